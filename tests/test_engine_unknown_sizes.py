"""The engine when the source does not say the sizes (the editor's usual case): production
scale, one consistent model for work and footprint, honest uncertainty, readable headlines."""

import pytest

from perflsp.analysis.costs import CostModel
from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.analysis.notes import texts
from perflsp.analysis.options import DEFAULT_OPTIONS
from perflsp.analysis.report import check_document, verdict_summary
from perflsp.analysis.roofline import Precision
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

DB = load_database()
H100, A100, RTX3080 = DB.get("H100"), DB.get("A100"), DB.get("RTX 3080")


def run(src: str, options: AnalysisOptions = DEFAULT_OPTIONS, gpus=(H100, A100)):
    data = src.encode()
    tree = parse(data)
    return analyze(data, tree, extract(data, tree), list(gpus), options)


def kernel(src: str, name: str, gpus=(H100, A100)):
    return next(k for k in run(src, gpus=gpus).kernels if k.name == name)


SCALE = """
__global__ void scale(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
"""


def test_streaming_kernel_without_a_launch_is_bandwidth_bound_at_production_scale():
    k = kernel(SCALE, "scale")
    assert k.facts.work_items == pytest.approx(1 << 24)
    assert texts(k.facts.assumptions)[0].startswith("problem size unknown: assumed large")
    # every element of the launch counted once: one float read and one written per thread
    assert k.facts.traffic.footprint_bytes == pytest.approx(8 * (1 << 24), rel=0.01)
    for est in k.estimates:
        assert est.verdict == "bandwidth"
        assert est.intensity[Precision.FP32] < 1


def test_bandwidth_headline_names_bytes_per_item_and_the_float_intensity_first():
    k = kernel(SCALE, "scale")
    est = k.estimates[0]
    summary = verdict_summary(est, k.facts)
    assert summary.startswith("bandwidth-bound on H100")
    assert "B DRAM per work item" in summary
    assert "FP32 intensity 0.12 < ridge 20.0 FLOP/B" in summary
    assert summary.index("FP32 intensity") < summary.index("problem size unknown")
    # integer instructions are named only as the nearest roof, and said to be integer work
    assert "work item · INT32" not in summary
    if est.nearest_roof() == Precision.INT32:
        assert "nearest roof: integer instructions, INT32 intensity " in summary


def test_compute_headline_names_the_roof_reached():
    src = """
__global__ void nbody(const float4 *p, float4 *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 me = p[i]; float ax = 0, ay = 0, az = 0;
  for (int j = 0; j < 4096; ++j) {
    float4 o = p[j];
    float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
    float r = rsqrtf(dx * dx + dy * dy + dz * dz + 1e-9f);
    float s = o.w * r * r * r;
    ax += dx * s; ay += dy * s; az += dz * s;
  }
  a[i] = make_float4(ax, ay, az, 0.0f);
}
"""
    k = kernel(src, "nbody")
    est = k.estimates[0]
    assert est.verdict == "compute"
    assert est.main_precision() == est.deciding


@pytest.mark.parametrize("body", [
    "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];",
    "int i = blockIdx.x * blockDim.x + threadIdx.x;\n  for (; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];",
    "int i = blockIdx.x * blockDim.x + threadIdx.x;\n  while (i < n) { y[i] = a * x[i] + y[i]; i += blockDim.x * gridDim.x; }",
])
def test_grid_stride_loops_keep_work_and_footprint_consistent(body):
    src = f"__global__ void axpy(float *y, const float *x, float a, int n) {{\n  {body}\n}}\n"
    k = kernel(src, "axpy")
    per_item_bytes = k.facts.traffic.footprint_bytes / k.facts.work_items
    loads_per_item = k.facts.per_item.global_load_bytes
    # the footprint grows with the iterations each thread runs, not with one iteration only
    assert per_item_bytes == pytest.approx(loads_per_item + k.facts.per_item.global_store_bytes, rel=0.05)
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_two_dimensional_kernels_spread_the_production_size_over_both_grid_axes():
    src = """
__global__ void transpose(float *out, const float *in, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}
"""
    k = kernel(src, "transpose")
    assert "16×16" in k.facts.work_items_note and "256×256 blocks" in k.facts.work_items_note
    assert k.facts.traffic.footprint_bytes >= 8 * (1 << 24) * 0.99
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_a_known_launch_shape_is_not_replaced():
    src = SCALE + """
int main() { float *x, *y; cudaMalloc(&x, 4096 * 4); cudaMalloc(&y, 4096 * 4);
  scale<<<16, 256>>>(y, x, 2.0f, 4096); }
"""
    k = kernel(src, "scale")
    assert k.facts.work_items == 4096
    assert not any(a.startswith("problem size unknown") for a in texts(k.facts.assumptions))


