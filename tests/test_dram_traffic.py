"""DRAM traffic of a launch (`analysis.memory`, `analysis.finish`): what each group of accesses
moves, on small programs of our own with the launch shape given."""

from __future__ import annotations

import pytest

from tests.engine_reports import kernel_reports

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
    assert any(line.startswith("DRAM: footprint ") for line in facts.evidence)
