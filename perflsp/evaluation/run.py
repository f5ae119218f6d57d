"""Run the static engine over labeled kernels and score it.

The predictor sees only what the study gave its LLMs: the sources, the launch shape
(`block`, `grid`) and the program's arguments (`exe_args`). The label is read by the scorer.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from perflsp.analysis.costs import CostModel
from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.extents import cuda_extent, leading_name
from perflsp.evaluation.labels import Answer, KernelRow
from perflsp.evaluation.locate import Locator
from perflsp.hardware.models import Gpu
from perflsp.kernels.compile_db import CompileDatabase
from perflsp.kernels.models import ConstValue, CudaFunction, FileKernels, LaunchSite
from perflsp.source.files import SkippedFile
from perflsp.source.parser import is_source_path

CLASSES = ("compute", "bandwidth")


@dataclass(slots=True)
class Prediction:
    row: KernelRow
    verdict: str | None  # compute | bandwidth | uncertain | None (not located)
    reason: str | None = None
    intensity: dict[str, float] = field(default_factory=dict)


def predict_rows(rows: Iterable[KernelRow], src_root: Path, gpu: Gpu, cost: CostModel | None = None,
                 progress: Callable[[int], None] | None = None,
                 compile_db: CompileDatabase | None = None) -> list[Prediction]:
    """Predict every row, in order. `compile_db` (re-rooted under `src_root`) supplies each
    file's include directories and macros; `progress` is called with the count done."""
    locator = Locator(src_root, compile_db)
    launches = _LaunchIndex(locator, src_root)
    predictions = []
    for count, row in enumerate(rows, start=1):
        predictions.append(_predict(locator, launches, row, gpu, cost or CostModel()))
        if progress is not None:
            progress(count)
    return predictions


def _predict(locator: Locator, launches: _LaunchIndex, row: KernelRow, gpu: Gpu, cost: CostModel) -> Prediction:
    try:
        located = locator.locate(row)
    except Exception as exc:  # noqa: BLE001 - an extraction bug must not stop the other rows
        return Prediction(row, None, f"extraction error: {type(exc).__name__}: {exc}")
    if located.kernel is None or located.file is None:
        return Prediction(row, None, located.reason)
    file = located.file
    argv = tuple(shlex.split(row.exe_args)) if row.exe_args else ()
    override = (row.grid, row.block) if row.grid and row.block else None
    external: tuple[LaunchSite, ...] = ()
    if isinstance(located.kernel, CudaFunction) and not file.launches_of(located.kernel):
        external = launches.for_kernel(row.target, located.kernel.name, argv)
    loaded = locator.source(row.file)
    options = AnalysisOptions(argv=argv, launch_override=override, include_env=locator.include_env(row.file, loaded),
                              external_launches=external, cost=cost)
    try:
        unit = AnalysisUnit(loaded, locator.tree(row.file), file, options)
        report = analyze_kernel(unit, located.kernel, [gpu])
    except Exception as exc:  # noqa: BLE001 - a scorer must score every row; the reason is reported
        return Prediction(row, "uncertain", f"engine error: {type(exc).__name__}: {exc}")
    estimate = report.estimates[0]
    if estimate.verdict == "uncertain":
        return Prediction(row, "uncertain", "; ".join(estimate.evidence))
    return Prediction(row, estimate.verdict, None, {p.value: v for p, v in estimate.intensity.items()})


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
                if not path.is_file() or not is_source_path(path):
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
            unit = AnalysisUnit(self.locator.source(relative), self.locator.tree(relative), fk,
                                AnalysisOptions(argv=argv, include_env=self.locator.include_env(relative, self.locator.source(relative))))
            for site in matching:
                sites.append(_refold(unit, site))
        return tuple(sites)


def _refold(unit: AnalysisUnit, site: LaunchSite) -> LaunchSite:
    """Fold a site's values in its own file (with the program's arguments) and detach the
    spans, which point into that other file."""

    def fold(value: ConstValue | None, dim3: bool) -> ConstValue | None:
        if value is None:
            return None
        folded = value.value
        if folded is None and value.span is not None:
            folded = unit.fold_at(value.span.start_byte, value.text)
        if dim3 and isinstance(folded, (int, float)):
            folded = (int(folded), 1, 1)
        return ConstValue(value.text, None, folded, None if folded is not None else value.reason)

    extents = []
    for arg in site.args:
        name = leading_name(arg.text)
        extent = cuda_extent(unit, name) if name else None
        extents.append((extent.bytes, extent.host_memory) if extent is not None else (None, False))
    return dataclasses.replace(site, grid=fold(site.grid, True), block=fold(site.block, True),
                               shared_mem_bytes=fold(site.shared_mem_bytes, False),
                               args=tuple(fold(a, False) for a in site.args), arg_extents=tuple(extents))


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
    confusion: dict[str, dict[str, int]] = {c: Counter() for c in CLASSES}  # type: ignore[misc]
    located = analyzed = correct = 0
    for prediction, answer in pairs:
        predicted = prediction.verdict or "not located"
        if prediction.verdict is not None:
            located += 1
        if prediction.verdict in CLASSES:
            analyzed += 1
        confusion.setdefault(answer.label, Counter())[predicted] += 1  # type: ignore[arg-type]
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
