"""Diagnostics: one roofline verdict per kernel and GPU, plus the lint findings.

Published (`textDocument/publishDiagnostics`) for every analysed version, or answered to
`textDocument/diagnostic` when the client pulls.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate, compress, count

from lsprotocol import types as lsp

from perflsp.analysis.models import Finding, KernelReport
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
from perflsp.server.json_types import JsonObject, JsonValue, lsp_json_object
from perflsp.source.positions import Position

SOURCE = "perflsp"
# (the diagnostic's result object, the diagnostic, its JSON); the result object is compared by identity
_Entry = tuple[object, lsp.Diagnostic, JsonObject]


def _description(code: str, cache: dict[str, lsp.CodeDescription | None]) -> lsp.CodeDescription | None:
    if code not in cache:
        url = engine.rule_doc_url(code)
        cache[code] = lsp.CodeDescription(href=url) if url else None
    return cache[code]


class DiagnosticCache:
    """Diagnostics (and their JSON) of results that did not change since the last build: after an
    edit inside one kernel, only that kernel's diagnostics (and those whose position moved) are
    built and serialised again.

    Two levels: `memo_table` answers per result object (a report or a finding) from what its
    diagnostics were built from (the result, the configuration, the Position objects of its
    spans): spans keep their Position objects while their line and column stand (edits elsewhere
    move them in place), so an identity check finds the unchanged ones without looking anything
    up. Otherwise `get` answers per diagnostic from a key of values (positions, levels).

    Entries persist from build to build (no per-build copy: a build of a thousand unchanged
    kernels is a thousand lookups) and are swept when the owners gone outnumber the live ones.
    Each entry holds its owner, so an id in the tables cannot belong to a newer object."""

    def __init__(self) -> None:
        self._entries: dict[tuple[object, ...], _Entry] = {}
        # id(owner) -> (basis, its diagnostics, their JSON in the same order)
        self._memo: dict[int, tuple[tuple[object, ...], list[lsp.Diagnostic], list[JsonObject]]] = {}
        self._built: tuple[list[lsp.Diagnostic], list[JsonObject]] | None = None  # the last build
        self.verdicts: _Verdicts | None = None  # the last build's verdicts (`_verdicts`)

    def memo_table(self) -> dict[int, tuple[tuple[object, ...], list[lsp.Diagnostic], list[JsonObject]]]:
        """id(owner) -> (the basis its diagnostics were built from, the diagnostics, their JSON)."""
        return self._memo

    def moved(self, owner: object, basis: tuple[object, ...], rng: lsp.Range,
              related: list[lsp.Range]) -> tuple[list[lsp.Diagnostic], list[JsonObject]] | None:
        """The last diagnostics of `owner`, moved to `rng` (and their related information to
        `related`), when only positions changed since: the same result object and configuration
        (`basis` starts with them; in plain mode nothing else decides). An edit that adds a line
        moves every diagnostic after it: this saves building their messages and JSON again."""
        entry = self._memo.get(id(owner))
        if entry is None or entry[0][:2] != basis[:2]:
            return None
        out: list[lsp.Diagnostic] = []
        out_json: list[JsonObject] = []
        for diagnostic, as_json in zip(entry[1], entry[2]):
            infos = diagnostic.related_information or []
            if len(infos) != len(related):
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
                    {**info_json, "location": {"uri": info.location.uri, "range": _range_json(r)}}
                    for info_json, info, r in zip(_json_objects(as_json["relatedInformation"]), moved_infos, related)]
            out.append(moved)
            out_json.append(moved_json)
        self.remember(owner, basis, out, out_json)
        return out, out_json

    def remember(self, owner: object, basis: tuple[object, ...], diagnostics: list[lsp.Diagnostic],
                 as_json: list[JsonObject]) -> None:
        self._memo[id(owner)] = (basis, diagnostics, as_json)

    def get(self, key: tuple[object, ...], owner: object) -> tuple[lsp.Diagnostic, JsonObject] | None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is owner:
            return entry[1], entry[2]
        return None

    def put(self, key: tuple[object, ...], owner: object, diagnostic: lsp.Diagnostic) -> JsonObject:
        """Keep `diagnostic` under `key`; its JSON."""
        entry = (owner, diagnostic, lsp_json_object(diagnostic))
        self._entries[key] = entry
        return entry[2]

    def finish(self, items: list[lsp.Diagnostic], as_json: list[JsonObject], owners: list[object]) -> None:
        """End a build: remember its output (`json`), and sweep the entries of owners gone once
        they outnumber the build's `owners`."""
        self._built = (items, as_json)
        if len(self._memo) > 2 * len(owners) + 64 or len(self._entries) > 4 * len(owners) + 256:
            live = {id(o) for o in owners}
            self._memo = {k: v for k, v in self._memo.items() if k in live}
            self._entries = {k: v for k, v in self._entries.items() if id(v[0]) in live}

    def json(self, diagnostics: list[lsp.Diagnostic]) -> list[JsonObject]:
        """The JSON of a build's output (`diagnostics` is the list `build` returned)."""
        if self._built is not None and self._built[0] is diagnostics:
            return self._built[1]
        return [lsp_json_object(d) for d in diagnostics]


