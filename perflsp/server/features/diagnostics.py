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
    built and serialised again.

    Two levels: `memo` answers per result object (a report or a finding) from what its
    diagnostics were built from (the result, the configuration, the Position objects of its
    spans): spans keep their Position objects while their line and column stand (edits elsewhere
    move them in place), so an identity check finds the unchanged ones without looking anything
    up. Otherwise `get` answers per diagnostic from a key of values (positions, levels)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[object, ...], _Entry] = {}
        self._fresh: dict[tuple[object, ...], _Entry] = {}
        # id(owner) -> (basis, its diagnostics, their JSON by id)
        self._memo: dict[int, tuple[tuple[object, ...], list[lsp.Diagnostic], dict[int, dict[str, Any]]]] = {}
        self._memo_fresh: dict[int, tuple[tuple[object, ...], list[lsp.Diagnostic], dict[int, dict[str, Any]]]] = {}
        self._json: dict[int, dict[str, Any]] = {}  # id(diagnostic) -> its JSON, of the last build
        self._json_fresh: dict[int, dict[str, Any]] = {}

    def memo(self, owner: object, basis: tuple[object, ...]) -> list[lsp.Diagnostic] | None:
        entry = self._memo.get(id(owner))
        # (tuples compare item by item, identity first: the same objects cost no field compare;
        # equal positions in new objects give the same diagnostics, so they count as the same)
        if entry is None or entry[0] != basis:
            return None
        self._json_fresh.update(entry[2])
        self._memo_fresh[id(owner)] = entry
        return entry[1]

    def moved(self, owner: object, basis: tuple[object, ...], rng: lsp.Range,
              related: list[lsp.Range]) -> list[lsp.Diagnostic] | None:
        """The last diagnostics of `owner`, moved to `rng` (and their related information to
        `related`), when only positions changed since: the same result object and configuration
        (`basis` starts with them; in plain mode nothing else decides). An edit that adds a line
        moves every diagnostic after it: this saves building their messages and JSON again."""
        entry = self._memo.get(id(owner))
        if entry is None or entry[0][:2] != basis[:2]:
            return None
        old_diagnostics, old_json = entry[1], entry[2]
        out: list[lsp.Diagnostic] = []
        for diagnostic in old_diagnostics:
            infos = diagnostic.related_information or []
            as_json = old_json.get(id(diagnostic))
            if len(infos) != len(related) or as_json is None:
                return None
            moved_infos = [lsp.DiagnosticRelatedInformation(location=lsp.Location(uri=info.location.uri, range=r),
                                                            message=info.message)
                           for info, r in zip(infos, related)]
            moved = lsp.Diagnostic(range=rng, message=diagnostic.message, severity=diagnostic.severity,
                                   code=diagnostic.code, code_description=diagnostic.code_description,
                                   source=diagnostic.source, tags=diagnostic.tags,
                                   related_information=moved_infos or None, data=diagnostic.data)
            moved_json = dict(as_json, range=_range_json(rng))
            if moved_infos:
                moved_json["relatedInformation"] = [
                    dict(info_json, location={"uri": info.location.uri, "range": _range_json(r)})
                    for info_json, info, r in zip(as_json["relatedInformation"], moved_infos, related)]
            self._json_fresh[id(moved)] = moved_json
            out.append(moved)
        self.remember(owner, basis, out)
        return out

    def remember(self, owner: object, basis: tuple[object, ...], diagnostics: list[lsp.Diagnostic]) -> None:
        fresh = self._json_fresh
        self._memo_fresh[id(owner)] = (basis, diagnostics, {id(d): fresh[id(d)] for d in diagnostics})

    def get(self, key: tuple[object, ...], owner: object) -> lsp.Diagnostic | None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is owner:
            self._fresh[key] = entry
            self._json_fresh[id(entry[1])] = entry[2]
            return entry[1]
        return None

    def put(self, key: tuple[object, ...], owner: object, diagnostic: lsp.Diagnostic) -> None:
        entry = (owner, diagnostic, _converter().unstructure(diagnostic))
        self._fresh[key] = entry
        self._json_fresh[id(diagnostic)] = entry[2]

    def json(self, diagnostics: list[lsp.Diagnostic]) -> list[dict[str, Any]]:
        out = []
        for diagnostic in diagnostics:
            found = self._json_fresh.get(id(diagnostic))
            if found is None:  # not cached (the budget note)
                found = _converter().unstructure(diagnostic)
            out.append(found)
        return out

    def rotate(self) -> None:
        self._entries, self._fresh = self._fresh, {}
        self._memo, self._memo_fresh = self._memo_fresh, {}
        self._json, self._json_fresh = self._json_fresh, {}


_CONVERTER: Converter | None = None


def _converter() -> Converter:
    global _CONVERTER
    if _CONVERTER is None:
        from pygls.protocol import default_converter

        _CONVERTER = default_converter()
    return _CONVERTER


def _range_json(rng: lsp.Range) -> dict[str, dict[str, int]]:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


def _positions(span: Span) -> tuple[int, int, int, int]:
    start, end = span.start, span.end
    return (start.line, start.character, end.line, end.character)


def build(snapshot: Snapshot, cache: DiagnosticCache | None = None) -> list[lsp.Diagnostic]:
    cache = cache or DiagnosticCache()
    settings = snapshot.config.settings
    out: list[lsp.Diagnostic] = []
    descriptions: dict[str, lsp.CodeDescription | None] = {}
    plain = snapshot.advice is None and snapshot.measured is None  # nothing but the result decides
    for report in snapshot.reports():
        kernel = report.kernel
        anchor = anchor_span(kernel)
        basis: tuple[object, ...] = ()
        if plain:
            basis = (report, snapshot.config, anchor.start, anchor.end,
                     *(p for site in report.launches for p in (site.span.start, site.span.end)))
            memo = cache.memo(report, basis) or cache.moved(
                report, basis, to_range(anchor), [to_range(site.span) for site in report.launches])
            if memo is not None:
                out.extend(memo)
                continue
        own_from = len(out)
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
            if plain:
                cache.remember(report, basis, out[own_from:])
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
        if plain:
            cache.remember(report, basis, out[own_from:])
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
        span = finding.span
        lint_basis = (finding, snapshot.config, span.start, span.end,
                      *(p for related, _ in finding.related for p in (related.start, related.end)))
        lint_memo = cache.memo(finding, lint_basis) or cache.moved(
            finding, lint_basis, to_range(span), [to_range(related) for related, _ in finding.related])
        if lint_memo is not None:
            out.extend(lint_memo)
            continue
        level = settings.rules.get(finding.code) or finding.severity
        if level == "off":
            cache.remember(finding, lint_basis, [])
            continue
        lint_key = ("lint", id(finding), level, _positions(finding.span),
                    tuple(_positions(span) for span, _ in finding.related), snapshot.uri)
        cached_lint = cache.get(lint_key, finding)
        if cached_lint is not None:
            out.append(cached_lint)
            cache.remember(finding, lint_basis, [cached_lint])
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
        cache.remember(finding, lint_basis, [diagnostic])
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
