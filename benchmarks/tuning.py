"""Replay benchmark_hub's brute-forced Kernel Tuner caches in simulation mode and compare search
strategies: how close to each space's optimum the best configuration found is after 10, 20, 50
and 100 evaluations (mean over seeds), and how many evaluations it takes to come within 10% of
the optimum; plus the static proposal alone (zero evaluations) against the optimum and median.

Random sampling (Kernel Tuner's `random_sample`: a uniform sample of the valid configurations,
without replacement) is not run: its expectation is computed exactly from the cache (`exact_random`),
so no seed's luck enters it. Kernel Tuner's other strategies run once per seed, with seeds drawn
per space (equal-size spaces do not share their draws). perflsp's prior ranks equal scores by
their values; `--tie-seeds N` runs it again with N random tie-break orders and reports the
spread (median, min-max) that choice alone makes.

    git clone https://github.com/AutoTuningAssociation/benchmark_hub /tmp/benchmark_hub   # MIT
    python benchmarks/tuning.py /tmp/benchmark_hub [--seeds 20] [--kernels convolution,dedispersion]
           [--builtins genetic_algorithm,pso,simulated_annealing] [--llm-url URL --llm-model M]

Nothing of benchmark_hub is vendored: the caches are read where they lie. Strategies: Kernel
Tuner's `random_sample` and built-ins, perflsp's `prior` (static ranking + hill climbing) and
`llm` (LlmStrategy), the latter against a deterministic stand-in server (tests/stand_ins/
tuning_llm.py: it proposes neighbours of the best so far, it is not a model) unless --llm-url
points at a real OpenAI-compatible endpoint. perflsp's strategies are deterministic: their rows
are one run, repeated seeds would give the same numbers.

The static prior judges each device with figures from perflsp's GPU database; devices missing
from it use the nearest entry of the same vendor (named in the output).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perflsp.hardware.database import load_database  # noqa: E402
from perflsp.tuning.cache import TuningRecord, read_cache  # noqa: E402
from perflsp.tuning.search import kt_cache_file, run_search  # noqa: E402
from perflsp.tuning.space import TuningSpace  # noqa: E402
from perflsp.tuning.strategies import LlmStrategy, PriorStrategy, static_proposal  # noqa: E402

KERNELS = {
    # benchmark_hub kernel -> (cache folder, T1 spec, block dimensions, shared memory bytes)
    "convolution": ("convolution_milo", "kernels/convolution_milo.json", ("block_size_x", "block_size_y"),
                    "use_shmem*(block_size_x*tile_size_x+filter_width-1)*(block_size_y*tile_size_y+filter_height-1)*4"),
    "dedispersion": ("dedispersion_milo", "kernels/dedispersion_milo.json", ("block_size_x", "block_size_y"), None),
}
DEVICES = ["A100", "A4000", "A6000", "MI250X", "W6600", "W7800"]
# device -> (database id, note); the prior's figures
GPU_FOR = {
    "A100": ("a100-sxm4-40gb", "A100 SXM4 40GB figures for the A100 PCIe 40GB"),
    "A4000": ("rtx-a6000", "RTX A6000 (GA102, cc 8.6) figures for the RTX A4000 (GA104, cc 8.6)"),
    "A6000": ("rtx-a6000", ""),
    "MI250X": ("mi250x", ""),
    "W6600": ("mi250x", "MI250X (gfx90a) limits for the Radeon PRO W6600 (RDNA2, not in the database)"),
    "W7800": ("mi250x", "MI250X (gfx90a) limits for the Radeon PRO W7800 (RDNA3, not in the database)"),
}
CHECKPOINTS = (10, 20, 50, 100)


@dataclass
class Space:
    kernel: str
    device: str
    space: TuningSpace
    record: TuningRecord
    optimum: float
    median: float
    cache_file: Path


def load_space(hub: Path, kernel: str, device: str, folder: Path) -> Space:
    cache_dir, spec_path, blocks, smem = KERNELS[kernel]
    record = read_cache(hub / "cachefiles" / cache_dir / f"{device}.json.gz",
                        source=f"benchmark_hub cachefiles/{cache_dir}/{device}.json.gz")
    spec = json.loads((hub / spec_path).read_text())
    restrictions = [c["Expression"] for c in spec["ConfigurationSpace"]["Conditions"]]
    space = TuningSpace(record.kernel_name, record.tune_params, restrictions, blocks, smem)
    timed = record.timed()
    sub = folder / f"{kernel}-{device}"
    sub.mkdir()
    return Space(kernel, device, space, record, timed[0][1], statistics.median(t for _c, t in timed),
                 kt_cache_file(record, sub))


def exact_random(times: Sequence[float | None], optimum: float, checkpoints: Sequence[int] = CHECKPOINTS,
                 within: float = 1.1) -> tuple[list[float], float]:
    """Random sampling without replacement over the valid configurations whose times are `times`
    (None: failed), exactly: the expected best found / `optimum` after each checkpoint's number of
    evaluations, over the draws in which something ran (a draw of failures only has no best), and
    the median number of evaluations until one within `within` x the optimum is drawn (inf past
    the last checkpoint)."""
    n_all = len(times)
    timed = sorted(t for t in times if t is not None)
    ratios = []
    for n in checkpoints:
        n = min(n, n_all)
        # P(the fastest configuration drawn is the i-th fastest of all, 0-based) = C(N-1-i, n-1) / C(N, n)
        p = n / n_all
        expected = ran = 0.0
        for i, t in enumerate(timed):
            expected += p * t
            ran += p
            if n_all - i - 1 <= 0:
                break
            p *= (n_all - i - n) / (n_all - i - 1)  # C(N-2-i, n-1) / C(N-1-i, n-1)
            if p <= 0:
                break
        ratios.append(expected / ran / optimum if ran > 0 else math.inf)
    good = sum(1 for t in timed if t <= within * optimum)
    median = math.inf
    missed = 1.0  # P(none of the first m draws is good)
    for m in range(1, min(max(checkpoints), n_all) + 1):
        missed *= max(0.0, (n_all - good - (m - 1)) / (n_all - (m - 1)))
        if missed <= 0.5:
            median = m
            break
    return ratios, median


def seed_for(space: str, index: int) -> int:
    """A seed of its own per space and index (the same index on two spaces of equal size would
    draw the same configurations' positions: correlated luck)."""
    return zlib.crc32(f"{space}/{index}".encode()) & 0x7FFFFFFF


def trace(result, optimum: float) -> tuple[list[float], int | None]:
    ratios = []
    for n in CHECKPOINTS:
        best = result.best_after(n)
        ratios.append(best / optimum if best else math.inf)
    within = next((e.index for e in result.evaluations if e.best_ms is not None and e.best_ms <= 1.1 * optimum), None)
    return ratios, within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hub", type=Path, help="a checkout (or archive extract) of benchmark_hub")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--kernels", default="convolution,dedispersion")
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--builtins", default="genetic_algorithm,pso,simulated_annealing")
    parser.add_argument("--max-fevals", type=int, default=100)
    parser.add_argument("--llm-url", help="a real OpenAI-compatible endpoint (default: the stand-in)")
    parser.add_argument("--llm-model", default="stand-in")
    parser.add_argument("--tie-seeds", type=int, default=20,
                        help="random tie-break orders the prior runs with (its spread is reported; 0: none)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    started = time.perf_counter()
    db = load_database()
    rows: list[dict] = []
    statics: list[dict] = []
    builtins = [b for b in args.builtins.split(",") if b]
    stand_in = None
    if args.llm_url is None:
        from tests.stand_ins.tuning_llm import TuningLlmServer

        stand_in = TuningLlmServer().__enter__()
        llm_url, llm_label = stand_in.url + "/v1", "llm (stand-in)"
    else:
        llm_url, llm_label = args.llm_url, f"llm ({args.llm_model})"
    from perflsp.llm.providers import ProviderConfig
    from perflsp.tuning.llm_proposer import LlmProposer

    notes = {}
    spreads: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="perflsp-tuning-bench-") as tmp:
        for kernel in args.kernels.split(","):
            for device in args.devices.split(","):
                sp = load_space(args.hub, kernel, device, Path(tmp))
                gpu_id, note = GPU_FOR[device]
                gpu = db.get(gpu_id)
                if note:
                    notes[device] = note
                name = f"{kernel}/{device}"
                size = sum(1 for _ in sp.space.configs())
                proposal = static_proposal(sp.space, gpu)
                ptime = sp.record.time_of(proposal) if proposal else None
                statics.append({"space": name, "configs": size, "optimum_ms": sp.optimum, "median_ms": sp.median,
                                "proposal": proposal, "proposal_ms": ptime,
                                "vs_optimum": ptime / sp.optimum if ptime else None,
                                "vs_median": ptime / sp.median if ptime else None})
                runs: dict[str, list] = {}
                exact, exact_within = exact_random([sp.record.time_of(c) for c in sp.space.configs()], sp.optimum)
                rows.append({"space": name, "strategy": "random_sample", "runs": 0, "mean_ratio": exact,
                             "within10_median": exact_within, "within10_reached": None, "exact": True})
                for strategy in builtins:
                    for seed in range(args.seeds):
                        result = run_search(sp.space, sp.record, strategy=strategy, max_fevals=args.max_fevals,
                                            seed=seed_for(name, seed), cache_file=sp.cache_file)
                        runs.setdefault(strategy, []).append(trace(result, sp.optimum))
                result = run_search(sp.space, sp.record, strategy=PriorStrategy(sp.space, gpu),
                                    max_fevals=args.max_fevals, cache_file=sp.cache_file)
                runs["prior"] = [trace(result, sp.optimum)]
                ties = []
                for tie in range(args.tie_seeds):
                    result = run_search(sp.space, sp.record, strategy=PriorStrategy(sp.space, gpu, tie_seed=tie),
                                        max_fevals=args.max_fevals, cache_file=sp.cache_file)
                    ties.append(trace(result, sp.optimum))
                if ties:
                    spreads.append({"space": name, "runs": len(ties),
                                    "ratios": [[t[0][i] for t in ties] for i in range(len(CHECKPOINTS))],
                                    "within10": [t[1] if t[1] is not None else math.inf for t in ties]})
                proposer = LlmProposer(ProviderConfig(kind="openai", base_url=llm_url, model=args.llm_model,
                                                      api_key_env="PERFLSP_BENCH_LLM_KEY"), api_key="unused",
                                       gpu=gpu)
                try:
                    result = run_search(sp.space, sp.record, strategy=LlmStrategy(sp.space, gpu, proposer),
                                        max_fevals=args.max_fevals, cache_file=sp.cache_file)
                finally:
                    proposer.close()
                runs[llm_label] = [trace(result, sp.optimum)]
                for strategy, traces in runs.items():
                    means = [statistics.fmean(t[0][i] for t in traces) for i in range(len(CHECKPOINTS))]
                    reached = [t[1] for t in traces if t[1] is not None]
                    median_within = (statistics.median([t[1] if t[1] is not None else math.inf for t in traces])
                                     if traces else math.inf)
                    rows.append({"space": name, "strategy": strategy, "runs": len(traces), "mean_ratio": means,
                                 "within10_median": median_within, "within10_reached": len(reached)})
                print(f"... {name}: {size} configurations ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if stand_in is not None:
        stand_in.close()
    report(rows, statics, builtins, llm_label, notes, args)
    report_ties(spreads)
    wall = time.perf_counter() - started
    print(f"\nwall time {wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "static": statics, "prior_tie_breaks": spreads, "wall_s": wall},
                                        indent=1, default=str))
    return 0


