"""Calibrate the engine's model constants on labeled kernels, judged by grouped cross-validation.

    python benchmarks/calibrate_engine.py --labels CSV --src DIR --gpu-file FILE --gpu NAME \
        [--compile-commands FILE] [--folds 5] [--seeds 3] [--editor]

The engine runs once per kernel (with the launch shape and program arguments only, or, with
`--editor`, with neither, as in the editor); the
constants that act after counting (integer fusion factor, OpenMP per-iteration overhead,
write-back share, minimum DRAM traffic) are then searched on a coarse grid by
coordinate ascent of balanced accuracy. Folds are grouped by benchmark (the target name without
`-cuda`/`-omp`), so a benchmark's CUDA and OpenMP versions are never split between training and
test. The script prints the cross-validated balanced accuracy per seed and the constants fitted
on all rows; `perflsp.analysis.costs.CostModel` holds the chosen values.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflsp.analysis.costs import CostModel
from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.memory import combine
from perflsp.analysis.models import OpCounts
from perflsp.evaluation.labels import read_labels
from perflsp.evaluation.locate import Locator
from perflsp.hardware import load_database
from perflsp.kernels.compile_db import CompileDatabase

GRID: dict[str, list[float]] = {
    "write_to_dram": [0.25, 0.5, 0.75, 1.0],
    "int_arith_factor": [0.35, 0.5, 0.75, 1.0],
    "int_per_omp_iteration": [6.0, 12.0, 24.0],
    "min_dram_bytes": [0.0, 1e4, 1e5],
}


@dataclass
class Sample:
    benchmark: str
    language: str
    label: str
    per_item: OpCounts | None
    work_items: float
    groups: list


def collect(args: argparse.Namespace) -> tuple[list[Sample], dict]:
    database = load_database(user_files=[args.gpu_file] if args.gpu_file else [])
    gpu = database.get(args.gpu)
    compile_db = CompileDatabase.load(args.compile_commands, args.src) if args.compile_commands else None
    locator = Locator(args.src, compile_db)
    samples = []
    for row, answer in read_labels(args.labels):
        located = locator.locate(row)
        per = None
        items = 0.0
        groups: list = []
        if located.kernel is not None:
            given = not args.editor
            argv = tuple(shlex.split(row.exe_args)) if given else None
            program = locator.read(row.file, argv)
            options = AnalysisOptions(argv=argv,
                                      launch_override=(row.grid, row.block) if given and row.grid and row.block else None,
                                      include_env=program.options.include_env)
            try:
                unit = AnalysisUnit.of(program.model, options)
                facts = analyze_kernel(unit, located.kernel, [gpu]).facts
                if facts.uncertain is None:
                    per, items, groups = facts.per_item, facts.work_items or 0.0, facts.traffic.groups
            except Exception as exc:  # noqa: BLE001 - calibration scores every row
                print(f"{row.file}:{row.line}: {exc}", file=sys.stderr)
        samples.append(Sample(row.target.rsplit("-", 1)[0], row.language, answer.label, per, items, groups))
    ridges = {p.value: r for p, r in gpu.ridges().items()}
    return samples, {"ridges": ridges, "l2": float(gpu.l2_cache_bytes or 0)}


def verdict(sample: Sample, cost: CostModel, base: CostModel, gpu: dict) -> str:
    if sample.per_item is None:
        return "uncertain"
    p = sample.per_item
    fixed0 = base.int_per_thread if sample.language == "cuda" else base.int_per_omp_iteration
    arithmetic = max(0.0, p.int32 - p.int_address - p.int_loop - fixed0) / base.int_arith_factor
    fixed = base.int_per_thread if sample.language == "cuda" else cost.int_per_omp_iteration
    ints = p.int_address + p.int_loop + arithmetic * cost.int_arith_factor + fixed
    dram = max(combine(sample.groups, cost), cost.min_dram_bytes, 1.0)
    n = sample.work_items
    intensity = {"fp32": p.fp32 * n / dram, "fp64": p.fp64 * n / dram, "int32": ints * n / dram}
    compute = any(intensity[k] >= r for k, r in gpu["ridges"].items() if k in intensity)
    return "compute" if compute else "bandwidth"


def balanced_accuracy(samples: list[Sample], predict: Callable[[Sample], str]) -> float:
    recalls = []
    for cls in ("compute", "bandwidth"):
        members = [s for s in samples if s.label == cls]
        if members:
            recalls.append(sum(predict(s) == cls for s in members) / len(members))
    return sum(recalls) / len(recalls) if recalls else 0.0


def fit(samples: list[Sample], base: CostModel, gpu: dict) -> CostModel:
    cost = base
    for _ in range(3):
        for name, values in GRID.items():
            cost = max((replace(cost, **{name: v}) for v in values),
                       key=lambda c: balanced_accuracy(samples, lambda s: verdict(s, c, base, gpu)))
    return cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=Path, required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--gpu-file", type=Path)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--compile-commands", type=Path)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--editor", action="store_true", help="no launch shape or program arguments (as in the editor)")
    args = ap.parse_args()
    samples, gpu = collect(args)
    base = CostModel()
    benchmarks = sorted({s.benchmark for s in samples})
    for seed in range(args.seeds):
        order = benchmarks[:]
        random.Random(seed).shuffle(order)
        folds = [set(order[i :: args.folds]) for i in range(args.folds)]
        predicted: dict[int, str] = {}
        for fold in folds:
            train = [s for s in samples if s.benchmark not in fold]
            cost = fit(train, base, gpu)
            for index, s in enumerate(samples):
                if s.benchmark in fold:
                    predicted[index] = verdict(s, cost, base, gpu)
        by_index = {id(s): predicted[i] for i, s in enumerate(samples)}
        def predicted_of(s, by_index=by_index):
            return by_index[id(s)]

        scores = [balanced_accuracy([s for s in samples if lang is None or s.language == lang], predicted_of)
                  for lang in (None, "cuda", "omp")]
        print(f"seed {seed}: grouped {args.folds}-fold CV balanced accuracy {scores[0]:.3f} "
              f"(cuda {scores[1]:.3f}, omp {scores[2]:.3f})")
    cost = fit(samples, base, gpu)
    fitted = {name: getattr(cost, name) for name in GRID}
    print(f"fitted on all rows: {fitted}")
    print(f"balanced accuracy with the shipped constants: "
          f"{balanced_accuracy(samples, lambda s: verdict(s, base, base, gpu)):.3f}")


if __name__ == "__main__":
    main()