def test_reads_are_the_same_on_every_gpu_and_the_ridges_differ():
    k = kernel(SCALE, "scale", gpus=(H100, RTX3080))
    h100, rtx = k.estimates
    assert h100.dram_bytes_per_item >= 6.0 and rtx.dram_bytes_per_item >= 6.0
    assert h100.ridge[Precision.FP32] != rtx.ridge[Precision.FP32]


def test_cuda_style_openmp_region_without_team_counts_runs_at_production_scale():
    src = """
void run(const float *in, float *out, int width, int blocks) {
  #pragma omp target teams num_teams(blocks) thread_limit(128)
  {
    #pragma omp parallel
    {
      int i = omp_get_team_num() * 128 + omp_get_thread_num();
      if (i < width) out[i] = in[i] * 2.0f;
    }
  }
}
"""
    (k,) = run(src).kernels
    assert k.facts.work_items == pytest.approx(1 << 24, rel=0.01)
    assert texts(k.facts.assumptions)[0].startswith("problem size unknown: assumed large")
    assert all(e.verdict == "bandwidth" for e in k.estimates)


@pytest.mark.parametrize("src, reason", [
    ("__global__ void hidden(float *a, int n) { float s = unseen(a, n); for (int i = 0; i < n; ++i) s = s * 1.5f; }",
     "calls functions the engine could not read"),
    ("void lost(float *a, int n) {\n  #pragma omp target teams distribute parallel for\n"
     "  { int i = 0; while (i < n) { a[i] = a[i] + 1.0f; i++; } }\n}",
     "parallel loop was not found"),
    # main's default when no arguments are given: the loop is there, with one iteration
    ("void step(float *a, int n) {\n  #pragma omp target teams distribute parallel for\n"
     "  for (int i = 0; i < n; i++) a[i] = a[i] * 2.0f;\n}\n"
     "int main(int argc, char **argv) {\n  int n = 1;\n  if (argc > 1) n = atoi(argv[1]);\n"
     "  float *a = new float[n];\n  step(a, n);\n}",
     "runs one iteration at the sizes the source sets: give the program's arguments"),
])
def test_degenerate_analyses_are_uncertain_with_the_reason(src, reason):
    (k,) = run(src).kernels
    assert k.facts.uncertain is not None and reason in k.facts.uncertain
    for est in k.estimates:
        assert est.verdict == "uncertain"


def test_a_serial_target_region_and_a_one_thread_launch_are_real_and_keep_their_verdict():
    serial = "void serial(float *a) {\n  #pragma omp target map(tofrom: a[0:1])\n  { a[0] = a[0] + 1.0f; }\n}"
    one_thread = ("void edges(float *a, int n) {\n  #pragma omp target teams num_teams(1) thread_limit(1) "
                  "map(tofrom: a[0:n])\n  { for (int i = 0; i < n; i++) a[i * n] = 0.0f; }\n}")
    single = SCALE + "int main() { float *x, *y; cudaMalloc(&x, 4); cudaMalloc(&y, 4); scale<<<1, 1>>>(y, x, 2.0f, 1); }"
    for k in (*run(serial).kernels, *run(one_thread).kernels, *run(single).kernels):
        assert k.facts.uncertain is None
        assert all(e.verdict in ("compute", "bandwidth") for e in k.estimates)


def test_uncertain_verdict_reaches_the_check_report_with_its_reason():
    src = "__global__ void hidden(float *a, int n) { float s = unseen(a, n); for (int i = 0; i < n; ++i) s = s * 1.5f; }"
    data = src.encode()
    tree = parse(data)
    result = check_document(data, tree, extract(data, tree), [H100])
    (finding,) = [f for f in result.findings if f.code.startswith("roofline/")]
    assert finding.code == "roofline/uncertain"
    assert "no global-memory access found" in finding.message


