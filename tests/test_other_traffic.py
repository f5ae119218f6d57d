"""DRAM traffic of a GPU's other clients while a kernel runs (`analysis.other_traffic`): kernels
of our own that touch little memory (a long one, a short one, one block looping ten million
times), judged on a headless card and on one that drives a display."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import NoteKind
from perflsp.analysis.other_traffic import (CYCLES_PER_THREAD_INSTRUCTION, MIN_SECONDS, RUN_TIME_OVER_ROOFLINE,
                                            roofline_seconds, serial_seconds)
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

RTX3080 = load_database().get("rtx3080")
DESKTOP = RTX3080.model_copy(update={"id": "rtx3080-desk", "other_dram_traffic_gbs": 1.2})

# 2^20 threads, each 131,072 dependent multiply-adds on one loaded value: ~275 GFLOP over 8 MiB
# (about 9 ms at the card's peak); STEPS = 4096 makes it 32 times shorter
CHAIN = """
__global__ void chain(const float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = a[i];
  for (int k = 0; k < STEPS; k++) s = s * 0.999f + 1.0f;
  b[i] = s;
}
int main() {
  const int n = 1 << 20;
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
  chain<<<n / 256, 256>>>(a, b, n);
}
"""


# one block of 128 threads, each loading, adding and storing ten million times
REPEAT = """
__global__ void repeat(const unsigned *in, unsigned *out, int times) {
  int t = threadIdx.x;
  for (int i = 0; i < times; i++) out[t] = in[t] + 1u;
}
int main() {
  unsigned *in, *out;
  cudaMalloc(&in, 512); cudaMalloc(&out, 512);
  repeat<<<1, 128>>>(in, out, 10000000);
}
"""


def _report(gpus: list[Gpu], source: str = CHAIN.replace("STEPS", "131072")) -> KernelReport:
    prepared = read_program(None, source.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
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
    roofline = RUN_TIME_OVER_ROOFLINE * roofline_seconds(headless.facts, DESKTOP)
    assert roofline == pytest.approx(2 * max(roofs), rel=1e-6) and roofline > MIN_SECONDS
    # or its threads' instructions one after another, where that is longer (12 warps of a
    # sub-partition taking turns: about as long)
    serial = serial_seconds(headless.facts, DESKTOP, 256)
    assert 0.5 < serial / roofline < 2
    assert desk.facts.dram_bytes == pytest.approx(own + 1.2e9 * max(roofline, serial), rel=1e-6)
    assert desk.estimates[0].dram_bytes == pytest.approx(desk.facts.dram_bytes, rel=1e-6)
    assert any(a.kind == NoteKind.OTHER_TRAFFIC and "1.2 GB/s" in a.text for a in desk.facts.assumptions)
    assert "of other DRAM clients over the kernel's run time" in desk.facts.dram_note


def test_a_kernel_shorter_than_the_scanout_is_seen_over_adds_nothing():
    short = _report([DESKTOP], CHAIN.replace("STEPS", "4096"))
    assert RUN_TIME_OVER_ROOFLINE * roofline_seconds(short.facts, DESKTOP) < MIN_SECONDS
    assert "other DRAM clients" not in short.facts.dram_note
    assert not any(a.kind == NoteKind.OTHER_TRAFFIC for a in short.facts.assumptions)


def test_a_launch_too_small_to_hide_latency_runs_its_threads_instructions_one_after_another():
    headless, desk = _report([RTX3080], REPEAT), _report([DESKTOP], REPEAT)
    facts = headless.facts
    # the roofline's time (the whole GPU's throughput) is far shorter than one block's threads
    # doing their ten million passes one after another
    serial = serial_seconds(facts, DESKTOP, 128)
    assert serial > 100 * RUN_TIME_OVER_ROOFLINE * roofline_seconds(facts, DESKTOP)
    per_thread = facts.per_item.int32 + facts.per_item.global_loads + facts.per_item.global_stores
    assert per_thread >= 3e7  # (an add, a load and a store a pass at least)
    assert serial == pytest.approx(per_thread * CYCLES_PER_THREAD_INSTRUCTION / (DESKTOP.base_clock_mhz * 1e6),
                                   rel=1e-6)
    assert desk.facts.dram_bytes == pytest.approx(facts.dram_bytes + 1.2e9 * serial, rel=1e-6)
    assert any("one after another" in a.text for a in desk.facts.assumptions if a.kind == NoteKind.OTHER_TRAFFIC)
    # the display's bytes over that time are what a profiler counts: more than its arithmetic
    # can hold above the ridge
    assert headless.estimates[0].verdict == "compute" and desk.estimates[0].verdict == "bandwidth"


def test_the_added_bytes_leave_the_verdict_of_a_kernel_busy_with_arithmetic_as_it_was():
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
