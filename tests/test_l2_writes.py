"""Writes a launch whose data fit in L2 leaves there (`analysis.l2_writes`): small programs of
our own, judged on GPUs of different L2 sizes."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.l2_writes import WRITTEN_BACK_FLOOR
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import NoteKind
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

DATABASE = load_database()
RTX3080 = DATABASE.get("rtx3080")  # 5 MiB of L2
H100 = DATABASE.get("H100")  # 50 MiB of L2

SCALE = """
__global__ void scale(const float *a, float *b, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 2.0f * a[i];
}}
int main() {{
  const int n = {n};
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
  scale<<<n / 256, 256>>>(a, b, n);
}}
"""


def _report(n: int, gpus: list[Gpu]) -> KernelReport:
    prepared = read_program(None, SCALE.format(n=n).encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (kernel,) = prepared.kernels.kernels
    return analyze_kernel(unit, kernel, gpus)


def test_a_launch_far_below_l2_writes_back_the_floor_share():
    # 2 x 256 KiB: a tenth of the 3080's L2; a fifth of the written bytes reach DRAM in the launch
    n = 1 << 16
    report = _report(n, [RTX3080])
    half = 4 * n
    assert report.facts.dram_bytes == pytest.approx(half + WRITTEN_BACK_FLOOR * half, rel=0.01)
    assert any(a.kind == NoteKind.L2_WRITES for a in report.facts.assumptions)
    assert "stay in" in report.facts.dram_note


def test_the_share_written_back_grows_with_the_share_of_l2_filled():
    # 2 x 1 MiB fill 40% of the 3080's L2: 40% of the writes reach DRAM
    n = 1 << 18
    report = _report(n, [RTX3080])
    half = 4 * n
    filled = 2 * half / RTX3080.l2_cache_bytes
    assert report.facts.dram_bytes == pytest.approx(half + filled * half, rel=0.01)


def test_a_launch_beyond_l2_writes_everything_and_each_gpu_judges_its_own():
    # 2 x 8 MiB exceed the 3080's L2, not the H100's 50 MiB
    n = 1 << 21
    report = _report(n, [RTX3080, H100])
    rtx, h100 = report.estimates
    assert rtx.dram_bytes == pytest.approx(8 * n, rel=0.01)
    assert not any(a.kind == NoteKind.L2_WRITES for a in report.facts.assumptions)
    half = 4 * n
    assert h100.dram_bytes == pytest.approx(half + 2 * half / H100.l2_cache_bytes * half, rel=0.01)
