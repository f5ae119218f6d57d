"""The threads a GPU holds at once for a launch, and the L1 each SM has left for them: what the
per-GPU cache rules (`local_traffic`, `pass_rereads`, `line_walks`) weigh a working set
against."""

from __future__ import annotations

from dataclasses import dataclass

from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, occupancy


@dataclass(frozen=True, slots=True)
class HeldThreads:
    on_sm: float  # threads an SM holds at once (a launch smaller than the GPU: its share)
    on_gpu: float  # threads all SMs hold at once, at most those launched
    l1_bytes: float  # an SM's unified L1/shared memory less the shared memory of its blocks


def held_threads(gpu: Gpu, work_items: float | None, threads_per_block: int | None, registers_per_thread: int | None,
                 shared_bytes: int) -> HeldThreads | None:
    """None where the GPU has no L1 figure or occupancy tables, the launch has no block size, or
    the GPU rejects it (32 registers a thread where ptxas did not say)."""
    l1_and_shared = getattr(gpu.limits, "unified_l1_shared_kib", None)
    if not l1_and_shared or not threads_per_block or not work_items or work_items < 1.0:
        return None
    try:
        held = occupancy(gpu, threads_per_block, registers_per_thread or 32, shared_bytes).active_blocks_per_sm
    except (OccupancyInputError, ValueError, TypeError):
        return None
    on_sm = max(1.0, min(float(max(1, held) * threads_per_block), work_items / gpu.sm_count))
    return HeldThreads(on_sm, min(work_items, on_sm * gpu.sm_count),
                       max(0.0, l1_and_shared * 1024.0 - max(1, held) * shared_bytes))
