"""Reads of threads each walking its own row: every access a sector from DRAM once the lines the
threads held at once walk exceed L1 and L2.

Where neighbouring threads read 128 bytes or more apart and each walks its own row over a loop
(`x[p * F + f]` over `f`, a row a thread), a warp's load touches 32 lines, and the next pass comes
back to the same lines for the next element. `memory.combine` counts each distinct sector once:
the caches keep a thread's line between its passes. L1 and L2 allocate whole 128-byte lines, so
the threads held at once need a line each per array they walk in a loop: where those lines exceed an SM's L1
(its own threads) and the L2 (all SMs' threads), a line is gone before its thread comes back,
and every access reads its sector from DRAM again: the group moves what its warps request.
A row a thread read in three passes (a row's maximum, sum and scaling) measured about half of
what its warps request on the study's card, nine times its footprint; a transpose's reads of a
few dozen features a thread measured 0.97 of it.

Not where the array fits in L2 (what is read stays there whatever the lines do), nor where the
threads share its elements (accessed more than twice its footprint: a window its neighbours
read too, found again in L2), nor for writes, atomics and gathers.
"""

from __future__ import annotations

from dataclasses import replace

from perflsp.analysis.held_threads import held_threads
from perflsp.analysis.linear import UNKNOWN_COEFF
from perflsp.analysis.memory import GroupTraffic, Traffic, _bytes, combine, with_dram_added
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_values import is_loop_atom
from perflsp.hardware.models import Gpu

LINE_BYTES = 128.0  # what L1 and L2 allocate
SECTOR_BYTES = 32.0  # what a miss moves
_SHARED = 2.0  # accessed more than this many times its footprint: the threads share its elements
_RELEVANT = 1.05  # below 5% more than the footprint: nothing worth a remark


def with_line_walks(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None, registers_per_thread: int | None,
                    shared_bytes: int) -> KernelFacts:
    """The facts of a kernel whose work item is a thread (CUDA; an OpenMP `parallel for`
    iteration) with the row walks whose lines the caches cannot hold counted at what their
    warps request; the same facts where there are none or their lines fit."""
    traffic = facts.traffic
    l2_bytes = gpu.l2_cache_bytes
    held = held_threads(gpu, facts.work_items, threads_per_block, registers_per_thread, shared_bytes)
    if not isinstance(traffic, Traffic) or not traffic.groups or traffic.cardinality is None or not l2_bytes \
            or held is None:
        return facts
    spans: dict[str, float] = {}  # array -> its largest group's footprint (overlapping groups count once)
    for group in traffic.groups:
        spans[group.array] = max(spans.get(group.array, 0.0), group.footprint_bytes)
    walking: dict[int, str] = {}  # group -> the loop whose passes walk its row
    for i, group in enumerate(traffic.groups):
        loop = _row_walk(group, traffic.fast_atom, traffic.cardinality)
        if loop is not None and spans[group.array] > l2_bytes and group.accessed_bytes <= _SHARED * spans[group.array]:
            walking[i] = loop
    # a thread holds a line for each array it walks in the same loop (sibling loops, one after the other)
    per_loop: dict[str, set[str]] = {}
    for i, loop in walking.items():
        per_loop.setdefault(loop, set()).add(traffic.groups[i].array)
    lines = max((len(arrays) for arrays in per_loop.values()), default=0)
    lines_on_sm = held.on_sm * LINE_BYTES * lines
    lines_on_gpu = held.on_gpu * LINE_BYTES * lines
    if not walking or lines_on_sm <= held.l1_bytes or lines_on_gpu <= l2_bytes:
        return facts
    walks = list(walking)
    groups = list(traffic.groups)
    changed: list[str] = []
    for i in walks:
        group = groups[i]
        if group.streamed_bytes > max(group.footprint_bytes, group.reread_bytes) * _RELEVANT:
            groups[i] = replace(group, reread_bytes=group.streamed_bytes)
            changed.append(group.array)
    if not changed:
        return facts
    added = combine(groups) - combine(traffic.groups)
    arrays = ", ".join(f"`{a}`" for a in dict.fromkeys(changed))
    remark = (f"{arrays} walked a row a thread, threads {LINE_BYTES:g} B or more apart: the lines of the "
              f"{held.on_sm:,.0f} threads an SM holds ({_bytes(lines_on_sm)}) exceed its L1 ({_bytes(held.l1_bytes)}) "
              f"and those of all SMs ({_bytes(lines_on_gpu)}) its L2: each access reads its sector from DRAM again")
    assumption = assumed(NoteKind.L2_REUSE, f"{gpu.name}: L1 and L2 allocate {LINE_BYTES:g}-byte lines; a thread "
                         "walking its own row keeps its line only where the lines of the threads held at once fit "
                         "in them", subject=gpu.name)
    return with_dram_added(replace(facts, traffic=replace(traffic, groups=groups)), added, remark, assumption)


def _row_walk(group: GroupTraffic, fast_atom: str, cardinality: dict[str, float]) -> str | None:
    """The loop whose passes walk a read group's row: its neighbouring threads are a line or
    more apart and its index steps by less than a sector over that loop's passes (each thread's
    own row); None for any other group."""
    form = group.form
    if group.is_store or group.atomic or form is None or group.element_bytes <= 0 or "data" in form.nonlinear:
        return None
    coeffs = form.coeff_map()
    apart = coeffs.get(fast_atom)
    if apart is None or apart == UNKNOWN_COEFF or abs(apart) * group.element_bytes < LINE_BYTES:
        return None
    return next((atom for atom, step in coeffs.items() if is_loop_atom(atom) and step not in (0.0, UNKNOWN_COEFF)
                 and abs(step) * group.element_bytes < SECTOR_BYTES and cardinality.get(atom, 1.0) > 1.0), None)
