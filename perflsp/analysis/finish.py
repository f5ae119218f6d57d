"""The last step of every kernel's analysis: DRAM traffic, totals, evidence lines, and whether
the facts found say enough to give a verdict on."""

from __future__ import annotations

from perflsp.analysis.costs import CostModel
from perflsp.analysis.memory import Traffic, _bytes, dram_traffic, with_compiled_widths
from perflsp.analysis.models import KernelFacts, OpCounts
from perflsp.analysis.notes import Note, NoteKind, NoteSource, assumed
from perflsp.analysis.walk_values import WalkResult

Extents = dict[str, tuple[float | None, bool]]  # array -> (bytes or None, lives in host memory)


def uncertain_facts(reason: str) -> KernelFacts:
    """Facts that say nothing, with the reason the kernel gets no verdict."""
    return KernelFacts(OpCounts(), None, "unknown", OpCounts(), 0.0, "unknown", uncertain=reason)


def calibrated(counts: OpCounts, cost: CostModel, fixed_ints: float) -> OpCounts:
    """Integer instructions as the hardware executes them: address and loop arithmetic as
    counted, source-level integer operations scaled by what the compiler fuses, plus the fixed
    per-item overhead."""
    arithmetic = max(0.0, counts.int32 - counts.int_address - counts.int_loop)
    counts.int32 = counts.int_address + counts.int_loop + arithmetic * cost.int_arith_factor + fixed_ints
    return counts


def finish(cost: CostModel, per_item: OpCounts, work_items: float, items_note: str, result: WalkResult,
           assumptions: list[Note], fast_atom: str = "tx", extents: Extents | None = None, *,
           sizes_assumed: bool = False, one_item_expected: bool = True, one_item_stated: bool = False,
           data_offsets: bool = False,
           compiled: bool = False, widths: dict[tuple[int, bool], tuple[float, float]] | None = None,
           block_atoms: tuple[str, ...] = (), block_items: float | None = None,
           shape_assumed: bool = False) -> KernelFacts:
    """`block_atoms`, `block_items`: the launch's block indices in the order its blocks start, or
    an OpenMP nest's loops and a team's iterations (see `memory.dram_traffic`). `compiled`:
    `per_item` counts the compiled code's instructions (its global loads and stores are what the
    kernel really issues); `widths`: the compiled code's global accesses by
    (line, is a store), as (instructions, bytes), whose widths replace the source's element sizes."""
    accesses, width_notes = with_compiled_widths(result.accesses, widths or {})
    arrays = {a.array for a in accesses if a.space == "global"}
    laid_out = [f"`{array}`: elements of `{layout.name}`, {layout.size_bytes} B as the source lays it out"
                for array, layout in sorted(result.layouts.items()) if array in arrays]
    traffic = dram_traffic(accesses, result.cardinality, work_items, cost, fast_atom, extents,
                           data_offsets=data_offsets, layout_remarks=laid_out[:3], block_atoms=block_atoms,
                           block_items=block_items, shape_assumed=shape_assumed)
    if width_notes:
        shown = "; ".join(width_notes[:3]) + (f"; {len(width_notes) - 3} more" if len(width_notes) > 3 else "")
        traffic.note += f"; element sizes from the compiled code ({shown})"
    moved = (per_item.global_load_bytes + per_item.global_store_bytes) * work_items
    no_global = per_item.global_loads + per_item.global_stores + per_item.atomics <= 0
    unseen_calls = any(note.kind == NoteKind.UNANALYSED_CALL for note in result.notes)
    if compiled and traffic.footprint_bytes <= 0 and moved > 0:
        # the source shows no array the compiled code's global accesses reach (pointer
        # arithmetic, accessor objects): each byte they move counted as moved once
        traffic = Traffic(max(moved, cost.min_dram_bytes), moved, moved, moved, [],
                          f"{_bytes(moved)} moved by the compiled code's global loads and stores (no array found in "
                          "the source to place them: reuse not known)")
    elif no_global and traffic.footprint_bytes <= 0 and (compiled or not unseen_calls):
        # no global access at all: the launch's own parameters and code are its traffic
        traffic = Traffic(cost.launch_dram_bytes, 0.0, 0.0, 0.0, [],
                          f"no global-memory access{' in the compiled code' if compiled else ''}: "
                          f"{_bytes(cost.launch_dram_bytes)}, the launch's parameters and code")
    total = per_item.scaled(work_items)
    evidence = _evidence(per_item, work_items, traffic, compiled)
    all_assumptions = assumptions + result.assumptions
    facts = KernelFacts(
        per_item=per_item, work_items=work_items, work_items_note=items_note, total=total,
        dram_bytes=traffic.dram_bytes, dram_note=traffic.note, dram_remarks=traffic.remarks, loops=result.loops,
        assumptions=all_assumptions, evidence=evidence + result.notes, traffic=traffic,
    )
    if result.truncated:
        facts.assumptions.append(assumed(NoteKind.WORK_LIMIT, "analysis stopped at its work limit: counts are a lower bound"))
    facts.uncertain = _degenerate(per_item, work_items, traffic, cost, sizes_assumed, one_item_expected, compiled,
                                  unseen_calls, one_item_stated)
    return facts


