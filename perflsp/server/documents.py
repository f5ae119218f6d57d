"""What the features read: one analysed version of one document (a `Snapshot`)."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lsprotocol import types as lsp
from tree_sitter import Tree

from perflsp.analysis.models import KernelReport
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import ProgramModel
from perflsp.server.json_types import JsonObject
from perflsp.source.positions import LineIndex, Position

if TYPE_CHECKING:
    from perflsp.llm.advisor import AdvisorResult
    from perflsp.profiling.measured import MeasuredEvidence
    from perflsp.server.advice_state import SnapshotAdvice
    from perflsp.server.analysis import AnalysisState
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.measured import SnapshotMeasured
    from perflsp.server.text import DocumentModel


_START_BYTE = operator.attrgetter("span.start_byte")

@dataclass
class Snapshot:
    """One version's text, tree, extraction and analysis. Only the newest snapshot of a
    document is ever read: its line index (and the spans of kept kernels) follow later edits."""

    uri: str
    version: int | None
    data: bytes
    _tree: Tree | None
    lines: LineIndex
    kernels: FileKernels
    analysis: AnalysisState
    config: ResolvedConfig
    preprocessed: ConstEnv | None = None  # the preprocessor's macros for this text
    exact: bool = True  # the tree equals a fresh parse (incremental error recovery can differ)
    diagnostics: list[lsp.Diagnostic] = field(default_factory=list)  # as published
    # the same, unstructured JSON (published without a converter pass)
    diagnostics_json: list[JsonObject] | None = None
    advice: SnapshotAdvice | None = None  # the LLM's questions and answers (advice.py), when it is on
    measured: SnapshotMeasured | None = None  # stored Nsight Compute results (measured.py)
    revision: int = 0  # counts republications of this version (LLM answers, imported results)
    provisional: bool = False  # the newest text with the last complete analysis (edits since not analysed yet)
    # the document's first analysis is not complete: what is known so far (kernels not reached yet
    # have no report); answers read from it say so, and are refreshed when the analysis completes
    partial: bool = False
    # the version's program model (`TextState.model`: built on first use, shared with its analysis)
    document: DocumentModel | None = None

    @property
    def model(self) -> ProgramModel | None:
        """What the analysis read of this version (`kernels.program.ProgramModel`): features
        query it instead of reading the text again (None: a snapshot made without its text's
        state, the first publication of a large file's top)."""
        return self.document.model if self.document is not None else None

    def unanalysed_items(self) -> int:
        """Kernels and OpenMP regions with no report yet (a partial snapshot's work left)."""
        return sum(1 for item in (*self.kernels.kernels, *self.kernels.omp_regions)
                   if id(item) not in self.analysis.reports)

    @property
    def tree(self) -> Tree:
        """The syntax tree (parsed again if the document was hibernated to save memory)."""
        tree = self._tree
        if tree is None:
            from perflsp.source.parser import parse

            tree = self._tree = parse(self.data)
        return tree

    def hibernate(self) -> None:
        self._tree = None

    @property
    def complete(self) -> bool:
        return self.analysis.complete

    def offset(self, position: Position | tuple[int, int]) -> int:
        return self.lines.offset(position)

    def reports(self) -> list[KernelReport]:
        """Reports in document order (kernels, then OpenMP regions, by position)."""
        regions = self.kernels.omp_regions
        items: list[CudaFunction | OmpRegion] = [*self.kernels.kernels, *regions]
        if regions:  # (the kernels alone are in document order already)
            items.sort(key=_START_BYTE)
        # (in C: typing in a file of a thousand kernels builds this list per keystroke)
        return list(filter(None, map(self.analysis.reports.get, map(id, items))))

    def report_for(self, item: CudaFunction | OmpRegion) -> KernelReport | None:
        return self.analysis.report_for(item)

    # -- what the LLM and the profiler add -----------------------------------------------

    def llm_result(self, name: str, gpu: str) -> AdvisorResult | None:
        return self.advice.result(name, gpu) if self.advice is not None else None

    def llm_pending(self, name: str, gpu: str) -> bool:
        return self.advice is not None and self.advice.pending(name, gpu)

    def measured_for(self, name: str, gpu: str) -> MeasuredEvidence | None:
        return self.measured.for_estimate(name, gpu) if self.measured is not None else None

    # -- what is under the cursor --------------------------------------------------------

    def kernel_at_name(self, offset: int) -> CudaFunction | None:
        for kernel in (*self.kernels.kernels, *self.kernels.device_functions):
            if kernel.name_span.contains(offset):
                return kernel
        return None

    def kernel_containing(self, offset: int) -> CudaFunction | None:
        best = None
        for kernel in self.kernels.kernels:
            if kernel.span.contains(offset) and (best is None or kernel.span.start_byte > best.span.start_byte):
                best = kernel
        return best

    def launch_at(self, offset: int) -> LaunchSite | None:
        best = None
        for site in self.kernels.launches:
            if site.span.contains(offset) and (best is None or site.span.start_byte > best.span.start_byte):
                best = site
        return best

    def region_at(self, offset: int, pragma_only: bool = False) -> OmpRegion | None:
        for region in self.kernels.omp_regions:
            if region.span.contains(offset):
                return region
            if not pragma_only and region.body_span is not None and region.body_span.contains(offset):
                return region
        return None

    def kernel_named(self, name: str) -> CudaFunction | OmpRegion | None:
        for kernel in self.kernels.kernels:
            if name in (kernel.qualified_name, kernel.name):
                return kernel
        for region in self.kernels.omp_regions:
            if region.name == name:
                return region
        return None

    def report_of_launch(self, site: LaunchSite) -> KernelReport | None:
        if site.kernel is None:
            return None
        for kernel in self.kernels.kernels:
            if kernel.qualified_name == site.kernel:
                return self.report_for(kernel)
        return None
