"""The server's names for the analysis layer: the analysis pipeline, the lint rules, the rule
registry and the fix builders, imported plainly. The analysis itself runs through
`perflsp.analysis.pipeline` (the path `perflsp check` takes); what is here is only what the
server adds: options from an open document, reuse of file-level lint facts between runs, and
fix builders that report a refusal as `FixUnavailable`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tree_sitter import Node, Tree

from perflsp.analysis import fixes
from perflsp.analysis.engine import ENGINE_VERSION, analysis_key
from perflsp.analysis.exprtypes import Scope
from perflsp.analysis.lints import LINT_CODES, LintContext, LintOptions, run_rules
from perflsp.analysis.models import Finding, Fix
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis, Kernel
from perflsp.analysis.reader import ReadContext
from perflsp.analysis.rules import RULES, rule_info
from perflsp.analysis.rules import rule_doc_url as _rule_doc_url
from perflsp.analysis.unit import AnalysisUnit
from perflsp.compiled.model import CompiledSource
from perflsp.hardware.models import Gpu
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.kernels.symbols import TopLevelFacts
from perflsp.source.positions import LineIndex

log = logging.getLogger(__name__)

__all__ = [
    "ENGINE_VERSION",
    "AnalysisOptions",
    "FileAnalysis",
    "FixUnavailable",
    "Kernel",
    "LintFacts",
    "analysis_key",
    "best_block_for",
    "default_severity",
    "includer_launches",
    "known_rule_codes",
    "lint_codes",
    "lint_model",
    "options",
    "rule_doc_url",
    "rule_summary",
    "run_lints",
    "set_block_size",
    "set_launch_bounds",
    "set_omp_clauses",
    "snapshot_model",
    "with_includer_launches",
]


class DocumentText(Protocol):
    """What the server's open text offers here (`perflsp.server.text.TextState`)."""

    path: str | None
    reading: ReadContext


def lints_available() -> bool:
    return True  # the lint rules ship with perflsp (kept for the status report's shape)


def fixes_available() -> bool:
    return True


# --------------------------------------------------------------------------- engine


def options(preprocessed: ConstEnv | None, registers: Sequence[tuple[str, int]] = (),
            argv: Sequence[str] | None = None, compiled: CompiledSource | None = None) -> AnalysisOptions:
    """`argv`: the program's arguments (`perflsp.profiling.args`), folded where main() parses argv;
    `compiled`: the document's device code compiled (its kernels counted from it)."""
    return AnalysisOptions(include_env=preprocessed, registers=tuple(registers),
                           argv=tuple(argv) if argv is not None else None, compiled=compiled)


def with_includer_launches(opts: AnalysisOptions, text: DocumentText, kernels: FileKernels) -> AnalysisOptions:
    """`opts` with the launch sites of this file's kernels in the sources that `#include` it
    (folded with the document's flags and `opts.argv`, as `analysis.reader` reads them)."""
    external = includer_launches(text, kernels, opts.argv)
    return dataclasses.replace(opts, external_launches=external) if external else opts


def includer_launches(text: DocumentText, kernels: FileKernels,
                      argv: Sequence[str] | None = None) -> tuple[LaunchSite, ...]:
    """Launch sites of this file's kernels in the sources that `#include` it (none when the
    file launches them itself or has no path)."""
    if not text.path or not kernels.kernels:
        return ()
    try:
        return text.reading.includer_launches(Path(text.path), kernels, argv)
    except Exception:
        log.exception("reading the files that include %s failed", text.path)
        return ()


# --------------------------------------------------------------------------- lints and rules


def lint_codes() -> tuple[str, ...]:
    return LINT_CODES


@dataclass(slots=True)
class LintFacts:
    """File-level facts one lint run leaves for the next while nothing outside kernel bodies
    changes (the server clears them then): the file's own macros and top-level facts (of a model
    over them, `lint_model`) and the file-scope declarations, with the tree they were typed in and
    whether they hold none of its nodes (then they carry over to the next tree)."""

    macros: ConstEnv | None = None
    top: TopLevelFacts | None = None
    file_scope: tuple[Tree, Scope, bool] | None = None

    def clear(self) -> None:
        self.macros = self.top = self.file_scope = None


