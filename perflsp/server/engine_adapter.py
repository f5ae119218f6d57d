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
from pathlib import Path
from typing import Any, Protocol

from tree_sitter import Node, Tree

from perflsp.analysis import fixes
from perflsp.analysis.engine import ENGINE_VERSION, analysis_key
from perflsp.analysis.lints import LINT_CODES, LintContext, LintOptions, run_rules
from perflsp.analysis.lints import run_lints as _run_lints
from perflsp.analysis.models import Finding, Fix
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis, Kernel
from perflsp.analysis.reader import ReadContext
from perflsp.analysis.rules import RULES, rule_info
from perflsp.analysis.rules import rule_doc_url as _rule_doc_url
from perflsp.compiled.model import CompiledSource
from perflsp.hardware.models import Gpu
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.source.positions import LineIndex

log = logging.getLogger(__name__)

__all__ = ["ENGINE_VERSION", "AnalysisOptions", "FileAnalysis", "FixUnavailable", "Kernel", "analysis_key",
           "best_block_for", "default_severity", "includer_launches", "known_rule_codes", "lint_codes",
           "options", "rule_doc_url", "rule_summary", "run_lints", "set_block_size",
           "set_launch_bounds", "set_omp_clauses", "with_includer_launches"]


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


def run_lints(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
              enabled: Collection[str] | None, notes: list[str] | None = None, *,
              lines: LineIndex | None = None, shared: dict[str, Any] | None = None) -> list[Finding]:
    """`perflsp.analysis.lints.run_lints`, optionally reusing what does not change between runs
    on one document: its line index (`lines`, same content as the text) and, in `shared`, the
    file-level facts of the previous run (the file's constants and macro aliases) while nothing
    outside kernel bodies changed, and the file-scope declarations. Without those it is exactly `run_lints`."""
    try:
        if lines is None and shared is None:
            return _run_lints(data, tree, kernels, gpus, enabled=enabled, notes=notes)
        ctx = LintContext(data=data, tree=tree, kernels=kernels, gpus=tuple(gpus), options=LintOptions(),
                          path=kernels.path)
        if lines is not None:
            ctx.lines = lines
        if shared is not None:
            if "constants" in shared:
                ctx.constants = shared["constants"]
            if "aliases" in shared:
                ctx.aliases = shared["aliases"]
            # the file-scope declarations (`shared` lives while nothing outside kernel bodies
            # changes) carry over to the next tree unless they hold nodes of theirs (`auto`
            # initialisers, typed on demand): then only the chunks of one run share them
            scope_tree, scope, portable = shared.get("file_scope", (None, None, False))
            if scope is not None and (scope_tree is tree or portable):
                ctx.file_scope = scope
        findings = run_rules(ctx, enabled, notes)
        if shared is not None:
            shared["constants"] = ctx.constants
            shared["aliases"] = ctx.aliases
            if "file_scope" in ctx.__dict__ and shared.get("file_scope", (None, None, False))[1] is not ctx.file_scope:
                names = ctx.file_scope.names.values()
                shared["file_scope"] = (tree, ctx.file_scope, not any(isinstance(v, Node) for v in names))
        return findings
    except Exception as exc:  # noqa: BLE001 - the rules guard themselves; this guards their context
        log.warning("the lint rules failed: %s: %s", type(exc).__name__, exc)
        return []


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


def set_block_size(data: bytes, tree: Tree, site: LaunchSite, block: int, file_kernels: FileKernels | None = None) -> Fix:
    try:
        return fixes.set_block_size(data, tree, site, block, file_kernels=file_kernels)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def set_launch_bounds(data: bytes, tree: Tree, kernel: CudaFunction, max_threads: int, min_blocks: int | None = None,
                      file_kernels: FileKernels | None = None) -> Fix:
    try:
        return fixes.set_launch_bounds(data, tree, kernel, max_threads, min_blocks, file_kernels=file_kernels)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def set_omp_clauses(data: bytes, tree: Tree, region: OmpRegion, thread_limit: int | None = None,
                    num_teams: int | None = None) -> Fix:
    try:
        return fixes.set_omp_clauses(data, tree, region, thread_limit=thread_limit, num_teams=num_teams)
    except fixes.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def best_block_for(kernel: CudaFunction | None, gpu: Gpu, regs_per_thread: int | None = None) -> int | None:
    """The occupancy-best block size (a multiple of the warp) for `kernel` on `gpu`."""
    try:
        return int(fixes.best_block_for(kernel, gpu, regs_per_thread))
    except (ValueError, TypeError):
        return None
