"""Diagnostics: one roofline verdict per kernel and GPU, plus the lint findings.

Published (`textDocument/publishDiagnostics`) for every analysed version, or answered to
`textDocument/diagnostic` when the client pulls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from perflsp.kernels.models import LaunchSite, Span
from perflsp.server import engine_adapter as engine
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import (
    SEVERITIES,
    VERDICT_CODES,
    anchor_span,
    kernel_name,
    launch_label,
    shown_verdict,
    to_range,
    verdict_message,
)

if TYPE_CHECKING:
    from cattrs import Converter

SOURCE = "perflsp"
# (the diagnostic's result object, the diagnostic, its JSON); the result object is compared by identity
_Entry = tuple[object, lsp.Diagnostic, dict[str, Any]]


def _description(code: str, cache: dict[str, lsp.CodeDescription | None]) -> lsp.CodeDescription | None:
    if code not in cache:
        url = engine.rule_doc_url(code)
        cache[code] = lsp.CodeDescription(href=url) if url else None
    return cache[code]


class DiagnosticCache:
    """Diagnostics (and their JSON) of results that did not change since the last build: after an
    edit inside one kernel, only that kernel's diagnostics (and those whose position moved) are
    built and serialised again."""

    def __init__(self) -> None:
        self._entries: dict[tuple[object, ...], _Entry] = {}
        self._fresh: dict[tuple[object, ...], _Entry] = {}

    def get(self, key: tuple[object, ...], owner: object) -> lsp.Diagnostic | None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is owner:
            self._fresh[key] = entry
            return entry[1]
        return None

    def put(self, key: tuple[object, ...], owner: object, diagnostic: lsp.Diagnostic) -> None:
        from pygls.protocol import default_converter

        global _CONVERTER
        if _CONVERTER is None:
            _CONVERTER = default_converter()
        self._fresh[key] = (owner, diagnostic, _CONVERTER.unstructure(diagnostic))

    def json(self, diagnostics: list[lsp.Diagnostic]) -> list[dict[str, Any]]:
        by_id = {id(entry[1]): entry[2] for entry in self._fresh.values()}
        return [by_id[id(d)] for d in diagnostics]

    def rotate(self) -> None:
        self._entries, self._fresh = self._fresh, {}


_CONVERTER: Converter | None = None


def _positions(span: Span) -> tuple[int, int, int, int]:
    start, end = span.start, span.end
    return (start.line, start.character, end.line, end.character)


def build(snapshot: Snapshot, cache: DiagnosticCache | None = None) -> list[lsp.Diagnostic]:
    cache = cache or DiagnosticCache()
    settings = snapshot.config.settings
    out: list[lsp.Diagnostic] = []
    descriptions: dict[str, lsp.CodeDescription | None] = {}
    for report in snapshot.reports():
        kernel = report.kernel
        anchor = anchor_span(kernel)
        where = (_positions(anchor), tuple(_positions(site.span) for site in report.launches), snapshot.uri)
        name = kernel_name(kernel)
        levels, codes, extras = [], [], []
        for estimate in report.estimates:
            llm = snapshot.llm_result(name, estimate.gpu)
            measured = snapshot.measured_for(name, estimate.gpu)
            shown, source = shown_verdict(estimate, llm, measured)
            code = VERDICT_CODES.get(shown) or VERDICT_CODES[estimate.verdict]  # an LLM's "latency" has no code
            codes.append((code, source, llm, measured))
            levels.append(settings.rules.get(code) or engine.default_severity(code))
            extras.append((id(llm), snapshot.llm_pending(name, estimate.gpu), id(measured), code))
        key = ("roofline", id(report), where, tuple(levels), tuple(extras))
        cached = [cache.get((*key, i), report) for i in range(len(report.estimates))]
        if all(d is not None for d in cached):
            out.extend(d for d, level in zip(cached, levels) if level != "off")  # type: ignore[misc]
            continue
        rng = to_range(anchor)
        related = [
            lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=snapshot.uri, range=to_range(site.span)),
                message=f"`{site.name}` launched here with {launch_label(site)}",
            )
            for site in report.launches
        ]
        label = snapshot.advice.label if snapshot.advice is not None else None
        for index, (estimate, level) in enumerate(zip(report.estimates, levels)):
            code, source, llm, measured = codes[index]
            pending = label if snapshot.llm_pending(name, estimate.gpu) else None
            data: dict[str, Any] = {"kind": "roofline", "kernel": name, "gpu": estimate.gpu, "source": source,
                                    "static": estimate.verdict}
            if llm is not None:
                data["llm"] = {"verdict": llm.verdict if llm.source == "llm" else None, "label": llm.label,
                               "confidence": llm.confidence, "disagrees": llm.source == "llm" and llm.verdict != estimate.verdict,
                               "fallbackReason": llm.fallback_reason}
            elif pending:
                data["llm"] = {"verdict": None, "label": pending, "pending": True}
            if measured is not None:
                data["measured"] = {"verdict": measured.verdict, "gpu": measured.gpu, "stale": measured.stale}
            diagnostic = lsp.Diagnostic(
                range=rng,
                message=verdict_message(report, estimate, llm, measured, pending),
                severity=SEVERITIES.get(level, lsp.DiagnosticSeverity.Information),
                code=code,
                code_description=_description(code, descriptions),
                source=SOURCE,
                related_information=related or None,
                data=data,
            )
            cache.put((*key, index), report, diagnostic)
            if level != "off":
                out.append(diagnostic)
    note = snapshot.analysis.budget_note
    if note:  # the file's analysis budget ran out: say where the unanalysed part begins
        left = snapshot.analysis.unanalysed
        if left:
            first = min(left, key=lambda item: item.span.start_byte)
            rng = to_range(first.span if isinstance(first, LaunchSite) else anchor_span(first))
        else:
            rng = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
        out.append(lsp.Diagnostic(range=rng, message=note,
                                  severity=lsp.DiagnosticSeverity.Information, source=SOURCE,
                                  data={"kind": "budget", "unanalysed": len(snapshot.analysis.unanalysed)}))
    for finding in snapshot.analysis.findings:
        level = settings.rules.get(finding.code) or finding.severity
        if level == "off":
            continue
        lint_key = ("lint", id(finding), level, _positions(finding.span),
                    tuple(_positions(span) for span, _ in finding.related), snapshot.uri)
        cached_lint = cache.get(lint_key, finding)
        if cached_lint is not None:
            out.append(cached_lint)
            continue
        related = [
            lsp.DiagnosticRelatedInformation(location=lsp.Location(uri=snapshot.uri, range=to_range(span)), message=message)
            for span, message in finding.related
        ]
        diagnostic = lsp.Diagnostic(
            range=to_range(finding.span),
            message=finding.message,
            severity=SEVERITIES.get(level, lsp.DiagnosticSeverity.Warning),
            code=finding.code,
            code_description=_description(finding.code, descriptions),
            source=SOURCE,
            related_information=related or None,
            data={"kind": "lint", "kernel": finding.kernel},
        )
        cache.put(lint_key, finding, diagnostic)
        out.append(diagnostic)
    return out


def full_report(snapshot: Snapshot | None, previous_result_id: str | None) -> lsp.DocumentDiagnosticReport:
    """Answer to a pull (`textDocument/diagnostic`)."""
    if snapshot is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[], result_id="off")
    result_id = f"{snapshot.version}:{id(snapshot)}:{snapshot.revision}"
    if previous_result_id == result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return lsp.RelatedFullDocumentDiagnosticReport(items=snapshot.diagnostics, result_id=result_id)
