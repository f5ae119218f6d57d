"""benchmarks/engine_parts.py: the 2x rule with its floor, per-part shares, the split filter, and
a run over the synthetic labels in both modes."""

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
    (0, 500, True),  # both below the floor: "none to speak of" on both sides
    (0, 5000, False), (2000, 0, True), (3000, 0, False),  # raised to the floor of 1024, then compared
    (None, 10, False), (float("inf"), 10, False),  # no usable estimate
])
def test_agreement_within_2x_after_the_floor(estimated, measured, agree):
    assert engine_parts.agrees(estimated, measured, 1024.0) is agree


def _row(language: str) -> KernelRow:
    return KernelRow("t", language, "k", "", "f", 1, None, None, "")


def _totals(dram: float, fp32: float, fp64: float, int32: float) -> Totals:
    return Totals(dram, fp32, fp64, 0.0, int32, 1024.0, False)


def test_part_figures_per_language():
    pairs = [
        (Prediction(_row("cuda"), "bandwidth", totals=_totals(1e6, 1e6, 0, 1e6)), Answer("bandwidth", 1.5e6, 1e6, 0, 5e6)),
        (Prediction(_row("cuda"), "compute", totals=_totals(1e6, 1e6, 0, 1e6)), Answer("compute", 1e8, 1e6, 1e6, 1e6)),
        (Prediction(_row("omp"), None), Answer("compute", 1e6, 0, 0, 1e6)),  # not located: disagrees on every part
        (Prediction(_row("omp"), "bandwidth", totals=_totals(1e6, 0, 0, 1e6)), Answer("bandwidth", None, 0, 0, None)),
    ]
    groups = engine_parts.grouped(pairs)
    overall = groups["all"]
    assert (overall["DRAM bytes"].rows, overall["DRAM bytes"].agree) == (3, 1)  # the empty cell is left out
    assert (overall["FP32"].rows, overall["FP32"].agree) == (4, 3)
    assert (overall["FP64"].agree, overall["FP64"].measured_rows, overall["FP64"].measured_agree) == (2, 1, 0)
    assert (overall["INT"].rows, overall["INT"].agree) == (3, 1)
    assert overall["FP32"].median_factor == pytest.approx(1.0)
    assert set(groups) == {"all", "cuda", "omp"} and groups["cuda"]["DRAM bytes"].agree == 1
    assert groups["omp"]["FP32"].agree == 1 and groups["omp"]["FP32"].rows == 2
    table = engine_parts.markdown({"editor": groups})
    assert table.splitlines()[0].startswith("| mode | kernels | DRAM bytes within 2x |")
    assert "| editor | 4 | 33%" in table and "| editor, omp | 2 |" in table


def test_run_over_labels_with_a_split(tmp_path, capsys):
    with (DATA / "labels.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row.update(dram_bytes="12582912", fp32_ops="1048576", fp64_ops="0", int_ops="9437184", xtime_ns="1000")
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    split = tmp_path / "split.csv"
    with split.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([r for r in rows if r["kernel"] in ("vadd", "main@l14")])
    code = engine_parts.main(["--labels", str(labels), "--src", str(DATA / "src"), "--gpu-file", str(STUDY),
                              "--gpu", "rtx3080-study", "--split", str(split), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["modes"]) == {"launch-given", "editor"}
    given = result["modes"]["launch-given"]
    assert given["all"]["FP32"]["rows"] == 2 and set(given) == {"all", "cuda", "omp"}
    # vadd: 1,048,576 float additions over 12 MiB, as measured here
    assert given["cuda"]["FP32"]["agree"] == 1
    code = engine_parts.main(["--labels", str(labels), "--src", str(DATA / "src"), "--gpu-file", str(STUDY),
                              "--gpu", "rtx3080-study", "--mode", "editor"])
    out = capsys.readouterr().out
    assert code == 0 and "| editor | 7 |" in out and "launch-given" not in out.split("\n\n", 1)[1]
