"""Code lens above each kernel and OpenMP target region: the roofline headline per GPU
("compute-bound on H100 SXM5 80GB · FP32 intensity 41 ≥ ridge 20.0 FLOP/B · 75% occupancy", with the measured verdict
when results are stored); click for the explanation. Beside it "Explain" (the LLM's, when it is
on) and, when profiling may run, "Profile" (Nsight Compute)."""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.llm.sanitize import inert_text
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import anchor_span, kernel_name, measured_text, to_range

PARTIAL = {"partial": True}  # `data` of the lenses of a partial answer (refreshed when the analysis completes)
TOP = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))


def queued_lenses(uri: str, queued: int) -> list[lsp.CodeLens]:
    """Before the text is even parsed: one lens at the top that says so."""
    others = f" (with {queued - 1} other document{'s' if queued != 2 else ''})" if queued > 1 else ""
    return [lsp.CodeLens(range=TOP, data=PARTIAL, command=lsp.Command(
        title=f"perflsp: queued for analysis{others}; verdicts follow", command="perflsp.status", arguments=[{}]))]


def lenses(snapshot: Snapshot, profiling: bool = False, llm_label: str | None = None) -> list[lsp.CodeLens]:
    if not snapshot.config.settings.code_lens:
        return []
    if snapshot.partial:
        return _partial_lenses(snapshot, profiling, llm_label)
    return _lenses(snapshot, profiling, llm_label)


def _partial_lenses(snapshot: Snapshot, profiling: bool, llm_label: str | None) -> list[lsp.CodeLens]:
    """The first analysis is running: the verdicts known so far, "analysing" on the other kernels,
    and a lens at the top that says how far it is (all marked partial: refreshed when it completes)."""
    items: list[CudaFunction | OmpRegion] = [*snapshot.kernels.kernels, *snapshot.kernels.omp_regions]
    left = snapshot.unanalysed_items()
    title = (f"perflsp: analysing this file ({len(items) - left} of {len(items)} kernels so far); verdicts follow"
             if left else "perflsp: verdicts ready, lint rules still running on this file; findings follow")
    top = lsp.CodeLens(range=TOP, data=PARTIAL, command=lsp.Command(title=title, command="perflsp.status",
                                                                    arguments=[{}]))
    out = [top]
    for lens in _lenses(snapshot, profiling, llm_label):
        lens.data = PARTIAL
        out.append(lens)
    for item in items:
        if snapshot.report_for(item) is None:
            name = kernel_name(item)
            out.append(lsp.CodeLens(range=to_range(anchor_span(item)), data=PARTIAL, command=lsp.Command(
                title=f"analysing `{name}`…", command="perflsp.explainKernel",
                arguments=[{"uri": snapshot.uri, "kernel": name}])))
    return out


def _lenses(snapshot: Snapshot, profiling: bool, llm_label: str | None) -> list[lsp.CodeLens]:
    out: list[lsp.CodeLens] = []
    for report in snapshot.reports():
        if not report.estimates:
            continue
        name = kernel_name(report.kernel)
        parts = []
        for estimate in report.estimates:
            text = estimate.headline()
            measured = snapshot.measured_for(name, estimate.gpu)
            if measured is not None and measured.verdict is not None:
                text += " · " + measured_text(measured)
            parts.append(text)
        arguments = [{"uri": snapshot.uri, "kernel": name}]
        rng = to_range(anchor_span(report.kernel))
        out.append(lsp.CodeLens(range=rng, command=lsp.Command(title=" | ".join(parts), command="perflsp.explainKernel",
                                                               arguments=arguments)))
        if llm_label:
            out.append(lsp.CodeLens(range=rng, command=lsp.Command(title=f"Explain ({inert_text(llm_label)})",
                                                                   command="perflsp.explainKernel", arguments=arguments)))
        if profiling:
            out.append(lsp.CodeLens(range=rng, command=lsp.Command(title="Profile", command="perflsp.profileKernel",
                                                                   arguments=arguments)))
    return out
