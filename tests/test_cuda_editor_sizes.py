"""CUDA kernels at an assumed launch (the editor's case: no launch shape, no program arguments):
the grid a kernel spans through its helpers, template values of helper calls, and size
parameters read as the extent the threads cover. Small programs written for the test."""


from perflsp.analysis.notes import texts
from tests.engine_reports import kernel_reports, reports


def analyse(src: str):
    return kernel_reports(src)


HELPER_INDEX_SRC = """
__device__ int global_row() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ void body(const float *in, float *out) {
  int i = global_row();
  out[i] = in[i] * in[i];
}
__global__ void squares(const float *in, float *out) { body(in, out); }
__global__ void one_block(const float *in, float *out) { out[threadIdx.x] = in[threadIdx.x]; }
"""


def test_grid_read_in_a_helper_spans_many_blocks():
    reports = analyse(HELPER_INDEX_SRC)
    squares = reports["squares"].facts
    assert squares.work_items >= 1 << 20, squares.work_items_note
    # a kernel that never reads the block index, directly or through a helper, is still one block
    assert reports["one_block"].facts.work_items == 256


TEMPLATE_HELPER_SRC = """
#define TILE 4
#define STRIDE 32
template <int tile, int stride>
__device__ void gather(float *dst, const float *src, int first) {
  for (int t = 0; t < tile; t++) dst[t * stride] = src[first + t * stride];
}
__global__ void tiles(const float *src, float *dst) {
  int i = blockIdx.x * TILE * STRIDE + threadIdx.x;
  gather<TILE, STRIDE>(dst + i, src, i);
}
"""


def test_helper_template_values_written_as_macro_names_are_folded():
    facts = analyse(TEMPLATE_HELPER_SRC)["tiles"].facts
    (loop,) = facts.loops
    assert (loop.trip_count, loop.origin) == (4, "constant")
    assert not any("assumed 32" in a for a in texts(facts.assumptions))


SIZE_PARAMETER_SRC = """
__global__ void first_above(const float *cdf, const float *u, int *found, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int index = n - 1;
    for (int x = 0; x < n; x++) {
      if (cdf[x] >= u[i]) { index = x; break; }
    }
    found[i] = index;
  }
}
__global__ void axpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] += a * x[i];
}
__global__ void window(float *out, const float *in, int n, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.0f;
    for (int k = 0; k < width; k++) s += in[i + k];
    out[i] = s;
  }
}
"""


def test_size_parameter_that_bounds_the_thread_index_is_the_launch_extent():
    reports = analyse(SIZE_PARAMETER_SRC)
    search = reports["first_above"].facts
    (loop,) = search.loops
    # one consistent problem: the loop runs over the n elements the grid covers, not 32
    assert loop.trip_count == search.work_items and loop.origin == "assumed"
    assert any("`n` bounds the thread index" in a for a in texts(search.assumptions))
    # every thread scans the whole array, which stays in cache: compute-bound at production size
    assert reports["first_above"].estimates[0].verdict == "compute"
    # a streaming kernel guarded the same way stays bandwidth-bound
    assert reports["axpy"].estimates[0].verdict == "bandwidth"
    # a loop over a different parameter is not the launch's extent
    (window_loop,) = reports["window"].facts.loops
    assert window_loop.origin == "assumed" and window_loop.trip_count == 32


def test_launch_given_sizes_are_not_replaced():
    src = SIZE_PARAMETER_SRC + """
int main() {
  float *c, *u; int *f;
  first_above<<<4, 256>>>(c, u, f, 1000);
}
"""
    facts = analyse(src)["first_above"].facts
    (loop,) = facts.loops
    assert loop.trip_count == 1000
    assert not any("bounds the thread index" in a for a in texts(facts.assumptions))


ARRAY_MEMBER_SRC = """
#define N 4096
typedef float Column[N];
typedef struct { Column x; Column y; } Columns;
__global__ void add_columns(Columns *dst, const Columns *src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { dst->x[i] += src->x[i]; dst->y[i] += src->y[i]; }
}
"""


def test_array_member_through_a_struct_pointer_is_a_global_array():
    report = analyse(ARRAY_MEMBER_SRC)["add_columns"]
    per = report.facts.per_item
    assert (per.global_loads, per.global_stores) == (4, 2)
    assert report.facts.uncertain is None
    # four streamed reads and two streamed writes of one float per thread: far from 4 B in all
    assert report.facts.dram_bytes >= 4 * 4 * report.facts.work_items
    assert report.estimates[0].verdict == "bandwidth"


