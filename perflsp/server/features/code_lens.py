"""Code lens above each kernel and OpenMP target region: the roofline headline per GPU
("compute-bound on H100 SXM5 80GB · FP32 AI 41 FLOP/B · 75% occupancy", with the measured verdict
when results are stored); click for the explanation. Beside it "Explain" (the LLM's, when it is
on) and, when profiling may run, "Profile" (Nsight Compute)."""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.llm.sanitize import inert_text
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import anchor_span, kernel_name, to_range


def lenses(snapshot: Snapshot, profiling: bool = False, llm_label: str | None = None) -> list[lsp.CodeLens]:
    if not snapshot.config.settings.code_lens:
        return []
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
                text += f" · measured {measured.verdict}-bound" + (" (stale)" if measured.stale else "")
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
