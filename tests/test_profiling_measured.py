"""Measured evidence: intensities, achieved rates, % of peak and the verdict rule."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pytest
from profiling_helpers import MIXED

from perflsp.analysis.roofline import Precision, classify
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import RTX_3080, MeasuredGpu, find_measured_gpu, resolve_measured_gpu
from perflsp.profiling.measured import evaluate, group_launches
from perflsp.profiling.ncu_csv import parse_ncu_csv

P = Precision
REPO = Path(__file__).resolve().parents[1]


def _kernels():
    return {k.name: k for k in group_launches(parse_ncu_csv(MIXED.read_text(encoding="utf-8")).launches)}


def test_rtx3080_ridges_are_the_labeling_rule():
    assert RTX_3080.ridge[P.FP32] == pytest.approx(32.9706, abs=5e-5)
    assert RTX_3080.ridge[P.FP64] == pytest.approx(0.51517, abs=5e-6)
    assert RTX_3080.ridge[P.INT32] == pytest.approx(16.4853, abs=5e-5)
    assert RTX_3080.peak_ops_per_s[P.FP32] == 128 * 68 * 1.44e9 * 2


def test_gpu_lookup():
    assert find_measured_gpu("RTX 3080") is RTX_3080
    assert find_measured_gpu("NVIDIA GeForce RTX 3080") is RTX_3080
    assert find_measured_gpu("rtx3080") is RTX_3080
    assert find_measured_gpu("A100") is None
    with pytest.raises(ProfilingError) as info:
        resolve_measured_gpu("H9000")
    assert info.value.code == "unknown-gpu" and "RTX 3080" in info.value.message


def test_explicit_ridges_win_over_derived_ones():
    gpu = MeasuredGpu("X", 1000, {P.FP32: 1e12}, 1e11, ridge={P.FP32: 5.0})
    assert gpu.ridge == {P.FP32: 5.0}
    assert MeasuredGpu("Y", 1000, {P.FP32: 1e12}, 1e11).ridge == {P.FP32: 10.0}


def test_launches_of_one_kernel_are_summed():
    saxpy = _kernels()["void ns::saxpy<float>(const float *, float *, int)"]
    assert saxpy.launches == 2
    assert saxpy.counters.ops[P.FP32] == 2 * (2 * 1_048_576)  # an FMA counts two operations
    assert saxpy.counters.dram_bytes == 2 * (8_388_608 + 4_194_304)
    assert saxpy.counters.duration_ns == 20_480 + 20_992
    assert saxpy.block == (256, 1, 1) and not saxpy.shapes_vary
    assert saxpy.registers_per_thread == 16
    # time-weighted occupancy
    assert saxpy.achieved_occupancy_pct == pytest.approx((85.5 * 20_480 + 84.5 * 20_992) / (20_480 + 20_992))


def test_bandwidth_bound_kernel_evidence():
    saxpy = _kernels()["void ns::saxpy<float>(const float *, float *, int)"]
    evidence = evaluate(saxpy, RTX_3080)
    bytes_ = 2 * (8_388_608 + 4_194_304)
    seconds = (20_480 + 20_992) * 1e-9
    assert evidence.intensity[P.FP32] == pytest.approx(4 * 1_048_576 / bytes_)
    assert evidence.intensity[P.INT32] == pytest.approx(2 * 4_194_304 / bytes_)
    assert evidence.achieved_bytes_per_s == pytest.approx(bytes_ / seconds)
    assert evidence.pct_of_peak_bandwidth == pytest.approx(100 * bytes_ / seconds / 760.3e9)
    assert evidence.pct_of_peak_ops[P.FP32] == pytest.approx(
        100 * 4 * 1_048_576 / seconds / RTX_3080.peak_ops_per_s[P.FP32]
    )
    assert evidence.verdict == "bandwidth" and evidence.deciding_precision is None
    assert evidence.measured_clock_mhz == pytest.approx(1440)
    assert evidence.notes == ()
    assert evidence.summary() == (
        "measured on NVIDIA GeForce RTX 3080 at 1440 MHz: bandwidth-bound, FP32 intensity 0.17 < ridge 33.0 FLOP/B · "
        "nearest roof: integer instructions, INT32 intensity 0.33 < ridge 16.5 op/B, "
        f"{bytes_ / seconds / 1e9:.3g} GB/s ({100 * bytes_ / seconds / 760.3e9:.3g}% of peak)"
    )
    assert "stale" in evidence.marked(kernel_hash="a", current_hash="b").summary()
    data = evidence.to_json()
    assert data["source"] == "measured" and data["verdict"] == "bandwidth" and data["gpu"] == RTX_3080.name


def test_compute_bound_by_fp64_and_by_integer():
    kernels = _kernels()
    dgemm = evaluate(kernels["dgemm_tile(const double *, const double *, double *, int)"], RTX_3080)
    assert dgemm.verdict == "compute" and dgemm.deciding_precision is P.FP64
    assert dgemm.intensity[P.FP64] == pytest.approx((2 * 268_435_456 + 1_048_576) / (100_663_296 + 33_554_432))
    omp = evaluate(kernels["__omp_offloading_fd00_1a2b3c__Z6smoothPfi_l42"], RTX_3080)
    assert omp.verdict == "compute" and omp.deciding_precision is P.INT32


def test_no_dram_traffic_means_unbounded_intensity():
    histogram = evaluate(_kernels()["_Z10histogram8PKhPji"], RTX_3080)
    assert histogram.intensity[P.INT32] == math.inf and histogram.intensity[P.FP32] == 0.0
    assert histogram.verdict == "compute"
    assert any("no DRAM traffic" in n for n in histogram.notes)
    assert any("hadd" in n for n in histogram.notes)  # an n/a metric is said, not hidden
    assert histogram.to_json()["intensity"]["int32"] == "inf"


def test_clock_and_device_mismatch_are_noted():
    saxpy = _kernels()["void ns::saxpy<float>(const float *, float *, int)"]
    other = MeasuredGpu("Other GPU", 1900, {P.FP32: 1e13}, 5e11)
    notes = evaluate(saxpy, other).notes
    assert any("1440 MHz" in n and "1900 MHz" in n for n in notes)
    assert any("profiled on NVIDIA GeForce RTX 3080" in n for n in notes)


def test_missing_dram_metrics_give_no_verdict():
    lines = MIXED.read_text(encoding="utf-8").splitlines()
    text = "\n".join(lines).replace("dram__bytes_read.sum", "l2__bytes_read.sum")
    saxpy = group_launches(parse_ncu_csv(text).launches)[0]
    evidence = evaluate(saxpy, RTX_3080)
    assert evidence.verdict is None and "dram__bytes_read.sum" in evidence.notes[0]


# ---------------------------------------------------------------------------------------------
# The evaluation labels: given the measured intensities, the verdict must equal the label rule.


def _labels_path() -> Path | None:
    override = os.environ.get("PERFLSP_EVAL_LABELS")
    candidates = (
        [Path(override)]
        if override
        else [
            REPO.parent / "shared" / "eval" / "rtx3080-roofline-dev.csv",
            Path("/work/shared/eval/rtx3080-roofline-dev.csv"),
        ]
    )
    return next((c for c in candidates if c.is_file()), None)


def _label_rows() -> list[dict]:
    path = _labels_path()
    if path is None:
        pytest.skip("evaluation labels not found (set PERFLSP_EVAL_LABELS to rtx3080-roofline-dev.csv)")
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_verdict_rule_equals_labels_on_measured_intensities():
    rows = _label_rows()
    mismatched = [
        r["kernel_signature"]
        for r in rows
        if classify(
            {P.FP32: float(r["sp_ai"]), P.FP64: float(r["dp_ai"]), P.INT32: float(r["int_ai"])}, RTX_3080.ridge
        )[0]
        != r["label"]
    ]
    print(f"\nmeasured-verdict rule equals the label on {len(rows) - len(mismatched)}/{len(rows)} rows")
    assert len(rows) > 0 and mismatched == []


def _split_fma(ops: int) -> tuple[int, int]:
    fma = ops // 2
    return ops - 2 * fma, fma  # (add, fma): add + 2*fma == ops


def test_verdicts_through_the_csv_pipeline_equal_labels(tmp_path):
    """Counters that reproduce each row's measured intensities, written as ncu raw CSV (with
    thousands separators and FMAs), parsed and judged: 100% agreement with the labels."""
    rows = _label_rows()
    dram_read, dram_write = 600_000_000, 400_000_000
    total = dram_read + dram_write
    metrics = [
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "gpu__time_duration.sum",
        "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_integer_pred_on.sum",
    ]
    lines = [",".join(f'"{c}"' for c in ["ID", "Kernel Name", *metrics])]
    lines.append(
        ",".join(f'"{u}"' for u in ["", "", "byte", "byte", "nsecond", "inst", "inst", "inst", "inst", "inst"])
    )
    for index, row in enumerate(rows):
        fadd, ffma = _split_fma(round(float(row["sp_ai"]) * total))
        dadd, dfma = _split_fma(round(float(row["dp_ai"]) * total))
        integer = round(float(row["int_ai"]) * total)
        traffic = float(row["traffic"]) or 1.0
        duration = max(1, round(total / traffic * 1e9))
        values = [dram_read, dram_write, duration, dadd, dfma, fadd, ffma, integer]
        lines.append(",".join(f'"{c}"' for c in [str(index), f"kernel_{index}(float *)", *(f"{v:,}" for v in values)]))
    report = tmp_path / "synthetic-from-labels.csv"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")

    kernels = group_launches(parse_ncu_csv(report.read_text(encoding="utf-8")).launches)
    assert len(kernels) == len(rows)
    verdicts = [evaluate(k, RTX_3080).verdict for k in kernels]
    agree = sum(v == r["label"] for v, r in zip(verdicts, rows, strict=True))
    assert agree == len(rows), f"{len(rows) - agree} of {len(rows)} verdicts differ from the labels"
