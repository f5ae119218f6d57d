"""Threads each walking their own row, 128 bytes or more apart (`analysis.line_walks`): beyond
what L1 and L2 hold of the threads' lines, each access reads its sector from DRAM again."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

DATABASE = load_database()
RTX3080 = DATABASE.get("rtx3080")  # 5 MiB of L2, 128 KiB of L1 an SM
H100 = DATABASE.get("H100")  # 50 MiB of L2

# each thread scales its own row of 640 floats by the row's maximum and sum (three passes)
ROWS = """
#define WIDTH 640
__global__ void scale_rows(const float *x, float *y, int rows) {{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float top = x[{at0}];
  for (int j = 1; j < WIDTH; j++) top = fmaxf(top, x[{at}]);
  float sum = 0.0f;
  for (int j = 0; j < WIDTH; j++) sum += expf(x[{at}] - top);
  for (int j = 0; j < WIDTH; j++) y[{at}] = expf(x[{at}] - top) / sum;
}}
int main() {{
  float *x, *y;
  int rows = {rows};
  scale_rows<<<(rows + 255) / 256, 256>>>(x, y, rows);
}}
"""
ROW_MAJOR = {"at0": "r * WIDTH", "at": "r * WIDTH + j"}  # a row a thread: threads 2,560 B apart
COLUMN_MAJOR = {"at0": "r", "at": "j * rows + r"}  # the same walk, neighbouring threads side by side


def _report(rows: int, gpus: list[Gpu], layout: dict[str, str] = ROW_MAJOR) -> KernelReport:
    src = ROWS.format(rows=rows, **layout)
    prepared = read_program(None, src.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (kernel,) = prepared.kernels.kernels
    return analyze_kernel(unit, kernel, gpus)


def _walked(report: KernelReport) -> list[float]:
    """The bytes each read group of `x` counts beyond its footprint (its row walks)."""
    return [g.reread_bytes for g in report.facts.traffic.groups if g.array == "x" and g.reread_bytes > 0]


def test_rows_walked_beyond_l1_and_l2_read_a_sector_an_access():
    # 120,000 rows of 640 floats: the 1,536 threads an SM holds walk a line each (196 KB against
    # 128 KiB of L1), all SMs' 13.4 MB against 5 MiB of L2: each pass reads a sector an access
    report = _report(120_000, [RTX3080])
    passes = _walked(report)
    assert sorted(passes)[-3:] == pytest.approx([120_000 * 639 * 32, 120_000 * 640 * 32, 120_000 * 640 * 32])
    assert "`x` walked a row a thread" in report.facts.dram_note
    assert report.facts.dram_bytes > 7.3e9


def test_a_gpu_whose_caches_hold_the_lines_reads_each_row_pass_once():
    # on the H100 the 909 threads an SM gets walk 116 KB of lines: within its L1
    report = _report(120_000, [H100])
    assert _walked(report) == []
    assert report.facts.dram_bytes < 1.5e9


def test_a_launch_whose_lines_fit_in_l2_reads_each_row_pass_once():
    # 4,096 rows (10.5 MB, beyond L2): their threads' lines, 0.5 MB over all SMs, fit in L2
    assert _walked(_report(4_096, [RTX3080])) == []


def test_threads_side_by_side_share_their_sectors():
    assert _walked(_report(120_000, [RTX3080], COLUMN_MAJOR)) == []


def test_each_gpu_s_summary_names_only_what_was_assumed_of_it():
    # the report's facts are the first GPU's: the RTX 3080's line-walk assumption is not the
    # H100's, whose lines fit
    from perflsp.analysis.report import verdict_summary

    report = _report(120_000, [RTX3080, H100])
    rtx, h100 = (verdict_summary(estimate, report.facts) for estimate in report.estimates)
    assert "GeForce RTX 3080" in rtx and "128-byte lines" in rtx
    assert "GeForce RTX 3080" not in h100 and "128-byte lines" not in h100
