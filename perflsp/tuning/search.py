"""The search loop: perflsp builds the problem, Kernel Tuner searches.

`run_search` calls `kernel_tuner.tune_kernel` with the space's `tune_params` and restrictions, a
strategy (one of Kernel Tuner's own by name, or perflsp's `PriorStrategy` / `LlmStrategy`), and
the budget (`max_fevals`, `time_limit`). Kernel Tuner always runs in simulation mode over a
cache file; what fills that cache decides what "running" means:

- **replay**: a recorded cache (an imported Kernel Tuner cache, benchmark_hub's): every
  configuration Kernel Tuner asks for is looked up, as Kernel Tuner's own simulation does;
- **measure**: an `evaluate(config)` callable (build and time the kernel on the GPU through the
  profiling runner): a configuration Kernel Tuner asks for that is not in the cache yet is
  measured first and written into the cache, then Kernel Tuner reads it like any other.

Either way each evaluation reaches `on_evaluation` (progress: n of the budget, best so far), and
a set `cancel` event stops the search after the evaluation in flight. The time budget counts
each configuration's compile and benchmark time (measured, or as recorded).
"""

from __future__ import annotations

import json
import logging
import random
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflsp.tuning.cache import TuningRecord, entry_time
from perflsp.tuning.space import Config, TuningSpace

log = logging.getLogger(__name__)

KT_MISSING = ("Kernel Tuner is not installed: tuning needs it (pip install 'perflsp[tune]', "
              "which adds the kernel_tuner package)")


class TuningUnavailable(RuntimeError):
    """Kernel Tuner is missing or the problem cannot be tuned (the message says why)."""


class ToolFailure(TuningUnavailable):
    """A tool the measurement needs failed, not the configuration (ncu or the compiler missing,
    no permission, profiling off or not configured): `evaluate` raises it, the search stops, and
    nothing is recorded for the configuration in flight (it is measured once the tool works).
    What was measured before it stays in `record` (set by `run_search`)."""

    record: TuningRecord | None = None
    evaluations: int = 0


def kernel_tuner_available() -> str | None:
    """None when `kernel_tuner` is installed, else the reason to show. Cheap: it looks the package
    up without importing it (its import pulls in numpy, scipy and pandas: the search does that, in
    its worker thread, not the editor's requests)."""
    import importlib.util
    import sys

    if "kernel_tuner" in sys.modules:
        return None if sys.modules["kernel_tuner"] is not None else KT_MISSING
    try:
        found = importlib.util.find_spec("kernel_tuner") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else KT_MISSING


@dataclass
class Measurement:
    """What one evaluation of a configuration gave: a time, or why there is none."""

    time_ms: float | None
    error: str | None = None  # "CompilationFailedConfig" | "RuntimeFailedConfig" with a reason after ": "
    compile_ms: float = 0.0
    benchmark_ms: float = 0.0
    times_ms: list[float] = field(default_factory=list)


@dataclass
class Evaluation:
    index: int  # 1-based
    config: Config
    time_ms: float | None
    error: str | None
    best_config: Config | None
    best_ms: float | None


@dataclass
class SearchResult:
    strategy: str
    device_name: str
    evaluations: list[Evaluation]
    record: TuningRecord
    cancelled: bool = False
    stopped: str | None = None  # why the search ended early
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    measured: int = 0  # configurations this run measured (`evaluate` ran them; the rest came from the record)
    measured_ok: int = 0  # ... of which ran and were timed

    def provenance(self) -> str:
        """Where the times come from, in words: "recorded on D", "measured on D", or, for a
        measuring run in which nothing ran, what it read instead."""
        device = self.device_name
        if self.record.recorded:
            return f"recorded on {device}"
        if self.measured_ok:
            return f"measured on {device}"
        if any(e.time_ms is not None for e in self.evaluations):
            return f"from earlier measurements on {device}; nothing ran in this run"
        return f"nothing ran on {device}"

    @property
    def best(self) -> tuple[Config, float] | None:
        timed = [(e.config, e.time_ms) for e in self.evaluations if e.time_ms is not None]
        return min(timed, key=lambda item: item[1]) if timed else None

    def best_after(self, n: int) -> float | None:
        times = [e.time_ms for e in self.evaluations[:n] if e.time_ms is not None]
        return min(times) if times else None


class Cancelled(Exception):
    pass


def _kt():
    try:
        import kernel_tuner
        from kernel_tuner import util
    except ImportError as exc:
        raise TuningUnavailable(f"{KT_MISSING} ({exc})") from None
    return kernel_tuner, util


