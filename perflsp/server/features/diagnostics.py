"""Diagnostics: one roofline verdict per kernel and GPU, plus the lint findings.

Published (`textDocument/publishDiagnostics`) for every analysed version, or answered to
`textDocument/diagnostic` when the client pulls.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.server import engine_adapter as engine
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import (
    SEVERITIES,
    VERDICT_CODES,
    anchor_span,
    kernel_name,
    launch_label,
    to_range,
    verdict_message,
)

SOURCE = "perflsp"


def _description(code: str, cache: dict[str, lsp.CodeDescription | None]) -> lsp.CodeDescription | None:
    if code not in cache:
        url = engine.rule_doc_url(code)
        cache[code] = lsp.CodeDescription(href=url) if url else None
    return cache[code]


def build(snapshot: Snapshot) -> list[lsp.Diagnostic]:
    settings = snapshot.config.settings
    out: list[lsp.Diagnostic] = []
    descriptions: dict[str, lsp.CodeDescription | None] = {}
    for report in snapshot.reports():
        kernel = report.kernel
        rng = to_range(anchor_span(kernel))
        related = [
            lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=snapshot.uri, range=to_range(site.span)),
                message=f"`{site.name}` launched here with {launch_label(site)}",
            )
            for site in report.launches
        ]
        for estimate in report.estimates:
            code = VERDICT_CODES[estimate.verdict]
            level = settings.rules.get(code) or engine.default_severity(code)
            if level == "off":
                continue
            out.append(lsp.Diagnostic(
                range=rng,
                message=verdict_message(report, estimate),
                severity=SEVERITIES.get(level, lsp.DiagnosticSeverity.Information),
                code=code,
                code_description=_description(code, descriptions),
                source=SOURCE,
                related_information=related or None,
                data={"kind": "roofline", "kernel": kernel_name(kernel), "gpu": estimate.gpu},
            ))
    for finding in snapshot.analysis.findings:
        level = settings.rules.get(finding.code) or finding.severity
        if level == "off":
            continue
        related = [
            lsp.DiagnosticRelatedInformation(location=lsp.Location(uri=snapshot.uri, range=to_range(span)), message=message)
            for span, message in finding.related
        ]
        out.append(lsp.Diagnostic(
            range=to_range(finding.span),
            message=finding.message,
            severity=SEVERITIES.get(level, lsp.DiagnosticSeverity.Warning),
            code=finding.code,
            code_description=_description(finding.code, descriptions),
            source=SOURCE,
            related_information=related or None,
            data={"kind": "lint", "kernel": finding.kernel},
        ))
    return out


def full_report(snapshot: Snapshot | None, previous_result_id: str | None) -> lsp.DocumentDiagnosticReport:
    """Answer to a pull (`textDocument/diagnostic`)."""
    if snapshot is None:
        return lsp.RelatedFullDocumentDiagnosticReport(items=[], result_id="off")
    result_id = f"{snapshot.version}:{id(snapshot)}"
    if previous_result_id == result_id:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return lsp.RelatedFullDocumentDiagnosticReport(items=snapshot.diagnostics, result_id=result_id)
