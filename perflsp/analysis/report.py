"""The check result of one file: roofline verdicts per kernel and GPU plus the lint findings.

    result = check_document(data, tree, file_kernels, gpus, CheckSettings(rule_levels=...))

Pure (no I/O): `perflsp check` (text, JSON, SARIF) builds on it and the server can too, so both
agree on what a file's diagnostics are. A verdict is also a `Finding` (`roofline/<verdict>` at
the kernel's name, informational by default), re-levelled or silenced by `[rules]` like a lint.
A kernel the engine fails on gets an `uncertain` verdict naming the failure, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Tree

from perflsp.analysis.fixes import with_fixes
from perflsp.analysis.instantiations import differing_verdicts, gpu_index
from perflsp.analysis.lints import run_lints
from perflsp.analysis.lints.context import LintOptions
from perflsp.analysis.models import Estimate, Finding, InstantiationReport, KernelFacts, KernelReport, OpCounts, Severity
from perflsp.analysis.notes import NoteKind, records, texts
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import MAX_KERNELS_PER_FILE, FileAnalysis, within_ceiling
from perflsp.analysis.roofline_rules import verdict_rule
from perflsp.analysis.rules import SEVERITIES, apply_rule_levels, enabled_codes, rule_doc_url
from perflsp.hardware.models import Gpu
from perflsp.hardware.precision import Precision
from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion, Span
from perflsp.kernels.program import ProgramModel
from perflsp.source.positions import LineIndex

# `--fail-on` levels, most severe first; "none" never fails.
FAIL_ON_LEVELS: tuple[str, ...] = (*SEVERITIES, "none")
_RANK: dict[str, int] = {severity: rank for rank, severity in enumerate(SEVERITIES)}


def at_or_above(severity: str, level: str) -> bool:
    """Whether a finding of `severity` reaches the `--fail-on` level (`none`: never)."""
    if level == "none":
        return False
    return _RANK[severity] <= _RANK[level]


@dataclass(frozen=True)
class CheckSettings:
    rule_levels: Mapping[str, str] = field(default_factory=dict)  # code -> level, from `[rules]`
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    lint_options: LintOptions | None = None
    # build and validate the lint fixes (output that shows them: JSON, SARIF); text output
    # does not, and building costs an edited re-parse per fix
    build_fixes: bool = True
    max_kernels: int = MAX_KERNELS_PER_FILE  # the per-file ceiling (tests lower it)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The roofline verdict of one kernel on one GPU, and the finding that shows it."""

    kernel: KernelReport
    estimate: Estimate
    gpu: Gpu
    finding: Finding | None  # None when its rule is switched off


@dataclass(slots=True)
class FileCheck:
    path: str | None
    lines: LineIndex
    kernels: list[KernelReport] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    lints: list[Finding] = field(default_factory=list)  # after `[rules]` levels
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        """Lint findings and verdict findings, in document order."""
        shown = [v.finding for v in self.verdicts if v.finding is not None]
        return sorted([*self.lints, *shown], key=lambda f: (f.span.start_byte, f.span.end_byte, f.code))


def check_document(data: bytes, tree: Tree, file_kernels: FileKernels, gpus: Sequence[Gpu],
                   settings: CheckSettings = CheckSettings(), lines: LineIndex | None = None, *,
                   model: ProgramModel | None = None) -> FileCheck:
    """The check of one text; `model`: its program model when the caller read it
    (`analysis.reader`), else built from the settings' options on first need."""
    lines = lines or LineIndex(data)
    result = FileCheck(path=file_kernels.path, lines=lines, notes=list(file_kernels.notes))
    if file_kernels.has_errors:
        result.notes.append("the file has syntax errors: kernels near them may be missed or only partly analysed")
    share = within_ceiling(file_kernels, settings.max_kernels)
    if share.note is not None:
        result.notes.append(share.note)
    analysis = FileAnalysis(data, tree, file_kernels, settings.options, lines, model=model)
    for report in analysis.reports(gpus, settings.max_kernels):
        result.kernels.append(report)
        for estimate, gpu in zip(report.estimates, gpus):
            finding = verdict_finding(report, estimate)
            shown = apply_rule_levels([finding], settings.rule_levels)
            result.verdicts.append(Verdict(report, estimate, gpu, shown[0] if shown else None))
    compiled = settings.options.compiled
    if compiled is not None and result.kernels:
        # the fallback named once for the file, where a reader of `check`'s lines sees it (each
        # kernel's evidence says it too)
        result.notes += [f"not compiled for {arch} ({failure}): operations estimated from the source"
                         for arch, failure in compiled.failures.items()]
    model = analysis.model_if_built()  # the lints and their fixes read the file through the same model
    if model is not None:
        lints = run_lints(model, gpus, enabled=enabled_codes(settings.rule_levels), options=settings.lint_options,
                          notes=result.notes, subject=share.kernels)
        if settings.build_fixes:
            lints = _with_fixes_within_ceiling(lints, model, result.notes)
        result.lints = apply_rule_levels(lints, settings.rule_levels)
    else:
        result.notes.append(f"lints not run: the file could not be read ({analysis.failure()})")
    analysis.release()  # the program model holds whole-text indexes
    return result


