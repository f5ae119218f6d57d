"""Local memory that reaches DRAM: a thread's stack frame (arrays it indexes at run time,
registers the compiler spills), which the compiled code loads and stores with `LDL`/`STL`.

Local memory lives in DRAM and is cached in L1 and L2 like global data. The frames of the
threads an SM holds at once either fit in its L1 (the unified L1/shared memory less the
blocks' shared memory) or they do not:
- they fit: local loads and stores stay on chip, DRAM sees none of them;
- they do not, and the frames of the threads all SMs hold fit in L2: what L1 misses, L2 holds.
  Each thread's frame is written to DRAM and read back at least once, and never more than every
  byte its loads and stores move; the engine counts the least of those, twice the frames of the
  launch, within the bytes moved;
- they fit in neither: L1 keeps the share of each SM's frames it can hold, and every load and
  store it misses goes to DRAM: the bytes moved times the share L1 cannot hold (accesses taken as
  spread evenly over the frames), at least the twice-the-frames above and at most eight frames a
  thread (`MAX_FRAME_PASSES`): the bytes moved are themselves an estimate, and where they pass
  through branches the data decide (an insertion into a short sorted list) the walk's assumed
  shares can put them a hundred times over.

Measured against Nsight Compute's DRAM bytes on the study split (an RTX 3080, whose L2 is smaller
than its SMs' L1 together: frames that exceed an SM's L1 exceed L2 as well), local traffic beyond
the global: none where the frames fit in L1; 4.6 frames a thread for FFT butterflies over a
176 B frame (2.94 GB moved, 58% of it beyond L1: 1.7 GB), 9 for a hash's 1,120 B frames (6.6 GB
moved, 77% beyond L1), about 12 for top-k lists of 128 B updated in an inner loop, and one or
less for large per-thread tables walked about once.
"""

from __future__ import annotations

from perflsp.analysis.held_threads import held_threads
from perflsp.analysis.memory import _bytes, with_dram_added
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.hardware.models import Gpu

FRAME_PASSES = 2.0  # a frame that leaves the chip: written to DRAM once, read back once
MAX_FRAME_PASSES = 8.0  # at most this many frames a thread for the local accesses L1 misses (see above)


def with_local_traffic(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None, registers_per_thread: int | None,
                       shared_bytes: int) -> KernelFacts:
    """The facts with the local-memory bytes that leave `gpu`'s SMs added to the DRAM bytes;
    the same facts where the compiled code has no stack, moves nothing there, or the frames of
    the threads an SM holds fit in its L1."""
    stack = facts.stack
    moved = facts.per_item.local_bytes * (facts.work_items or 0.0)
    if stack is None or stack.bytes_per_thread <= 0 or moved <= 0.0:
        return facts
    held = held_threads(gpu, stack.threads, threads_per_block, stack.registers or registers_per_thread, shared_bytes)
    if held is None:
        return facts
    on_sm, l1 = held.on_sm, held.l1_bytes
    frames_on_sm = stack.bytes_per_thread * on_sm
    if frames_on_sm <= l1:
        return facts
    frames = stack.bytes_per_thread * stack.threads
    added = min(moved, FRAME_PASSES * frames)
    how = f"each frame written to DRAM and read back (the local loads and stores move {_bytes(moved)})"
    rule = ("stack frames that do not fit in an SM's L1 leave the chip; each thread's frame counted written to DRAM "
            "and read back once (at most what its local loads and stores move)")
    live = stack.bytes_per_thread * held.on_gpu  # the frames all SMs hold
    l2 = gpu.l2_cache_bytes
    if l2 is not None and live > l2:
        missed = 1.0 - l1 / frames_on_sm
        added = max(added, min(moved * missed, MAX_FRAME_PASSES * frames))
        how = (f"and those of all SMs ({_bytes(live)}) its L2: the {missed:.0%} of the local loads and stores "
               f"({_bytes(moved)}) that L1 cannot hold go to DRAM, at most {MAX_FRAME_PASSES:g} frames a thread")
        rule = ("stack frames that fit in neither an SM's L1 nor L2: the share of the local loads and stores L1 "
                f"cannot hold counted as DRAM traffic (at most {MAX_FRAME_PASSES:g} frames a thread)")
    remark = (f"{_bytes(added)} of local memory: the {stack.bytes_per_thread:,} B stack frames of the "
              f"{on_sm:,.0f} threads an SM holds ({_bytes(frames_on_sm)}) exceed its L1 ({_bytes(l1)}), {how}")
    return with_dram_added(facts, added, remark, assumed(NoteKind.LOCAL_MEMORY, f"{gpu.name}: {rule}",
                                                         subject=gpu.name))
