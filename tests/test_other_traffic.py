"""DRAM traffic of a GPU's other clients while a kernel runs (`analysis.other_traffic`): a long
kernel of our own that touches little memory, judged on a headless card and on one that drives
a display."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import NoteKind
from perflsp.analysis.other_traffic import RUN_TIME_OVER_ROOFLINE, roofline_seconds
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

RTX3080 = load_database().get("rtx3080")
DESKTOP = RTX3080.model_copy(update={"id": "rtx3080-desk", "other_dram_traffic_gbs": 1.2})

# 2^20 threads, each 4096 dependent multiply-adds on one loaded value: ~8.6 GFLOP over 8 MiB
CHAIN = """
__global__ void chain(const float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = a[i];
  for (int k = 0; k < 4096; k++) s = s * 0.999f + 1.0f;
  b[i] = s;
}
int main() {
  const int n = 1 << 20;
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
  chain<<<n / 256, 256>>>(a, b, n);
}
"""


def _report(gpus: list[Gpu]) -> KernelReport:
    prepared = read_program(None, CHAIN.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (kernel,) = prepared.kernels.kernels
    return analyze_kernel(unit, kernel, gpus)


def test_a_headless_card_adds_nothing():
    report = _report([RTX3080])
    assert not any(a.kind == NoteKind.OTHER_TRAFFIC for a in report.facts.assumptions)
    assert "other DRAM clients" not in report.facts.dram_note


def test_a_display_adds_its_rate_over_the_kernels_run_time():
    headless, desk = _report([RTX3080]), _report([DESKTOP])
    own = headless.facts.dram_bytes
    # the run time is the roofline's over the kernel's own parts (its slowest roof), stretched
    total = headless.facts.total
    roofs = (total.fp32 / DESKTOP.peak_ops_per_s("fp32"), total.int32 / DESKTOP.peak_ops_per_s("int32"),
             own / DESKTOP.memory_bandwidth_bytes_per_s)
    seconds = RUN_TIME_OVER_ROOFLINE * roofline_seconds(headless.facts, DESKTOP)
    assert seconds == pytest.approx(2 * max(roofs), rel=1e-6) and seconds > 1e-4
    assert desk.facts.dram_bytes == pytest.approx(own + 1.2e9 * seconds, rel=1e-6)
    assert desk.estimates[0].dram_bytes == pytest.approx(desk.facts.dram_bytes, rel=1e-6)
    assert any(a.kind == NoteKind.OTHER_TRAFFIC and "1.2 GB/s" in a.text for a in desk.facts.assumptions)
    assert "of other DRAM clients over the kernel's run time" in desk.facts.dram_note


def test_the_added_bytes_leave_the_verdict_as_it_was():
    headless, desk = _report([RTX3080]), _report([DESKTOP])
    assert headless.estimates[0].verdict == desk.estimates[0].verdict == "compute"
    # a kernel's run time at a rate far below the bandwidth cannot bring it down to the ridge
    assert desk.estimates[0].intensity["fp32"] > desk.estimates[0].ridge["fp32"]


def test_a_gpu_file_sets_the_rate(tmp_path):
    entry = (tmp_path / "desk.toml")
    entry.write_text("""
[[gpu]]
id = "desk-card"
vendor = "NVIDIA"
architecture = "Ampere"
compute_capability = "8.6"
sm_count = 68
boost_clock_mhz = 1710
memory_bandwidth_gbs = 760
other_dram_traffic_gbs = 1.5
""")
    gpu = load_database([entry]).get("desk-card")
    assert gpu.other_dram_traffic_gbs == 1.5
    assert gpu.detail_json()["other_dram_traffic_gbs"] == 1.5