def run_lints(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
              enabled: Collection[str] | None, notes: list[str] | None = None, *,
              lines: LineIndex | None = None, shared: LintFacts | None = None,
              model: ProgramModel | None = None) -> list[Finding]:
    """`perflsp.analysis.lints.run_lints` on `kernels` (all of the file's or some of them).

    `model`: the document's program model (the one its analysis reads, `Snapshot.model`); a
    snapshot without one (the first publication of a large file's top) lints over a model of the
    file's own macros (`lint_model`). `shared`: the previous run's facts (see `LintFacts`)."""
    try:
        if model is None:
            model = lint_model(data, tree, kernels, lines, shared)
        ctx = LintContext(model, gpus=tuple(gpus), options=LintOptions(),
                          subject=None if kernels is model.kernels else kernels)
        kept = shared.file_scope if shared is not None else None
        if kept is not None and (kept[0] is tree or kept[2]):
            # the file-scope declarations carry over to the next tree unless they hold nodes of
            # theirs (`auto` initialisers, typed on demand): then only the chunks of one run share them
            ctx.file_scope = kept[1]
        findings = run_rules(ctx, enabled, notes)
        if shared is not None and "file_scope" in ctx.__dict__ and (kept is None or kept[1] is not ctx.file_scope):
            names = ctx.file_scope.names.values()
            shared.file_scope = (tree, ctx.file_scope, not any(isinstance(v, Node) for v in names))
        return findings
    except Exception as exc:  # noqa: BLE001 - the rules guard themselves; this guards their context
        log.warning("the lint rules failed: %s: %s", type(exc).__name__, exc)
        return []


def lint_model(data: bytes, tree: Tree, kernels: FileKernels, lines: LineIndex | None = None,
               shared: LintFacts | None = None) -> ProgramModel:
    """A program model for lints whose snapshot carries none (the first publication of a large
    file's top), over the file's own macros; with `shared`, the macros and top-level facts of
    the previous call are reused."""
    lines = lines or LineIndex(data)
    if shared is None:
        return program_model(SourceFile(data, tree, lines, kernels, None))
    if shared.macros is None:
        shared.macros = IncludeResolver().env_for(None, data)
    model = program_model(SourceFile(data, tree, lines, kernels, shared.macros, shared.top))
    shared.top = model.top
    return model


def snapshot_model(data: bytes, tree: Tree, kernels: FileKernels, preprocessed: ConstEnv | None,
                   lines: LineIndex | None = None) -> ProgramModel:
    """The program model of an open document's text for its code actions and commands when its
    snapshot carries none (`features.common.document_model`), built through the pipeline's
    `AnalysisUnit` with the document's preprocessor view."""
    return AnalysisUnit(data, tree, kernels, options(preprocessed), lines).model


def known_rule_codes() -> set[str]:
    return set(RULES)


def rule_doc_url(code: str) -> str | None:
    return _rule_doc_url(code)


def default_severity(code: str) -> str:
    info = rule_info(code)
    return info.default_severity if info is not None else "warning"


def rule_summary(code: str) -> str | None:
    info = rule_info(code)
    return info.summary if info is not None else None


# --------------------------------------------------------------------------- fixes


class FixUnavailable(Exception):
    """The fix builders refused this edit (the reason is the message)."""


def set_block_size(model: ProgramModel, site: LaunchSite, block: int) -> Fix:
    try:
        return fixes.set_block_size(model, site, block)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def set_launch_bounds(model: ProgramModel, kernel: CudaFunction, max_threads: int, min_blocks: int | None = None) -> Fix:
    try:
        return fixes.set_launch_bounds(model, kernel, max_threads, min_blocks)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def set_omp_clauses(model: ProgramModel, region: OmpRegion, thread_limit: int | None = None,
                    num_teams: int | None = None) -> Fix:
    try:
        return fixes.set_omp_clauses(model, region, thread_limit=thread_limit, num_teams=num_teams)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def best_block_for(kernel: CudaFunction | None, gpu: Gpu, regs_per_thread: int | None = None) -> int | None:
    """The occupancy-best block size (a multiple of the warp) for `kernel` on `gpu`."""
    try:
        return int(fixes.best_block_for(kernel, gpu, regs_per_thread))
    except (ValueError, TypeError):
        return None
