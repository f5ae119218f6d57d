"""DRAM traffic of a launch (`analysis.memory`, `analysis.finish`): what each group of accesses
moves, on small programs of our own with the launch shape given."""

from __future__ import annotations

import pytest

from perflsp.analysis.compiled_facts import access_widths
from perflsp.analysis.costs import CostModel
from perflsp.analysis.linear import Linear
from perflsp.analysis.memory import with_compiled_widths
from perflsp.analysis.notes import texts
from perflsp.analysis.walk_values import Access
from perflsp.compiled.build import CompileCache
from perflsp.compiled.cfg import build_function
from perflsp.compiled.sass import parse_sass
from perflsp.compiled.service import Compiler
from tests.engine_reports import kernel_reports
from tests.test_compiled import SASS, TOOLCHAIN, analyse, needs_cuda

SPMV_SRC = """
__global__ void spmv(const int *col, const double *val, const double *x, double *y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  double s = 0.0;
  for (int k = 0; k < 8; k++) s += val[r * 8 + k] * x[col[r * 8 + k]];
  y[r] = s;
}
int main() {
  int *col; double *val, *x, *y;
  cudaMalloc(&col, (1 << 23) * sizeof(int));
  cudaMalloc(&val, (1 << 23) * sizeof(double)); cudaMalloc(&x, (1 << 26) * sizeof(double));
  cudaMalloc(&y, (1 << 20) * sizeof(double));
  spmv<<<4096, 256>>>(col, val, x, y);
}
"""


def test_a_gather_through_an_index_array_moves_its_elements():
    facts = kernel_reports(SPMV_SRC)["spmv"].facts
    threads = 4096 * 256
    x = max((g for g in facts.traffic.groups if g.array == "x"), key=lambda g: g.footprint_bytes)
    # 8 gathers of a double per row: 8 B each (neighbouring rows' columns fill the sectors), not a
    # 32-byte sector per access
    assert x.footprint_bytes == pytest.approx(8 * 8 * threads)
    assert any(line.startswith("DRAM: footprint ") for line in texts(facts.evidence))


# ------------------------------------------------------------------ widths from the compiled code

def _access(line: int, elem: int, array: str = "a", is_store: bool = False, coeff: float = 1.0,
            sized: bool = True) -> Access:
    return Access(array, "global", elem, is_store, Linear(coeffs=(("tx", coeff),)), 1.0, line=line, sized=sized)


def test_a_wider_compiled_access_sets_the_element_size():
    # a template type the source assumed float, instantiated with double: LDG.E.64 on line 3
    accesses = [_access(3, 4), _access(4, 4, "b", is_store=True)]
    widths = {(3, False): (1.0, 8.0), (4, True): (1.0, 4.0)}
    changed, notes = with_compiled_widths(accesses, widths)
    assert [a.elem_bytes for a in changed] == [8, 4]
    assert notes == ["line 3: the compiled code loads 8 B per element (the source read 4 B)"]


def test_narrower_or_merged_compiled_accesses_leave_the_source_sizes():
    # a 16-byte struct loaded field by field: four 4-byte loads on its line
    struct = [_access(5, 16)]
    assert with_compiled_widths(struct, {(5, False): (4.0, 16.0)}) == (struct, [])
    # two neighbouring floats merged into one 8-byte load: fewer instructions than accesses
    pair = [_access(6, 4), _access(6, 4, coeff=2.0)]
    assert with_compiled_widths(pair, {(6, False): (1.0, 8.0)}) == (pair, [])
    # loads of several widths on one line (8 + 4 bytes in two loads): no one width to read
    mixed = [_access(7, 4), _access(7, 4, "b")]
    assert with_compiled_widths(mixed, {(7, False): (2.0, 12.0)}) == (mixed, [])


