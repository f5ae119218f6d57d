"""Local memory that reaches DRAM: a thread's stack frame (arrays it indexes at run time,
registers the compiler spills), which the compiled code loads and stores with `LDL`/`STL`.

Local memory lives in DRAM and is cached in L1 and L2 like global data. The frames of the
threads an SM holds at once either fit in its L1 (the unified L1/shared memory less the
blocks' shared memory) or they do not:
- they fit: local loads and stores stay on chip, DRAM sees none of them;
- they do not: frames leave the chip. Each thread's frame is written to DRAM and read back at
  least once, and never more than every byte its loads and stores move. The engine counts the
  least of those, twice the frames of the launch, within the bytes moved.

Measured against Nsight Compute's DRAM bytes on the study split, kernels whose frames exceed
L1 moved beyond their global traffic from one frame a thread (large per-thread tables walked
once) to about a hundred (small top-k lists updated in an inner loop), and no more than their
local loads and stores; kernels whose frames fit in L1 moved none. Twice the frames keeps the
first within 2x and brings the others closer (the small-frame ones stay 2-9x under).
"""

from __future__ import annotations

from perflsp.analysis.memory import _bytes, with_dram_added
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, occupancy

FRAME_PASSES = 2.0  # a frame that leaves the chip: written to DRAM once, read back once


def with_local_traffic(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None, registers_per_thread: int | None,
                       shared_bytes: int) -> KernelFacts:
    """The facts with the local-memory bytes that leave `gpu`'s SMs added to the DRAM bytes;
    the same facts where the compiled code has no stack, moves nothing there, or the frames of
    the threads an SM holds fit in its L1."""
    stack = facts.stack
    moved = facts.per_item.local_bytes * (facts.work_items or 0.0)
    l1_and_shared = getattr(gpu.limits, "unified_l1_shared_kib", None)
    if stack is None or stack.bytes_per_thread <= 0 or moved <= 0.0 or not threads_per_block or not l1_and_shared:
        return facts
    try:
        registers = stack.registers or registers_per_thread or 32
        held = occupancy(gpu, threads_per_block, registers, shared_bytes).active_blocks_per_sm
    except (OccupancyInputError, ValueError, TypeError):
        return facts  # a launch the GPU rejects, or a user GPU without occupancy tables
    resident = max(1, held) * threads_per_block
    frames_on_sm = stack.bytes_per_thread * min(float(resident), stack.threads)
    l1 = max(0.0, l1_and_shared * 1024.0 - max(1, held) * shared_bytes)
    if frames_on_sm <= l1:
        return facts
    added = min(moved, FRAME_PASSES * stack.bytes_per_thread * stack.threads)
    remark = (f"{_bytes(added)} of local memory: the {stack.bytes_per_thread:,} B stack frames of the "
              f"{resident:,} threads an SM holds ({_bytes(frames_on_sm)}) exceed its L1 "
              f"({_bytes(l1)}), each frame written to DRAM and read back (the local loads and stores "
              f"move {_bytes(moved)})")
    return with_dram_added(facts, added, remark, assumed(
        NoteKind.LOCAL_MEMORY, f"{gpu.name}: stack frames that do not fit in an SM's L1 leave the chip; each "
        "thread's frame counted written to DRAM and read back once (at most what its local loads and stores move)",
        subject=gpu.name))