BLOCK_STRIDE_SRC = """
__global__ void nearest(int n, const float *pts, int *best) {
  const float *mine = pts + blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float d = 1e30f;
    for (int j = 0; j < n; j++) {
      float e = mine[j] - mine[i];
      if (e * e < d) { d = e * e; best[blockIdx.x * n + i] = j; }
    }
  }
}
"""


def test_block_stride_loop_size_is_what_the_loop_covers():
    facts = analyse(BLOCK_STRIDE_SRC)["nearest"].facts
    outer, inner = facts.loops
    assert outer.origin == "assumed" and outer.trip_count == 32
    # n is what 32 strides of a 256-thread block cover: the inner loop runs over all of it
    assert inner.trip_count == 32 * 256
    assert any("`n` bounds the thread index" in a for a in texts(facts.assumptions))


def _traffic(src: str, name: str):
    return analyse(src)[name].facts.traffic


DATA_OFFSET_SRC = """
__global__ void bucket(const int *keys, int *slots, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int b = keys[i] & 1;
    slots[i * 2 + b] = i;            /* a data-dependent slot of the thread's own two */
  }
}
__global__ void segments(const int *starts, const float *in, float *out) {
  int gid = blockIdx.x * blockDim.x + threadIdx.x;
  out[starts[blockIdx.y] + gid] = 2.0f * in[gid]; /* a run per row of blocks, from a data start */
}
__global__ void gather(const int *idx, const float *table, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = table[idx[i]];            /* a pure gather: each element once */
}
"""


def test_data_dependent_offsets_land_where_their_affine_part_says():
    reports = analyse(DATA_OFFSET_SRC)
    threads = reports["bucket"].facts.work_items
    slots = next(g for g in reports["bucket"].facts.traffic.groups if g.array == "slots")
    # within the thread's two slots (8 B), not a 32-byte sector per store
    assert 4 * threads <= slots.footprint_bytes <= 2 * 4 * threads
    segments = reports["segments"].facts
    out = next(g for g in segments.traffic.groups if g.array == "out")
    # each row of blocks writes its own run: every element once, coalesced
    assert out.footprint_bytes == 4 * segments.work_items
    gather = reports["gather"].facts
    table = next(g for g in gather.traffic.groups if g.array == "table")
    # an index read from memory lands near its neighbours': each access moves its element
    assert table.footprint_bytes == 4 * gather.work_items


LAUNCHER_PARAMETER_SRC = """
__global__ void scale(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3.0f * in[i];
}
void run(const float *in, float *out, int n) {
  scale<<<(n + 255) / 256, 256>>>(in, out, n);
}
int main() {
  int n = 1 << 24;
  float *in, *out, *d_in, *d_out;
  cudaMallocHost((void **)&in, n * sizeof(float));   /* pinned host copies, same names */
  cudaMallocHost((void **)&out, n * sizeof(float));
  cudaMalloc((void **)&d_in, n * sizeof(float));
  cudaMalloc((void **)&d_out, n * sizeof(float));
  run(d_in, d_out, n);
}
"""


def test_launch_argument_named_like_a_host_buffer_elsewhere_is_the_callers_device_array():
    report = analyse(LAUNCHER_PARAMETER_SRC)["scale"]
    (load,) = [g for g in report.facts.traffic.groups if g.array == "in"]
    # `in` at the launch is run()'s parameter, bound to main's d_in (device memory), not main's
    # pinned `in`: its reads come from DRAM
    assert load.footprint_bytes == 4 * (1 << 24)
    assert report.estimates[0].verdict == "bandwidth"


def test_at_a_given_launch_a_size_the_thread_index_is_checked_against_is_the_launch_extent():
    # the launch shape given (as `perflsp eval` and a profile give it), the size read at run time
    from perflsp.analysis.engine import AnalysisOptions

    src = SIZE_PARAMETER_SRC + """
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *c, *u; int *f;
  first_above<<<(n + 255) / 256, 256>>>(c, u, f, n);
}
"""
    (report,) = [r for r in reports(src, options=AnalysisOptions(launch_override=((40, 1, 1), (256, 1, 1))))
                 if r.kernel.name == "first_above"]
    facts = report.facts
    (loop,) = facts.loops
    assert loop.trip_count == 40 * 256  # not the 32 an unknown bound is given
    assert any("`n` bounds the thread index: read as the extent the threads cover, 10,240" in a
               for a in texts(facts.assumptions))