def test_a_struct_the_source_cannot_size_moves_what_its_line_loads():
    # `Option o = options[i]` of a struct the source does not know: 4 B assumed, 7 fields loaded
    accesses = [_access(9, 4, "options", sized=False)]
    changed, notes = with_compiled_widths(accesses, {(9, False): (7.0, 28.0)})
    assert changed[0].elem_bytes == 28
    assert notes == ["line 9: the compiled code loads 28 B per access of an element whose type the source does not "
                     "size (the source read 4 B)"]
    # two fields read on one line share its bytes
    fields = [_access(10, 4, "p", sized=False), _access(10, 4, "p", sized=False)]
    assert [a.elem_bytes for a in with_compiled_widths(fields, {(10, False): (2.0, 16.0)})[0]] == [8, 8]
    # known and unknown types on one line: nothing to share the bytes by
    mixed = [_access(11, 4, sized=False), _access(11, 4, "b")]
    assert with_compiled_widths(mixed, {(11, False): (3.0, 12.0)}) == (mixed, [])


def test_global_accesses_of_a_compiled_function_by_source_line():
    cf = build_function(parse_sass(SASS)[0])
    found = cf.global_accesses()
    # LDG.E.128 inlined from h.cuh line 9 (counted once, not per trip), STG.E.64 on k.cu line 7
    assert found[(("/src/h.cuh", 9), False)] == (1.0, 16.0)
    assert found[(("/src/k.cu", 7), True)] == (1.0, 8.0)
    assert len(found) == 2
    # by line for the walk's accesses; moved where the source moved since the compile, and a line
    # number that two files' code shares left out (an access knows its line, not its file)
    assert access_widths(cf) == {(9, False): (1.0, 16.0), (7, True): (1.0, 8.0)}
    assert access_widths(cf, ("/src/k.cu", 1)) == {(9, False): (1.0, 16.0), (8, True): (1.0, 8.0)}
    assert access_widths(cf, ("/src/k.cu", 2)) == {}


TEMPLATE_SRC = """
template <typename T>
__global__ void axpy(const T *x, T *y, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T>
void run(const T *x, T *y, int n) { axpy<<<n / 256, 256>>>(x, y, T(2), n); }
int main() {
  double *x, *y; int n = 1 << 20;
  cudaMalloc(&x, n * sizeof(double)); cudaMalloc(&y, n * sizeof(double));
  run(x, y, n);
}
"""


@pytest.fixture
def nvcc(tmp_path) -> Compiler:
    return Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))


@needs_cuda
def test_the_compiled_widths_of_a_template_instance_size_its_traffic(tmp_path, nvcc):
    source = tmp_path / "axpy.cu"
    source.write_text(TEMPLATE_SRC)
    plain = analyse(source, None)["axpy"].facts
    compiled = analyse(source, nvcc)["axpy"].facts
    threads = 1 << 20
    # SASS: 2 × LDG.E.64 (x[i], y[i]), DFMA, STG.E.64: every element 8 bytes, 3 of them per thread
    assert compiled.traffic.footprint_bytes == pytest.approx(3 * 8 * threads)
    assert plain.traffic.footprint_bytes < compiled.traffic.footprint_bytes
    dram = next(line for line in texts(compiled.evidence) if line.startswith("DRAM: "))
    assert "element sizes from the compiled code (line 5: the compiled code loads 8 B per element" in dram


SPIN_SRC = """
__global__ void spin(int n) {
  float s = threadIdx.x;
  for (int i = 0; i < n; ++i) s = s * 1.5f + 1.0f;
  if (s == 0.0f) asm volatile("trap;");   /* keeps the arithmetic alive without touching memory */
}
int main() { spin<<<1024, 256>>>(1000); }
"""


@needs_cuda
def test_compiled_arithmetic_without_global_traffic_is_compute_bound(tmp_path, nvcc):
    source = tmp_path / "spin.cu"
    source.write_text(SPIN_SRC)
    report = analyse(source, nvcc)["spin"]
    facts = report.facts
    assert facts.operations == "compiled" and facts.per_item.fp32 >= 2 * 1000
    assert facts.per_item.global_loads == facts.per_item.global_stores == 0
    assert facts.dram_bytes == CostModel().launch_dram_bytes
    assert "no global-memory access in the compiled code" in facts.dram_note
    assert facts.uncertain is None and report.estimates[0].verdict == "compute"


