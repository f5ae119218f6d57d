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
