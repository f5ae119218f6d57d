"""Shared helpers of the LSP features: spans to ranges, kernel names, verdict wording."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.instantiations import differing_verdicts
from perflsp.analysis.models import Estimate, KernelReport
from perflsp.analysis.roof import roof_of, roof_summary
from perflsp.analysis.roofline_rules import verdict_rule
from perflsp.hardware.precision import Precision
from perflsp.kernels.models import CudaFunction, LaunchSite, OmpRegion, Span

if TYPE_CHECKING:
    from perflsp.kernels.program import ProgramModel
    from perflsp.llm.advisor import AdvisorResult
    from perflsp.profiling.measured import MeasuredEvidence
    from perflsp.server.documents import Snapshot

VERDICT_CODES = {verdict: verdict_rule(verdict).code for verdict in ("compute", "bandwidth", "uncertain")}
SEVERITIES = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning,
              "information": lsp.DiagnosticSeverity.Information, "hint": lsp.DiagnosticSeverity.Hint}


# the last model built for a snapshot that carries none: a code-action request builds every fix
# of a snapshot over one model
_last_model: tuple[bytes, object, ProgramModel] | None = None


def document_model(snap: Snapshot) -> ProgramModel:
    """The program model of a snapshot's text (its constants, kernels and launch sites), which
    the fix builders and the tuning problem read: the one its analysis reads (`Snapshot.model`);
    for a snapshot made without its text's state (the first publication of a large file's top),
    one built through the pipeline's `AnalysisUnit` with the snapshot's preprocessor view."""
    if snap.model is not None:
        return snap.model
    global _last_model
    last = _last_model
    if last is not None and last[0] is snap.data and last[1] is snap.kernels:
        return last[2]
    from perflsp.server import engine_adapter

    model = engine_adapter.snapshot_model(snap.data, snap.tree, snap.kernels, snap.preprocessed, snap.lines)
    _last_model = (snap.data, snap.kernels, model)
    return model


def to_range(span: Span) -> lsp.Range:
    start, end = span.start, span.end
    return lsp.Range(lsp.Position(start.line, start.character), lsp.Position(end.line, end.character))


def kernel_name(kernel: CudaFunction | OmpRegion) -> str:
    return kernel.qualified_name if isinstance(kernel, CudaFunction) else kernel.name


def anchor_span(kernel: CudaFunction | OmpRegion) -> Span:
    """Where a kernel's verdict is shown: its name, or an OpenMP region's pragma."""
    return kernel.name_span if isinstance(kernel, CudaFunction) else kernel.span


def closest_precision(estimate: Estimate) -> Precision | None:
    """The precision a static verdict is quoted with (`perflsp.analysis.roof.roof_of`): the same
    one on every surface."""
    return roof_of(estimate.deciding, estimate.intensity, estimate.ridge)


def intensity_vs_ridge(estimate: Estimate) -> str:
    """`FP32 intensity 0.17 < ridge 20.0 FLOP/B` of an estimate, as the code lens and `perflsp check` quote it."""
    return roof_summary(estimate.deciding, estimate.intensity, estimate.ridge) or "no intensity known"


def occupancy_text(estimate: Estimate) -> str | None:
    occ = estimate.occupancy
    if occ is None:
        return None
    return f"{occ.occupancy:.0%} occupancy (limited by {occ.limiter.value.replace('_', ' ')})"


def _kind(verdict: str | None) -> str:
    return {"compute": "compute-bound", "bandwidth": "bandwidth-bound", "latency": "latency-bound"}.get(
        verdict or "", "uncertain")


def deciding_precision(evidence: MeasuredEvidence) -> Precision | None:
    """The precision a measured verdict is quoted with: chosen as a static one's (`roof_of`)."""
    return roof_of(evidence.deciding_precision, evidence.intensity, evidence.ridge)


def measured_vs_ridge(measured: MeasuredEvidence) -> str:
    """`FP32 intensity 38 ≥ ridge 33 FLOP/B` of a measurement, written as a static estimate's."""
    return roof_summary(measured.deciding_precision, measured.intensity, measured.ridge) or "no intensity measured"


def measured_text(measured: MeasuredEvidence) -> str:
    """`measured bandwidth-bound (FP32 intensity 0.17 < ridge 20.0 FLOP/B)`, `(stale)` after an
    edit of the kernel: how the lens and inlay hints label a stored measurement."""
    return (f"measured {_kind(measured.verdict)} ({measured_vs_ridge(measured)})"
            + (" (stale)" if measured.stale else ""))


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
        why = estimate.evidence[0].text if estimate.evidence else "the engine could not analyse it"
        static = f"the static estimate is uncertain: {why}"
    else:
        static = f"predicted {estimate.verdict}-bound: {intensity_vs_ridge(estimate)}" + (f" · {occ}" if occ else "")
    fresh = measured if measured is not None and not measured.stale and measured.verdict is not None else None
    answer = llm if llm is not None and llm.source == "llm" else None
    if fresh is not None:
        text = (f"`{name}` on {estimate.gpu}: measured {_kind(fresh.verdict)} ({measured_vs_ridge(fresh)}), "
                f"{static}")
    elif answer is not None and answer.verdict != estimate.verdict:  # (an answer is never "uncertain")
        text = (f"`{name}` is {_kind(answer.verdict)} on {estimate.gpu} according to {answer.label} "
                f"(confidence {answer.confidence:.0%}), which disagrees with the static estimate: {static}")
    elif estimate.verdict == "uncertain":
        why = estimate.evidence[0].text if estimate.evidence else "the engine could not analyse it"
        text = f"`{name}`: roofline verdict uncertain on {estimate.gpu}: {why}"
    else:
        parts = [f"`{name}` is {estimate.verdict}-bound on {estimate.gpu}: {intensity_vs_ridge(estimate)}"]
        if occ:
            parts.append(occ)
        text = " · ".join(parts)
    if (per_instantiation := differing_verdicts(report, estimate)) is not None:
        text += f" · {per_instantiation}"
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