STRUCT_SRC = """
struct Option { float spot, strike, rate, vol, time; int kind; float yield; };
__global__ void price(const Option *options, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Option o = options[i];
  out[i] = o.spot * o.strike + o.rate * o.vol + o.time * o.yield + o.kind;
}
int main() {
  Option *options; float *out; int n = 1 << 20;
  cudaMalloc(&options, n * sizeof(Option)); cudaMalloc(&out, n * sizeof(float));
  price<<<n / 256, 256>>>(options, out, n);
}
"""


@needs_cuda
def test_a_struct_read_from_memory_moves_the_fields_the_compiled_code_loads(tmp_path, nvcc):
    source = tmp_path / "price.cu"
    source.write_text(STRUCT_SRC)
    facts = analyse(source, nvcc)["price"].facts
    threads = 1 << 20
    options = next(g for g in facts.traffic.groups if g.array == "options")
    # SASS: 7 × LDG.E (the struct's seven 4-byte fields) on line 6; the source lays the struct out
    # the same (a struct it cannot size takes the compiled bytes: the test above)
    assert options.footprint_bytes == pytest.approx(28 * threads)
    assert facts.traffic.footprint_bytes == pytest.approx((28 + 4) * threads)
    assert "`options`: elements of `Option`, 28 B as the source lays it out" in facts.dram_note


# ------------------------------------------------------------------ an array read at several forms

PERIODIC = """
__global__ void laplace(float *out, const float *in, int lx, int ly) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int x = i % lx;
  int y = i / lx;
  out[y * lx + x] = in[y * lx + x] + in[y * lx + (x + 1) % lx] + in[((y + 1) % ly) * lx + x];
}
int main() {
  const int lx = 8192, ly = 8192;
  float *a, *b;
  cudaMalloc(&a, lx * ly * sizeof(float)); cudaMalloc(&b, lx * ly * sizeof(float));
  laplace<<<lx * ly / 256, 256>>>(b, a, lx, ly);
}
"""


def test_an_array_read_at_forms_that_do_not_merge_moves_at_most_its_size():
    # the centre and the neighbours wrapped around with `%` are three groups of `in`, each
    # reaching all of it: together they move its 256 MiB once, not three times
    facts = kernel_reports(PERIODIC)["laplace"].facts
    size = 8192 * 8192 * 4
    reads = [g for g in facts.traffic.groups if g.array == "in"]
    assert len(reads) > 1
    assert sum(g.footprint_bytes for g in reads) == pytest.approx(size)
    assert facts.dram_bytes == pytest.approx(2 * size, rel=0.05)
    # `i / lx` and `i % lx` split the block index into tiles (`bx / 32`, `bx % 32`): one block
    # still touches its own 256 pixels, and neighbouring blocks share what they read in L2
    assert all(g.reread_bytes == 0.0 for g in facts.traffic.groups)


CLOSEST = """
#define N 16384
__global__ void closest(const float *p, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float best = 1e30f;
  for (int k = 0; k < N; k++) {
    float d = 0.f;
    for (int j = 0; j < 3; j++) d += (p[i * 3 + j] - p[k * 3 + j]) * (p[i * 3 + j] - p[k * 3 + j]);
    best = fminf(best, d);
  }
  out[i] = best;
}
void run(const float *p, float *out) {
  closest<<<N / 256, 256>>>(p, out);
}
"""


def test_an_array_read_at_two_forms_moves_its_sectors_once():
    # each thread reads its own point and, in the loop, every point: groups of `p` at two forms
    # over the same 16,384 points of 3 floats, an array whose size the source does not state;
    # its 192 KiB come from DRAM once, not once per form
    facts = kernel_reports(CLOSEST)["closest"].facts
    points = 16384 * 3 * 4
    reads = [g for g in facts.traffic.groups if g.array == "p"]
    assert len({g.form for g in reads}) == 2
    assert sum(g.footprint_bytes for g in reads) == pytest.approx(points, rel=1e-3)
    # with the writes a launch far below L2 sends to DRAM within it (the floor's share)
    assert facts.dram_bytes == pytest.approx(points + 0.2 * 16384 * 4, rel=1e-3)


