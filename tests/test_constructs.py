"""Source constructs of real code that the engine must find and read (issue 12): each on a
small program written for the test."""

from dataclasses import replace
from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.source.parser import parse

DB = load_database()
H100 = DB.get("H100")


def analyse(src: str, path: Path | None = None, options: AnalysisOptions | None = None):
    """Reports of every kernel and region of `src` (as `perflsp check` reads a file at `path`)."""
    data = src.encode()
    env = IncludeResolver().env_for(path, data)
    tree = parse(data)
    kernels = extract(data, tree, path=str(path) if path else None, env=env)
    unit = AnalysisUnit(data, tree, kernels, replace(options or AnalysisOptions(), include_env=env))
    return [analyze_kernel(unit, k, [H100]) for k in [*kernels.kernels, *kernels.omp_regions]]


# 1. declarations through macros ---------------------------------------------------------------

RESTRICT_SRC = """
#define RESTRICT __restrict__
#define CONSTANT const
#define REAL double
__global__ void scale(REAL * RESTRICT out, CONSTANT REAL * RESTRICT in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0 * in[i];
}
int main() {
  double *a, *b;
  cudaMalloc(&a, (1 << 24) * sizeof(double));
  cudaMalloc(&b, (1 << 24) * sizeof(double));
  scale<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
}
"""


def test_restrict_macro_keeps_pointer_parameters():
    data = RESTRICT_SRC.encode()
    (kernel,) = extract(data, parse(data)).kernels
    assert [p.name for p in kernel.params] == ["out", "in", "n"]
    out, inp, _ = kernel.params
    assert out.pointer_depth == 1 and out.is_restrict and inp.is_const
    (report,) = analyse(RESTRICT_SRC)
    per = report.facts.per_item
    assert (per.global_loads, per.global_stores) == (1, 1)
    assert (per.global_load_bytes, per.global_store_bytes) == (8, 8)
    assert report.estimates[0].verdict == "bandwidth"


# 2. template arguments and sizes from #define, constexpr and const ----------------------------

FOLDED_SIZES_SRC = """
#define BLOCK 256
#define REAL double
constexpr int TILE = 16;
const int n = 1 << 20;
template <int B, int T, typename V = float>
__global__ void tiled(V *x, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  V s = 0;
  for (int j = 0; j < T; j++) s += x[i] * j;
  if (i < n) x[i] = s;
}
__global__ void bounded(float *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < TILE; j++) s += x[i] * j;
  if (i < n) x[i] = s;
}
int main() {
  const int m = 1 << 20;
  constexpr int STEPS = TILE / 2;
  float *x;
  cudaMalloc(&x, m * sizeof(double));
  tiled<BLOCK, STEPS, REAL><<<m / BLOCK, BLOCK>>>((double *)x, m);
  bounded<<<n / BLOCK, BLOCK>>>(x);
}
"""


def test_template_arguments_fold_through_macros_and_constants():
    tiled, bounded = analyse(FOLDED_SIZES_SRC)
    assert not any("template" in a or "assumed 32" in a for a in tiled.facts.assumptions)
    (loop,) = tiled.facts.loops
    assert loop.trip_count == 8  # STEPS = TILE / 2, a constexpr of the launching function
    assert tiled.facts.per_item.fp64 == 16 and tiled.facts.per_item.fp32 == 0  # V = REAL = double
    assert tiled.facts.work_items == 1 << 20
    (loop,) = bounded.facts.loops
    assert loop.trip_count == 16  # a file-scope constexpr as a loop bound
    assert bounded.facts.per_item.fp32 == 32
    assert bounded.facts.work_items == 1 << 20
