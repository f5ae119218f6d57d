"""Reads a thread repeats on each pass of an outer loop, once the pass's data have left L1 and L2
(`analysis.pass_rereads`): small programs of our own, judged on GPUs of different L2 sizes."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

DATABASE = load_database()
RTX3080 = DATABASE.get("rtx3080")  # 5 MiB of L2, 68 SMs of 1,536 threads and 128 KiB of L1
H100 = DATABASE.get("H100")  # 50 MiB of L2

# each point's distance to each of 6 centres over its features, stored feature-major (coalesced)
NEAREST = """
__global__ void nearest(const float *__restrict__ x, const float *__restrict__ centres, int *label,
                        int k, int features, int points) {{
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < points) {{
    int best = 0;
    float least = 3.0e38f;
    for (int c = 0; c < k; c++) {{
      float d = 0.0f;
      for (int f = 0; f < {bound}; f++) {{
        float t = x[f * points + p] - centres[c * features + f];
        d += t * t;
      }}
      if (d < least) {{ least = d; best = c; }}
    }}
    label[p] = best;
  }}
}}
int main() {{
  float *x, *centres; int *label;
  int points = {points};
  nearest<<<(points + 255) / 256, 256>>>(x, centres, label, 6, 40, points);
}}
"""


def _report(points: int, gpus: list[Gpu], bound: str = "features") -> KernelReport:
    src = NEAREST.format(points=points, bound=bound)
    prepared = read_program(None, src.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (kernel,) = prepared.kernels.kernels
    return analyze_kernel(unit, kernel, gpus)


def _points_group(report: KernelReport):
    return max((g for g in report.facts.traffic.groups if g.array == "x"), key=lambda g: g.footprint_bytes)


def test_a_pass_whose_data_exceed_l1_and_l2_reads_its_elements_again_on_the_next_pass():
    # 524,288 points of 40 features (84 MB): a pass over one centre reads 160 B a thread, 246 KB
    # on an SM (128 KiB of L1), 16.7 MB on all of them (5 MiB of L2): each of the 6 passes reads
    # the points from DRAM again
    report = _report(1 << 19, [RTX3080])
    footprint = (1 << 19) * 40 * 4
    group = _points_group(report)
    assert group.footprint_bytes == pytest.approx(footprint, rel=0.01)
    assert group.reread_bytes == pytest.approx(6 * footprint, rel=0.01)
    assert report.facts.dram_bytes == pytest.approx(6 * footprint, rel=0.02)
    assert "read again on each pass of a loop its index does not follow" in report.facts.dram_note


def test_a_gpu_whose_l2_holds_the_pass_reads_the_elements_once():
    # the H100's 50 MiB of L2 hold a pass of its 270,336 threads (43 MB): the footprint once
    h100, rtx = (_report(1 << 19, [gpu]) for gpu in (H100, RTX3080))
    footprint = (1 << 19) * 40 * 4
    assert _points_group(h100).reread_bytes == 0.0
    assert h100.facts.dram_bytes < 1.1 * footprint
    assert rtx.facts.dram_bytes > 4 * h100.facts.dram_bytes


def test_a_launch_too_small_to_fill_l2_with_a_pass_reads_the_elements_once():
    # 16,384 points: a pass is 2.6 MB over all the threads, within L2
    report = _report(1 << 14, [RTX3080])
    assert _points_group(report).reread_bytes == 0.0


def test_a_few_elements_a_pass_stay_in_registers():
    # the inner loop over 8 features, a constant the compiler unrolls: each thread's 8 values
    # are registers over the 6 passes, whatever the caches hold
    report = _report(1 << 19, [RTX3080], bound="8")
    assert _points_group(report).reread_bytes == 0.0


NEAREST_OMP = """
void nearest(const float *x, const float *centres, int *label, int k, int features, int points) {{
  #pragma omp target teams distribute {parallel} thread_limit(256) map(to: x[0:points * features], centres[0:k * features]) map(from: label[0:points])
  for (int p = 0; p < points; p++) {{
    int best = 0;
    float least = 3.0e38f;
    for (int c = 0; c < k; c++) {{
      float d = 0.0f;
      for (int f = 0; f < features; f++) {{
        float t = x[f * points + p] - centres[c * features + f];
        d += t * t;
      }}
      if (d < least) {{ least = d; best = c; }}
    }}
    label[p] = best;
  }}
}}
int main() {{
  float *x, *centres; int *label;
  nearest(x, centres, label, 6, 40, 1 << 19);
}}
"""


def _omp_report(parallel: str, gpus: list[Gpu]) -> KernelReport:
    src = NEAREST_OMP.format(parallel=parallel)
    prepared = read_program(None, src.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (region,) = prepared.kernels.omp_regions
    return analyze_kernel(unit, region, gpus)


def test_an_openmp_parallel_for_iteration_is_a_thread_that_reads_again_on_each_pass():
    report = _omp_report("parallel for", [RTX3080])
    footprint = (1 << 19) * 40 * 4
    assert _points_group(report).reread_bytes == pytest.approx(6 * footprint, rel=0.01)


def test_an_openmp_region_without_parallel_keeps_its_footprint():
    # `teams distribute` alone: each team's main thread runs its iterations, not a thread each
    report = _omp_report("", [RTX3080])
    assert _points_group(report).reread_bytes == 0.0