def _degenerate(per_item: OpCounts, work_items: float, traffic: Traffic, cost: CostModel, sizes_assumed: bool,
                one_item_expected: bool, compiled: bool = False, unseen_calls: bool = False,
                one_item_stated: bool = False) -> str | None:
    """Why an analysis says too little to give a verdict on, or None. A ratio of two numbers
    the analysis did not really find (memory traffic hidden behind calls it could not read, a
    parallel launch seen as one item, traffic that is only the per-launch floor at production
    scale) is no evidence either way. A kernel whose code has arithmetic and no global access
    (the compiled code's word, or a source with no unread calls) is compute-bound: its traffic
    is the launch's own. A launch of one thread, a serial target region, or a tiny footprint at
    sizes the source states are real and keep their verdict."""
    no_global = per_item.global_loads + per_item.global_stores + per_item.atomics <= 0
    if no_global and not compiled and unseen_calls:
        return "no global-memory access found in the kernel, and it calls functions the engine could not read"
    if work_items <= 1.0 and not one_item_expected:
        if one_item_stated:
            # (`n = 1` in main unless the program is given arguments: too little work to judge)
            return ("the region's parallel loop runs one iteration at the sizes the source sets: give the "
                    "program's arguments (`--args`, or `args` of [profiling] in .perflsp.toml)")
        return "the region's parallel loop was not found: the analysis saw one work item"
    if no_global:
        return None
    if sizes_assumed and traffic.footprint_bytes < cost.min_dram_bytes * 0.01:
        return (f"at production scale the DRAM traffic found ({traffic.footprint_bytes:.0f} B) is far below the "
                "per-launch floor: the accesses that matter were not found")
    return None


def _many(count: float, noun: str) -> str:
    """`1 store`, `2 stores`, `0.5 stores` (a count as displayed, 3 significant figures)."""
    shown = f"{count:.3g}"
    return f"{shown} {noun}" + ("" if shown == "1" else "s")


def _evidence(per_item: OpCounts, work_items: float, traffic: Traffic, compiled: bool) -> list[Note]:
    lines = []
    loads = f"{_many(per_item.global_loads, 'load')} ({per_item.global_load_bytes:.3g} B)"
    stores = f"{_many(per_item.global_stores, 'store')} ({per_item.global_store_bytes:.3g} B)"
    flops = []
    if per_item.fp64:
        flops.append(f"{per_item.fp64:.3g} FP64")
    if per_item.fp32:
        flops.append(f"{per_item.fp32:.3g} FP32")
    if per_item.fp16:
        flops.append(f"{per_item.fp16:.3g} FP16")
    ops = ", ".join(flops) or "no FP"
    counted = NoteSource.COMPILED if compiled else NoteSource.SOURCE
    lines.append(Note(NoteKind.PER_ITEM_COUNTS, counted,
                      f"per work item: {loads} + {stores}, {ops} FLOP, {per_item.int32:.3g} integer instructions",
                      subject="work item"))
    lines.append(Note(NoteKind.DRAM_TRAFFIC, NoteSource.SOURCE, f"DRAM: {traffic.note}", subject="launch",
                      value=traffic.dram_bytes, unit="B"))
    return lines


def dims_text(d: tuple[float, float, float] | None) -> str:
    if d is None:
        return "?"
    parts = [str(int(x)) for x in d]
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return "×".join(parts)


def count_text(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.0f}"