def test_arithmetic_without_global_traffic_is_compute_bound():
    # nothing read or written in global memory, nothing unread called: the launch's own traffic
    # is all it moves, and its arithmetic reaches every roof
    src = ("__global__ void spin() { float s = threadIdx.x; for (int i = 0; i < 1000; ++i) s = s * 1.5f + 1.0f; }\n"
           "int main() { spin<<<1024, 256>>>(); }")
    (k,) = run(src).kernels
    assert k.facts.uncertain is None
    assert k.facts.dram_bytes == CostModel().launch_dram_bytes
    assert all(e.verdict == "compute" for e in k.estimates)
    assert "no global-memory access" in k.facts.dram_note


def test_confidence_grows_with_the_distance_from_the_ridge():
    near = kernel("""
__global__ void k(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  for (int j = 0; j < 16; ++j) v = v * v + 1.0f;
  y[i] = v;
}""", "k").estimates[0]
    far = kernel(SCALE, "scale").estimates[0]
    assert 0.5 < near.confidence <= far.confidence <= 0.9


def test_hip_builtin_spellings_index_like_cuda_ones():
    src = """
template <typename T>
__global__ void copy(const T *a, T *c) { const int i = hipThreadIdx_x + hipBlockIdx_x * hipBlockDim_x; c[i] = a[i]; }
"""
    k = kernel(src, "copy")
    assert k.facts.uncertain is None
    assert k.facts.traffic.footprint_bytes >= 8 * (1 << 24) * 0.99


def test_the_bytes_judged_are_the_bytes_the_accesses_move_on_every_gpu():
    h100, rtx = kernel(SCALE, "scale", gpus=(H100, RTX3080)).estimates
    # one float read and one written per thread: 8 B, whatever the GPU's L2 (no hidden write-back share)
    assert rtx.dram_bytes_per_item == h100.dram_bytes_per_item == pytest.approx(8.0)


TEMPLATE_REGION = """
#define STEP s = v - s; s = s * v;
template <class T>
void add(T *data, int n, int iters, T v) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int gid = 0; gid < n; gid++) {
    T s = data[gid];
    for (int j = 0; j < iters; ++j) { STEP STEP }
    data[gid] = s;
  }
}
"""


def test_function_around_finds_the_definition_from_the_tokens():
    from perflsp.kernels.program import function_around

    data = TEMPLATE_REGION.encode()
    start, end = function_around(data, data.index(b"#pragma"))
    assert data[start:end].startswith(b"template <class T>\nvoid add(T *data") and data[start:end].endswith(b"}")


def test_openmp_region_whose_function_the_tree_lost_reads_it_from_the_tokens(monkeypatch):
    # macro-heavy files can end up as one ERROR node in tree-sitter: no enclosing definition
    import perflsp.kernels.program as program

    monkeypatch.setattr(program, "enclosing_function", lambda node: None)
    (k,) = run(TEMPLATE_REGION, gpus=(H100,)).kernels
    assert k.facts.uncertain is None
    assert k.facts.per_item.global_loads >= 1 and k.facts.per_item.global_stores >= 1


def test_grid_axes_the_kernel_never_reads_get_one_block():
    # only blockIdx.y is read: blocks along x would redo the same rows on the same data
    src = """
__global__ void rows(const float *in, float *out, int width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = threadIdx.x;
  out[row * width + col] = 2.0f * in[row * width + col];
}
"""
    k = kernel(src, "rows")
    assert "1×" in k.facts.work_items_note.split("blocks")[0]
    assert k.facts.traffic.footprint_bytes / k.facts.work_items == pytest.approx(8.0, rel=0.05)
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_openmp_fragment_included_inside_a_function_reads_that_functions_variables(tmp_path):
    from perflsp.source.files import load_file

    (tmp_path / "main.cpp").write_text("""
void step(double *u, const double *f, int n) {
  for (int it = 0; it < 10; ++it) {
    #include "update.h"
  }
}
""")
    fragment = tmp_path / "update.h"
    fragment.write_text("""#pragma omp target teams distribute parallel for
for (int i = 0; i < n; ++i)
  u[i] = 0.5 * (u[i] + f[i]);
""")
    loaded = load_file(fragment)
    tree = parse(loaded.data)
    (k,) = analyze(loaded.data, tree, extract(loaded.data, tree, str(fragment)), [H100]).kernels
    assert k.facts.uncertain is None
    assert k.facts.per_item.global_loads >= 2 and k.facts.per_item.fp64 >= 2


