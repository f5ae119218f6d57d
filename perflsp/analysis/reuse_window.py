"""Reads that blocks far apart in launch order repeat, after L2 has let them go.

`memory.combine` counts each distinct sector once (an ideal cache). A launch of more blocks than
the GPU holds at once starts them in launch order (x fastest) as earlier ones finish, so the
blocks resident at any time are at different points of their work. Two blocks `d` apart in that
order reach a sector they share about `d / resident` of a block's run apart, while the resident
blocks move on through their own data: about `d` blocks' bytes go through L2 between the two
reads. L2 keeps the sector when that fits in it, and not when it does not: the second read comes
from DRAM again. A naive matrix product is the case: the blocks of one row of the grid share the
rows of `a` (neighbours, served by L2), the blocks of one column share a strip of `b`,
`gridDim.x` blocks apart; when that many blocks' data exceed L2, every row of blocks reads `b`
again.

From the index forms: the *window* is the blocks whose data fit in L2 (L2 over the distinct
bytes one block touches, every group); a block index whose neighbours along it are further
apart in launch order than the window (`blockIdx.y` is `gridDim.x` blocks apart; `blockIdx.x`
one, so when one block's data exceed L2 each block reads its own) does not share its reads, so
each of its values reads its own copy. A read group's bytes are then its footprint counted per
value of those indices, at most what its warps request. A launch whose blocks all fit on the GPU
at once (one wave: they start together), or whose data fits in L2, keeps its footprint; so does
one with a loop whose trip count is assumed (each block's bytes, so the window, a guess).

Why not a share of capacity misses (`1 - L2 / footprint` of the re-requests, tried before): most
re-requests come from neighbouring blocks and hit; only the reads shared by blocks further apart
than the window miss, and the index forms say which those are. Nor waves of resident blocks
each reading what they share once: after the first wave the blocks no longer start together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from perflsp.analysis.linear import base_atom, distinct_values
from perflsp.analysis.memory import GroupTraffic, Traffic, _bytes, _shifted_extra, _span
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, occupancy

_UNBOUNDED = float("inf")
_RELEVANT = 1.05  # re-reads below 5% of the group's footprint change nothing worth a remark


@dataclass(frozen=True, slots=True)
class Residency:
    """What the judged GPU holds of one launch: its L2 and the blocks resident at once."""

    l2_bytes: float
    resident_blocks: int  # SMs × blocks per SM at the kernel's occupancy


def on_gpu(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None, registers_per_thread: int | None,
           shared_bytes: int) -> KernelFacts:
    """The facts with the DRAM traffic of the launch on `gpu` (its L2, the blocks it holds at
    once at the kernel's occupancy: 32 registers a thread where ptxas did not say): the same
    facts where no read repeats. Every GPU is judged on the bytes its own facts show."""
    traffic = facts.traffic
    l2_bytes = gpu.l2_cache_bytes
    if not isinstance(traffic, Traffic) or not traffic.block_order or l2_bytes is None or not threads_per_block:
        return facts
    if any(loop.origin == "assumed" for loop in facts.loops):
        # the window is how many blocks' data fit in L2: with a loop's trip count guessed, each
        # block's data is a guess too, and so would the blocks that share a read in L2 be
        return facts
    try:
        resident = occupancy(gpu, threads_per_block, registers_per_thread or 32, shared_bytes).active_blocks_per_sm
    except (OccupancyInputError, ValueError, TypeError):
        return facts  # a launch the GPU rejects, or a user GPU without occupancy tables
    changed = with_rereads(traffic, Residency(float(l2_bytes), max(1, resident) * gpu.sm_count))
    if changed is None:
        return facts
    evidence = [replace(note, detail=f"DRAM: {changed.note}", value=changed.dram_bytes)
                if note.kind == NoteKind.DRAM_TRAFFIC else note for note in facts.evidence]
    assumption = assumed(NoteKind.L2_REUSE, f"{gpu.name}: blocks start in launch order (x fastest) as earlier ones "
                         f"finish, {max(1, resident) * gpu.sm_count:,} at a time, each at its own point of its work, "
                         "and L2 keeps what was read last: reads that blocks far apart share come from DRAM again",
                         subject=gpu.name)
    return replace(facts, dram_bytes=changed.dram_bytes, dram_note=changed.note, dram_remarks=changed.remarks,
                   traffic=changed, evidence=evidence, assumptions=[*facts.assumptions, assumption])


def with_rereads(traffic: Traffic, residency: Residency) -> Traffic | None:
    """The traffic with the reads repeated by blocks too far apart to share them in L2, or None
    where nothing changes (one wave, data within L2, no block index beyond the window)."""
    order = traffic.block_order
    cardinality = traffic.cardinality
    if not order or cardinality is None or not traffic.groups:
        return None
    blocks = math.prod(count for _, _, count in order)
    if blocks <= residency.resident_blocks or sum(g.footprint_bytes for g in traffic.groups) <= residency.l2_bytes:
        return None
    units = [_unit_bytes(g, cardinality) for g in traffic.groups]
    window = _window(traffic.groups, units, cardinality, order, blocks, residency.l2_bytes)
    apart = _indices_apart(order, window)
    if not apart:
        return None
    groups: list[GroupTraffic] = []
    reread: list[tuple[str, float]] = []
    for group, unit in zip(traffic.groups, units):
        copies = _copies(group, unit, cardinality, apart)
        if copies > group.footprint_bytes * _RELEVANT:
            group = replace(group, reread_bytes=copies)
            reread.append((group.array, copies / group.footprint_bytes))
        groups.append(group)
    if not reread:
        return None
    dram = sum(max(g.footprint_bytes, g.reread_bytes) for g in groups)
    names = " and ".join(f"`{a}`" for a in apart)
    shown = ", ".join(f"`{array}` {times:.3g}x" for array, times in reread[:3])
    remark = (f"reads again by blocks too far apart to share them in L2: {_bytes(residency.l2_bytes)} holds "
              f"the data of about {window:.3g} blocks, blocks next to each other along {names} lie further "
              f"apart in launch order, so each reads its own ({shown} the footprint, at most what its warps "
              f"request); assumed blocks start in launch order (x fastest) as earlier ones finish, "
              f"{residency.resident_blocks:,} at a time, each at its own point of its work, and L2 keeps what "
              "was read last")
    added = dram - sum(g.footprint_bytes for g in traffic.groups)
    return replace(traffic, dram_bytes=traffic.dram_bytes + added, groups=groups,
                   note=f"{traffic.note}; {remark}", remarks=(*traffic.remarks, remark))


def _unit_bytes(group: GroupTraffic, cardinality: dict[str, float]) -> float:
    """Bytes per distinct value of the group's form (its element with the sectors and gaps its
    footprint counts, within its caps); 0 for a group whose elements the data places."""
    if group.form is None or group.footprint_bytes <= 0.0:
        return 0.0
    return group.footprint_bytes / distinct_values(group.form, cardinality, _UNBOUNDED)


def _window(groups: list[GroupTraffic], units: list[float], cardinality: dict[str, float],
            order: tuple[tuple[str, float, float], ...], blocks: float, l2_bytes: float) -> float:
    """How many blocks' data L2 holds: its bytes over the distinct bytes one block touches (all
    groups; a group whose elements the data places, its share of the launch). Under one when a
    single block's data exceed it."""
    one_block = dict(cardinality)
    for atom, per_block, _ in order:
        _hold(one_block, atom, per_block)
    per_block = 0.0
    for group, unit in zip(groups, units):
        if unit > 0.0 and group.form is not None:
            per_block += unit * _reached(group, one_block)
        else:
            per_block += group.footprint_bytes / blocks
    return l2_bytes / per_block if per_block > 0.0 else blocks


