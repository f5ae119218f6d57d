"""perflsp's search strategies for Kernel Tuner (objects with Kernel Tuner's `tune(searchspace,
runner, tuning_options)` interface, evaluating through Kernel Tuner's `CostFunc`, so its budget,
cache and restrictions apply exactly as to its own strategies).

- `static_ranking`: the static prior. Every valid configuration scored from the GPU's figures:
  occupancy (perflsp's occupancy calculator with the block's threads, the registers and the
  shared memory the configuration needs), warp efficiency (threads per block as a multiple of
  the warp), coalescing (threads along x, the contiguous dimension, of at least a warp), then
  moderate work per thread (tile/unroll products near 4). It is a heuristic ranking of what the
  hardware allows, not a time prediction; its first entry is the *static proposal*.
- `PriorStrategy`: evaluates the static proposal, then climbs from the best measured
  configuration to its neighbours (one value step in one parameter, the prior's order first),
  and restarts at the next-ranked unvisited configuration when the neighbourhood is exhausted.
- `LlmStrategy`: after the static proposal, asks a proposer (the LLM) for the next
  configurations given the kernel, the GPU's figures and every measurement so far; each proposal
  is checked against the space (values, restrictions, GPU limits) and rejected with the reason,
  never evaluated, when it does not fit; a round with nothing new to evaluate falls back to the
  prior's next step, so the budget is never spent on nothing.
"""

from __future__ import annotations

import logging
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perflsp.hardware.models import Gpu
from perflsp.tuning.space import Config, TuningSpace

log = logging.getLogger(__name__)

WORK_NAMES = ("tile", "unroll", "work", "per_thread", "vector", "items")


@dataclass(frozen=True)
class Score:
    key: tuple[float, ...]
    occupancy: float | None
    why: str


def _occupancy(gpu: Gpu, threads: int, registers_per_thread: int, smem: int,
               memo: dict[tuple[int, int], float] | None) -> float:
    from perflsp.hardware.occupancy import OccupancyInputError, occupancy

    if memo is not None and (threads, smem) in memo:
        return memo[(threads, smem)]
    try:
        value = occupancy(gpu, threads, registers_per_thread, smem).occupancy
    except (OccupancyInputError, ValueError):
        value = 0.0
    if memo is not None:
        memo[(threads, smem)] = value
    return value


def score(space: TuningSpace, config: Config, gpu: Gpu | None, registers_per_thread: int = 32,
          memo: dict[tuple[int, int], float] | None = None) -> Score:
    threads = space.threads(config)
    occ = None
    parts = []
    primary = 1.0
    if threads is not None and gpu is not None:
        warp = gpu.warp_size
        occ = _occupancy(gpu, threads, registers_per_thread, space.shared_bytes(config), memo)
        warp_eff = threads / (math.ceil(threads / warp) * warp)
        x = int(config[space.block_params[0]])
        coalesce = min(x, warp) / warp
        primary = warp_eff * coalesce * min(1.0, occ / 0.5)
        parts.append(f"occupancy {occ:.0%}, warp efficiency {warp_eff:.0%}, {x} threads along x")
    work = 1
    for name, value in config.items():
        if any(w in name.lower() for w in WORK_NAMES) and isinstance(value, int) and value > 0:
            work *= value
    work_term = -abs(math.log2(work) - 2) if work > 0 else -9.0
    size_term = -abs(math.log2(threads) - 8) if threads else 0.0  # 256 threads: a safe default size
    return Score((round(primary, 3), work_term, size_term), occ, "; ".join(parts))


def static_ranking(space: TuningSpace, gpu: Gpu | None, registers_per_thread: int = 32,
                   configs: Sequence[Config] | None = None, tie_seed: int | None = None) -> list[Config]:
    """Valid configurations, best first by the static prior. Equal scores are ordered by their
    values (whatever the enumeration), or, with `tie_seed`, in a random order drawn from it (the
    benchmark reports how much the result depends on that choice)."""
    items = list(configs) if configs is not None else space.valid_configs()
    memo: dict[tuple[int, int], float] = {}
    ties: list[tuple[tuple[int, float | str], ...]] | list[float]
    if tie_seed is None:
        ties = [_order(c) for c in items]
    else:
        draw = random.Random(tie_seed)
        ties = [draw.random() for _c in items]
    scored = [(score(space, c, gpu, registers_per_thread, memo).key, tie, c) for c, tie in zip(items, ties, strict=True)]
    scored.sort(key=lambda item: (tuple(-k for k in item[0]), item[1]))
    return [c for _k, _i, c in scored]


