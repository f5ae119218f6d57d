"""Inlay hints after each launch site's `<<<...>>>` and each OpenMP target pragma: occupancy and
verdict per configured GPU."""

from __future__ import annotations

from lsprotocol import types as lsp

from perflsp.analysis.models import KernelReport
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import kernel_name, short_verdict, verdict_message
from perflsp.source.positions import Position

_SHORT = {"compute": "compute", "bandwidth": "bandwidth", "uncertain": "uncertain"}


def hints(snapshot: Snapshot, visible: lsp.Range) -> list[lsp.InlayHint]:
    if not snapshot.config.settings.inlay_hints:
        return []
    start = snapshot.offset(Position(visible.start.line, visible.start.character))
    end = snapshot.offset(Position(visible.end.line, visible.end.character))
    out: list[lsp.InlayHint] = []
    for site in snapshot.kernels.launches:
        if not start <= site.config_span.end_byte <= end:
            continue
        report = snapshot.report_of_launch(site)
        if report is None:
            continue
        out.append(_hint(site.config_span.end, report, snapshot))
    for region in snapshot.kernels.omp_regions:
        if start <= region.span.end_byte <= end:
            report = snapshot.report_for(region)
            if report is not None:
                out.append(_hint(region.span.end, report, snapshot))
    return out


def _hint(position: Position, report: KernelReport, snapshot: Snapshot) -> lsp.InlayHint:
    """The label: occupancy and the static verdict per GPU, `· measured …` when a measurement is
    stored; the tooltip: each GPU's verdict diagnostic text (the same words as Problems)."""
    parts, tooltips = [], []
    name = kernel_name(report.kernel)
    for estimate in report.estimates:
        gpu = estimate.gpu.split(" ")[0] if len(report.estimates) > 1 else ""
        text = short_verdict(estimate)
        if estimate.occupancy is not None:
            text = f"{estimate.occupancy.occupancy:.0%} occ · {text}"
        measured = snapshot.measured_for(name, estimate.gpu)
        if measured is not None and measured.verdict is not None:
            text += f" · measured {measured.verdict}" + (" (stale)" if measured.stale else "")
        parts.append(f"{gpu}: {text}" if gpu else text)
        tooltips.append(verdict_message(report, estimate, measured=measured))
    tooltip = "\n\n".join(tooltips)
    return lsp.InlayHint(
        position=lsp.Position(position.line, position.character),
        label=" " + " | ".join(parts),
        padding_left=True,
        tooltip=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=tooltip),
    )