def _hold(cardinality: dict[str, float], atom: str, values: float) -> None:
    """Hold a block index at `values` values, and each tile of it (`bx % 256`, `bx / 256`) at
    as many at most."""
    cardinality[atom] = values
    for other, count in cardinality.items():
        if other != atom and base_atom(other) == atom:
            cardinality[other] = min(count, values)


def _indices_apart(order: tuple[tuple[str, float, float], ...], window: float) -> dict[str, float]:
    """The indices whose neighbours (one step along them) start more than `window` blocks apart,
    with the blocks along each: `blockIdx.y` is `gridDim.x` blocks from the next, `blockIdx.x`
    one; the outer loop of an OpenMP `collapse(2)` nest is (inner trip / a team's threads)
    blocks from the next."""
    apart = {}
    period = 1.0
    for atom, per_block, count in order:
        if count > 1.0 and per_block <= 1.0 and period > window:
            apart[atom] = count
        period *= count
    return apart


def _copies(group: GroupTraffic, unit: float, cardinality: dict[str, float], apart: dict[str, float]) -> float:
    """A read group's bytes when every value of the indices in `apart` reads its own copy of
    what it reaches: the footprint over the other indices, once per such value, at most what
    its warps request. Writes and data-placed groups keep their footprint (0 here)."""
    if group.is_store or group.atomic or unit <= 0.0 or group.form is None:
        return 0.0
    one_each = dict(cardinality)
    copies = 1.0
    for atom, count in apart.items():
        copies *= max(1.0, count)
        _hold(one_each, atom, 1.0)
    per_copy = unit * _reached(group, one_each)
    return min(per_copy * copies, group.streamed_bytes)


def _reached(group: GroupTraffic, cardinality: dict[str, float]) -> float:
    """Distinct elements the group reaches over the atoms' `cardinality`: its form's values and
    those of its accesses' shifts (a stencil's planes above and below its own,
    `c[(k + 4) * n * n + j * n + i]`, which a block or a copy reads beside its own); 0 for a
    group the data places (no form)."""
    form = group.form
    if form is None:
        return 0.0
    elements = distinct_values(form, cardinality, _UNBOUNDED)
    span = _span(form, cardinality)
    if len(group.offsets) > 1 and math.isfinite(span):
        elements += _shifted_extra(span, list(group.offsets)) * min(1.0, elements / span)
    return elements