def _json_objects(value: JsonValue) -> list[Mapping[str, JsonValue]]:
    """The objects of a JSON array the converter wrote (a diagnostic's `relatedInformation`)."""
    assert isinstance(value, list)
    return [item for item in value if isinstance(item, Mapping)]


def _range_json(rng: lsp.Range) -> dict[str, dict[str, int]]:
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


def _positions(span: Span) -> tuple[int, int, int, int]:
    start, end = span.start, span.end
    return (start.line, start.character, end.line, end.character)


def build(snapshot: Snapshot, cache: DiagnosticCache | None = None) -> list[lsp.Diagnostic]:
    """The snapshot's diagnostics; their JSON is `cache.json(result)`."""
    cache = cache or DiagnosticCache()
    descriptions: dict[str, lsp.CodeDescription | None] = {}
    plain = snapshot.advice is None and snapshot.measured is None  # nothing but the result decides
    reports = snapshot.reports()
    config = snapshot.config
    out, out_json = _verdicts(snapshot, cache, reports, plain, descriptions)
    note = snapshot.analysis.budget_note
    if note:  # the file's analysis budget ran out: say where the unanalysed part begins
        left = snapshot.analysis.unanalysed
        if left:
            first = min(left, key=lambda item: item.span.start_byte)
            rng = to_range(first.span if isinstance(first, LaunchSite) else anchor_span(first))
        else:
            rng = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
        budget = lsp.Diagnostic(range=rng, message=note, severity=lsp.DiagnosticSeverity.Information, source=SOURCE,
                                data={"kind": "budget", "unanalysed": len(snapshot.analysis.unanalysed)})
        out.append(budget)
        out_json.append(lsp_json_object(budget))
    findings = snapshot.analysis.findings
    memo_get = cache.memo_table().get
    for finding in findings:
        span = finding.span
        lint_basis = (finding, config, span.start, span.end,
                      *(p for related, _ in finding.related for p in (related.start, related.end)))
        entry = memo_get(id(finding))
        known = (entry[1], entry[2]) if entry is not None and entry[0] == lint_basis else cache.moved(
            finding, lint_basis, to_range(span), [to_range(related) for related, _ in finding.related])
        if known is not None:
            out.extend(known[0])
            out_json.extend(known[1])
            continue
        built, built_json = _finding_diagnostics(snapshot, cache, finding, descriptions)
        cache.remember(finding, lint_basis, built, built_json)
        out.extend(built)
        out_json.extend(built_json)
    cache.finish(out, out_json, [*reports, *findings])
    return out


# a kernel's verdicts are shown at its name (`anchor_span`): its positions, read in C (None
# where not computed since an edit moved it: then it differs from the last build's)
_NAME_POSITIONS = Span.known_positions("kernel.name_span")


@dataclass(frozen=True, slots=True)
class _Verdicts:
    """One build's verdict diagnostics, by report: report `i`'s are `out[offsets[i]:offsets[i + 1]]`."""

    config: object
    reports: list[KernelReport]  # (held: an id in a newer build's list cannot be one of these reused)
    where: list[tuple[Position | None, Position | None]]  # each report's name positions
    launched: set[int]  # the indices of reports with launch sites (their positions are checked too)
    lengths: list[int]
    offsets: list[int]
    out: list[lsp.Diagnostic]
    out_json: list[JsonObject]


def _verdicts(snapshot: Snapshot, cache: DiagnosticCache, reports: list[KernelReport], plain: bool,
              descriptions: dict[str, lsp.CodeDescription | None]
              ) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
    """Every report's verdict diagnostics, and their JSON. After an edit in one kernel of a large
    file the reports are the last build's but one, at the same positions: the runs of unchanged
    ones are copied from the last build as slices, found with C-level comparisons, and only the
    others (and the launched kernels, whose launch sites may have moved) are looked at one by one."""
    last = cache.verdicts
    by_name = plain and not snapshot.kernels.omp_regions  # (an OpenMP region's verdict is at its pragma)
    if not by_name or last is None or last.config is not snapshot.config or len(last.reports) != len(reports):
        out: list[lsp.Diagnostic] = []
        out_json: list[JsonObject] = []
        lengths = []
        for report in reports:
            built, built_json = _report_segment(snapshot, cache, report, plain, descriptions)
            out.extend(built)
            out_json.extend(built_json)
            lengths.append(len(built))
        launched = {i for i, report in enumerate(reports) if report.launches} if by_name else set()
        where = list(map(_NAME_POSITIONS, reports)) if by_name else []  # (computed by the build)
    else:
        where = list(map(_NAME_POSITIONS, reports))
        unchanged = map(operator.and_, map(operator.is_, reports, last.reports), map(operator.eq, where, last.where))
        changed = set(compress(count(), map(operator.not_, unchanged)))
        recheck = sorted(changed | last.launched)
        launched = (last.launched - changed) | {i for i in changed if reports[i].launches}
        out, out_json, lengths = [], [], list(last.lengths)
        copied = 0  # reports before this index are in `out`
        for i in recheck:
            out.extend(last.out[last.offsets[copied]:last.offsets[i]])
            out_json.extend(last.out_json[last.offsets[copied]:last.offsets[i]])
            built, built_json = _report_segment(snapshot, cache, reports[i], plain, descriptions)
            out.extend(built)
            out_json.extend(built_json)
            lengths[i] = len(built)
            where[i] = _NAME_POSITIONS(reports[i])
            copied = i + 1
        out.extend(last.out[last.offsets[copied]:])
        out_json.extend(last.out_json[last.offsets[copied]:])
    cache.verdicts = _Verdicts(snapshot.config, reports, where, launched, lengths,
                               list(accumulate(lengths, initial=0)), out, out_json) if by_name else None
    return list(out), list(out_json)


