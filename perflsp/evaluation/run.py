"""Run the static engine over labeled kernels and score it.

The predictor sees only what the study gave its LLMs: the sources, the launch shape
(`block`, `grid`) and the program's arguments (`exe_args`). The label and the measured columns
are read by the scorer.

Two modes:
- `launch-given` (default): the row's launch shape and program arguments are handed to the engine,
  and launch sites in the benchmark's other files are folded in, as the study's LLMs were told.
- `editor`: `block`, `grid` and `exe_args` are dropped and each kernel's verdict is the one
  `perflsp check FILE` gives (`perflsp.checking.check_file`, the settings `check` builds):
  what a user sees in the editor or on the command line.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import shlex
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perflsp.analysis.compiled_facts import gpu_arch
from perflsp.analysis.costs import CostModel
from perflsp.analysis.engine import uncertain_report
from perflsp.analysis.includers import refold_site
from perflsp.analysis.instantiations import same_arguments
from perflsp.analysis.models import KernelFacts, KernelReport
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis, failure_reason
from perflsp.analysis.unit import AnalysisUnit
from perflsp.compiled.model import CompiledSource
from perflsp.compiled.service import Compiler
from perflsp.evaluation.labels import Answer, KernelRow
from perflsp.evaluation.locate import Locator, match_kernel
from perflsp.hardware.models import Gpu
from perflsp.kernels.compile_db import FlagsSource
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import ProgramModel, program_model
from perflsp.source.files import SkippedFile, is_transient_copy
from perflsp.source.parser import is_source_path

if TYPE_CHECKING:
    from perflsp.analysis.report import FileCheck

CLASSES = ("compute", "bandwidth")
MODES = ("launch-given", "editor")


@dataclass(slots=True)
class Totals:
    """What the engine estimated for one launch (the facts' totals), to compare with measurements."""

    dram_bytes: float | None
    fp32: float | None
    fp64: float | None
    fp16: float | None
    int32: float | None
    work_items: float | None
    degenerate: bool  # no global access found, a single work item, or an engine failure

    def to_json(self) -> dict[str, float | bool | None]:
        return {name: _finite(getattr(self, name)) if name != "degenerate" else self.degenerate
                for name in self.__slots__}


@dataclass(slots=True)
class Prediction:
    row: KernelRow
    verdict: str | None  # compute | bandwidth | uncertain | None (not located)
    reason: str | None = None
    intensity: dict[str, float] = field(default_factory=dict)
    confidence: float | None = None  # the estimate's confidence (None when not located)
    totals: Totals | None = None  # None when not located or the engine failed before facts


def predict_rows(rows: Iterable[KernelRow], src_root: Path, gpu: Gpu, cost: CostModel | None = None,
                 progress: Callable[[int], None] | None = None,
                 compile_db: FlagsSource | None = None, mode: str = "launch-given",
                 compiler: Compiler | None = None) -> list[Prediction]:
    """Predict every row, in order. `compile_db` (re-rooted under `src_root`) supplies each
    file's include directories and macros; `progress` is called with the count done. `mode` is
    `launch-given` or `editor` (see the module's docstring). `compiler`: the files are compiled
    for the GPU's architecture (a pool compiles all of them first) and their compiled counts used."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    rows = list(rows)
    arch = gpu_arch(gpu)
    if compiler is not None and arch is not None:
        compiler.prefetch(dict.fromkeys(src_root / row.file for row in rows), [arch])
    predictions = []
    if mode == "editor":
        editor = _EditorChecks(src_root, gpu, compile_db, cost, compiler)
        for count, row in enumerate(rows, start=1):
            predictions.append(editor.predict(row))
            if progress is not None:
                progress(count)
        return predictions
    locator = Locator(src_root, compile_db)
    launches = _LaunchIndex(locator, src_root)
    models = _Models(locator)
    for count, row in enumerate(rows, start=1):
        compiled = None
        if compiler is not None and arch is not None:
            compiled = compiler.compiled(src_root / row.file, [arch], omp_regions=row.language == "omp",
                                         kernels=row.language == "cuda")
        predictions.append(_predict(locator, launches, models, row, gpu, cost or CostModel(), compiled))
        if progress is not None:
            progress(count)
    return predictions


def is_degenerate(facts: KernelFacts) -> bool:
    """Whether the analysis is degenerate: the engine's own flag when it has one, else the engine
    declared it uncertain (an engine failure, or its own degeneracy checks), found no global memory
    access, or found a single work item."""
    flag = getattr(facts, "degenerate", None)
    if isinstance(flag, bool):
        return flag
    if facts.uncertain is not None:
        return True
    accessed = facts.total.global_load_bytes + facts.total.global_store_bytes + facts.total.atomics
    return accessed <= 0 or (facts.work_items is not None and facts.work_items <= 1)


def totals_of(facts: KernelFacts) -> Totals:
    return Totals(dram_bytes=facts.dram_bytes, fp32=facts.total.fp32, fp64=facts.total.fp64, fp16=facts.total.fp16,
                  int32=facts.total.int32, work_items=facts.work_items, degenerate=is_degenerate(facts))


def prediction_from(row: KernelRow, report: KernelReport) -> Prediction:
    """The prediction of a row from the engine's report of its kernel (its first estimate): of a
    template judged per instantiation, the report of the instantiation the row measured, as the
    editor shows it beside the template's own."""
    estimate, facts = report.estimates[0], report.facts
    named = row.instantiation
    if named is not None:
        judged = next((inst for inst in report.instantiations if same_arguments(inst.arguments, named)), None)
        if judged is not None and judged.estimates:
            estimate, facts = judged.estimates[0], judged.facts
    totals = totals_of(facts)
    if estimate.verdict == "uncertain":
        reason = "; ".join(note.text for note in estimate.evidence) or facts.uncertain
        return Prediction(row, "uncertain", reason, confidence=estimate.confidence, totals=totals)
    return Prediction(row, estimate.verdict, None, {p.value: v for p, v in estimate.intensity.items()},
                      confidence=estimate.confidence, totals=totals)


class _EditorChecks:
    """`--editor`: each file checked once exactly as `perflsp check FILE` checks it (no launch
    shape, no program arguments, no launch sites from other files), the row's kernel then looked
    up among the kernels that check reported. The lint rules are off: they never change a
    verdict, and they were a sixth of the run."""

    def __init__(self, src_root: Path, gpu: Gpu, compile_db: FlagsSource | None, cost: CostModel | None,
                 compiler: Compiler | None = None):
        from perflsp.analysis.rules import RULES
        from perflsp.checking.run import check_settings
        from perflsp.kernels.includes import IncludeResolver

        self.src_root = src_root
        self.gpu = gpu
        self.compile_db = compile_db
        self.settings = check_settings({code: "off" for code, rule in RULES.items() if rule.kind == "lint"})
        if cost is not None:
            self.settings = dataclasses.replace(self.settings, options=dataclasses.replace(self.settings.options, cost=cost))
        self.resolver = IncludeResolver()
        self.compiler = compiler
        self._checks: dict[str, FileCheck | str] = {}

    def check(self, relative: str) -> FileCheck | str:
        from perflsp.checking.run import check_file

        cached = self._checks.get(relative)
        if cached is None:
            cached = check_file(self.src_root / relative, [self.gpu], self.settings, self.resolver, self.compile_db,
                                self.compiler)
            self._checks[relative] = cached
        return cached

    def predict(self, row: KernelRow) -> Prediction:
        checked = self.check(row.file)
        if isinstance(checked, str):
            return Prediction(row, None, f"{row.file}: {checked}")  # what `check` names when it skips a file
        reports = {id(r.kernel): r for r in checked.kernels}
        kernels = [r.kernel for r in checked.kernels if isinstance(r.kernel, CudaFunction)]
        regions = [r.kernel for r in checked.kernels if isinstance(r.kernel, OmpRegion)]
        kernel, reason = match_kernel(row, kernels, regions)
        if kernel is None:
            return Prediction(row, None, reason)
        return prediction_from(row, reports[id(kernel)])


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def _predict(locator: Locator, launches: _LaunchIndex, models: _Models, row: KernelRow, gpu: Gpu,
             cost: CostModel, compiled: CompiledSource | None = None) -> Prediction:
    argv = tuple(shlex.split(row.exe_args)) if row.exe_args else ()
    try:
        located = locator.locate(row, argv)
    except Exception as exc:  # noqa: BLE001 - an extraction bug must not stop the other rows
        return Prediction(row, None, f"extraction error: {type(exc).__name__}: {exc}")
    if located.kernel is None or located.file is None:
        return Prediction(row, None, located.reason)
    file = located.file
    override = (row.grid, row.block) if row.grid and row.block else None
    external: tuple[LaunchSite, ...] = ()
    if isinstance(located.kernel, CudaFunction) and not file.launches_of(located.kernel):
        external = launches.for_kernel(row.target, located.kernel.name, argv)
    options = AnalysisOptions(argv=argv, launch_override=override, external_launches=external, cost=cost,
                              compiled=compiled, instantiation=row.instantiation)
    try:
        model = models.get(row.file, argv)
    except Exception as exc:  # noqa: BLE001 - a scorer must score every row; the reason is reported
        launches_of = file.launches_of(located.kernel) if isinstance(located.kernel, CudaFunction) else []
        return prediction_from(row, uncertain_report(located.kernel, launches_of, [gpu], failure_reason(exc)))
    report = FileAnalysis(model.data, model.tree, file, options, model=model).report(located.kernel, [gpu])
    return prediction_from(row, report)


class _Models:
    """Program models of the files the rows name, per program arguments: consecutive rows of one
    file share one (its preprocessor view, constants, call index and allocations)."""

    def __init__(self, locator: Locator, keep: int = 8):
        self.locator = locator
        self.keep = keep
        self._models: dict[tuple[str, tuple[str, ...]], ProgramModel] = {}

    def get(self, relative: str, argv: tuple[str, ...]) -> ProgramModel:
        key = (relative, argv)
        model = self._models.pop(key, None)
        if model is None:
            # (not kept by the read: this keeps the last few files' models only)
            model = program_model(self.locator.read(relative, argv).source, argv)
        self._models[key] = model  # most recently used last
        while len(self._models) > self.keep:
            del self._models[next(iter(self._models))]
        return model


class _LaunchIndex:
    """Launch sites of a benchmark's other files, for kernels defined in headers."""

    def __init__(self, locator: Locator, src_root: Path):
        self.locator = locator
        self.src_root = src_root
        self._by_target: dict[str, list[tuple[str, FileKernels]]] = {}

    def for_kernel(self, target: str, name: str, argv: tuple[str, ...]) -> tuple[LaunchSite, ...]:
        files = self._by_target.get(target)
        if files is None:
            files = []
            folder = self.src_root / target
            for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
                if not path.is_file() or not is_source_path(path) or is_transient_copy(path):
                    continue
                relative = str(path.relative_to(self.src_root))
                result = self.locator.file(relative)
                if not isinstance(result, SkippedFile) and result.launches:
                    files.append((relative, result))
            self._by_target[target] = files
        sites: list[LaunchSite] = []
        for relative, fk in files:
            matching = [s for s in fk.launches if s.name == name]
            if not matching:
                continue
            program = self.locator.read(relative, argv)
            unit = AnalysisUnit.of(program_model(program.source, argv),
                                   AnalysisOptions(argv=argv, include_env=program.options.include_env))
            for site in matching:
                sites.append(refold_site(unit, site))
        return tuple(sites)


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(slots=True)
class Score:
    listed: int
    located: int
    analyzed: int
    accuracy: float
    balanced_accuracy: float
    confusion: dict[str, dict[str, int]]  # truth -> predicted -> count

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def score(pairs: list[tuple[Prediction, Answer]]) -> Score:
    confusion: dict[str, dict[str, int]] = {c: Counter() for c in CLASSES}
    located = analyzed = correct = 0
    for prediction, answer in pairs:
        predicted = prediction.verdict or "not located"
        if prediction.verdict is not None:
            located += 1
        if prediction.verdict in CLASSES:
            analyzed += 1
        confusion.setdefault(answer.label, Counter())[predicted] += 1
        correct += predicted == answer.label
    recalls = []
    for cls in CLASSES:
        total = sum(confusion.get(cls, {}).values())
        if total:
            recalls.append(confusion[cls].get(cls, 0) / total)
    listed = len(pairs)
    return Score(
        listed=listed, located=located, analyzed=analyzed,
        accuracy=correct / listed if listed else 0.0,
        balanced_accuracy=sum(recalls) / len(recalls) if recalls else 0.0,
        confusion={k: dict(v) for k, v in confusion.items()},
    )


def score_by_language(pairs: list[tuple[Prediction, Answer]]) -> dict[str, Score]:
    groups: dict[str, list[tuple[Prediction, Answer]]] = defaultdict(list)
    for pair in pairs:
        groups[pair[0].row.language].append(pair)
    return {language: score(items) for language, items in sorted(groups.items())}


# ---------------------------------------------------------------------------------------------
# Calibration and tiny runs (the scorer's side: these read the answers)

CONFIDENCE_EDGES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
TINY_DRAM_BYTES = 64 * 1024  # labels of runs that moved less than this say more about the input than the code


@dataclass(slots=True)
class ReliabilityBin:
    low: float
    high: float
    count: int
    mean_confidence: float | None
    accuracy: float | None  # share of the bin's verdicts that match the label

    @property
    def gap(self) -> float | None:
        """Observed accuracy minus stated confidence (negative: over-confident)."""
        if self.accuracy is None or self.mean_confidence is None:
            return None
        return self.accuracy - self.mean_confidence

    def to_json(self) -> dict:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"low": self.low, "high": self.high, "count": self.count, "mean_confidence": r(self.mean_confidence),
                "accuracy": r(self.accuracy), "gap": r(self.gap)}


