"""Chains of cases on a value of the thread index (`analysis/case_chains.py`): `if (kind == 1)
... if (kind == 2) ...` with `kind = (tid % 12) / 4 + 1` runs one case per thread, each case for
a third of the threads, not for one thread in the launch."""

from __future__ import annotations

import pytest

from perflsp.analysis.notes import texts
from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler
from tests.test_compiled import TOOLCHAIN, analyse, needs_cuda

CASES = """
__global__ void cases(const float *in, float *out, int n, int m) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) {
    int kind = (tid % 12) / 4 + 1;
    float sum = 0.f;
    if (kind == 1) {
      for (int j = 0; j < m; ++j) sum += in[j] * 2.f;
    }
    if (kind == 2) {
      for (int j = 0; j < m; ++j) sum += in[j] * in[j];
    } else if (kind == 3) {
      for (int j = 0; j < m; ++j) sum -= in[j];
    }
    if (tid == 0) {
      for (int j = 0; j < m; ++j) sum += in[j];
    }
    out[tid] = sum;
  }
}
int main() { float *a, *b; int n = 1 << 20; cases<<<n / 256, 256>>>(a, b, n, 1000); }
"""

NOTE = "`kind` (of the thread index through `%` or `/`) is tested against 3 constants: each thread runs one case, " \
       "1/3 of the threads each"


def test_each_case_of_a_chain_on_a_value_of_the_thread_index_runs_for_its_share_of_the_threads(tmp_path):
    source = tmp_path / "cases.cu"
    source.write_text(CASES)
    facts = analyse(source, None)["cases"].facts
    # 1000 trips of 2 (FMA), 2 (FMA) and 1 (FADD) FLOP, a third of the threads each; the
    # `tid == 0` loop runs for one thread of the launch (1000 / 2^20 per thread)
    assert facts.per_item.fp32 == pytest.approx(5000 / 3 + 1000 / 2**20, rel=1e-6)
    assert texts(facts.assumptions).count(NOTE) == 1


def test_a_single_equality_on_a_value_of_the_thread_index_is_no_chain(tmp_path):
    source = tmp_path / "cases.cu"
    source.write_text(CASES.replace("kind == 2", "kind < 2").replace("kind == 3", "kind > 2"))
    facts = analyse(source, None)["cases"].facts
    assert not any("constants: each thread runs one case" in t for t in texts(facts.assumptions))


@needs_cuda
def test_compiled_counts_weight_each_case_by_its_share(tmp_path):
    source = tmp_path / "cases.cu"
    source.write_text(CASES)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["cases"].facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    assert NOTE in texts(facts.assumptions)
    # the three loops' FP32 work, a third of the threads each (nvcc unrolls them by 4: the trips
    # are 1000 / 4 of four iterations' code each)
    assert facts.per_item.fp32 == pytest.approx(5000 / 3, rel=0.01)