TRANSPOSE = """
__global__ void transpose(float *out, const float *in, int lx, int ly) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int x = i % lx;
  int y = i / lx;
  out[y * lx + x] = in[x * ly + y];
}
int main() {
  const int lx = 8192, ly = 8192;
  float *a, *b;
  cudaMalloc(&a, lx * ly * sizeof(float)); cudaMalloc(&b, lx * ly * sizeof(float));
  transpose<<<lx * ly / 256, 256>>>(b, a, lx, ly);
}
"""


def test_blocks_split_into_tiles_share_in_l2_what_their_neighbours_read():
    # each lane reads its own sector of `in` (8 times the bytes it uses); the blocks of the next
    # row (`y + 1`: `bx / 32` one more, 32 blocks later) read the rest of those sectors while L2
    # still holds them: one block is its own 256 threads, not every value of `bx % 32` and `bx / 32`
    facts = kernel_reports(TRANSPOSE)["transpose"].facts
    size = 8192 * 8192 * 4
    (read,) = [g for g in facts.traffic.groups if g.array == "in"]
    assert read.streamed_bytes == pytest.approx(8 * size)
    assert read.reread_bytes == 0.0
    assert facts.dram_bytes == pytest.approx(2 * size, rel=0.05)


ROTATE = """
__global__ void rotate(const float *src, float *dst, int w, int h, float c, float s) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int xs = (int)floorf(c * x - s * y);
  int ys = (int)floorf(s * x + c * y);
  float v = 0.0f;
  if (xs >= 0 && xs < w && ys >= 0 && ys < h) v = src[ys * w + xs];
  dst[y * w + x] = v;
}
int main() {
  float *a, *b;
  cudaMalloc(&a, 4096 * 4096 * sizeof(float)); cudaMalloc(&b, 4096 * 4096 * sizeof(float));
  rotate<<<dim3(256, 256), dim3(16, 16)>>>(a, b, 4096, 4096, 0.8f, 0.6f);
}
"""


def test_an_index_a_math_function_computes_from_the_thread_index_reaches_an_element_per_thread():
    # `floorf(c * x - s * y)` is some function of the thread's position: each thread its own
    # source pixel (as many as it writes), not one pixel for the launch
    facts = kernel_reports(ROTATE)["rotate"].facts
    (read,) = [g for g in facts.traffic.groups if g.array == "src"]
    (write,) = [g for g in facts.traffic.groups if g.array == "dst"]
    assert read.footprint_bytes >= 0.5 * write.footprint_bytes


SUB_MATRICES = """
#define TILE 16
typedef struct { int width; int stride; float *elements; } Matrix;
__device__ float get(const Matrix A, int row, int col) { return A.elements[row * A.stride + col]; }
__device__ void set(Matrix A, int row, int col, float v) { A.elements[row * A.stride + col] = v; }
__device__ Matrix sub_matrix(Matrix A, int row, int col) {
  Matrix s;
  s.width = TILE;
  s.stride = A.stride;
  s.elements = &A.elements[A.stride * TILE * row + TILE * col];
  return s;
}
__global__ void product(Matrix A, Matrix B, Matrix C) {
  int row = threadIdx.y, col = threadIdx.x;
  Matrix c = sub_matrix(C, blockIdx.y, blockIdx.x);
  float acc = 0;
  for (int m = 0; m < 2048 / TILE; ++m) {
    Matrix a = sub_matrix(A, blockIdx.y, m);
    Matrix b = sub_matrix(B, m, blockIdx.x);
    __shared__ float as[TILE][TILE], bs[TILE][TILE];
    as[row][col] = get(a, row, col);
    bs[row][col] = get(b, row, col);
    __syncthreads();
    for (int e = 0; e < TILE; ++e) acc += as[row][e] * bs[e][col];
    __syncthreads();
  }
  set(c, row, col, acc);
}
int main() {
  Matrix a, b, c;
  a.width = a.stride = b.width = b.stride = c.width = c.stride = 2048;
  product<<<dim3(128, 128), dim3(TILE, TILE)>>>(a, b, c);
}
"""


