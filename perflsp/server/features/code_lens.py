"""Code lens above each kernel and OpenMP target region: the roofline headline per GPU
("compute-bound on H100 SXM5 80GB · FP32 AI 41 FLOP/B · 75% occupancy"); click for the explanation."""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.server.documents import Snapshot
from perflsp.server.features.common import anchor_span, kernel_name, to_range


def lenses(snapshot: Snapshot) -> list[lsp.CodeLens]:
    if not snapshot.config.settings.code_lens:
        return []
    out: list[lsp.CodeLens] = []
    for report in snapshot.reports():
        if not report.estimates:
            continue
        title = " | ".join(e.headline() for e in report.estimates)
        name = kernel_name(report.kernel)
        out.append(lsp.CodeLens(
            range=to_range(anchor_span(report.kernel)),
            command=lsp.Command(title=title, command="perflsp.explainKernel",
                                arguments=[{"uri": snapshot.uri, "kernel": name}]),
        ))
    return out