@dataclass(slots=True)
class Reliability:
    bins: list[ReliabilityBin]
    analyzed: int  # verdicts with a confidence (compute or bandwidth)
    expected_calibration_error: float | None  # count-weighted mean |gap|
    median_confidence_right: float | None
    median_confidence_wrong: float | None

    def to_json(self) -> dict:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"bins": [b.to_json() for b in self.bins], "analyzed": self.analyzed,
                "expected_calibration_error": r(self.expected_calibration_error),
                "median_confidence_right": r(self.median_confidence_right),
                "median_confidence_wrong": r(self.median_confidence_wrong)}


def reliability(pairs: list[tuple[Prediction, Answer]], edges: tuple[float, ...] = CONFIDENCE_EDGES) -> Reliability:
    """Confidence bins (`[low, high)`, the last one closed) vs observed accuracy, over the analysed
    verdicts (compute or bandwidth). Uncertain and unlocated rows have no verdict to be right about."""
    scored = [(p.confidence, p.verdict == a.label) for p, a in pairs
              if p.verdict in CLASSES and p.confidence is not None]
    bins = []
    for index, (low, high) in enumerate(itertools.pairwise(edges)):
        last = index == len(edges) - 2
        members = [(c, ok) for c, ok in scored if low <= c < high or (last and c == high)]
        if members:
            bins.append(ReliabilityBin(low, high, len(members), sum(c for c, _ in members) / len(members),
                                       sum(ok for _, ok in members) / len(members)))
        else:
            bins.append(ReliabilityBin(low, high, 0, None, None))
    counted = sum(b.count for b in bins)
    ece = (sum(b.count * abs(b.gap) for b in bins if b.gap is not None) / counted) if counted else None
    right = sorted(c for c, ok in scored if ok)
    wrong = sorted(c for c, ok in scored if not ok)
    return Reliability(bins, len(scored), ece, _median(right), _median(wrong))


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def is_tiny(answer: Answer, threshold: float = TINY_DRAM_BYTES) -> bool:
    """Whether the labeled run moved less than `threshold` DRAM bytes (unknown: not tiny)."""
    return answer.dram_bytes is not None and answer.dram_bytes < threshold


def tiny_runs(pairs: list[tuple[Prediction, Answer]], threshold: float = TINY_DRAM_BYTES) -> dict | None:
    """Scores with and without the labels of tiny runs; None when the labels carry no `dram_bytes`."""
    if not any(a.dram_bytes is not None for _, a in pairs):
        return None
    tiny = [pair for pair in pairs if is_tiny(pair[1], threshold)]
    rest = [pair for pair in pairs if not is_tiny(pair[1], threshold)]
    return {
        "threshold_bytes": int(threshold),
        "tiny": len(tiny),
        "with": score(pairs),
        "without": score(rest),
        "without_by_language": score_by_language(rest),
        "only": score(tiny),
    }
