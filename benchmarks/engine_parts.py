"""Per-part agreement of the engine's estimates with the measured columns of a labels CSV.

For every labeled kernel the engine's facts (DRAM bytes of one launch, FP32, FP64 and integer
operations) are compared with the representative execution's measurements (`dram_bytes`,
`fp32_ops`, `fp64_ops`, `int_ops`). A part *agrees* when the estimate is within a factor of 2 of
the measurement, after both are raised to a small floor: two counts that are both below the floor
(e.g. no FP64 estimated and 300 FP64 operations measured) agree. A kernel the engine did not
locate, or has no facts for, disagrees on every part. Rows whose measurement cell is empty are left
out of that part.

Both modes of `perflsp eval` are measured: `launch-given` (block, grid and exe_args handed to the
engine) and `editor` (dropped; the pipeline of `perflsp check FILE`). Prints a markdown table
for docs/engine.md (overall and per language), or JSON with `--json`.

    python benchmarks/engine_parts.py --labels ../shared/eval/rtx3080-roofline-dev.csv --src data/src \\
        --gpu-file examples/gpus/rtx3080-study.toml --gpu rtx3080-study \\
        --compile-commands data/compile_commands.json [--split study.csv] [--mode editor]

`--split FILE` keeps only the rows of the labels that FILE (a labels CSV, e.g. a study split)
also lists, keyed by (target, kernel_signature, file, line). The predictor never sees the measured
columns: they are read into `Answer`, by this scorer alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from perflsp.evaluation.labels import Answer, KernelRow, LabelsError, read_labels
from perflsp.evaluation.run import MODES, Prediction, predict_rows

FACTOR = 2.0
BYTES_FLOOR = 32 * 1024  # bytes: below this on both sides, "moves almost nothing" agrees
OPS_FLOOR = 1024.0  # operations: below this on both sides, "none to speak of" agrees

# part name -> (attribute of the estimate's totals, attribute of the measured answer, floor)
PARTS: dict[str, tuple[str, str, float]] = {
    "DRAM bytes": ("dram_bytes", "dram_bytes", BYTES_FLOOR),
    "FP32": ("fp32", "fp32_ops", OPS_FLOOR),
    "FP64": ("fp64", "fp64_ops", OPS_FLOOR),
    "INT": ("int32", "int_ops", OPS_FLOOR),
}


def agrees(estimated: float | None, measured: float, floor: float, factor: float = FACTOR) -> bool:
    """Within `factor` of each other after both are raised to `floor` (both below it: agree).
    An unknown or non-finite estimate disagrees."""
    if estimated is None or not math.isfinite(estimated):
        return False
    high, low = max(estimated, floor), max(measured, floor)
    return max(high, low) / min(high, low) <= factor


def log_error(estimated: float | None, measured: float, floor: float) -> float | None:
    """|log2(estimate / measurement)| after the floor; None when there is no usable estimate."""
    if estimated is None or not math.isfinite(estimated):
        return None
    return abs(math.log2(max(estimated, floor) / max(measured, floor)))


@dataclass(slots=True)
class PartFigure:
    rows: int  # rows with a measurement for this part
    agree: int
    median_factor: float | None  # median of max(e/m, m/e) over rows with an estimate
    measured_rows: int = 0  # rows whose measurement reaches the floor (the kernel really does this work)
    measured_agree: int = 0

    @property
    def share(self) -> float | None:
        return self.agree / self.rows if self.rows else None

    @property
    def measured_share(self) -> float | None:
        return self.measured_agree / self.measured_rows if self.measured_rows else None

    def to_json(self) -> dict:
        def r(x: float | None, digits: int = 4) -> float | None:
            return None if x is None else round(x, digits)

        return {"rows": self.rows, "agree": self.agree, "share": r(self.share),
                "median_factor": r(self.median_factor, 3), "measured_rows": self.measured_rows,
                "measured_agree": self.measured_agree, "measured_share": r(self.measured_share)}


def part_figures(pairs: list[tuple[Prediction, Answer]]) -> dict[str, PartFigure]:
    out = {}
    for part, (estimate_attr, measured_attr, floor) in PARTS.items():
        rows = agree = measured_rows = measured_agree = 0
        errors = []
        for prediction, answer in pairs:
            measured = getattr(answer, measured_attr)
            if measured is None:
                continue
            rows += 1
            estimated = getattr(prediction.totals, estimate_attr) if prediction.totals is not None else None
            ok = agrees(estimated, measured, floor)
            agree += ok
            if measured >= floor:
                measured_rows += 1
                measured_agree += ok
            error = log_error(estimated, measured, floor)
            if error is not None:
                errors.append(error)
        median = 2 ** statistics.median(errors) if errors else None
        out[part] = PartFigure(rows, agree, median, measured_rows, measured_agree)
    return out


def grouped(pairs: list[tuple[Prediction, Answer]]) -> dict[str, dict[str, PartFigure]]:
    """Figures overall ("all") and per language."""
    by_language: dict[str, list[tuple[Prediction, Answer]]] = defaultdict(list)
    for pair in pairs:
        by_language[pair[0].row.language].append(pair)
    return {"all": part_figures(pairs), **{k: part_figures(v) for k, v in sorted(by_language.items())}}


def split_keys(path: Path) -> set[tuple[str, str, str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return {(r["target"], r.get("kernel_signature", ""), r["file"], r["line"]) for r in csv.DictReader(fh)}


def restrict(pairs: list[tuple[KernelRow, Answer]], keys: set[tuple[str, str, str, str]]) -> list[tuple[KernelRow, Answer]]:
    return [(row, answer) for row, answer in pairs if (row.target, row.signature, row.file, str(row.line)) in keys]


def markdown(results: dict[str, dict[str, dict[str, PartFigure]]], factor: float = FACTOR) -> str:
    parts = list(PARTS)
    lines = ["| mode | kernels | " + " | ".join(f"{p} within {factor:g}x" for p in parts) + " |",
             "| --- | --- | " + " | ".join("---" for _ in parts) + " |"]
    for mode, groups in results.items():
        for group, figures in groups.items():
            kernels = max(f.rows for f in figures.values())
            cells = []
            for part in parts:
                f = figures[part]
                if f.share is None:
                    cells.append("-")
                    continue
                inner = []
                if f.measured_share is not None:
                    inner.append(f"{100 * f.measured_share:.0f}% of {f.measured_rows}")
                if f.median_factor is not None:
                    inner.append(f"x{f.median_factor:.1f}")
                cells.append(f"{100 * f.share:.0f}%" + (f" ({'; '.join(inner)})" if inner else ""))
            lines.append(f"| {mode}{'' if group == 'all' else f', {group}'} | {kernels} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, required=True, help="labels CSV with the measured columns")
    parser.add_argument("--src", type=Path, required=True, help="folder the CSV's `file` column is relative to")
    parser.add_argument("--gpu-file", action="append", default=[], help="[[gpu]] definitions (repeatable)")
    parser.add_argument("--gpu", required=True, help="the GPU the labels were measured on")
    parser.add_argument("--compile-commands", type=Path, help="compile_commands.json, re-rooted under --src")
    parser.add_argument("--split", type=Path, help="only the rows that this labels CSV also lists")
    parser.add_argument("--mode", choices=MODES, action="append", help="mode(s) to measure (default: both)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the markdown table")
    args = parser.parse_args(argv)

    from perflsp.hardware import GpuConfigError, UnknownGpuError, load_database

    try:
        pairs = read_labels(args.labels)
        if args.split is not None:
            pairs = restrict(pairs, split_keys(args.split))
        gpu = load_database(args.gpu_file).get(args.gpu)
    except (LabelsError, GpuConfigError, UnknownGpuError, OSError, KeyError) as exc:
        print(f"engine_parts: error: {exc}", file=sys.stderr)
        return 2
    compile_db = None
    if args.compile_commands is not None:
        from perflsp.kernels.compile_db import CompileDatabase

        compile_db = CompileDatabase.load(args.compile_commands, source_root=args.src)
    rows = [row for row, _ in pairs]
    answers = [answer for _, answer in pairs]
    results: dict[str, dict[str, dict[str, PartFigure]]] = {}
    for mode in args.mode or list(MODES):
        started = time.perf_counter()
        predictions = predict_rows(rows, args.src, gpu, compile_db=compile_db, mode=mode)
        results[mode] = grouped(list(zip(predictions, answers)))
        print(f"{mode}: {len(rows)} kernels in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({"labels": str(args.labels), "split": str(args.split) if args.split else None,
                          "factor": FACTOR, "floors": {p: f for p, (_, _, f) in PARTS.items()},
                          "modes": {m: {g: {p: f.to_json() for p, f in figs.items()} for g, figs in groups.items()}
                                    for m, groups in results.items()}}, indent=1))
    else:
        print(f"Share of kernels whose estimate is within {FACTOR:g}x of the measurement "
              f"({args.labels.name}{f', rows of {args.split.name}' if args.split else ''}; "
              f"counts below {OPS_FLOOR:g} operations / {BYTES_FLOOR // 1024} KiB on both sides agree. In brackets: "
              f"the share among the kernels whose measured count reaches that floor, and the median factor "
              f"between estimate and measurement):\n")
        print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