class _RunnerProxy:
    """Kernel Tuner's runner, seen through perflsp: measure on a cache miss, report, cancel."""

    def __init__(self, runner: Any, search: _Search):
        self._runner = runner
        self._search = search

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def run(self, parameter_space: Any, tuning_options: Any) -> list[Any]:
        _kt_module, util = _kt()
        elements = list(parameter_space)
        for element in elements:
            if self._search.cancel is not None and self._search.cancel.is_set():
                self._search.cancelled = True
                raise util.StopCriterionReached("cancelled")
            key = ",".join(str(v) for v in element)
            if key not in tuning_options.cache and self._search.evaluate is not None:
                if tuning_options.budget.is_done():
                    break
                config = dict(zip(self._search.space.tune_params, element, strict=True))
                entry = self._search.measure(config)
                tuning_options.cache[key] = _with_error_object(entry, util)
        results = self._runner.run(elements, tuning_options)
        for element, result in zip(elements, results, strict=False):
            if result is not None:
                self._search.observe(element, result)
        return results


def _with_error_object(entry: dict[str, Any], util: Any) -> dict[str, Any]:
    out = dict(entry)
    kind = entry.get("time")
    if isinstance(kind, str):
        out["__error__"] = {"CompilationFailedConfig": util.CompilationFailedConfig,
                            "RuntimeFailedConfig": util.RuntimeFailedConfig}.get(kind, util.ErrorConfig)()
    return out


class _Observed:
    """A strategy wrapped so that it searches with `_RunnerProxy`."""

    def __init__(self, inner: Any, search: _Search):
        self.inner = inner
        self.search = search

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> Any:
        return self.inner.tune(searchspace, _RunnerProxy(runner, self.search), tuning_options)


class _Search:
    def __init__(self, space: TuningSpace, record: TuningRecord, evaluate: Callable[[Config], Measurement] | None,
                 on_evaluation: Callable[[Evaluation], None] | None, cancel: threading.Event | None):
        self.space = space
        self.record = record
        self.evaluate = evaluate
        self.on_evaluation = on_evaluation
        self.cancel = cancel
        self.cancelled = False
        self.evaluations: list[Evaluation] = []
        self.seen: set[str] = set()
        self.best: tuple[Config, float] | None = None
        self.measured = 0
        self.measured_ok = 0

    def measure(self, config: Config) -> dict[str, Any]:
        assert self.evaluate is not None
        started = time.perf_counter()
        try:
            measurement = self.evaluate(config)
        except ToolFailure:
            raise  # not the configuration's failure: nothing is recorded, the run stops
        except Exception as exc:  # noqa: BLE001 - one failing configuration must not end the search
            log.warning("evaluating %s failed: %s: %s", config, type(exc).__name__, exc)
            measurement = Measurement(None, f"RuntimeFailedConfig: {type(exc).__name__}: {exc}")
        wall_ms = (time.perf_counter() - started) * 1000
        entry: dict[str, Any] = dict(config)
        if measurement.time_ms is not None and measurement.error is None:
            entry["time"] = float(measurement.time_ms)
            entry["times"] = list(measurement.times_ms) or [float(measurement.time_ms)]
        else:
            kind, _, reason = (measurement.error or "RuntimeFailedConfig").partition(": ")
            entry["time"] = kind if kind in ("CompilationFailedConfig", "RuntimeFailedConfig") else "RuntimeFailedConfig"
            entry["perflsp_error"] = reason or kind
        entry["compile_time"] = float(measurement.compile_ms)
        entry["verification_time"] = 0.0
        entry["benchmark_time"] = float(measurement.benchmark_ms or max(wall_ms - measurement.compile_ms, 0.0))
        entry["timestamp"] = time.strftime("%Y-%m-%d %H:%M:%S+00:00", time.gmtime())
        self.record.entries[self.space.key(config)] = entry
        self.measured += 1
        self.measured_ok += entry_time(entry) is not None
        return entry

    def observe(self, element: Any, result: Mapping[str, Any]) -> None:
        config = {name: result.get(name, value) for name, value in zip(self.space.tune_params, element, strict=True)}
        key = self.space.key(config)
        if key in self.seen:
            return
        self.seen.add(key)
        time_ms = entry_time(result)
        error = None
        if time_ms is None:
            stored = self.record.entries.get(key, {})
            error = str(stored.get("perflsp_error") or stored.get("time") or type(result.get("__error__")).__name__)
        if time_ms is not None and (self.best is None or time_ms < self.best[1]):
            self.best = (config, time_ms)
        evaluation = Evaluation(len(self.evaluations) + 1, config, time_ms, error,
                                self.best[0] if self.best else None, self.best[1] if self.best else None)
        self.evaluations.append(evaluation)
        if self.on_evaluation is not None:
            self.on_evaluation(evaluation)


def _problem_size(record: TuningRecord) -> list[Any]:
    size = record.problem_size
    return list(size) if isinstance(size, (list, tuple)) and size else [1]