def _order(config: Config) -> tuple[tuple[int, float | str], ...]:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in config.values())


def static_proposal(space: TuningSpace, gpu: Gpu | None, registers_per_thread: int = 32) -> Config | None:
    ranked = static_ranking(space, gpu, registers_per_thread)
    return ranked[0] if ranked else None


# ------------------------------------------------------------------------------ strategies


class _Walk:
    """Shared state of perflsp's strategies: the cost function, what was visited, the prior's order."""

    def __init__(self, space: TuningSpace, searchspace: Any, tuning_options: Any, runner: Any, gpu: Gpu | None,
                 registers_per_thread: int, tie_seed: int | None = None):
        from kernel_tuner.strategies.common import CostFunc

        self.space = space
        self.names = list(space.tune_params)
        valid = [dict(zip(self.names, t, strict=True)) for t in searchspace.list]
        self.ranked = static_ranking(space, gpu, registers_per_thread, valid, tie_seed)
        self.rank = {space.key(c): i for i, c in enumerate(self.ranked)}
        self.func = CostFunc(searchspace, tuning_options, runner, scaling=False, snap=False)
        self.visited: dict[str, float] = {}
        self.best: tuple[Config, float] | None = None
        self.current: tuple[Config, float] | None = None  # where the hill climb stands
        self._next_ranked = 0

    def evaluate(self, config: Config) -> float:
        key = self.space.key(config)
        if key in self.visited:
            return self.visited[key]
        cost = self.func(tuple(config[n] for n in self.names))
        value = float(cost) if isinstance(cost, (int, float)) else sys.float_info.max
        self.visited[key] = value
        if value < sys.float_info.max and (self.best is None or value < self.best[1]):
            self.best = (config, value)
        self.moved(config, value)
        return value

    def unvisited(self, config: Config) -> bool:
        key = self.space.key(config)
        return key in self.rank and key not in self.visited

    def neighbours(self, config: Config) -> list[Config]:
        """Unvisited configurations one value step away in one parameter, in the prior's order."""
        adjacent = [c for c in self.space.neighbours(config) if self.unvisited(c)]
        adjacent.sort(key=lambda c: self.rank[self.space.key(c)])
        return adjacent

    def next_ranked(self) -> Config | None:
        while self._next_ranked < len(self.ranked):
            config = self.ranked[self._next_ranked]
            self._next_ranked += 1
            if self.unvisited(config):
                return config
        return None

    def prior_step(self) -> Config | None:
        """The prior strategy's next configuration: first-improvement hill climbing from the
        current point (the best of this climb); when its neighbourhood is exhausted, a restart
        at the next-ranked unvisited configuration."""
        if self.current is not None:
            candidates = self.neighbours(self.current[0])
            if candidates:
                return candidates[0]
        self.current = None
        return self.next_ranked()

    def moved(self, config: Config, value: float) -> None:
        """Follow an improvement: the climb continues from `config`."""
        if value < sys.float_info.max and (self.current is None or value < self.current[1]):
            self.current = (config, value)


class PriorStrategy:
    """Static-prior-guided local search (see the module docstring)."""

    name = "prior"

    def __init__(self, space: TuningSpace, gpu: Gpu | None, registers_per_thread: int = 32,
                 tie_seed: int | None = None):
        self.space = space
        self.gpu = gpu
        self.registers_per_thread = registers_per_thread
        self.tie_seed = tie_seed  # None: equal scores in the order of their values (deterministic)

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        from kernel_tuner import util

        walk = _Walk(self.space, searchspace, tuning_options, runner, self.gpu, self.registers_per_thread,
                     self.tie_seed)
        try:
            while (config := walk.prior_step()) is not None:
                walk.evaluate(config)
        except util.StopCriterionReached:
            pass
        return walk.func.results


