"""Code actions: the lint fixes, launch tuning refactors, and "explain"/"profile" commands.

Every edit comes from the validated builders of `perflsp.analysis.fixes` (they re-parse the
edited text and refuse an edit that breaks it), computed on the snapshot the request is about:
lints only describe their fixes (`FixRequest`), and the edits are built here, when asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.fixes import (
    EditError,
    best_block_for,
    build_fixes,
    set_block_size,
    set_launch_bounds,
    set_omp_clauses,
)
from perflsp.analysis.models import ByteEdit, Finding, Fix
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, LaunchSite, OmpRegion
from perflsp.server import analysis as server_analysis
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import document_model, kernel_name
from perflsp.server.json_types import JsonObject, lsp_json_object
from perflsp.source.positions import Position

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext
    from perflsp.server.scheduler import DocumentWorker


class Cancelled(Exception):
    """The request was cancelled (`$/cancelRequest`) while its actions were computed."""


def actions(ls: ServerContext, worker: DocumentWorker | None, snap: Snapshot, params: lsp.CodeActionParams,
            cancelled: Callable[[], bool] | None = None) -> list[lsp.CodeAction]:
    """The actions at `params.range`; `cancelled()` is checked between stages (a cancelled
    request stops its work there and raises `Cancelled`)."""

    def check() -> None:
        if cancelled is not None and cancelled():
            raise Cancelled

    start = snap.offset(Position(params.range.start.line, params.range.start.character))
    end = snap.offset(Position(params.range.end.line, params.range.end.character))
    only = set(params.context.only or [])
    kernels = [k for k in snap.kernels.kernels if _overlaps(k.span.start_byte, k.span.end_byte, start, end)]
    launches = [s for s in snap.kernels.launches if _overlaps(s.span.start_byte, s.span.end_byte, start, end)]
    regions = [r for r in snap.kernels.omp_regions
               if _overlaps(r.span.start_byte, (r.body_span or r.span).end_byte, start, end)]
    gpus = snap.config.gpus
    out: list[lsp.CodeAction] = []

    # lint fixes, computed on this text
    items: list[server_analysis.Item] = [*kernels, *launches, *regions]
    items += [f for f in snap.kernels.device_functions if _overlaps(f.span.start_byte, f.span.end_byte, start, end)]
    check()
    findings = server_analysis.lint_fresh(snap.data, snap.tree, snap.kernels, gpus, ls.lint_codes(snap.config), items,
                                          snap.model)
    check()
    rules = snap.config.settings.rules
    for finding in findings:
        if rules.get(finding.code) == "off" or not _overlaps(finding.span.start_byte, finding.span.end_byte, start, end):
            continue
        for fix in build_fixes(finding, document_model(snap)):
            out.append(_action(snap, fix, _matching(params.context.diagnostics, finding)))

    # launch shape refactors (with a "measure" command when profiling may run)
    profiling = _profiling_ready(snap)
    for site in launches:
        check()
        kernel = _kernel_of(snap, site)
        for block, names in _best_blocks(kernel, gpus).items():
            current = site.block.value
            if isinstance(current, tuple) and current[1:] == (1, 1):
                current = current[0]
            if current == block:
                continue
            try:
                fix = set_block_size(document_model(snap), site, block)
            except EditError:
                continue
            title = f"Launch `{site.name}` with {block} threads per block (best occupancy on {', '.join(names)})"
            measured = _measured_title(ls, snap, kernel, current, block)
            out.append(_action(snap, Fix(title + measured, fix.edits, "refactor"), []))
            if profiling and kernel is not None and isinstance(current, int) and not measured:
                name = kernel_name(kernel)
                out.append(lsp.CodeAction(
                    title=f"Measure `{name}` with {block} vs {current} threads per block (Nsight Compute, perflsp)",
                    kind=lsp.CodeActionKind.Empty,
                    command=lsp.Command(title=f"Measure {name}", command="perflsp.verifyLaunchParameters",
                                        arguments=[{"uri": snap.uri, "kernel": name, "current": current,
                                                    "proposed": block}])))
    # the LLM's last launch-parameter proposals, while the kernel is unchanged
    subjects: list[CudaFunction | OmpRegion] = [*_with_launched(kernels, launches, snap), *regions]
    for subject in subjects:
        out += _proposal_actions(ls, snap, subject)
    for kernel in _with_launched(kernels, launches, snap):
        action = _launch_bounds_action(snap, kernel, gpus)
        if action is not None:
            out.append(action)
    for region in regions:
        action = _omp_action(snap, region, gpus)
        if action is not None:
            out.append(action)

    # commands
    for subject in subjects:
        name = kernel_name(subject)
        arguments = [{"uri": snap.uri, "kernel": name}]
        out.append(lsp.CodeAction(title=f"Explain `{name}` (perflsp)", kind=lsp.CodeActionKind.Empty,
                                  command=lsp.Command(title=f"Explain {name}", command="perflsp.explainKernel", arguments=arguments)))
        if profiling:  # only when profiling may run (else the command would only say it is off)
            out.append(lsp.CodeAction(title=f"Profile `{name}` with Nsight Compute (perflsp)",
                                      kind=lsp.CodeActionKind.Empty,
                                      command=lsp.Command(title=f"Profile {name}", command="perflsp.profileKernel",
                                                          arguments=arguments)))
    out += _tuning_actions(ls, snap, _with_launched(kernels, launches, snap))
    if only:
        out = [a for a in out if any(str(a.kind or "").startswith(str(k)) for k in only)]
    return _dedupe(out)


def _tuning_actions(ls: ServerContext, snap: Snapshot, kernels: list[CudaFunction]) -> list[lsp.CodeAction]:
    """*Tune `k` on <GPU>* and the tuned edit per device (perflsp.server.features.tuning)."""
    if not kernels:
        return []
    try:
        from perflsp.server.features import tuning
    except ImportError:
        return []
    try:
        return tuning.code_actions(ls, snap, kernels)
    except Exception:  # tuning results must never take the other code actions down
        import logging

        logging.getLogger(__name__).exception("tuning code actions failed")
        return []


def _profiling_ready(snap: Snapshot) -> bool:
    from perflsp.server.features.status import profiling_status

    return profiling_status(snap.config)[0] == "ready"


def _measured_title(ls: ServerContext, snap: Snapshot, kernel: CudaFunction | None, current: object, block: int) -> str:
    """" — measured 1.40× faster" once `perflsp.verifyLaunchParameters` timed this change."""
    measured = getattr(ls, "_measured", None)
    if kernel is None or measured is None or not isinstance(current, int):
        return ""
    result = measured.verified.get((snap.uri, kernel_name(kernel), kernel.body_hash, current, block))
    if result is None:
        return ""
    speedup = result.speedup
    if speedup is None:
        return " — not measured: could not time both block sizes"
    return f" — measured {speedup:.2f}× {'faster' if speedup >= 1 else 'slower'}"


def _proposal_actions(ls: ServerContext, snap: Snapshot, item: CudaFunction | OmpRegion) -> list[lsp.CodeAction]:
    advice = getattr(ls, "_advice", None)
    if advice is None:
        return []
    stored = advice.proposals.get((snap.uri, kernel_name(item)))
    if stored is None or stored[0] != item.body_hash:
        return []
    from perflsp.server.features.proposals import proposal_edits

    _hash, gpu, proposals, label = stored
    found = proposal_edits(snap, kernel_name(item), proposals, gpu, label)
    return [_action(snap, fix, []) for fix in found.fixes]


def code_action_json(snap: Snapshot, fix: Fix) -> JsonObject:
    """A fix as a code action in JSON (what `perflsp.askLaunchParameters` returns)."""
    return lsp_json_object(_action(snap, fix, []))


def _overlaps(a: int, b: int, start: int, end: int) -> bool:
    return a <= end and start <= b


def _kernel_of(snap: Snapshot, site: LaunchSite) -> CudaFunction | None:
    if site.kernel is None:
        return None
    return next((k for k in snap.kernels.kernels if k.qualified_name == site.kernel), None)


def _with_launched(kernels: list[CudaFunction], launches: list[LaunchSite], snap: Snapshot) -> list[CudaFunction]:
    out = list(kernels)
    for site in launches:
        kernel = _kernel_of(snap, site)
        if kernel is not None and all(kernel is not k for k in out):
            out.append(kernel)
    return out


def _registers(snap: Snapshot, kernel: CudaFunction | None) -> int | None:
    return None  # ptxas figures: not wired in this build (32 per thread is assumed)


def _best_blocks(kernel: CudaFunction | None, gpus: Iterable[Gpu]) -> dict[int, list[str]]:
    """Occupancy-best block size per GPU, grouped: {block: [gpu names]}."""
    out: dict[int, list[str]] = {}
    for gpu in gpus:
        try:
            block = best_block_for(kernel, gpu)
        except EditError:
            continue
        if block:
            out.setdefault(block, []).append(gpu.name)
    return out


def _launch_bounds_action(snap: Snapshot, kernel: CudaFunction, gpus: Sequence[Gpu]) -> lsp.CodeAction | None:
    blocks = []
    for site in snap.kernels.launches_of(kernel):
        value = site.block.value
        if isinstance(value, tuple):
            value = value[0] * value[1] * value[2]
        if isinstance(value, int):
            blocks.append(value)
    if blocks:
        target = max(blocks)
    else:
        best = _best_blocks(kernel, gpus)
        if not best:
            return None
        target = max(best)
    current = kernel.launch_bounds.max_threads.value if kernel.launch_bounds is not None else None
    if current == target:
        return None
    try:
        fix = set_launch_bounds(document_model(snap), kernel, target)
    except EditError:
        return None
    return _action(snap, Fix(fix.title, fix.edits, "refactor"), [])


def _omp_action(snap: Snapshot, region: OmpRegion, gpus: Sequence[Gpu]) -> lsp.CodeAction | None:
    best = _best_blocks(None, gpus)
    if not best:
        return None
    thread_limit = max(best)
    report = snap.report_for(region)
    num_teams = None
    if report is not None and report.facts.work_items:
        num_teams = max(1, math.ceil(report.facts.work_items / thread_limit))
    current_limit = region.clause("thread_limit")
    current_teams = region.clause("num_teams")
    if (current_limit is not None and current_limit.value is not None and current_limit.value.value == thread_limit
            and (num_teams is None or (current_teams is not None and current_teams.value is not None
                                       and current_teams.value.value == num_teams))):
        return None
    try:
        fix = set_omp_clauses(document_model(snap), region, thread_limit=thread_limit, num_teams=num_teams)
    except EditError:
        return None
    return _action(snap, Fix(fix.title, fix.edits, "refactor"), [])


def _action(snap: Snapshot, fix: Fix, diagnostics: list[lsp.Diagnostic]) -> lsp.CodeAction:
    kind = lsp.CodeActionKind.QuickFix if fix.kind == "quickfix" else lsp.CodeActionKind.RefactorRewrite
    edits = [_text_edit(snap, e) for e in sorted(fix.edits, key=lambda e: e.start_byte)]
    return lsp.CodeAction(
        title=fix.title,
        kind=kind,
        diagnostics=diagnostics or None,
        is_preferred=fix.preferred or None,
        edit=lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=snap.uri, version=snap.version),
            edits=edits,
        )]),
    )


def _text_edit(snap: Snapshot, edit: ByteEdit) -> lsp.TextEdit:
    start = snap.lines.position(edit.start_byte)
    end = snap.lines.position(edit.end_byte)
    return lsp.TextEdit(range=lsp.Range(lsp.Position(start.line, start.character), lsp.Position(end.line, end.character)),
                        new_text=edit.text)


def _matching(diagnostics: Sequence[lsp.Diagnostic], finding: Finding) -> list[lsp.Diagnostic]:
    start = finding.span.start
    return [d for d in diagnostics if d.code == finding.code and d.range.start.line == start.line]


def _dedupe(actions: list[lsp.CodeAction]) -> list[lsp.CodeAction]:
    seen: set[str] = set()
    out = []
    for action in actions:
        if action.title not in seen:
            seen.add(action.title)
            out.append(action)
    return out
