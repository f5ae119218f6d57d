"""Reads a thread repeats on each pass of an outer loop, after the pass's data have pushed them
out of L1 and L2.

`memory.combine` counts each distinct sector once: a value a thread reads again on the next pass
of a loop its index does not depend on (`feature[l * n + p]` inside `for (i < clusters)`, read
again for every cluster) is served by the caches. It is where what one pass of that loop reads,
over the threads the GPU runs at once, fits in them. Where it does not, the sectors read first
are gone by the time the pass comes back to them: each pass reads the group's footprint from
DRAM again. Points of a few dozen features against five cluster centres (the threads of an SM
reading some 200 KB a pass, all SMs 14 MB, against 128 KB of L1 each and 5 MB of L2) measured 4.4
times their footprint in DRAM bytes on the study's card.

What one pass reads: each group inside the loop, its bytes per thread per pass over the threads
held at once, at most its footprint (an array every thread reads alike, a table of centres, is
one copy however many threads read it). L1 is the SM's unified L1/shared memory less the
shared memory of its blocks, as for local memory (`local_traffic`); both must be exceeded, an
SM's L1 by its own threads' pass and L2 by all SMs'. The reads again are counted on the group's
footprint times the passes of each loop it does not depend on, at most the bytes it accesses.
"""

from __future__ import annotations

import math
from dataclasses import replace

from perflsp.analysis.held_threads import held_threads
from perflsp.analysis.memory import GroupTraffic, Traffic, _bytes, combine, with_dram_added
from perflsp.analysis.models import KernelFacts, LoopFact
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_values import is_loop_atom
from perflsp.hardware.models import Gpu

_RELEVANT = 1.05  # reads again below 5% of the group's footprint change nothing worth a remark


def with_pass_rereads(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None, registers_per_thread: int | None,
                      shared_bytes: int, unroll_limit: float = 32.0) -> KernelFacts:
    """The facts of a kernel whose work item is a thread (CUDA; an OpenMP `parallel for`
    iteration) with the reads repeated on each pass of
    an outer loop whose pass does not fit in `gpu`'s L1 and L2 counted from DRAM; the same facts
    where every such pass fits (or no read repeats over a loop). `unroll_limit`: the most trips
    of a loop of constant trip count the compiler unrolls (`CostModel.unroll_limit`)."""
    traffic = facts.traffic
    l2_bytes = gpu.l2_cache_bytes
    work_items = facts.work_items
    held = held_threads(gpu, work_items, threads_per_block, registers_per_thread, shared_bytes)
    if not isinstance(traffic, Traffic) or not traffic.groups or traffic.cardinality is None or not l2_bytes \
            or held is None or work_items is None:
        return facts
    on_sm, on_gpu, l1 = held.on_sm, held.on_gpu, held.l1_bytes
    cardinality = traffic.cardinality
    groups: list[GroupTraffic] = []
    changed: list[tuple[str, float, float]] = []  # (array, times its footprint, the pass's bytes on all SMs)
    for group in traffic.groups:
        repeated = _repeated_over(group)
        innermost = max(repeated, key=_order) if repeated else None
        if innermost is None or not _walked_per_pass(group, innermost, cardinality, facts.loops, unroll_limit):
            # (a few elements a pass, `x[8 * e + k]` for k < 8 in each of 4 passes: the compiler
            # keeps them in registers over the passes)
            groups.append(group)
            continue
        pass_on_sm = _pass_bytes(traffic.groups, innermost, cardinality, work_items, on_sm)
        pass_on_gpu = _pass_bytes(traffic.groups, innermost, cardinality, work_items, on_gpu)
        if pass_on_sm <= l1 or pass_on_gpu <= l2_bytes:
            groups.append(group)
            continue
        passes = math.prod(max(1.0, cardinality.get(loop, 1.0)) for loop in repeated)
        again = min(group.footprint_bytes * passes, group.accessed_bytes)
        if again > max(group.footprint_bytes, group.reread_bytes) * _RELEVANT:
            group = replace(group, reread_bytes=again)
            changed.append((group.array, again / group.footprint_bytes, pass_on_gpu))
        groups.append(group)
    if not changed:
        return facts
    added = combine(groups) - combine(traffic.groups)
    shown = ", ".join(f"`{array}` {times:.3g}x (a pass {_bytes(live)})" for array, times, live in changed[:3])
    remark = (f"read again on each pass of a loop its index does not follow, the pass's data exceeding L1 "
              f"({_bytes(l1)} an SM, {on_sm:,.0f} threads) and L2 ({_bytes(float(l2_bytes))}): {shown} the footprint")
    assumption = assumed(NoteKind.L2_REUSE, f"{gpu.name}: a value a thread reads again on the next pass of an outer "
                         "loop stays in L1 or L2 only where what one pass reads, over the threads held at once, fits "
                         "in them", subject=gpu.name)
    return with_dram_added(replace(facts, traffic=replace(traffic, groups=groups)), added, remark, assumption)


def _order(atom: str) -> int:
    """The walk's order of a loop atom (`L3`): an enclosing loop was entered before those inside it."""
    return int(atom[1:])


def _repeated_over(group: GroupTraffic) -> list[str]:
    """The loops around a read group whose counter its index does not follow (it reads the same
    elements on each of their passes); none for writes, atomics and groups the data place."""
    if group.is_store or group.atomic or group.form is None or group.footprint_bytes <= 0.0:
        return []
    return [loop for loop in group.loops if is_loop_atom(loop) and loop not in group.form.atoms]


def _walked_per_pass(group: GroupTraffic, loop: str, cardinality: dict[str, float], loops: list[LoopFact],
                     unroll_limit: float) -> bool:
    """Whether a thread walks the group's elements in one pass of `loop`, more than registers
    hold: its index follows a loop inside it whose trip count is no compile-time constant (the
    compiler keeps such a loop), or more than the compiler unrolls. A loop atom is the walk's
    `n`-th loop, the `n`-th of `loops` that is no OpenMP worksharing loop (those are `o` atoms);
    where its fact does not match, the loop is taken for unrolled."""
    assert group.form is not None
    walked = [fact for fact in loops if not fact.parallel]
    for atom in group.form.atoms:
        if not is_loop_atom(atom) or _order(atom) <= _order(loop):
            continue
        number = _order(atom)
        fact = walked[number - 1] if 0 < number <= len(walked) else None
        trips = cardinality.get(atom, 1.0)
        if fact is None or max(1.0, fact.trip_count) != trips:
            continue
        if fact.origin != "constant" or trips > unroll_limit:
            return True
    return False


def _pass_bytes(groups: list[GroupTraffic], loop: str, cardinality: dict[str, float], work_items: float,
                threads: float) -> float:
    """The bytes `threads` threads read and write in one pass of `loop`: of each group inside
    it, its accesses per thread over the passes of `loop` and of the loops around it, at most
    its footprint."""
    total = 0.0
    for group in groups:
        if loop not in group.loops:
            continue
        around = math.prod(max(1.0, cardinality.get(other, 1.0)) for other in group.loops
                           if is_loop_atom(other) and _order(other) <= _order(loop))
        per_thread = group.accessed_bytes / work_items / around
        total += min(per_thread * threads, group.footprint_bytes)
    return total