def _report_segment(snapshot: Snapshot, cache: DiagnosticCache, report: KernelReport, plain: bool,
                    descriptions: dict[str, lsp.CodeDescription | None]
                    ) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
    """One report's verdict diagnostics and their JSON: the last ones when the report, the
    configuration and the positions are the same (moved when only positions changed), else
    built (`_report_diagnostics`)."""
    kernel = report.kernel
    anchor = anchor_span(kernel)
    basis: tuple[object, ...] = ()
    config = snapshot.config
    if plain:
        entry = cache.memo_table().get(id(report))
        basis = (report, config, anchor.start, anchor.end)
        if report.launches:
            basis += tuple(p for site in report.launches for p in (site.span.start, site.span.end))
        if entry is not None and entry[0] == basis:
            return entry[1], entry[2]
        known = cache.moved(report, basis, to_range(anchor), [to_range(site.span) for site in report.launches])
        if known is not None:
            return known
    built, built_json = _report_diagnostics(snapshot, cache, report, anchor, descriptions)
    if plain:
        cache.remember(report, basis, built, built_json)
    return built, built_json


def _report_diagnostics(snapshot: Snapshot, cache: DiagnosticCache, report: KernelReport, anchor: Span,
                        descriptions: dict[str, lsp.CodeDescription | None]
                        ) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
    """A report's verdict diagnostics (one per GPU whose level is not "off"), and their JSON."""
    out: list[lsp.Diagnostic] = []
    out_json: list[JsonObject] = []
    settings = snapshot.config.settings
    kernel = report.kernel
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
    if all(c is not None for c in cached):
        for pair, level in zip(cached, levels):
            if pair is not None and level != "off":
                out.append(pair[0])
                out_json.append(pair[1])
        return out, out_json
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
        data: JsonObject = {"kind": "roofline", "kernel": name, "gpu": estimate.gpu, "source": source,
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
        as_json = cache.put((*key, index), report, diagnostic)
        if level != "off":
            out.append(diagnostic)
            out_json.append(as_json)
    return out, out_json


def _finding_diagnostics(snapshot: Snapshot, cache: DiagnosticCache, finding: Finding,
                         descriptions: dict[str, lsp.CodeDescription | None]
                         ) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
    """A lint finding's diagnostic (none when its level is "off"), and its JSON."""
    level = snapshot.config.settings.rules.get(finding.code) or finding.severity
    if level == "off":
        return [], []
    lint_key = ("lint", id(finding), level, _positions(finding.span),
                tuple(_positions(span) for span, _ in finding.related), snapshot.uri)
    cached = cache.get(lint_key, finding)
    if cached is not None:
        return [cached[0]], [cached[1]]
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
    return [diagnostic], [cache.put(lint_key, finding, diagnostic)]


def full_report(snapshot: Snapshot | None, previous_result_id: str | None) -> lsp.DocumentDiagnosticReport:
    """Answer to a pull (`textDocument/diagnostic`)."""
    if snapshot is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[], result_id="off")
    result_id = f"{snapshot.version}:{id(snapshot)}:{snapshot.revision}"
    if previous_result_id == result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return lsp.RelatedFullDocumentDiagnosticReport(items=snapshot.diagnostics, result_id=result_id)


def partial_report(version: int | None, items: list[lsp.Diagnostic]) -> lsp.DocumentDiagnosticReport:
    """Answer to a pull while the newest version's analysis is not complete: what is known (the
    newest diagnostics built). Its `resultId` is never reported unchanged; the server sends
    `workspace/diagnostic/refresh` once the complete analysis is there."""
    return lsp.RelatedFullDocumentDiagnosticReport(items=items, result_id=f"partial:{version}:{next(_PARTIAL_IDS)}")


_PARTIAL_IDS = itertools.count(1)