TILED_SRC = """
#define TILE 32
__global__ void tiled(const float *A, float *out, int K) {
  const float *row = A + blockIdx.x * K;  // moved by the size before the loop reads it
  float s = 0.0f;
  for (int k = 0; k < K; k += TILE) s += row[k + threadIdx.x];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def test_a_size_an_assumed_loop_runs_over_is_the_range_it_covers_wherever_else_it_is_read():
    facts = analyse(TILED_SRC)["tiled"].facts
    (loop,) = facts.loops
    assert loop.trip_count == 32 and loop.origin == "assumed"
    # K is read as the 32 tiles of 32 the loop covers, also where it moved the pointer before the loop
    assert any("`K` bounds the `k` loop, whose trip count is assumed: read as the range it covers, 1,024" in a
               for a in texts(facts.assumptions))
    # each block's row of K floats read once (an unknown K would place the rows apart, 1,248 floats each)
    rows = facts.work_items / 256 * 1024 * 4
    assert rows <= sum(g.footprint_bytes for g in facts.traffic.groups if g.array == "A") <= rows * 1.01


OCCUPANCY_GRID = """
__global__ void zero(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.0f;
}
__global__ void zero_strided(float *x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = 0.0f;
}
__global__ void zero_large(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.0f;
}
int main() {
  int n = 1 << 20;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, (1 << 26) * sizeof(float));
  int blocks, threads;
  cudaOccupancyMaxPotentialBlockSize(&blocks, &threads, zero);
  zero<<<blocks, threads>>>(x, n);
  zero_strided<<<blocks, threads>>>(x, n);
  zero_large<<<blocks, threads>>>(y, 1 << 26);
}
"""


def test_a_guessed_grid_covers_the_known_size_its_threads_are_checked_against_once():
    found = analyse(OCCUPANCY_GRID)
    # the grid comes from the occupancy API (unknown here); the size is known: 2^20 threads, one
    # element each, not 2^24 threads of which 15/16 only compute their index and leave
    for name in ("zero", "zero_strided"):
        facts = found[name].facts
        assert facts.work_items == 1 << 20, facts.work_items_note
        assert facts.per_item.global_store_bytes == 4
        assert any("grid unknown: assumed to cover the 1,048,576 indices" in t for t in texts(facts.assumptions))
    # a size above the production guess keeps the guess (the grid is not grown)
    assert found["zero_large"].facts.work_items == 1 << 24


def test_a_grid_the_host_fixes_stays_where_only_the_block_is_unknown():
    # the block size is a parameter of the launching function; the grid (columns / 32) is not
    src = """
__global__ void column_sums(float *sums, const float *m, int rows, int cols) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float s = 0.f;
  for (int r = warp; r < rows; r += blockDim.x / 32) s += m[r * cols + blockIdx.x * 32 + lane];
  if (warp == 0) sums[blockIdx.x * 32 + lane] = s;
}
void launch(float *sums, const float *m, int block_size) {
  int rows = 4096, cols = 768;
  column_sums<<<cols / 32, block_size>>>(sums, m, rows, cols);
}
"""
    facts = analyse(src)["column_sums"].facts
    assert facts.work_items == 24 * 256  # 24 blocks of the launch, the block assumed
    assert any("block assumed 256 threads" in a for a in texts(facts.assumptions))
    assert not any("problem size unknown" in a for a in texts(facts.assumptions))


STRIDED_BLOCKS_SRC = """
template <int NUM_THREADS = 128>
__global__ void block_sum(const float *a, float *y, int n) {
  int tid = threadIdx.x;
  int idx = blockIdx.x * NUM_THREADS + tid;
  __shared__ float part[NUM_THREADS / 32];
  float v = idx < n ? a[idx] : 0.0f;
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffff, v, m);
  if (tid % 32 == 0) part[tid / 32] = v;
  __syncthreads();
  if (tid == 0) atomicAdd(y, part[0] + part[1] + part[2] + part[3]);
}
#define BLOCK 512
__global__ void twice(const float *a, float *b) {
  int i = blockIdx.x * BLOCK * 2 + threadIdx.x;
  b[i] = a[i] + a[i + BLOCK];
}
"""


def test_a_kernel_that_strides_its_blocks_by_a_constant_is_assumed_launched_with_blocks_of_it():
    # `blockIdx.x * NUM_THREADS + tid` is written for blocks of NUM_THREADS threads: 256-thread
    # blocks would read every element twice (half the bytes, twice the integer work per byte)
    reports = analyse(STRIDED_BLOCKS_SRC)
    block_sum = reports["block_sum"].facts
    assert "× 128 threads" in block_sum.work_items_note
    assert block_sum.dram_bytes >= 4 * block_sum.work_items * 0.95
    assert "× 512 threads" in reports["twice"].facts.work_items_note
