"""Hover: the roofline story of a kernel (on its name, a launch site or an OpenMP pragma), and a
short performance note on GPU-specific identifiers (`__shfl_sync`, `__ldg`, `atomicAdd`, ...)."""

from __future__ import annotations

import math
import re
import tomllib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.instantiations import estimates_on
from perflsp.analysis.models import Estimate, KernelReport, OpCounts
from perflsp.analysis.roof import LABELS, number, unit
from perflsp.hardware.precision import ROOFLINE_PRECISIONS
from perflsp.hardware.units import format_seconds
from perflsp.kernels.models import ConstValue, CudaFunction, LaunchSite, OmpRegion, Span
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import (
    intensity_vs_ridge,
    kernel_name,
    launch_label,
    measured_vs_ridge,
    short_verdict,
    to_range,
)
from perflsp.source.positions import Position

if TYPE_CHECKING:
    from perflsp.profiling.measured import MeasuredEvidence


@cache
def intrinsic_notes() -> dict[str, str]:
    data = tomllib.loads((Path(__file__).with_name("intrinsics.toml")).read_text(encoding="utf-8"))
    return {name: entry["note"] for name, entry in data.items()}


def hover(snapshot: Snapshot, position: lsp.Position) -> lsp.Hover | None:
    offset = snapshot.offset(Position(position.line, position.character))
    region = snapshot.region_at(offset, pragma_only=True)
    if region is not None:
        report = snapshot.report_for(region)
        if report is not None:
            return _hover(kernel_markdown(report, snapshot), region.span)
        if snapshot.partial:
            return _hover(_analysing(snapshot, region.name), region.span)
    kernel = snapshot.kernel_at_name(offset)
    if kernel is not None:
        report = snapshot.report_for(kernel)
        if report is not None:
            return _hover(kernel_markdown(report, snapshot), kernel.name_span)
        if snapshot.partial and kernel.is_kernel:
            return _hover(_analysing(snapshot, kernel.qualified_name), kernel.name_span)
        if kernel.space == "device":
            return _hover(f"### `{kernel.qualified_name}` (`__device__` function)\n\nAnalysed as part of the kernels "
                          "that call it; its operations count toward theirs.", kernel.name_span)
    site = snapshot.launch_at(offset)
    if site is not None and (site.callee_span.contains(offset) or site.config_span.contains(offset)):
        report = snapshot.report_of_launch(site)
        if report is not None:
            return _hover(launch_markdown(site) + "\n\n---\n\n" + kernel_markdown(report, snapshot), site.callee_span)
        if snapshot.partial and site.kernel is not None and snapshot.kernel_named(site.kernel) is not None:
            return _hover(launch_markdown(site) + "\n\n---\n\n" + _analysing(snapshot, site.kernel), site.callee_span)
        return _hover(launch_markdown(site) + f"\n\nThe kernel `{site.callee}` is not defined in this file: no verdict.",
                      site.callee_span)
    return _identifier_note(snapshot, offset)


def _analysing(snapshot: Snapshot, name: str) -> str:
    """A kernel the document's first analysis has not reached yet: say so (the answer is partial)."""
    items = len(snapshot.kernels.kernels) + len(snapshot.kernels.omp_regions)
    done = items - snapshot.unanalysed_items()
    return (f"### `{name}`\n\nperflsp is still analysing this file ({done} of {items} kernels so far): the verdict "
            f"for `{name}` appears when the analysis reaches it. Hover again in a moment.")


_QUEUED_NAME = re.compile(r"[A-Za-z_]\w*")


def queued_hover(text: str, position: lsp.Position, queued: int) -> lsp.Hover | None:
    """Before the text is parsed: on a word the text defines as a kernel (`__global__ ... name(`)
    or launches (`name<<<`), say the verdict is on its way; elsewhere nothing."""
    lines = text.split("\n")
    if position.line >= len(lines):
        return None
    line = lines[position.line]
    column = len(line.encode("utf-16-le")[: position.character * 2].decode("utf-16-le", "replace"))
    word = next((m for m in _QUEUED_NAME.finditer(line) if m.start() <= column <= m.end()), None)
    if word is None:
        return None
    name = re.escape(word.group())
    if not re.search(rf"__global__[^;{{}}]*?\b{name}\s*\(|\b{name}\s*(?:<[^<>;]*>\s*)?<< ?<", text):
        return None
    others = f" (opened with {queued - 1} other document{'s' if queued != 2 else ''})" if queued > 1 else ""
    markdown = (f"### `{word.group()}`\n\nperflsp has not read this file yet{others}: the verdict for "
                f"`{word.group()}` appears once it is analysed. Hover again in a moment.")
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown),
                     range=lsp.Range(lsp.Position(position.line, _utf16(line, word.start())),
                                     lsp.Position(position.line, _utf16(line, word.end()))))


