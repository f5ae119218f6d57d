"""SARIF 2.1.0 output of `perflsp check --sarif`, for GitHub code scanning and other viewers.

Every rule of the registry is listed in `tool.driver.rules` (with its documentation address);
lint findings and roofline verdicts become results. Columns count UTF-16 code units, as in LSP
(`columnKind: utf16CodeUnits`); file URIs are relative to a root (`SRCROOT`) when the file lies
under it, absolute `file:` URIs otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perflsp import __version__
from perflsp.analysis.models import Finding
from perflsp.analysis.notes import records, texts
from perflsp.analysis.report import FileCheck, Verdict, json_number
from perflsp.analysis.rules import DOCS_BASE_URL, RULES, rule_doc_url
from perflsp.source.positions import LineIndex

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
ROOT_ID = "SRCROOT"
_LEVELS = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}
_RULE_IDS = list(RULES)


def sarif_level(severity: str) -> str:
    return _LEVELS[severity]


def artifact_uri(path: Path, root: Path) -> tuple[str, str | None]:
    """(uri, uriBaseId): relative to `root` when inside it, else an absolute file URI."""
    resolved = path.resolve()
    try:
        relative = resolved.relative_to(root.resolve())
    except ValueError:
        return resolved.as_uri(), None
    return quote(relative.as_posix()), ROOT_ID


def sarif_log(files: Sequence[tuple[Path, FileCheck]], root: Path, rule_levels: Mapping[str, str] | None = None,
              skipped: Sequence[tuple[Path, str]] = ()) -> dict[str, Any]:
    """The whole log: one run of perflsp over `files` (path on disk, its check result)."""
    rule_levels = rule_levels or {}
    artifacts: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for path, check in files:
        uri, base = artifact_uri(path, root)
        location: dict[str, Any] = {"uri": uri, "index": len(artifacts)}
        if base is not None:
            location["uriBaseId"] = base
        artifacts.append({"location": dict(location), "roles": ["analysisTarget"],
                          "sourceLanguage": "cuda" if path.suffix in (".cu", ".cuh") else "cplusplus"})
        verdict_of = {id(v.finding): v for v in check.verdicts if v.finding is not None}
        for finding in check.findings:
            results.append(_result(finding, location, check.lines, verdict_of.get(id(finding))))
        for note in check.notes:
            notifications.append({"level": "note", "message": {"text": note},
                                  "locations": [{"physicalLocation": {"artifactLocation": dict(location)}}]})
    for path, reason in skipped:
        uri, base = artifact_uri(path, root)
        location = {"uri": uri, **({"uriBaseId": base} if base else {})}
        notifications.append({"level": "warning", "message": {"text": f"skipped: {reason}"},
                              "locations": [{"physicalLocation": {"artifactLocation": location}}]})
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {"driver": _driver(rule_levels)},
        "originalUriBaseIds": {ROOT_ID: {"uri": root.resolve().as_uri().rstrip("/") + "/"}},
        "artifacts": artifacts,
        "invocations": [invocation],
        "results": results,
        "columnKind": "utf16CodeUnits",
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _driver(rule_levels: Mapping[str, str]) -> dict[str, Any]:
    rules = []
    for code in _RULE_IDS:
        info = RULES[code]
        level = rule_levels.get(code, info.default_severity)
        configuration: dict[str, Any] = {"level": sarif_level(info.default_severity if level == "off" else level)}
        if level == "off":
            configuration["enabled"] = False
        url = rule_doc_url(code)
        rules.append({
            "id": code,
            "name": info.name,
            "shortDescription": {"text": info.summary},
            "fullDescription": {"text": info.summary + ("" if not info.has_fix else " (a fix is offered)")},
            "helpUri": url,
            "help": {"text": f"{info.summary}. See {url}", "markdown": f"{info.summary}. [Documentation]({url})"},
            "defaultConfiguration": configuration,
            "properties": {"tags": ["performance", code.split("/", 1)[0]], "kind": info.kind},
        })
    return {
        "name": "perflsp",
        "semanticVersion": __version__,
        "version": __version__,
        "informationUri": DOCS_BASE_URL.split("/blob/", 1)[0],
        "rules": rules,
    }


def _region(lines: LineIndex, start_byte: int, end_byte: int) -> dict[str, int]:
    start, end = lines.position(start_byte), lines.position(end_byte)
    return {"startLine": start.line + 1, "startColumn": start.character + 1,
            "endLine": end.line + 1, "endColumn": end.character + 1}


def _result(finding: Finding, location: dict[str, Any], lines: LineIndex, verdict: Verdict | None) -> dict[str, Any]:
    region = _region(lines, finding.span.start_byte, finding.span.end_byte)
    physical = {"artifactLocation": dict(location), "region": region}
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": _RULE_IDS.index(finding.code),
        "level": sarif_level(finding.severity),
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": physical}],
        "partialFingerprints": {"perflspFinding/v1": _fingerprint(finding, location, lines, verdict)},
    }
    if finding.kernel:
        result["locations"][0]["logicalLocations"] = [{"name": finding.kernel, "kind": "function"}]
    if finding.related:
        result["relatedLocations"] = [
            {"id": i + 1, "message": {"text": message},
             "physicalLocation": {"artifactLocation": dict(location), "region": _region(lines, span.start_byte, span.end_byte)}}
            for i, (span, message) in enumerate(finding.related)
        ]
    if finding.fixes:
        result["fixes"] = [
            {"description": {"text": fix.title},
             "artifactChanges": [{"artifactLocation": dict(location), "replacements": [
                 {"deletedRegion": _region(lines, e.start_byte, e.end_byte), "insertedContent": {"text": e.text}}
                 for e in fix.edits]}]}
            for fix in finding.fixes if fix.edits
        ]
    if verdict is not None:
        estimate = verdict.estimate
        result["properties"] = {
            "gpu": verdict.gpu.id,
            "gpuName": verdict.gpu.name,
            "verdict": estimate.verdict,
            "deciding": estimate.deciding.value if estimate.deciding is not None else None,
            "roof": roof.value if (roof := estimate.main_precision()) is not None else None,
            "confidence": estimate.confidence,
            "intensity": {p.value: json_number(v) for p, v in estimate.intensity.items()},
            "ridge": {p.value: json_number(v) for p, v in estimate.ridge.items()},
            "assumptions": texts(verdict.kernel.facts.assumptions),
            "assumptionRecords": records(verdict.kernel.facts.assumptions),
            "source": estimate.source,
        }
    return result


def _fingerprint(finding: Finding, location: dict[str, Any], lines: LineIndex, verdict: Verdict | None) -> str:
    """Stable across edits elsewhere in the file: rule, file, kernel, GPU, the line's text and
    the flagged text itself (two findings of one rule on one line differ there)."""
    line = lines.line_of(finding.span.start_byte)
    text = lines.data[lines.line_starts[line]:lines.line_end(line)].strip()
    flagged = lines.data[finding.span.start_byte:min(finding.span.end_byte, finding.span.start_byte + 200)]
    key = "\0".join((finding.code, location["uri"], finding.kernel or "", verdict.gpu.id if verdict else "",
                     text.decode("utf-8", errors="replace"), flagged.decode("utf-8", errors="replace")))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
