"""Per-part agreement of the engine's estimates with Nsight Compute's measurements, and the
balanced accuracy of its verdicts, on a labels CSV with measured columns.

For each part (DRAM bytes of one launch, FP32, FP64 and integer operations) the share of kernels
whose estimate is within 2x of the measurement, among the kernels whose measured count reaches a
floor (32 KiB for DRAM bytes, 100,000 operations for the others): the measure of the project's
labels (../shared/eval/README.md). A kernel the engine did not locate, or has no estimate for,
is a miss. Also counted: kernels whose floating-point work is estimated in the wrong precision
(measured FP32 work and no FP64, estimated as mostly FP64, or the other way round).

Both modes of `perflsp eval` run: `launch-given` (block, grid and exe_args handed to the engine)
and `editor` (the pipeline of `perflsp check FILE`). The rows split by a hash of the benchmark
name into a study part and a set-aside fifth (`--split`), reported apart: the fifth is for
aggregate figures only, never for reading kernels one by one.

    python benchmarks/engine_parts.py --labels ../shared/eval/rtx3080-roofline-dev.csv \\
        --src HeCBench/src --gpu-file examples/gpus/rtx3080-study.toml --gpu rtx3080-study \\
        [--mode launch-given] [--no-compile] [--json]

The compile database is found as clangd finds it unless `--compile-commands` names one. The
predictor never sees the measured columns: they are read into `Answer`, by this scorer alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from perflsp.evaluation.labels import Answer, KernelRow, LabelsError, read_labels
from perflsp.evaluation.run import MODES, Prediction, predict_rows

FACTOR = 2.0
FLOORS = {"DRAM bytes": 32 * 1024, "FP32": 1e5, "FP64": 1e5, "INT": 1e5}
# part -> (attribute of the prediction's totals, attribute of the measured answer)
PARTS = {"DRAM bytes": ("dram_bytes", "dram_bytes"), "FP32": ("fp32", "fp32_ops"), "FP64": ("fp64", "fp64_ops"),
         "INT": ("int32", "int_ops")}


def in_fifth(target: str) -> bool:
    """The set-aside fifth: benchmarks whose name (without -cuda/-omp) hashes to 0 mod 5; a
    benchmark's CUDA and OpenMP versions fall on the same side."""
    base = re.sub(r"-(cuda|omp)$", "", target)
    return hashlib.sha256(base.encode()).digest()[0] % 5 == 0


def within(estimated: float | None, measured: float, factor: float = FACTOR) -> bool:
    if estimated is None or not math.isfinite(estimated) or estimated <= 0:
        return False
    return max(estimated / measured, measured / estimated) <= factor


@dataclass(slots=True)
class Figures:
    kernels: int
    balanced_accuracy: float | None
    parts: dict[str, tuple[int, int]]  # part -> (kernels measured at the floor, within 2x)
    wrong_precision: tuple[int, int]  # (kernels with floating-point work, estimated in the wrong precision)

    def to_json(self) -> dict:
        return {"kernels": self.kernels, "balanced_accuracy": _round(self.balanced_accuracy),
                "parts": {p: {"measured": n, "within": k, "share": _round(k / n if n else None)}
                          for p, (n, k) in self.parts.items()},
                "wrong_precision": {"with_fp_work": self.wrong_precision[0], "wrong": self.wrong_precision[1]}}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def figures(pairs: list[tuple[Prediction, Answer]]) -> Figures:
    parts: dict[str, tuple[int, int]] = {}
    for part, (estimate_attr, measured_attr) in PARTS.items():
        measured_rows = agree = 0
        for prediction, answer in pairs:
            measured = getattr(answer, measured_attr)
            if measured is None or measured < FLOORS[part]:
                continue
            measured_rows += 1
            estimated = getattr(prediction.totals, estimate_attr) if prediction.totals is not None else None
            agree += within(estimated, measured)
        parts[part] = (measured_rows, agree)
    recalls = []
    for label in ("compute", "bandwidth"):
        mine = [p.verdict == label for p, a in pairs if a.label == label]
        if mine:
            recalls.append(sum(mine) / len(mine))
    with_fp = wrong = 0
    for prediction, answer in pairs:
        fp32, fp64 = answer.fp32_ops or 0.0, answer.fp64_ops or 0.0
        if max(fp32, fp64) < FLOORS["FP32"] or min(fp32, fp64) >= FLOORS["FP32"]:
            continue  # no floating-point work to speak of, or real work in both precisions
        with_fp += 1
        totals = prediction.totals
        e32, e64 = (totals.fp32 or 0.0, totals.fp64 or 0.0) if totals is not None else (0.0, 0.0)
        wrong += (e64 > e32) if fp32 > fp64 else (e32 > e64)
    return Figures(len(pairs), sum(recalls) / len(recalls) if recalls else None, parts, (with_fp, wrong))