def _utf16(line: str, index: int) -> int:
    return len(line[:index].encode("utf-16-le")) // 2


def _hover(markdown: str, span: Span) -> lsp.Hover:
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=markdown), range=to_range(span))


def _identifier_note(snapshot: Snapshot, offset: int) -> lsp.Hover | None:
    node = snapshot.tree.root_node.descendant_for_byte_range(offset, offset)
    if node is None:
        return None
    if node.type not in ("identifier", "field_identifier", "type_qualifier", "__shared__", "primitive_type") and node.child_count:
        return None
    name = snapshot.data[node.start_byte:node.end_byte].decode("utf-8", "replace")
    note = intrinsic_notes().get(name)
    if note is None:
        return None
    span = Span(node.start_byte, node.end_byte, lines=snapshot.lines)
    return _hover(f"**`{name}`** — performance note\n\n{note}", span)


# --------------------------------------------------------------------------- Markdown


def kernel_markdown(report: KernelReport, snapshot: Snapshot | None = None) -> str:
    """The kernel's story; with `snapshot`, also the LLM's verdicts and the stored measurements
    beside the static estimate."""
    name = kernel_name(report.kernel)
    kind = "OpenMP target region" if report.kernel.kind == "omp" else "kernel"
    lines = [f"### `{name}` — {kind}", ""]
    lines += _verdict_table(report.estimates)
    lines += _instantiation_table(report)
    measured_any = False
    if snapshot is not None:
        llm_lines, measured_lines = _llm_sections(snapshot, report), _measured_sections(snapshot, report)
        measured_any = bool(measured_lines)
        lines += measured_lines + llm_lines
    facts = report.facts
    if facts.uncertain:
        lines += ["", f"**Uncertain:** {facts.uncertain}"]
    lines += ["", *_ops_table(report)]
    for estimate in report.estimates:
        lines += ["", f"**{estimate.gpu}** — {short_verdict(estimate)}"]
        for item in estimate.evidence:
            lines.append(f"- {item.text}")
        if estimate.occupancy is not None:
            lines.append(f"- occupancy {_occupancy(estimate)}")
        elif estimate.occupancy_note:
            lines.append(f"- occupancy: {estimate.occupancy_note}")
        if estimate.to_cross:
            lines.append(f"- *to cross the ridge:* {estimate.to_cross}")
    if facts.loops:
        lines += ["", "**Loops**"]
        lines += [f"- line {loop.line}: `{loop.variable or '?'}` × {number(loop.trip_count)} ({loop.origin}: {loop.note})"
                  for loop in facts.loops]
    if facts.assumptions:
        lines += ["", "**Assumptions**"]
        lines += [f"- {a.text}" for a in facts.assumptions]
    if facts.evidence:
        lines += ["", "**Evidence**"]
        lines += [f"- {e.text}" for e in facts.evidence]
    if snapshot is not None:
        lines += _tuning_lines(snapshot, report.kernel)
    if measured_any:
        lines += ["", ("*Predictions are static estimates; measured figures come from Nsight Compute results stored "
                       "under `.perflsp/profiles/`.*")]
    else:
        lines += ["", "*Static estimate (not a measurement). Click the code lens for the full explanation.*"]
    return "\n".join(lines)


def _tuning_lines(snapshot: Snapshot, kernel: CudaFunction | OmpRegion) -> list[str]:
    """Stored tuning results (Kernel Tuner caches): top configurations per device, portability."""
    try:
        from perflsp.server.features.tuning import hover_lines

        return hover_lines(snapshot, kernel)
    except Exception:  # a broken cache file must not take the hover down
        import logging

        logging.getLogger(__name__).exception("tuning hover failed")
        return []