# Building a fix re-parses the edited file to validate it, so a file's fixes cost its size each.
# The ceiling: at most this many bytes re-parsed per file, i.e. the fixes of the first
# MAX_FIX_REPARSE_BYTES // size findings that offer one (~1,300 for a 50 KB file, 4 for 15 MB).
# A count from the file's size, not a time budget: the output is the same on every machine.
MAX_FIX_REPARSE_BYTES = 64 << 20


def fix_ceiling(size: int) -> int:
    """How many findings of a file of `size` bytes get their fixes built."""
    return max(1, MAX_FIX_REPARSE_BYTES // max(size, 1))


def _with_fixes_within_ceiling(findings: list[Finding], model: ProgramModel, notes: list[str]) -> list[Finding]:
    limit = fix_ceiling(len(model.data))
    asking = [i for i, f in enumerate(findings) if f.fix_requests]
    if len(asking) <= limit:
        return with_fixes(findings, model)
    out = list(findings)
    for i, built in zip(asking[:limit], with_fixes([findings[i] for i in asking[:limit]], model)):
        out[i] = built
    notes.append(f"fixes built for the first {limit:,} of {len(asking):,} findings that offer one: the per-file "
                 f"ceiling is {MAX_FIX_REPARSE_BYTES >> 20} MiB of re-parsed text (an editor builds any fix on request)")
    return out


def kernel_span(kernel: CudaFunction | OmpRegion) -> Span:
    """Where a kernel's verdict is shown: the name of a CUDA kernel, the pragma of a region."""
    return kernel.name_span if isinstance(kernel, CudaFunction) else kernel.span


def shown_precision(estimate: Estimate) -> Precision | None:
    """The precision a one-line summary quotes (see `Estimate.main_precision`)."""
    return estimate.main_precision()


# the assumptions a per-GPU rule makes of the GPU it judges (its name their subject)
PER_GPU_KINDS = frozenset({NoteKind.L2_REUSE, NoteKind.L2_WRITES, NoteKind.LOCAL_MEMORY, NoteKind.OTHER_TRAFFIC})


def verdict_summary(estimate: Estimate, facts: KernelFacts) -> str:
    """`bandwidth-bound on H100 SXM5 80GB · 12 B DRAM per work item · FP32 intensity 0.083 < ridge 20.0 FLOP/B
    · problem size unknown: assumed large ...`: the deciding assumption is named first."""
    if estimate.verdict == "uncertain":
        reason = facts.uncertain or "; ".join(texts(estimate.evidence)) or "the engine could not analyse this kernel"
        return f"uncertain on {estimate.gpu} · {reason}"
    parts = estimate.headline_parts()
    # (the facts are the first GPU's: what a rule assumed of that GPU is not said of another)
    assumptions = [a for a in facts.assumptions if a.kind not in PER_GPU_KINDS or a.subject in (None, estimate.gpu)]
    if assumptions:
        first = assumptions[0]
        more = len(assumptions) - 1
        parts.append(first.summary)
        if more:
            parts.append(f"{more} more assumption{'s' if more > 1 else ''}")
    return " · ".join(parts)


def verdict_finding(report: KernelReport, estimate: Estimate) -> Finding:
    """A verdict as a diagnostic at the kernel, default severity from the rule registry."""
    rule = verdict_rule(estimate.verdict)
    message = verdict_summary(estimate, report.facts)
    if (per_instantiation := differing_verdicts(report, estimate)) is not None:
        message += f" · {per_instantiation}"
    return Finding(code=rule.code, message=message, span=kernel_span(report.kernel),
                   severity=rule.default_severity, kernel=report.name)


def severity_counts(findings: Sequence[Finding]) -> dict[Severity, int]:
    counts: dict[Severity, int] = {s: 0 for s in SEVERITIES}
    for finding in findings:
        counts[finding.severity] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# JSON (the shapes are documented in docs/cli.md)


def file_check_json(check: FileCheck, path: str | None = None) -> dict[str, Any]:
    return {
        "path": path if path is not None else check.path,
        "kernels": [kernel_json(k, [v for v in check.verdicts if v.kernel is k]) for k in check.kernels],
        "findings": [finding_json(f, check.lines) for f in check.findings],
        "notes": list(check.notes),
    }


def kernel_json(report: KernelReport, verdicts: Sequence[Verdict]) -> dict[str, Any]:
    kernel = report.kernel
    facts = report.facts
    return {
        "name": report.name,
        "kind": kernel.kind,
        "line": kernel.line,
        "range": kernel_span(kernel).to_json(),
        "launch_lines": [site.line for site in report.launches],
        "facts": {
            "work_items": json_number(facts.work_items),
            "work_items_note": facts.work_items_note,
            "per_item": _ops_json(facts.per_item),
            "total": _ops_json(facts.total),
            "dram_bytes": json_number(facts.dram_bytes),
            "dram_note": facts.dram_note,
            "loops": [{"line": loop.line, "variable": loop.variable, "trip_count": json_number(loop.trip_count),
                       "origin": loop.origin, "note": loop.note} for loop in facts.loops],
            "assumptions": texts(facts.assumptions),
            "evidence": texts(facts.evidence),
            "assumption_records": records(facts.assumptions),
            "evidence_records": records(facts.evidence),
            "uncertain": facts.uncertain,
        },
        "estimates": [estimate_json(v.estimate, v.gpu, report.facts) for v in verdicts],
        # a template's instantiations (compiled code, else source), each judged; empty when judged once
        "instantiations": [_instantiation_json(report, inst, verdicts) for inst in report.instantiations],
    }


def _instantiation_json(report: KernelReport, inst: InstantiationReport, verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """One instantiation's facts and its estimates on the GPUs of `verdicts` (the report's)."""
    indices = [(gpu_index(report, v.estimate), v.gpu) for v in verdicts]
    shown = [(inst.estimates[i], gpu) for i, gpu in indices if i is not None and i < len(inst.estimates)]
    return {
        "name": inst.label,
        "arguments": list(inst.arguments),
        "facts": {"work_items": json_number(inst.facts.work_items), "total": _ops_json(inst.facts.total),
                  "dram_bytes": json_number(inst.facts.dram_bytes), "assumptions": texts(inst.facts.assumptions),
                  "evidence": texts(inst.facts.evidence)},
        "estimates": [estimate_json(estimate, gpu, inst.facts) for estimate, gpu in shown],
    }


def estimate_json(estimate: Estimate, gpu: Gpu, facts: KernelFacts) -> dict[str, Any]:
    return {
        "gpu": gpu.id,
        "gpu_name": gpu.name,
        "verdict": estimate.verdict,
        "deciding": estimate.deciding.value if estimate.deciding is not None else None,
        # the precision the summary quotes, on every surface (`perflsp.analysis.roof.roof_of`)
        "roof": roof.value if (roof := shown_precision(estimate)) is not None else None,
        "confidence": estimate.confidence,
        "intensity": {p.value: json_number(v) for p, v in estimate.intensity.items()},
        "ridge": {p.value: json_number(v) for p, v in estimate.ridge.items()},
        "occupancy": json_number(estimate.occupancy.occupancy) if estimate.occupancy is not None else None,
        "occupancy_note": estimate.occupancy_note,
        # this GPU's DRAM bytes: the facts' are the first GPU's (L2 sizes differ: `reuse_window`)
        "dram_bytes": json_number(estimate.dram_bytes) if estimate.dram_bytes is not None else None,
        "evidence": texts(estimate.evidence),
        "evidence_records": records(estimate.evidence),
        "to_cross": estimate.to_cross,
        "source": estimate.source,
        "summary": verdict_summary(estimate, facts),
    }


def finding_json(finding: Finding, lines: LineIndex) -> dict[str, Any]:
    start = finding.span.start
    return {
        "code": finding.code,
        "severity": finding.severity,
        "message": finding.message,
        "kernel": finding.kernel,
        "line": start.line + 1,
        "column": start.character + 1,  # 1-based, UTF-16 code units (as LSP and SARIF count)
        "range": finding.span.to_json(),
        "doc_url": rule_doc_url(finding.code),
        "related": [{"range": span.to_json(), "message": message} for span, message in finding.related],
        "fixes": [
            {"title": fix.title, "kind": fix.kind, "preferred": fix.preferred,
             "edits": [{"range": _range_json(lines, e.start_byte, e.end_byte), "new_text": e.text} for e in fix.edits]}
            for fix in finding.fixes
        ],
    }


def _range_json(lines: LineIndex, start_byte: int, end_byte: int) -> dict[str, Any]:
    start, end = lines.position(start_byte), lines.position(end_byte)
    return {"start": {"line": start.line, "character": start.character},
            "end": {"line": end.line, "character": end.character}}


def _ops_json(ops: OpCounts) -> dict[str, float | None]:
    return {name: json_number(getattr(ops, name)) for name in ops.__slots__}


def json_number(value: float | None) -> float | None:
    """JSON has no infinities or NaN: those become null."""
    if value is None or not math.isfinite(value):
        return None
    return value