def markdown(results: dict[str, dict[str, Figures]]) -> str:
    lines = ["| mode | split | kernels | balanced accuracy | " + " | ".join(f"{p} within {FACTOR:g}x" for p in PARTS)
             + " | FP work in the wrong precision |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in PARTS) + " | --- |"]
    for mode, splits in results.items():
        for split, f in splits.items():
            cells = [f"{k / n:.2f} ({k}/{n})" if n else "-" for n, k in f.parts.values()]
            ba = f"{f.balanced_accuracy:.3f}" if f.balanced_accuracy is not None else "-"
            lines.append(f"| {mode} | {split} | {f.kernels} | {ba} | " + " | ".join(cells)
                         + f" | {f.wrong_precision[1]} of {f.wrong_precision[0]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, required=True, help="labels CSV with the measured columns")
    parser.add_argument("--src", type=Path, required=True, help="folder the CSV's `file` column is relative to")
    parser.add_argument("--gpu-file", action="append", default=[], help="[[gpu]] definitions (repeatable)")
    parser.add_argument("--gpu", required=True, help="the GPU the labels were measured on")
    parser.add_argument("--compile-commands", type=Path, help="compile_commands.json, re-rooted under --src "
                                                               "(default: found as clangd finds it)")
    parser.add_argument("--mode", choices=MODES, action="append", help="mode(s) to measure (default: both)")
    parser.add_argument("--split", choices=("both", "study", "fifth", "all"), default="both",
                        help="rows to report: the study part and the set-aside fifth apart (default), one of "
                             "them, or all rows together")
    parser.add_argument("--no-compile", action="store_true", help="the source engine alone (no compiled counts)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the markdown table")
    args = parser.parse_args(argv)

    from perflsp.compiled.service import command_line_compiler
    from perflsp.hardware import GpuConfigError, UnknownGpuError, load_database
    from perflsp.kernels.compile_db import CompileDatabase, CompileDatabaseError, DiscoveredDatabases

    try:
        pairs = read_labels(args.labels)
        gpu = load_database(args.gpu_file).get(args.gpu)
        compile_db: CompileDatabase | DiscoveredDatabases = DiscoveredDatabases()
        if args.compile_commands is not None:
            compile_db = CompileDatabase.load(args.compile_commands, source_root=args.src)
    except (LabelsError, GpuConfigError, UnknownGpuError, CompileDatabaseError, OSError, KeyError) as exc:
        print(f"engine_parts: error: {exc}", file=sys.stderr)
        return 2
    splits: dict[str, list[tuple[KernelRow, Answer]]] = {}
    if args.split in ("both", "study"):
        splits["study"] = [(r, a) for r, a in pairs if not in_fifth(r.target)]
    if args.split in ("both", "fifth"):
        splits["set-aside fifth"] = [(r, a) for r, a in pairs if in_fifth(r.target)]
    if args.split == "all":
        splits["all"] = pairs
    results: dict[str, dict[str, Figures]] = {}
    for mode in args.mode or list(MODES):
        results[mode] = {}
        for name, chosen in splits.items():
            compiler = None if args.no_compile else command_line_compiler(compile_db)
            started = time.perf_counter()
            predictions = predict_rows([r for r, _ in chosen], args.src, gpu, compile_db=compile_db, mode=mode,
                                       compiler=compiler)
            if compiler is not None:
                compiler.close()
            results[mode][name] = figures(list(zip(predictions, [a for _, a in chosen])))
            print(f"{mode}, {name}: {len(chosen)} kernels in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({"labels": str(args.labels), "factor": FACTOR, "floors": FLOORS,
                          "compiled": not args.no_compile,
                          "modes": {m: {s: f.to_json() for s, f in splits_.items()} for m, splits_ in results.items()}},
                         indent=1))
    else:
        print(f"Per part: the share of kernels whose estimate is within {FACTOR:g}x of Nsight Compute's count, "
              f"among the kernels whose measured count reaches {FLOORS['DRAM bytes'] // 1024} KiB / "
              f"{FLOORS['FP32']:,.0f} operations ({args.labels.name}; "
              f"{'source engine alone' if args.no_compile else 'compiled counts where the toolchain compiles'}):\n")
        print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