def _llm_sections(snapshot: Snapshot, report: KernelReport) -> list[str]:
    """The LLM's answer per GPU. Its words (rationale, factors, why it did not answer) are model
    or endpoint text: made inert Markdown (`perflsp.llm.sanitize.inert_markdown`)."""
    from perflsp.llm.sanitize import inert_markdown

    advice = snapshot.advice
    if advice is None:
        return []
    name = kernel_name(report.kernel)
    lines: list[str] = []
    for estimate in report.estimates:
        result = snapshot.llm_result(name, estimate.gpu)
        if result is None:
            if snapshot.llm_pending(name, estimate.gpu):
                lines += ["", f"**{advice.label}** on {estimate.gpu}: *asking…* (the static verdict stands until it answers)"]
            continue
        if result.source != "llm":
            lines += ["", (f"**{advice.label}** on {estimate.gpu}: no answer — "
                           f"{inert_markdown(result.fallback_reason or '')}. The static verdict stands.")]
            continue
        verdict = {"compute": "compute-bound", "bandwidth": "bandwidth-bound"}.get(result.verdict, f"{result.verdict}-bound")
        head = f"**{result.label}** on {estimate.gpu}: **{verdict}**, confidence {result.confidence:.0%}"
        if result.verdict != estimate.verdict:
            head += f" — **disagrees** with the static estimate ({short_verdict(estimate)})"
        else:
            head += " — agrees with the static estimate"
        if result.from_cache:
            head += " *(cached answer)*"
        rationale = inert_markdown(result.rationale)
        lines += ["", head, "", *(f"> {line}" for line in rationale.splitlines() if line.strip())]
        for factor in result.factors:
            where = f"line {factor.line}: " if factor.line else ""
            lines.append(f"- {where}{inert_markdown(' '.join(factor.text.split()))}")
    return lines


def _measured_sections(snapshot: Snapshot, report: KernelReport) -> list[str]:
    """Predicted beside measured, per GPU with a stored measurement."""
    if snapshot.measured is None:
        return []
    name = kernel_name(report.kernel)
    lines: list[str] = []
    for estimate in report.estimates:
        measured = snapshot.measured_for(name, estimate.gpu)
        if measured is not None:
            lines += ["", *_predicted_vs_measured(estimate, measured)]
    for measured in snapshot.measured.unmatched(name):
        lines += ["", *_predicted_vs_measured(None, measured)]
    return lines


def _predicted_vs_measured(estimate: Estimate | None, measured: MeasuredEvidence) -> list[str]:
    state = " — **stale**: the kernel changed since it was measured" if measured.stale else ""
    clock = f" at {measured.measured_clock_mhz:.0f} MHz" if measured.measured_clock_mhz else ""
    title = f"**Predicted vs measured on {estimate.gpu if estimate else measured.gpu}**{state}" if estimate else \
        f"**Measured on {measured.gpu}**{clock}{state} (not among the configured GPUs)"
    rows = [title, "", "| | predicted (static) | measured |" if estimate else "| | measured |",
            "| --- | --- | --- |" if estimate else "| --- | --- |"]

    def row(label: str, predicted: str, value: str) -> None:
        rows.append(f"| {label} | {predicted} | {value} |" if estimate else f"| {label} | {value} |")

    row("verdict", f"**{short_verdict(estimate)}**" if estimate else "",
        f"**{measured.verdict}-bound**" if measured.verdict else "no verdict")
    if measured.verdict is not None:  # the roof each verdict is quoted with, as on every other surface
        row("intensity vs ridge", intensity_vs_ridge(estimate) if estimate else "", measured_vs_ridge(measured))
    precisions = [p for p in ROOFLINE_PRECISIONS if (measured.intensity.get(p) or (estimate and estimate.intensity.get(p)))]
    for precision in precisions:
        label = LABELS.get(precision, precision.value)
        ai = measured.intensity.get(precision)
        shown = "—" if ai is None else ("∞" if math.isinf(ai) else number(ai))
        ridge = measured.ridge.get(precision)
        predicted_ai = estimate.intensity.get(precision) if estimate else None
        predicted_ridge = estimate.ridge.get(precision) if estimate else None
        row(f"{label} intensity ({unit(precision)})",
            (f"{number(predicted_ai)}" if predicted_ai is not None else "—") +
            (f" (ridge {number(predicted_ridge)})" if predicted_ridge else ""),
            shown + (f" (ridge {number(ridge)})" if ridge else ""))
    row("DRAM bytes", "", _big(measured.dram_bytes))
    if measured.duration_ns:
        row("time", "", f"{format_seconds(measured.duration_ns * 1e-9)} over {measured.launches} launch(es)")
    if measured.pct_of_peak_bandwidth is not None:
        row("DRAM bandwidth", "", f"{measured.pct_of_peak_bandwidth:.3g}% of peak")
    if estimate is not None and estimate.occupancy is not None:
        row("occupancy", f"{estimate.occupancy.occupancy:.0%} (theoretical)", "")
    rows += [f"- {note}" for note in measured.notes]
    return rows


