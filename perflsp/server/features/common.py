"""Shared helpers of the LSP features: spans to ranges, kernel names, verdict wording."""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.analysis.models import Estimate, KernelReport
from perflsp.hardware.precision import Precision
from perflsp.kernels.models import CudaFunction, LaunchSite, OmpRegion, Span

LABELS = {Precision.FP64: "FP64", Precision.FP32: "FP32", Precision.FP16: "FP16", Precision.INT32: "INT32"}
VERDICT_CODES = {"compute": "roofline/compute-bound", "bandwidth": "roofline/bandwidth-bound",
                 "uncertain": "roofline/uncertain"}
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


def verdict_message(report: KernelReport, estimate: Estimate) -> str:
    name = kernel_name(report.kernel)
    if estimate.verdict == "uncertain":
        why = estimate.evidence[0] if estimate.evidence else "the engine could not analyse it"
        return f"`{name}`: roofline verdict uncertain on {estimate.gpu}: {why}"
    parts = [f"`{name}` is {estimate.verdict}-bound on {estimate.gpu}: {intensity_vs_ridge(estimate)}"]
    occ = occupancy_text(estimate)
    if occ:
        parts.append(occ)
    return " · ".join(parts)


def short_verdict(estimate: Estimate) -> str:
    return {"compute": "compute-bound", "bandwidth": "bandwidth-bound"}.get(estimate.verdict, "uncertain")


def launch_label(site: LaunchSite) -> str:
    grid = site.grid.text.strip() or "?"
    block = site.block.text.strip() or "?"
    return f"<<<{grid}, {block}>>>"
