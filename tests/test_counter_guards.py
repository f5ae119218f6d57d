"""A test of a loop's own counter against a value the walk knows (`walk_branches.counter_share`):
`if (j < 250)` in a 1,000-pass loop runs its arm on a quarter of the passes, not on the half a
data-dependent branch is given; the compiled counts take the same share from the source guard."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler
from perflsp.compiled.toolchain import find_toolchain
from tests.engine_reports import reports
from tests.test_compiled import analyse

TOOLCHAIN = find_toolchain()
REQUIRED = bool(os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"))
needs_cuda = pytest.mark.skipif(TOOLCHAIN.missing("cuda") is not None and not REQUIRED, reason="no CUDA compiler")

PASSES = """
__global__ void head(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < 1000; ++j) {
    if (j < 250) t += x[i + j * 4096] * 1.5f;
  }
  y[i] = t;
}
__global__ void tail(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < 1000; ++j) {
    if (j >= 900) t = t * x[i + j * 4096] + 2.0f;
    else t += 1.0f;
  }
  y[i] = t;
}
__global__ void downward(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 999; j >= 0; j -= 2) {
    if (2 * j + 1 <= 399) t += x[i + j * 4096] * 1.5f;
  }
  y[i] = t;
}
__global__ void unknown(const float *x, const float *w, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < 1000; ++j) {
    if (w[j] < 0.5f) t += x[i + j * 4096] * 1.5f;
  }
  y[i] = t;
}
int main() {
  float *x, *w, *y;
  head<<<64, 256>>>(x, y); tail<<<64, 256>>>(x, y); downward<<<64, 256>>>(x, y); unknown<<<64, 256>>>(x, w, y);
}
"""


def _per_item(name: str):
    return next(r for r in reports(PASSES) if r.name == name).facts.per_item


def test_a_test_of_the_counter_against_a_constant_runs_on_the_passes_on_its_side():
    head = _per_item("head")
    assert head.fp32 == pytest.approx(250 * 2)  # one FMA on 250 of the 1,000 passes
    assert head.global_load_bytes == pytest.approx(250 * 4)


def test_the_else_arm_of_a_counter_test_runs_on_the_other_passes():
    tail = _per_item("tail")
    assert tail.fp32 == pytest.approx(100 * 2 + 900)  # the FMA on the last 100 passes, the add on the others
    assert tail.global_load_bytes == pytest.approx(100 * 4)


def test_a_sum_of_a_counter_stepped_down_by_two_is_ranged_over_the_values_it_takes():
    # j = 999, 997, ..., 1: 2j + 1 <= 399 for j <= 199, 100 of the 500 passes
    assert _per_item("downward").fp32 == pytest.approx(100 * 2, rel=0.01)


def test_a_test_of_a_value_read_from_memory_keeps_the_even_split():
    assert _per_item("unknown").fp32 == pytest.approx(1000)  # half of the 1,000 FMAs


@needs_cuda
def test_the_compiled_counts_take_the_counter_test_s_share(tmp_path: Path):
    source = tmp_path / "passes.cu"
    source.write_text(PASSES)
    compiled = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))
    head, tail = compiled["head"].facts, compiled["tail"].facts
    assert head.operations == tail.operations == "compiled"
    # nvcc unrolls the loop by 8 and predicates each copy's load and FMA on `j < 250`
    assert head.per_item.fp32 == pytest.approx(250 * 2)
    assert head.per_item.global_load_bytes == pytest.approx(250 * 4)
    assert tail.per_item.fp32 == pytest.approx(100 * 2 + 900, rel=0.01)
