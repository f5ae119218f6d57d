"""Behaviour of the static engine on small, hand-checked kernels."""

import pytest

from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.analysis.notes import texts
from perflsp.analysis.roofline import Precision
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

DB = load_database()
H100 = DB.get("H100")


def run(src: str, options: AnalysisOptions = AnalysisOptions(), gpus=(H100,)):
    data = src.encode()
    tree = parse(data)
    return analyze(data, tree, extract(data, tree), list(gpus), options)


SAXPY = """
__global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
}
"""


def test_saxpy_is_bandwidth_bound_with_exact_counts():
    (k,) = run(SAXPY, AnalysisOptions(argv=("1048576",))).kernels
    per = k.facts.per_item
    assert (per.fp32, per.global_load_bytes, per.global_store_bytes) == (2, 8, 4)
    assert k.facts.work_items == 1 << 20
    (est,) = k.estimates
    assert est.verdict == "bandwidth" and est.deciding is None
    assert est.intensity[Precision.FP32] < 1
    assert any("FP32" in line and "ridge" in line for line in texts(est.evidence))


def test_program_arguments_size_the_launch():
    """Without argv the launch shape is an assumption; with it, the grid folds."""
    (unknown,) = run(SAXPY).kernels
    assert unknown.facts.work_items == pytest.approx(1 << 24)  # the assumed production size
    assert texts(unknown.facts.assumptions)[0].startswith("problem size unknown: assumed large")
    assert any("launch shape" in a or "grid" in a for a in texts(unknown.facts.assumptions))
    (known,) = run(SAXPY, AnalysisOptions(argv=("4096",))).kernels
    assert known.facts.work_items == 4096
    assert not any("grid" in a for a in texts(known.facts.assumptions))


def test_fp64_heavy_kernel_is_compute_bound_on_the_fp64_ridge():
    src = """
__global__ void poly(int n, const double *x, double *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i], p = 0.0;
  for (int k = 0; k < 64; ++k) p = p * v + 1.0;
  y[i] = p;
}
int main() { poly<<<4096, 256>>>(1 << 20, 0, 0); }
"""
    # a GeForce part: FP64 at 1/64 of FP32 puts its FP64 ridge near 0.5 FLOP/B
    (k,) = run(src, gpus=(DB.get("RTX 3080"),)).kernels
    assert k.facts.per_item.fp64 == pytest.approx(128)  # 64 FMA
    (est,) = k.estimates
    assert est.verdict == "compute" and est.deciding == Precision.FP64


def test_tiled_reuse_counts_the_footprint_not_every_access():
    src = """
#define TILE 16
__global__ void mm(const float *A, const float *B, float *C, int N) {
  __shared__ float As[TILE][TILE], Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < N / TILE; ++t) {
    As[threadIdx.y][threadIdx.x] = A[row * N + t * TILE + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * N + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
int main() { dim3 g(64, 64), b(16, 16); mm<<<g, b>>>(0, 0, 0, 1024); }
"""
    (k,) = run(src).kernels
    facts = k.facts
    assert facts.per_item.fp32 == pytest.approx(2 * 1024)
    # 3 matrices of 1024×1024 floats: 12 MB of footprint, though 540 MB are requested
    assert facts.traffic.footprint_bytes == pytest.approx(3 * 1024 * 1024 * 4, rel=0.01)
    assert facts.traffic.accessed_bytes > 10 * facts.traffic.footprint_bytes


def test_l2_size_of_each_gpu_changes_the_dram_estimate():
    """A 32 MB working set streamed from a 64 MB buffer fits the H100's L2 but not an RTX 3080's."""
    src = """
__global__ void gather(const float *table, const int *idx, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int r = 0; r < 64; ++r) s += table[(i + r * 977) % (8 << 20)];
  out[i] = s;
}
int main() { float *t; cudaMalloc(&t, (8 << 20) * sizeof(float)); gather<<<4096, 256>>>(t, 0, 0, 1 << 20); }
"""
    rtx = DB.get("RTX 3080")
    (k,) = run(src, gpus=(H100, rtx)).kernels
    h100, r3080 = k.estimates
    assert h100.intensity[Precision.FP32] >= r3080.intensity[Precision.FP32]


def test_openmp_region_iterations_and_map_sizes():
    src = """
void scale(int n, float *a) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:n]) thread_limit(256)
  for (int i = 0; i < n; i++) a[i] = 2.0f * a[i];
}
int main(int argc, char **argv) { int n = atoi(argv[1]); float *a = (float *)malloc(n * 4); scale(n, a); }
"""
    (k,) = run(src, AnalysisOptions(argv=("100000",))).kernels
    assert k.facts.work_items == 100000
    assert k.facts.per_item.fp32 == 1
    assert k.facts.traffic.footprint_bytes == pytest.approx(800000)  # read + write of 400 KB
    assert k.estimates[0].verdict == "bandwidth"


def test_integer_division_by_a_runtime_value_is_expensive():
    base = """
__global__ void k(int *out, int w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = (i EXPR);
}
int main() { k<<<1024, 256>>>(0, 3); }
"""
    (cheap,) = run(base.replace("EXPR", "/ 4")).kernels
    (costly,) = run(base.replace("EXPR", "/ w")).kernels
    assert costly.facts.per_item.int32 > cheap.facts.per_item.int32 + 5


def test_unparsable_region_is_uncertain_with_a_reason():
    src = """
void f(int n, float *a) {
#pragma omp target teams distribute parallel for
}
"""
    (k,) = run(src).kernels
    (est,) = k.estimates
    assert est.verdict == "uncertain"
    assert texts(est.evidence) and "statement" in texts(est.evidence)[0]


def test_every_assumption_is_named():
    src = """
__global__ void k(const float *a, float *b, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0;
  for (int r = 0; r < iters; ++r) s += a[i] * r;
  b[i] = s;
}
"""
    (k,) = run(src).kernels
    text = " | ".join(texts(k.facts.assumptions))
    assert "iters" in text and "assumed" in text
    assert "launch" in text


def test_static_shared_memory_feeds_occupancy():
    src = """
__global__ void k(float *a) {
  __shared__ float big[12288];
  big[threadIdx.x] = a[threadIdx.x];
  __syncthreads();
  a[threadIdx.x] = big[255 - threadIdx.x];
}
int main() { k<<<1024, 256>>>(0); }
"""
    (k,) = run(src, gpus=(DB.get("RTX 3080"),)).kernels
    (est,) = k.estimates
    # 48 KB per block: the 100 KB of shared memory per SM fits two blocks
    assert est.occupancy is not None and est.occupancy.active_blocks_per_sm == 2
    assert est.occupancy.limiter.value == "shared_memory"


def test_a_guard_on_one_thread_and_one_block_passes_one_thread_of_the_grid():
    src = """
__global__ void first(const float *x, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0 && blockIdx.x == 0)
    *out = x[0] * 2.0f;
  if (i < n) out[i + 1] = x[i];
}
int main() { float *x, *o; first<<<4096, 256>>>(x, o, 1 << 20); }
"""
    (k,) = run(src).kernels
    # one thread of 4096 x 256 takes the first arm: its multiply counts 1 / 2^20 a thread
    assert k.facts.per_item.fp32 == pytest.approx(1.0 / (1 << 20))
