"""Writes that a launch whose data fit in L2 leaves there.

L2 is a write-back cache: a written sector reaches DRAM when L2 evicts it, not when it is
written. Nsight Compute measures each launch with the caches flushed before it (its default
cache control), so what a launch writes reaches DRAM within the launch only as far as the
launch's own traffic pushes it out. A launch whose distinct bytes (reads, writes and atomics)
stay below L2 pushes out a share of them about as large as the share of L2 it fills (sets fill
unevenly, so evictions start before L2 is full), and never less than a floor: a launch of
`F` bytes on an L2 of `C` bytes writes `max(floor, F / C)` of its written bytes to DRAM. A
launch at or above L2 writes them all.

The floor is fitted to the measured DRAM bytes of the study split (not to labels): for launches
of 1/16 to 1/2 of the RTX 3080's L2 that write a fifth of their bytes or more, the written
bytes reaching DRAM within the launch (measured DRAM bytes less the reads) are a median 0.2 of
those written; at one L2, 0.85; from two L2 on, 1.0.
"""

from __future__ import annotations

from dataclasses import replace

from perflsp.analysis.costs import CostModel
from perflsp.analysis.memory import Traffic, _bytes, combine
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu

# the share of a small launch's writes that reach DRAM within it (see the module's docstring)
WRITTEN_BACK_FLOOR = 0.2


def with_held_writes(facts: KernelFacts, gpu: Gpu, cost: CostModel) -> KernelFacts:
    """The facts with the writes a launch whose data fit in `gpu`'s L2 leaves there taken off
    its DRAM bytes; the same facts where the data exceed L2, nothing is written, or the traffic
    is not counted per array."""
    traffic = facts.traffic
    l2_bytes = gpu.l2_cache_bytes
    if not isinstance(traffic, Traffic) or not traffic.groups or not l2_bytes:
        return facts
    written = sum(g.footprint_bytes for g in traffic.groups if g.is_store or g.atomic)
    distinct = combine(traffic.groups)  # the launch's distinct bytes, reads again included
    if written <= 0.0 or distinct >= l2_bytes:
        return facts
    share = max(WRITTEN_BACK_FLOOR, distinct / l2_bytes)
    held = written * (1.0 - share)
    dram = max(distinct - held, cost.min_dram_bytes, 1.0)
    if dram >= traffic.dram_bytes:
        return facts  # the launch's floor already stands above what it moves
    remark = (f"{_bytes(held)} of the {_bytes(written)} written stay in {gpu.name}'s L2 "
              f"({_bytes(float(l2_bytes))}; the launch's data fill {distinct / l2_bytes:.0%} of it): "
              f"{share:.0%} of the writes reach DRAM within the launch")
    changed = replace(traffic, dram_bytes=dram, note=f"{traffic.note}; {remark}", remarks=(*traffic.remarks, remark))
    evidence = [replace(note, detail=f"DRAM: {changed.note}", value=dram) if note.kind == NoteKind.DRAM_TRAFFIC
                else note for note in facts.evidence]
    assumption = assumed(NoteKind.L2_WRITES, f"{gpu.name}: L2 writes back what a launch writes when it evicts it; a "
                         "launch measured with the caches flushed before it (as Nsight Compute does) writes to "
                         f"DRAM within it about the share of L2 its data fill, at least {WRITTEN_BACK_FLOOR:.0%}",
                         subject=gpu.name)
    return replace(facts, dram_bytes=dram, dram_note=changed.note, dram_remarks=changed.remarks, traffic=changed,
                   evidence=evidence, assumptions=[*facts.assumptions, assumption])
