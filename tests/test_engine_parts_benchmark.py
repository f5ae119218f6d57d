"""benchmarks/engine_parts.py: the labels' per-part measure (within 2x among the kernels whose
measured count reaches the floor, a missing estimate a miss), the wrong-precision count, the
split into a study part and a set-aside fifth, and a run over the synthetic labels in both modes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks import engine_parts
from perflsp.evaluation.labels import Answer, KernelRow
from perflsp.evaluation.run import Prediction, Totals

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "eval"
STUDY = ROOT / "examples" / "gpus" / "rtx3080-study.toml"


@pytest.mark.parametrize(("estimated", "measured", "agree"), [
    (100_000, 150_000, True), (100_000, 200_000, True), (100_000, 200_001, False), (300_000, 100_000, False),
    (0, 500_000, False), (None, 500_000, False), (float("inf"), 500_000, False),  # no usable estimate: a miss
])
def test_within_a_factor_of_two(estimated, measured, agree):
    assert engine_parts.within(estimated, measured) is agree


def _row(target: str = "t-cuda") -> KernelRow:
    return KernelRow(target, "cuda", "k", "", "f", 1, None, None, "")


def _totals(dram: float, fp32: float, fp64: float, int32: float) -> Totals:
    return Totals(dram, fp32, fp64, 0.0, int32, 1024.0, False)


def test_parts_count_only_kernels_measured_at_the_floor():
    pairs = [
        (Prediction(_row(), "bandwidth", totals=_totals(1e6, 1e6, 0, 1e6)), Answer("bandwidth", 1.5e6, 1e6, 0, 5e6)),
        (Prediction(_row(), "compute", totals=_totals(1e6, 0, 1e6, 1e6)), Answer("compute", 1e8, 1e6, 0, 1e6)),
        (Prediction(_row(), None), Answer("compute", 1e6, 0, 0, 1e6)),  # not located: a miss where measured
        (Prediction(_row(), "bandwidth", totals=_totals(1e6, 0, 0, 1e6)), Answer("bandwidth", 1e3, 10, 0, 50)),
    ]
    f = engine_parts.figures(pairs)
    assert f.parts["DRAM bytes"] == (3, 1)  # the 1 KB kernel is below the floor
    assert f.parts["FP32"] == (2, 1) and f.parts["FP64"] == (0, 0) and f.parts["INT"] == (3, 1)
    # the second kernel's FP32 work is estimated as FP64
    assert f.wrong_precision == (2, 1)
    assert f.balanced_accuracy == pytest.approx((1 / 2 + 2 / 2) / 2)
    table = engine_parts.markdown({"editor": {"study": f}})
    assert table.splitlines()[0].startswith("| mode | split | kernels | balanced accuracy | DRAM bytes within 2x |")
    assert "| editor | study | 4 | 0.750 | 0.33 (1/3) |" in table and table.endswith("| 1 of 2 |")


def test_the_fifth_is_chosen_by_benchmark_not_by_kernel():
    names = [f"bench{i}" for i in range(200)]
    fifth = [n for n in names if engine_parts.in_fifth(n + "-cuda")]
    assert 20 <= len(fifth) <= 60  # about a fifth
    assert all(engine_parts.in_fifth(n + "-omp") for n in fifth)  # both versions of a benchmark


def test_run_over_labels(tmp_path, capsys):
    with (DATA / "labels.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row.update(dram_bytes="12582912", fp32_ops="1048576", fp64_ops="0", int_ops="9437184", xtime_ns="1000")
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code = engine_parts.main(["--labels", str(labels), "--src", str(DATA / "src"), "--gpu-file", str(STUDY),
                              "--gpu", "rtx3080-study", "--split", "all", "--no-compile", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["modes"]) == {"launch-given", "editor"} and result["compiled"] is False
    given = result["modes"]["launch-given"]["all"]
    assert given["kernels"] == 7 and given["parts"]["FP32"]["measured"] == 7
    code = engine_parts.main(["--labels", str(labels), "--src", str(DATA / "src"), "--gpu-file", str(STUDY),
                              "--gpu", "rtx3080-study", "--mode", "editor", "--split", "all", "--no-compile"])
    out = capsys.readouterr().out
    assert code == 0 and "| editor | all | 7 |" in out and "launch-given" not in out.split("\n\n", 1)[1]