def fmt_evals(value: float) -> str:
    return f">{CHECKPOINTS[-1]}" if math.isinf(value) else f"{value:.0f}"


def report(rows: list[dict], statics: list[dict], builtins: list[str], llm_label: str, notes: dict,
           args: argparse.Namespace) -> None:
    print(f"Best found / optimum after {', '.join(map(str, CHECKPOINTS))} evaluations (random_sample: the exact "
          f"expectation; Kernel Tuner's other strategies: the mean over {args.seeds} seeds drawn per space; "
          "perflsp's are deterministic: one run),")
    print("and the median number of evaluations to come within 10% of the optimum.\n")
    # Kernel Tuner's best built-in: lowest mean ratio at 50 evaluations over all spaces
    by_strategy: dict[str, list[float]] = {}
    for row in rows:
        by_strategy.setdefault(row["strategy"], []).append(row["mean_ratio"][2])
    best_builtin = min(builtins, key=lambda s: statistics.fmean(by_strategy[s])) if builtins else None
    shown = ["random_sample", *([best_builtin] if best_builtin else []), "prior", llm_label]
    print(f"Kernel Tuner's best built-in strategy here (mean at 50): {best_builtin}; "
          + ", ".join(f"{s} {statistics.fmean(by_strategy[s]):.3f}" for s in builtins))
    header = f"{'space':<22} {'strategy':<22} " + " ".join(f"{'@' + str(n):>6}" for n in CHECKPOINTS) + "  ≤1.1x at"
    print("\n" + header)
    print("-" * len(header))
    wins = 0
    spaces = list(dict.fromkeys(r["space"] for r in rows))
    verdicts = []
    for space in spaces:
        for strategy in shown:
            row = next(r for r in rows if r["space"] == space and r["strategy"] == strategy)
            ratios = " ".join(f"{x:6.3f}" for x in row["mean_ratio"])
            print(f"{space:<22} {strategy:<22} {ratios}  {fmt_evals(row['within10_median']):>7}")
        random_row = next(r for r in rows if r["space"] == space and r["strategy"] == "random_sample")
        ours = [r for r in rows if r["space"] == space and r["strategy"] in ("prior", llm_label)]
        best_ours = min(ours, key=lambda r: (r["within10_median"], r["mean_ratio"][3]))
        won = best_ours["within10_median"] < random_row["within10_median"]
        wins += won
        verdicts.append(f"{space}: {best_ours['strategy']} {fmt_evals(best_ours['within10_median'])} vs random "
                        f"{fmt_evals(random_row['within10_median'])} -> {'fewer' if won else 'NOT fewer'}")
        print()
    print(f"perflsp's best strategy reaches 10% of the optimum in fewer evaluations than random sampling "
          f"on {wins} of {len(spaces)} spaces:")
    for line in verdicts:
        print("  " + line)
    print("\nStatic proposal alone (0 evaluations): its measured time against the optimum and the median")
    print(f"{'space':<22} {'configs':>7} {'optimum ms':>11} {'median ms':>10} {'proposal ms':>12} {'/opt':>6} {'/median':>8}")
    for s in statics:
        vs_opt = f"{s['vs_optimum']:.2f}" if s["vs_optimum"] else "n/a"
        vs_med = f"{s['vs_median']:.2f}" if s["vs_median"] else "n/a"
        pms = f"{s['proposal_ms']:.3f}" if s["proposal_ms"] else "failed"
        print(f"{s['space']:<22} {s['configs']:>7} {s['optimum_ms']:>11.3f} {s['median_ms']:>10.3f} {pms:>12} "
              f"{vs_opt:>6} {vs_med:>8}")
    for device, note in notes.items():
        print(f"note: {device}: prior judged with {note}")


def report_ties(spreads: list[dict]) -> None:
    """How much the prior's result depends on the order it gives equal scores."""
    if not spreads:
        return
    runs = spreads[0]["runs"]
    print(f"\nThe prior with {runs} random tie-break orders (equal scores shuffled): median [min, max] of best / optimum,")
    print("and of the evaluations to come within 10% of the optimum")
    header = f"{'space':<22} " + " ".join(f"{'@' + str(n):>20}" for n in CHECKPOINTS) + f"  {'≤1.1x at':>17}"
    print(header)
    print("-" * len(header))
    for row in spreads:
        cells = []
        for values in row["ratios"]:
            cells.append(f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]")
        within = row["within10"]
        spread = f"{fmt_evals(statistics.median(within))} [{fmt_evals(min(within))}, {fmt_evals(max(within))}]"
        print(f"{row['space']:<22} " + " ".join(f"{c:>20}" for c in cells) + f"  {spread:>17}")


if __name__ == "__main__":
    raise SystemExit(main())
