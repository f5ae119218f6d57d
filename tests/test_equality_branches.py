"""Branches on the equality of loop counters and indices (`if (i == j)`, `if (i != j) continue;`):
the two sides meet on one value of their range, not on half the passes."""

import pytest

from perflsp.analysis.engine import analyze
from perflsp.analysis.options import DEFAULT_OPTIONS
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

RTX3080 = load_database().get("RTX 3080")


def facts(src: str, name: str):
    data = src.encode()
    tree = parse(data)
    report = analyze(data, tree, extract(data, tree), [RTX3080], DEFAULT_OPTIONS)
    return next(k for k in report.kernels if k.name == name).facts


def pairs(skip: str) -> str:
    return f"""
__global__ void forces(const float *x, float *f, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int j = 0; j < 1024; j++) {{
    {skip}
    float d = x[i] - x[j];
    acc += d * d * 0.5f;
  }}
  f[i] = acc;
}}
int main() {{ float *x, *f; forces<<<4096, 256>>>(x, f, 1 << 20); }}
"""


def test_self_pair_skipped_by_continue_leaves_the_other_passes():
    src = """
__global__ void pairs(const float *x, float *f) {
  int b = blockIdx.x;
  for (int i = 0; i < 64; i++) {
    float acc = 0.0f;
    for (int j = 0; j < 64; j++) {
      if (i == j) continue;
      float d = x[b * 64 + i] - x[b * 64 + j];
      acc += d * d;
    }
    f[b * 64 + i] = acc;
  }
}
int main() { float *x, *f; pairs<<<1024, 1>>>(x, f); }
"""
    # 64 x 63 pairs, each a subtraction and a multiply-add (3 FLOP)
    assert facts(src, "pairs").per_item.fp32 == pytest.approx(64 * 63 * 3)


def test_not_equal_guard_runs_on_all_passes_but_one():
    body = pairs("if (j != 7) { acc += 1.0f; }")
    plain = facts(pairs(""), "forces").per_item.fp32
    assert facts(body, "forces").per_item.fp32 == pytest.approx(plain + 1023)


def test_equal_guard_on_a_counter_runs_once_per_loop():
    body = pairs("if (j == 7) { acc += 1.0f; }")
    plain = facts(pairs(""), "forces").per_item.fp32
    assert facts(body, "forces").per_item.fp32 == pytest.approx(plain + 1)


def test_two_counters_meet_on_the_diagonal():
    src = """
__global__ void diag(float *a, int n) {
  for (int r = 0; r < 64; r++)
    for (int c = 0; c < 64; c++)
      if (r == c) a[r * 64 + c] += 1.0f;
}
int main() { float *a; diag<<<1, 32>>>(a, 64); }
"""
    assert facts(src, "diag").per_item.fp32 == pytest.approx(64)


def test_a_guard_reading_memory_keeps_the_assumed_share():
    # `x[j] == 0` depends on the data: no range says how often it holds
    body = pairs("if (x[j] == 0.0f) { acc += 1.0f; }")
    plain = facts(pairs(""), "forces").per_item.fp32
    extra = facts(body, "forces").per_item.fp32 - plain
    assert 1023 / 2 <= extra <= 1024 / 2 + 1024  # the compare and half the adds