def _verdict_table(estimates: list[Estimate]) -> list[str]:
    rows = ["| GPU | verdict | intensity vs ridge | occupancy | confidence |", "| --- | --- | --- | --- | --- |"]
    for e in estimates:
        occ = f"{e.occupancy.occupancy:.0%} ({e.occupancy.limiter.value.replace('_', ' ')})" if e.occupancy else "—"
        rows.append(f"| {e.gpu} | **{short_verdict(e)}** | {intensity_vs_ridge(e) if e.verdict != 'uncertain' else '—'} | "
                    f"{occ} | {e.confidence:.0%} |")
    return rows


def _instantiation_table(report: KernelReport) -> list[str]:
    """A template's instantiations in the compiled code, each judged: the verdict above is the
    one its first launch or call names."""
    if not report.instantiations:
        return []
    rows = ["", "**Per instantiation** (each judged on its own; the verdict above is the first launch's or call's)", "",
            "| instantiation | GPU | verdict | intensity vs ridge | FP32 / FP64 FLOP | DRAM bytes |",
            "| --- | --- | --- | --- | ---: | ---: |"]
    for estimate in report.estimates:
        for inst, judged in estimates_on(report, estimate):
            facts = inst.facts
            rows.append(f"| `{inst.label}` | {judged.gpu} | **{short_verdict(judged)}** | "
                        f"{intensity_vs_ridge(judged) if judged.verdict != 'uncertain' else '—'} | "
                        f"{_big(facts.total.fp32)} / {_big(facts.total.fp64)} | "
                        f"{_big(judged.dram_bytes if judged.dram_bytes is not None else facts.dram_bytes)} |")
    return rows


def _ops_table(report: KernelReport) -> list[str]:
    facts = report.facts
    per, total = facts.per_item, facts.total
    item = "thread" if report.kernel.kind == "cuda" else "iteration"
    rows = [f"| per {item} | per {item} | whole launch |", "| --- | ---: | ---: |"]

    def row(label: str, a: float, b: float) -> None:
        if a or b:
            rows.append(f"| {label} | {number(a)} | {_big(b)} |")

    for precision in ROOFLINE_PRECISIONS:
        ops = OpCounts.ops(per, precision)
        row(f"{LABELS.get(precision, precision.value)} {'ops' if unit(precision) == 'op/B' else 'FLOP'}",
            ops, OpCounts.ops(total, precision))
    row("special-function ops", per.special, total.special)
    row("atomics", per.atomics, total.atomics)
    row("global load bytes", per.global_load_bytes, total.global_load_bytes)
    row("global store bytes", per.global_store_bytes, total.global_store_bytes)
    row("shared-memory bytes", per.shared_load_bytes + per.shared_store_bytes,
        total.shared_load_bytes + total.shared_store_bytes)
    rows.append(f"| **DRAM bytes (estimated)** | | **{_big(facts.dram_bytes)}** |")
    work = f"{facts.work_items_note}" if facts.work_items_note else "unknown"
    counted = ("Operations and global accesses: **counted in the compiled code** (each block weighted by how often "
               "the source says it runs); DRAM bytes: estimated from the accesses" if facts.operations == "compiled"
               else "Operations, accesses and DRAM bytes: **estimated from the source**")
    return [f"**Work:** {work}", "", *rows, "", counted + ".", "", f"DRAM model: {facts.dram_note}"]


def _occupancy(estimate: Estimate) -> str:
    occ = estimate.occupancy
    assert occ is not None
    limits = ", ".join(f"{lim.value.replace('_', ' ')} {n}" for lim, n in occ.block_limits.items() if n is not None)
    text = (f"{occ.occupancy:.0%}: {occ.active_blocks_per_sm} blocks × {occ.warps_per_block} warps of "
            f"{occ.max_warps_per_sm} warp slots per SM, limited by **{occ.limiter.value.replace('_', ' ')}** "
            f"(blocks per SM allowed by {limits})")
    if estimate.occupancy_note and "assumed" in estimate.occupancy_note:
        text += "; registers assumed 32/thread (no ptxas figures)"
    return text


def _big(value: float) -> str:
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {suffix}"
    return number(value)


def launch_markdown(site: LaunchSite) -> str:
    def value(v: ConstValue | None) -> str:
        if v is None:
            return "—"
        if v.known:
            return f"`{v.text.strip()}` = {v.value}"
        return f"`{v.text.strip()}` ({v.reason or 'not a compile-time constant'})"

    lines = [f"### Launch of `{site.callee}` {launch_label(site)}", "",
             f"- grid: {value(site.grid)}", f"- block: {value(site.block)}"]
    if site.shared_mem_bytes is not None:
        lines.append(f"- dynamic shared memory: {value(site.shared_mem_bytes)}")
    return "\n".join(lines)