@dataclass
class ProposalRound:
    proposed: list[dict[str, Any]]
    accepted: list[Config] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)  # {proposal, reason}
    error: str | None = None
    fallback: bool = False


Proposer = Callable[[dict[str, Any]], list[dict[str, Any]]]


class LlmStrategy:
    """Measured-feedback search with an LLM proposing configurations (see the module docstring).

    `proposer(context) -> [config dicts]` asks the model; `context` has `space` (TuningSpace.to_json),
    `measurements` ([{config, time_ms | error}] in evaluation order), `best`, `hints` (the prior's top
    configurations) and `round`. It may raise; the round then falls back to the prior."""

    name = "llm"

    def __init__(self, space: TuningSpace, gpu: Gpu | None, proposer: Proposer, *, per_round: int = 4,
                 registers_per_thread: int = 32, max_failures: int = 3):
        self.space = space
        self.gpu = gpu
        self.proposer = proposer
        self.per_round = per_round
        self.registers_per_thread = registers_per_thread
        self.max_failures = max_failures
        self.rounds: list[ProposalRound] = []

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        from kernel_tuner import util

        walk = _Walk(self.space, searchspace, tuning_options, runner, self.gpu, self.registers_per_thread)
        measurements: list[dict[str, Any]] = []

        def run(config: Config) -> None:
            value = walk.evaluate(config)
            measurements.append({"config": config, "time_ms": value if value < sys.float_info.max else None})

        failures = 0
        try:
            first = walk.next_ranked()
            if first is None:
                return walk.func.results
            run(first)
            while True:
                round_ = ProposalRound([])
                self.rounds.append(round_)
                if failures < self.max_failures:
                    context = {"space": self.space.to_json(), "measurements": measurements,
                               "best": {"config": walk.best[0], "time_ms": walk.best[1]} if walk.best else None,
                               "hints": walk.ranked[:5], "round": len(self.rounds), "per_round": self.per_round}
                    try:
                        round_.proposed = list(self.proposer(context))[: self.per_round * 2]
                        failures = 0
                    except Exception as exc:  # noqa: BLE001 - a failing model must not end the search
                        failures += 1
                        round_.error = f"{type(exc).__name__}: {exc}"
                        log.info("the LLM proposer failed (%s); the prior takes this round", round_.error)
                for proposal in round_.proposed:
                    config, reason = self._check(proposal, walk)
                    if config is None:
                        round_.rejected.append({"proposal": _describe(proposal), "reason": reason or "invalid"})
                    elif len(round_.accepted) < self.per_round:
                        round_.accepted.append(config)
                if not round_.accepted:
                    step = walk.prior_step()
                    if step is None:
                        break
                    round_.fallback = True
                    round_.accepted.append(step)
                for config in round_.accepted:
                    run(config)
        except util.StopCriterionReached:
            pass
        return walk.func.results

    def _check(self, proposal: Any, walk: _Walk) -> tuple[Config | None, str | None]:
        if not isinstance(proposal, dict):
            return None, "not an object of parameter values"
        config: Config = {}
        for name, value in proposal.items():
            if name in self.space.tune_params and isinstance(value, float) and value.is_integer():
                value = int(value)
            config[str(name)] = value
        problem = self.space.problem(config)
        if problem is not None:
            return None, problem
        ordered = {n: config[n] for n in self.space.tune_params}
        if self.space.key(ordered) in walk.visited:
            return None, "already measured"
        if self.space.key(ordered) not in walk.rank:
            return None, "outside the search space Kernel Tuner built (GPU limits)"
        return ordered, None

    def rejected(self) -> list[dict[str, str]]:
        return [r for round_ in self.rounds for r in round_.rejected]


def _describe(proposal: Any) -> str:
    if isinstance(proposal, dict):
        return ", ".join(f"{k}={v}" for k, v in proposal.items())
    return repr(proposal)[:80]


__all__ = ["LlmStrategy", "PriorStrategy", "ProposalRound", "Proposer", "Score", "score", "static_proposal",
           "static_ranking"]
