"""Shared helpers of the LSP features: spans to ranges, kernel names, verdict wording."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.models import Estimate, KernelReport
from perflsp.analysis.roofline_rules import verdict_rule
from perflsp.hardware.precision import Precision
from perflsp.kernels.models import CudaFunction, LaunchSite, OmpRegion, Span

if TYPE_CHECKING:
    from perflsp.llm.advisor import AdvisorResult
    from perflsp.profiling.measured import MeasuredEvidence

LABELS = {Precision.FP64: "FP64", Precision.FP32: "FP32", Precision.FP16: "FP16", Precision.INT32: "INT32"}
VERDICT_CODES = {verdict: verdict_rule(verdict).code for verdict in ("compute", "bandwidth", "uncertain")}
SEVERITIES = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
              "information": lsp.DiagnosticSeverity.Information, "hint": lsp.DiagnosticSeverity.Hint}


def to_range(span: Span) -> lsp.Range:
    start, end = span.start, span.end
    return lsp.Range(lsp.Position(start.line, start.character), lsp.Position(end.line, end.character))


def kernel_name(kernel: CudaFunction | OmpRegion) -> str:
    return kernel.qualified_name if isinstance(kernel, CudaFunction) else kernel.name


def anchor_span(kernel: CudaFunction | OmpRegion) -> Span:
    """Where a kernel's verdict is shown: its name, or an OpenMP region's pragma."""
    return kernel.name_span if isinstance(kernel, CudaFunction) else kernel.span


def unit(precision: Precision | None) -> str:
    return "op/B" if precision == Precision.INT32 else "FLOP/B"


def number(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2g}"


def closest_precision(estimate: Estimate) -> Precision | None:
    """The deciding precision, or for a bandwidth-bound kernel the one nearest its ridge."""
    if estimate.deciding is not None:
        return estimate.deciding
    ratios = {p: estimate.intensity[p] / r for p, r in estimate.ridge.items() if r and p in estimate.intensity}
    if not ratios:
        return None
    return max(ratios, key=lambda p: ratios[p])


def intensity_vs_ridge(estimate: Estimate) -> str:
    precision = closest_precision(estimate)
    if precision is None:
        return "no intensity known"
    ai = estimate.intensity.get(precision, 0.0)
    ridge = estimate.ridge.get(precision)
    if ridge is None:
        return f"{LABELS.get(precision, precision.value)} intensity {number(ai)} {unit(precision)}"
    relation = "≥" if ai >= ridge else "<"
    return f"{LABELS.get(precision, precision.value)} intensity {number(ai)} {relation} ridge {number(ridge)} {unit(precision)}"


def occupancy_text(estimate: Estimate) -> str | None:
    occ = estimate.occupancy
    if occ is None:
        return None
    return f"{occ.occupancy:.0%} occupancy (limited by {occ.limiter.value.replace('_', ' ')})"


def _kind(verdict: str | None) -> str:
    return {"compute": "compute-bound", "bandwidth": "bandwidth-bound", "latency": "latency-bound"}.get(
        verdict or "", "uncertain")


def deciding_precision(evidence: MeasuredEvidence) -> Precision | None:
    """The precision that decided a measured verdict, or the one nearest its ridge."""
    if evidence.deciding_precision is not None:
        return evidence.deciding_precision
    ratios = {p: v / evidence.ridge[p] for p, v in evidence.intensity.items()
              if evidence.ridge.get(p) and math.isfinite(v)}
    return max(ratios, key=lambda p: ratios[p]) if ratios else None


def measured_vs_ridge(measured: MeasuredEvidence) -> str:
    """`FP32 intensity 38 ≥ ridge 33 FLOP/B` of a measurement (its deciding or nearest precision)."""
    precision = deciding_precision(measured)
    if precision is None:
        return "no intensity measured"
    ai = measured.intensity.get(precision, 0.0)
    ridge = measured.ridge.get(precision)
    label = LABELS.get(precision, precision.value)
    shown = "∞" if math.isinf(ai) else number(ai)
    if not ridge:
        return f"{label} intensity {shown} {unit(precision)}"
    return f"{label} intensity {shown} {'≥' if ai >= ridge else '<'} ridge {number(ridge)} {unit(precision)}"


def shown_verdict(estimate: Estimate, llm: AdvisorResult | None = None,
                  measured: MeasuredEvidence | None = None) -> tuple[str, str]:
    """(verdict, source) a diagnostic leads with: a current measurement, else the LLM's answer,
    else the static estimate."""
    if measured is not None and not measured.stale and measured.verdict is not None:
        return measured.verdict, "measured"
    if llm is not None and llm.source == "llm":
        return llm.verdict, "llm"
    return estimate.verdict, "static"


def verdict_message(report: KernelReport, estimate: Estimate, llm: AdvisorResult | None = None,
                    measured: MeasuredEvidence | None = None, pending: str | None = None) -> str:
    """The verdict diagnostic's text, saying whose verdict it is.

    `llm`: the advisor's AdvisorResult (an answer, or a static fallback); `pending`: the label of
    an LLM still being asked; `measured`: MeasuredEvidence of this kernel on this GPU."""
    name = kernel_name(report.kernel)
    occ = occupancy_text(estimate)
    if estimate.verdict == "uncertain":
        why = estimate.evidence[0] if estimate.evidence else "the engine could not analyse it"
        static = f"the static estimate is uncertain: {why}"
    else:
        static = f"predicted {estimate.verdict}-bound: {intensity_vs_ridge(estimate)}" + (f" · {occ}" if occ else "")
    fresh = measured if measured is not None and not measured.stale and measured.verdict is not None else None
    answer = llm if llm is not None and llm.source == "llm" else None
    if fresh is not None:
        text = (f"`{name}` on {estimate.gpu}: measured {_kind(fresh.verdict)} ({measured_vs_ridge(fresh)}), "
                f"{static}")
    elif answer is not None and (answer.verdict != estimate.verdict or estimate.verdict == "uncertain"):
        text = (f"`{name}` is {_kind(answer.verdict)} on {estimate.gpu} according to {answer.label} "
                f"(confidence {answer.confidence:.0%}), which disagrees with the static estimate: {static}")
    elif estimate.verdict == "uncertain":
        why = estimate.evidence[0] if estimate.evidence else "the engine could not analyse it"
        text = f"`{name}`: roofline verdict uncertain on {estimate.gpu}: {why}"
    else:
        parts = [f"`{name}` is {estimate.verdict}-bound on {estimate.gpu}: {intensity_vs_ridge(estimate)}"]
        if occ:
            parts.append(occ)
        text = " · ".join(parts)
    notes = []
    if measured is not None and fresh is None:
        if measured.verdict is None:
            notes.append(f"measured on {measured.gpu}: no verdict ({'; '.join(measured.notes)})")
        else:
            notes.append(f"measured before the last edit (stale): {_kind(measured.verdict)} "
                         f"({measured_vs_ridge(measured)})")
    if answer is not None:
        if fresh is not None:
            notes.append(f"{answer.label} says {_kind(answer.verdict)} ({answer.confidence:.0%})")
        elif answer.verdict == estimate.verdict:
            notes.append(f"{answer.label} agrees ({answer.confidence:.0%})")
    elif llm is not None:
        notes.append("static estimate (no LLM answer: see the hover)")
    elif pending:
        notes.append(f"static estimate; asking {pending}")
    return text + "".join(f" · {n}" for n in notes)


def short_verdict(estimate: Estimate) -> str:
    return {"compute": "compute-bound", "bandwidth": "bandwidth-bound"}.get(estimate.verdict, "uncertain")


def launch_label(site: LaunchSite) -> str:
    grid = site.grid.text.strip() or "?"
    block = site.block.text.strip() or "?"
    return f"<<<{grid}, {block}>>>"
