"""A grid-stride loop over the size the launch's grid is computed from makes one pass a thread
(`analysis.grid_sizes`); a grid capped by a constant, or one computed from something else, leaves
the production size."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.analysis.notes import texts
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

H100 = load_database().get("H100")

KERNEL = """
#include <cstdlib>
__global__ void fill(int e, float *w, float value) {
  for (int j = threadIdx.x + blockIdx.x * blockDim.x; j < e; j += gridDim.x * blockDim.x)
    w[j] = value;
}
"""


def _fill(host: str, blocks: int = 4096):
    # the launch shape given, as `perflsp eval` gives it: the size `e` itself stays unknown
    src = KERNEL + "int main(int argc, char **argv) {\n  int e = atoi(argv[1]);\n  float *w;\n" \
        "  cudaMalloc(&w, e * sizeof(float));\n" + host + "\n}\n"
    data = src.encode()
    tree = parse(data)
    options = AnalysisOptions(launch_override=((blocks, 1, 1), (256, 1, 1)))
    (report,) = analyze(data, tree, extract(data, tree), [H100], options).kernels
    (loop,) = report.facts.loops
    return report, loop


@pytest.mark.parametrize("host", [
    "  dim3 nblocks, nthreads(256);\n  nblocks.x = (e + 255) / 256;\n  fill<<<nblocks, nthreads>>>(e, w, 1.0f);",
    "  fill<<<(e + 127) / 128, 128>>>(e, w, 1.0f);",
    "  int blocks = (e + 255) / 256;\n  fill<<<blocks, 256>>>(e, w, 1.0f);",
])
def test_a_grid_computed_from_the_size_covers_it_in_one_pass(host):
    report, loop = _fill(host)
    assert loop.trip_count == 1.0
    assert any("the size the launch's grid is computed from: one pass per thread" in t
               for t in texts(report.facts.assumptions))


@pytest.mark.parametrize("host", [
    "  int blocks = min((e + 255) / 256, 1024);\n  fill<<<blocks, 256>>>(e, w, 1.0f);",
    "  fill<<<1024, 256>>>(e, w, 1.0f);",
])
def test_a_capped_or_fixed_grid_leaves_the_production_size(host):
    report, loop = _fill(host)
    assert loop.trip_count > 1.0
    assert any("assumed the production size" in t for t in texts(report.facts.assumptions))