def kt_cache_file(record: TuningRecord, folder: Path) -> Path:
    """`record` as a Kernel Tuner cache file Kernel Tuner can read (no per-run arrays)."""
    entries = {}
    for key, entry in record.entries.items():
        slim = {k: v for k, v in entry.items() if k not in ("times", "__error__")}
        for k in ("compile_time", "verification_time", "benchmark_time"):
            slim.setdefault(k, 0.0)
        entries[key] = slim
    data = {"device_name": record.device_name, "kernel_name": record.kernel_name,
            "problem_size": _problem_size(record), "tune_params_keys": list(record.tune_params),
            "tune_params": record.tune_params, "objective": record.objective, "cache": entries}
    path = folder / "cache.json"
    text = json.dumps(data)
    if not text.endswith("}}}"):  # Kernel Tuner takes any other ending for a file a run left open
        text = text[:-1] + "\n}"
    path.write_text(text, encoding="utf-8")
    return path


def run_search(
    space: TuningSpace,
    record: TuningRecord,
    *,
    strategy: str | Any = "random_sample",
    max_fevals: int | None = None,
    time_limit_s: float | None = None,
    evaluate: Callable[[Config], Measurement] | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
    cancel: threading.Event | None = None,
    seed: int | None = None,
    strategy_options: Mapping[str, Any] | None = None,
    cache_file: Path | None = None,
) -> SearchResult:
    """Search `space` with Kernel Tuner; `record` holds the measurements (replayed, and/or filled by
    `evaluate`). Blocking: call it in a worker thread. `cache_file` reuses a file `kt_cache_file` wrote
    for `record` (the benchmark replays one cache many times). A record whose parameters the space
    lists in another order is searched as a re-keyed copy: the measurements are in
    `SearchResult.record` (or, when a tool fails, `ToolFailure.record`)."""
    kernel_tuner, util = _kt()
    if not record.matches(space):
        raise TuningUnavailable(f"the cache's parameters ({', '.join(record.tune_params)}) are not the kernel's "
                                f"tuning parameters ({', '.join(space.tune_params)})")
    if list(record.tune_params) != list(space.tune_params):
        # the same parameters in another order: Kernel Tuner keys the cache by the space's order
        record = record.ordered_as(list(space.tune_params))
        cache_file = None
    if evaluate is None and not record.entries:
        raise TuningUnavailable("nothing to replay and no way to measure: import a cache or enable profiling")
    if next(space.configs(), None) is None:
        raise TuningUnavailable(f"the restrictions exclude every configuration of `{space.kernel_name}` "
                                f"({space.cartesian_size} combinations, restrictions: {'; '.join(space.restrictions)})")
    name = strategy if isinstance(strategy, str) else getattr(strategy, "name", type(strategy).__name__)
    if isinstance(strategy, str):
        from kernel_tuner.interface import strategy_map

        if strategy not in strategy_map:
            raise TuningUnavailable(f"unknown strategy {strategy!r}; Kernel Tuner's are {', '.join(sorted(strategy_map))}, "
                                    "perflsp's are prior and llm")
        inner = strategy_map[strategy]
    else:
        inner = strategy
    search = _Search(space, record, evaluate, on_evaluation, cancel)
    options: dict[str, Any] = dict(strategy_options or {})
    if max_fevals is not None:
        options["max_fevals"] = int(max_fevals)
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    if seed is not None:
        import numpy as np

        np.random.seed(seed)
        random.seed(seed)
    started = time.perf_counter()
    stopped = None
    with tempfile.TemporaryDirectory(prefix="perflsp-tune-") as folder:
        path = cache_file
        if path is None or evaluate is not None:
            path = kt_cache_file(record, Path(folder))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                kernel_tuner.tune_kernel(
                    record.kernel_name,
                    f"__global__ void {record.kernel_name}() {{}}",
                    tuple(_problem_size(record)),
                    [],
                    {k: list(v) for k, v in space.tune_params.items()},
                    restrictions=list(space.restrictions) or None,
                    cache=str(path),
                    simulation_mode=True,
                    strategy=_Observed(inner, search),
                    strategy_options=options,
                    lang="CUDA",
                    quiet=True,
                    verbose=False,
                )
            except util.StopCriterionReached as exc:
                stopped = str(exc)
            except ToolFailure as exc:
                exc.record, exc.evaluations = record, len(search.evaluations)
                raise
            except ValueError as exc:
                # a replayed cache that lacks a configuration the space allows
                if "not in cache" in str(exc) and search.evaluations:
                    stopped = f"the cache has no measurement for a configuration the search asked for ({exc})"
                elif "not in cache" in str(exc):
                    raise TuningUnavailable(f"the cache does not cover this space: {exc}") from None
                else:
                    raise
    result = SearchResult(name, record.device_name, search.evaluations, record, cancelled=search.cancelled,
                          stopped="cancelled" if search.cancelled else stopped, wall_s=time.perf_counter() - started,
                          measured=search.measured, measured_ok=search.measured_ok)
    return result


__all__ = [
    "KT_MISSING",
    "Evaluation",
    "Measurement",
    "SearchResult",
    "ToolFailure",
    "TuningUnavailable",
    "kernel_tuner_available",
    "kt_cache_file",
    "run_search",
]
