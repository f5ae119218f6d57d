"""One analysis pipeline for every front end: `perflsp check`, `perflsp eval`, the language
server and its workspace scan.

    program = read_program(path, data, context, options)       # perflsp.analysis.reader
    analysis = FileAnalysis.of(program)
    reports = analysis.reports(gpus)                           # or analysis.report(kernel, gpus)

`analysis.reader` reads a file in its context (the preprocessor's view with the local headers
and the build's flags, for a file another source `#include`s that source's context, the launch
sites of its kernels in the sources that include it). The server extracts incrementally
instead and passes its own text through `FileAnalysis` (with the includers' launch sites in the
options, read by the same reader), so what it shows is what `check` shows.

`FileAnalysis` analyses kernels over the read's program model (built once, on first need, by
`kernels.program.program_model`) one at a time (the server reuses reports by `analysis_key` and stops at a deadline). Whatever the engine
trips on becomes an `uncertain` report naming the failure (`uncertain_report`, the one place
such a report is built), never an exception.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tree_sitter import Tree

from perflsp.analysis.engine import analyze_kernel, uncertain_report
from perflsp.analysis.instantiations import judge_instantiations
from perflsp.analysis.models import KernelReport
from perflsp.analysis.options import DEFAULT_OPTIONS, AnalysisOptions
from perflsp.analysis.reader import ReadProgram
from perflsp.analysis.unit import AnalysisUnit
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.kernels.symbols import TopLevelFacts
from perflsp.source.positions import LineIndex

log = logging.getLogger(__name__)

Kernel = CudaFunction | OmpRegion

# The per-file ceiling: at most this many kernels and OpenMP regions of one file are analysed
# (verdicts and lints), the first ones in document order; the rest get one note saying so. A
# count, not a time budget, so `perflsp check` in CI prints the same on every machine. Analysis
# and lints cost 2-7 ms per kernel: the ceiling bounds them at a few seconds a file whatever its
# size (a generated 15 MB file has 41,000 kernels; reading it, ~25 s, stays linear). The
# language server has its own time budget besides.
MAX_KERNELS_PER_FILE = 1000


@dataclass(frozen=True, slots=True)
class Share:
    """The part of a file that is analysed under the ceiling."""

    kernels: FileKernels  # the analysed kernels and regions, with what lints need beside them
    analysed: int
    total: int
    limit: int

    @property
    def note(self) -> str | None:
        """The one line that says the ceiling was reached (None when it was not)."""
        if self.analysed == self.total:
            return None
        return (f"{self.analysed:,} of {self.total:,} kernels and OpenMP regions analysed: the per-file ceiling is "
                f"{self.limit:,} (the first ones in the file; see 'Large files' in docs/cli.md)")


def within_ceiling(kernels: FileKernels, limit: int = MAX_KERNELS_PER_FILE) -> Share:
    """The first `limit` kernels and regions of the file in document order, with the device
    functions and unresolved launch sites before the first one left out, and every launch site
    of a kept kernel (wherever it is)."""
    items: list[Kernel] = sorted([*kernels.kernels, *kernels.omp_regions], key=lambda k: k.span.start_byte)
    if len(items) <= limit:
        return Share(kernels, len(items), len(items), limit)
    cut = items[limit].span.start_byte
    kept = [k for k in kernels.kernels if k.span.start_byte < cut]
    names = {k.qualified_name for k in kept}
    part = dataclasses.replace(
        kernels, kernels=kept,
        omp_regions=[r for r in kernels.omp_regions if r.span.start_byte < cut],
        device_functions=[f for f in kernels.device_functions if f.span.start_byte < cut],
        launches=[s for s in kernels.launches
                  if s.kernel in names or (s.kernel is None and s.span.start_byte < cut)],
        notes=list(kernels.notes))
    return Share(part, limit, len(items), limit)


class FileAnalysis:
    """The kernels of one file in one context, analysed on demand over one program model."""

    def __init__(self, data: bytes, tree: Tree, kernels: FileKernels, options: AnalysisOptions,
                 lines: LineIndex | None = None, *, model: ProgramModel | None = None,
                 top: TopLevelFacts | None = None, program: ReadProgram | None = None):
        """`model`: the program model of this text, when the caller keeps one (built with the
        options' `include_env` and `argv`); else the `program`'s read (`of`), or one built on
        first need over `top` (the facts of the text's top-level declarations, when the
        caller's extraction has them)."""
        self.data = data
        self.tree = tree
        self.kernels = kernels
        self.options = options
        self.lines = lines
        self._model = model
        self._top = top
        self._program = program
        self._unit: AnalysisUnit | None = None
        self._failure: str | None = None  # why the model could not be built

    @classmethod
    def of(cls, program: ReadProgram, options: AnalysisOptions | None = None) -> FileAnalysis:
        """The analysis of a read file (with `options` instead of the read's: a launch shape,
        compiled facts), over its program model."""
        return cls(program.data, program.tree, program.kernels, options or program.options, program.lines,
                   program=program)

    @property
    def model(self) -> ProgramModel:
        """The program model the kernels are analysed over (built on first use)."""
        if self._model is None:
            if self._program is not None:
                self._model = self._program.model_with(self.options.argv)
            else:
                source = SourceFile(self.data, self.tree, self.lines or LineIndex(self.data), self.kernels,
                                    self.options.include_env, self._top)
                self._model = program_model(source, self.options.argv)
        return self._model

    def _prepared_unit(self) -> AnalysisUnit | None:
        if self._unit is None and self._failure is None:
            try:
                self._unit = AnalysisUnit.of(self.model, self.options)
            except Exception as exc:  # noqa: BLE001 - every kernel then gets `uncertain` with this reason
                log.warning("the static engine failed to prepare %s: %s: %s", self.kernels.path or "a document",
                            type(exc).__name__, exc)
                self._failure = failure_reason(exc)
        return self._unit

    def model_if_built(self) -> ProgramModel | None:
        """The file's program model (built on first need; None when it could not be built),
        for what else reads the file: its lints and their fixes."""
        unit = self._prepared_unit()
        return unit.model if unit is not None else None

    def failure(self) -> str | None:
        """Why the model could not be built, if it could not."""
        return self._failure

    def report(self, kernel: Kernel, gpus: Sequence[Gpu]) -> KernelReport:
        """The engine's report of `kernel`, or an `uncertain` one naming the failure."""
        unit = self._prepared_unit()
        if unit is None:
            return uncertain_report(kernel, self._launches(kernel), gpus, self._failure or "engine error")
        try:
            report = analyze_kernel(unit, kernel, gpus)
        except Exception as exc:  # noqa: BLE001 - one kernel the engine trips on must not hide the rest
            log.warning("the static engine failed on %s: %s: %s", kernel.name, type(exc).__name__, exc)
            return uncertain_report(kernel, self._launches(kernel), gpus, failure_reason(exc))
        model = unit.model
        report.instantiations = judge_instantiations(
            report, unit, lambda named: analyze_kernel(AnalysisUnit.of(model, named), kernel, gpus))
        return report

    def reports(self, gpus: Sequence[Gpu], limit: int = MAX_KERNELS_PER_FILE) -> list[KernelReport]:
        """Reports of every kernel, then every OpenMP region, in document order (those within
        the per-file ceiling, see `within_ceiling`)."""
        share = within_ceiling(self.kernels, limit).kernels
        kernels: list[Kernel] = [*share.kernels, *share.omp_regions]
        return [self.report(kernel, gpus) for kernel in kernels]

    def release(self) -> None:
        """Forget the program model (it holds the whole text's helper structures)."""
        self._unit = None
        self._model = None

    def _launches(self, kernel: Kernel) -> list[LaunchSite]:
        return self.kernels.launches_of(kernel) if isinstance(kernel, CudaFunction) else []


def failure_reason(exc: BaseException) -> str:
    return f"engine error: {type(exc).__name__}: {exc}"


def analyze_file(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
                 options: AnalysisOptions = DEFAULT_OPTIONS, lines: LineIndex | None = None) -> list[KernelReport]:
    """Every kernel's and region's report (see `FileAnalysis`)."""
    return FileAnalysis(data, tree, kernels, options, lines).reports(gpus)