def test_indices_stepped_in_the_loop_body_march_through_the_array():
    # `index += stride` in the body: each iteration reads a new plane, as the loop's own counter
    src = """
__global__ void march(const float *in, float *out, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  int stride = nx * ny;
  int index = y * nx + x;
  float acc = 0.0f;
  for (int z = 0; z < 64; z++) {
    acc += in[index];
    index += stride;
  }
  out[y * nx + x] = acc;
}
"""
    k = kernel(src, "march")
    # 64 distinct planes read per thread, not one
    assert k.facts.traffic.footprint_bytes / k.facts.work_items >= 64 * 4 * 0.9
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_pointers_stepped_in_the_update_clause_march_through_the_array():
    # `t++, path += n` in the loop header: each iteration reads a new row, not the same element
    src = """
__global__ void average(float *out, const float *paths, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float *path = paths + i;
  float sum = 0.0f;
  for (int t = 0; t < 64; t++, path += n) {
    sum += *path;
  }
  out[i] = sum / 64;
}
"""
    k = kernel(src, "average")
    # 64 distinct elements read per thread (plus the one written), not one
    assert k.facts.traffic.footprint_bytes / k.facts.work_items >= 64 * 4 * 0.9
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_cuda_builtin_vector_types_are_known_not_guessed():
    # float4, int2, double2, half2: CUDA's own types, sized by their lanes, no assumption about them
    src = """
__global__ void vec(const float4 *x, int2 *p, double2 *d, half2 *h, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = x[i]; y[i] = v.x + v.y + v.z + v.w; d[i].x = 1.0; p[i].x = 2; h[i] = h[i]; }
}
"""
    k = kernel(src, "vec")
    assert not [a for a in texts(k.facts.assumptions) if "is not defined" in a], texts(k.facts.assumptions)
    assert k.facts.per_item.global_load_bytes >= 16  # a float4 read is 16 bytes
    # a name that only looks like a float type is still an assumption, said so
    guessed = kernel(src.replace("float4 v = x[i];", "real_t s = 1; float4 v = x[i];"), "vec")
    assert any("`real_t` is not defined" in a for a in texts(guessed.facts.assumptions))
    # words in a comment name no type (`// only 1 real root`, `/* 2 double buffers */`)
    commented = kernel(src.replace("float4 v = x[i];", "float4 v = x[i];  // only 1 real root\n /* 2 double buffers */"), "vec")
    assert not [a for a in texts(commented.facts.assumptions) if "is not defined" in a]


def test_a_loop_on_two_bounds_stops_at_the_nearer_one():
    from perflsp.analysis.engine import AnalysisOptions
    from tests.engine_reports import reports

    src = """
__global__ void k(float *y, const int *flags, int n, int rows, int h) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < rows && r < h; r++) y[i] += y[r];
  for (int c = 0; c < 64 && (c + i) < n; c++) y[i] += 1.0f;
  bool found = false;
  for (int j = 0; j < n && !found; j++) found = flags[j] == i;
}
int main() {
  float *y; int *flags;
  cudaMalloc(&y, 4096 * sizeof(float));
  cudaMalloc(&flags, 4096 * sizeof(int));
  k<<<16, 256>>>(y, flags, 4096, 100, 40);
}
"""
    report = reports(src, options=AnalysisOptions())[0]
    assert {loop.variable: loop.trip_count for loop in report.facts.loops} == {"r": 40, "c": 64, "j": 4096}
    said = " ".join(texts(report.facts.assumptions))
    assert "the `c` loop may end before its bound (`(c + i) < n`): assumed it runs to the bound" in said
    assert "the `j` loop may end before its bound (`!found`): assumed it runs to the bound" in said
    assert "the `r` loop may end" not in said and "not understood" not in said