def test_sub_matrices_returned_by_a_device_function_keep_their_place_in_the_matrix(tmp_path):
    source = tmp_path / "sub.cu"
    source.write_text(SUB_MATRICES)
    facts = analyse(source, None)["product"].facts
    # each of the three 2048 x 2048 matrices is reached whole (the tiles of `a` and `b` at their
    # block's row and column and the loop's step; `get(b, ...)` reads `b`, not a kernel's
    # parameter that a device function's parameter happens to share a name with)
    matrix = 2048 * 2048 * 4
    groups = {g.array: g.footprint_bytes for g in facts.traffic.groups}
    assert groups == {"A.elements": pytest.approx(matrix), "B.elements": pytest.approx(matrix),
                      "C.elements": pytest.approx(matrix)}


UNROLLED_BLOCKS = """
__global__ void gather8(const float *in, float *out) {
  unsigned idx = blockDim.x * blockIdx.x * 8 + threadIdx.x;
  // unrolled by hand, as a reduction's first step is: eight forms, shifted by constants
  float s = in[idx] + in[idx + blockDim.x] + in[idx + 2 * blockDim.x] + in[idx + 3 * blockDim.x]
          + in[idx + 4 * blockDim.x] + in[idx + 5 * blockDim.x] + in[idx + 6 * blockDim.x]
          + in[idx + 7 * blockDim.x];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
__global__ void pairs(const float *in, float *out) {
  unsigned idx = blockIdx.x * 512 + threadIdx.x;
  out[blockIdx.x * 256 + threadIdx.x] = in[idx] + in[idx + 512];
}
int main() {
  float *in, *out;
  gather8<<<2048, 256>>>(in, out);
  pairs<<<2048, 256>>>(in, out);
}
"""


def test_shifted_runs_fill_the_gaps_between_a_blocks_runs(tmp_path):
    source = tmp_path / "unrolled.cu"
    source.write_text(UNROLLED_BLOCKS)
    reports = analyse(source, None)
    reads = {g.array: g.footprint_bytes for g in reports["gather8"].facts.traffic.groups if not g.is_store}
    # each block reads 8 runs of 256 floats, one after the other: the whole 2048 x 2048 floats
    assert reads["in"] == pytest.approx(2048 * 2048 * 4)
    # `in[idx + 512]` is the next block's run: the two forms share all runs but one
    reads = {g.array: g.footprint_bytes for g in reports["pairs"].facts.traffic.groups if not g.is_store}
    assert reads["in"] == pytest.approx((2048 + 1) * 256 * 4)


SLOTS = """
#define N (1 << 22)
__global__ void slot16(const int *in, int *out) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 16;
  out[i / 16] = in[i] + in[i + 1] + in[i + 2] + in[i + 3] + in[i + 4] + in[i + 5] + in[i + 6] + in[i + 7]
      + in[i + 8] + in[i + 9] + in[i + 10] + in[i + 11] + in[i + 12] + in[i + 13] + in[i + 14] + in[i + 15];
}
__global__ void slot_first_half(const int *in, int *out) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 16;
  out[i / 16] = in[i] + in[i + 1] + in[i + 2] + in[i + 3] + in[i + 4] + in[i + 5] + in[i + 6] + in[i + 7];
}
int main() {
  int *in, *out;
  slot16<<<N / 16 / 256, 256>>>(in, out);
  slot_first_half<<<N / 16 / 256, 256>>>(in, out);
}
"""


def test_offsets_into_a_threads_slot_reach_each_sector_of_it(tmp_path):
    source = tmp_path / "slots.cu"
    source.write_text(SLOTS)
    reports = analyse(source, None)
    reads = {g.array: g.footprint_bytes for g in reports["slot16"].facts.traffic.groups if not g.is_store}
    # each thread reads its 64-byte slot whole: both sectors of it, the whole array
    assert reads["in"] == pytest.approx(N_SLOTS := (1 << 22) * 4, rel=1e-3)
    # the first 8 elements of each slot: its first sector only
    reads = {g.array: g.footprint_bytes for g in reports["slot_first_half"].facts.traffic.groups if not g.is_store}
    assert reads["in"] == pytest.approx(N_SLOTS / 2, rel=1e-3)