HALVES = """
__global__ void inside(unsigned *hits, const float *points, unsigned n) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned step = gridDim.x * blockDim.x;
  const float *px = points + tid;
  const float *py = px + n;
  unsigned count = 0;
  for (unsigned i = tid; i < n; i += step, px += step, py += step)
    if (*px * *px + *py * *py < 1.0f) count++;
  hits[tid] = count;
}
"""


def test_a_pointer_moved_by_a_size_read_further_on_reaches_its_own_half():
    # `py = px + n` comes before the loop that reads `n` as the extent the threads cover: the
    # kernel is read again with `n` known from the start, so x and y are two ranges, not one
    k = kernel(HALVES, "inside")
    extent = k.facts.work_items
    reads = next(g for g in k.facts.traffic.groups if g.array == "points")
    assert reads.footprint_bytes == pytest.approx(2 * 4 * extent, rel=0.01)
    assert sum("`n` bounds the thread index" in t for t in texts(k.facts.assumptions)) == 1


# a 64 x 64 x 64 grid of rows 64 wide: the code's launch is (64 / 4, 64) blocks of 64 x 4 threads,
# each thread its own element; the engine, not seeing it, assumes 16 x 16 blocks, which overlap
PENCILS = """
#define mx 64
#define my 64
__global__ void derivative(const float *f, float *df) {
  __shared__ float s[4][mx + 8];
  int i = threadIdx.x;
  int j = blockIdx.x * blockDim.y + threadIdx.y;
  int k = blockIdx.y;
  int g = k * mx * my + j * mx + i;
  s[threadIdx.y][i + 4] = f[g];
  __syncthreads();
  df[g] = 0.8f * (s[threadIdx.y][i + 5] - s[threadIdx.y][i + 3]) - 0.2f * (s[threadIdx.y][i + 6] - s[threadIdx.y][i + 2]);
}
"""

STENCIL = """
__global__ void blur(const float *in, float *out, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int c = (y + 1) * 4096 + x + 1;
  out[c] = 0.2f * (in[c] + in[c - 1] + in[c + 1] + in[c - 4096] + in[c + 4096]);
}
"""


def test_under_an_assumed_shape_each_thread_stores_its_own_element():
    # a plain store over every launch index is one element per thread (two would race): the
    # assumed 16x16 blocks overlap the code's 64-wide rows, but the bytes are the launch's own
    k = kernel(PENCILS, "derivative")
    assert k.facts.work_items == pytest.approx(1 << 24)
    assert k.facts.dram_bytes == pytest.approx(8 * k.facts.work_items, rel=0.05)
    assert all(e.verdict == "bandwidth" for e in k.estimates)


def test_the_neighbours_a_stencil_reads_are_not_each_their_own_element():
    # five loads at constant offsets from the thread's element: one range and its halo, not five
    k = kernel(STENCIL, "blur")
    assert k.facts.dram_bytes < 12 * k.facts.work_items


PENCILS_LOOP = """
#define mx 64
#define my 64
__global__ void derivative_y(const float *f, float *df) {
  __shared__ float s[my + 8][4];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int k = blockIdx.y;
  int si = threadIdx.x;
  for (int j = threadIdx.y; j < my; j += blockDim.y) {
    int g = k * mx * my + j * mx + i;
    s[j + 4][si] = f[g];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < my; j += blockDim.y) {
    int g = k * mx * my + j * mx + i;
    df[g] = 0.8f * (s[j + 5][si] - s[j + 3][si]);
  }
}
"""


def test_a_store_in_a_loop_over_its_own_counter_is_one_element_per_thread_and_pass():
    # the index moves with the loop's counter: each pass of each thread its own element too (the
    # guessed 16x16 blocks overlap the rows otherwise, and the launch reads 1/50 of its bytes)
    k = kernel(PENCILS_LOOP, "derivative_y")
    stores = k.facts.per_item.global_stores * k.facts.work_items
    assert k.facts.dram_bytes >= 4 * stores
    assert all(e.verdict == "bandwidth" for e in k.estimates)
