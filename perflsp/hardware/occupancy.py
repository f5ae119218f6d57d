"""Occupancy: how many blocks (and warps) of a kernel fit on one SM at a time.

NVIDIA follows the CUDA toolkit's own calculator (`cuda_occupancy.h`,
`cudaOccMaxActiveBlocksPerMultiprocessor`) step by step, with the limits taken from the
architecture table of the GPU database. The kernel is modelled as the runtime sees a real
kernel: it may opt in to more than 48 KiB of dynamic shared memory, and uses one block barrier.
Tests compare it with the header on thousands of configurations.

AMD (wavefront 64) and Intel Xe use the documented models described on their functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from perflsp.hardware.models import AmdArchLimits, Gpu, IntelArchLimits, NvidiaArchLimits

AnyArchLimits = NvidiaArchLimits | AmdArchLimits | IntelArchLimits
UNLIMITED: int | None = None  # a block limit that does not apply


class Limiter(StrEnum):
    REGISTERS = "registers"
    SHARED_MEMORY = "shared_memory"
    WARPS = "warps"  # warp (wavefront / hardware-thread) slots per SM
    BLOCKS = "blocks"  # resident blocks (workgroups) per SM
    BARRIERS = "barriers"


# Order in which tying limiters are named: a hardware ceiling first, because when registers or
# shared memory tie with it, cutting them gains nothing.
_LIMITER_ORDER = (Limiter.WARPS, Limiter.BLOCKS, Limiter.BARRIERS, Limiter.REGISTERS, Limiter.SHARED_MEMORY)


class OccupancyInputError(ValueError):
    """An input outside what the hardware accepts at all (0 threads, 2000 threads, ...)."""


@dataclass(frozen=True, slots=True)
class OccupancyResult:
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # active warps / max warps, 0..1
    limiter: Limiter
    limiters: tuple[Limiter, ...]  # every factor that caps at the achieved value
    block_limits: dict[Limiter, int | None]  # blocks allowed by each factor (None = no limit)
    warps_per_block: int
    warp_size: int
    allocated_registers_per_block: int
    allocated_shared_memory_per_block_bytes: int
    shared_memory_per_sm_bytes: int  # the L1/shared split in effect for this launch
    notes: tuple[str, ...] = ()

    @property
    def active_threads_per_sm(self) -> int:
        return self.active_warps_per_sm * self.warp_size

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["limiter"] = self.limiter.value
        data["limiters"] = [lim.value for lim in self.limiters]
        data["block_limits"] = {lim.value: n for lim, n in self.block_limits.items()}
        data["notes"] = list(self.notes)
        return data


def occupancy(
    limits: AnyArchLimits | Gpu,
    threads_per_block: int,
    registers_per_thread: int,
    static_smem_bytes: int = 0,
    dynamic_smem_bytes: int = 0,
    *,
    carveout_percent: int | None = None,
    carveout_bytes: int | None = None,
    block_barriers: int = 1,
    sgprs_per_wave: int | None = None,
    subgroup_size: int | None = None,
) -> OccupancyResult:
    """Active blocks and warps per SM (CU, Xe-core) for one kernel configuration.

    `limits` is a GPU's architecture table (`gpu.limits`) or the `Gpu` itself.
    `registers_per_thread` are registers on NVIDIA, VGPRs (+ AGPRs on gfx90a and later) on
    AMD and GRF registers on Intel (above 128 selects large-GRF mode). Shared memory is LDS on
    AMD and SLM on Intel. `carveout_*` (NVIDIA) is the preferred shared-memory carveout,
    `sgprs_per_wave` (AMD) and `subgroup_size` (Intel) apply to those vendors only.
    Raises `OccupancyInputError` for inputs the hardware rejects outright.
    """
    limits = _limits_of(limits)
    if isinstance(limits, NvidiaArchLimits):
        return _nvidia(
            limits, threads_per_block, registers_per_thread, static_smem_bytes,
            dynamic_smem_bytes, carveout_percent, carveout_bytes, block_barriers,
        )
    if isinstance(limits, AmdArchLimits):
        return _amd(limits, threads_per_block, registers_per_thread,
                    static_smem_bytes + dynamic_smem_bytes, sgprs_per_wave)
    return _intel(limits, threads_per_block, registers_per_thread,
                  static_smem_bytes + dynamic_smem_bytes, subgroup_size)


# --------------------------------------------------------------------------- NVIDIA


def _nvidia(
    lim: NvidiaArchLimits,
    threads: int,
    regs: int,
    static_smem: int,
    dynamic_smem: int,
    carveout_percent: int | None,
    carveout_bytes: int | None,
    block_barriers: int,
) -> OccupancyResult:
    cc = f"compute capability {lim.key}"
    _check_int("threads per block", threads, 1, lim.max_threads_per_block, cc)
    _check_int("registers per thread", regs, 0, lim.max_registers_per_thread, cc)
    _check_int("static shared memory per block", static_smem, 0,
               lim.default_shared_memory_per_block_bytes, cc, bytes_=True,
               hint="larger arrays must use dynamic shared memory")
    _check_int("dynamic shared memory per block", dynamic_smem, 0,
               lim.max_shared_memory_per_block_bytes, cc, bytes_=True)
    _check_int("block barriers", block_barriers, 0, 16, cc)
    if static_smem + dynamic_smem > lim.max_shared_memory_per_block_bytes:
        raise OccupancyInputError(
            f"shared memory per block {_kib(static_smem + dynamic_smem)} (static + dynamic) "
            f"exceeds the {_kib(lim.max_shared_memory_per_block_bytes)} a block may use on {cc}"
        )
    if carveout_percent is not None and carveout_bytes is not None:
        raise OccupancyInputError("give the shared-memory carveout as a percentage or in bytes, not both")
    if carveout_percent is not None:
        _check_int("shared-memory carveout (percent)", carveout_percent, 0, 100, cc)
    if carveout_bytes is not None:
        _check_int("shared-memory carveout", carveout_bytes, 0, lim.shared_memory_per_sm_bytes, cc, bytes_=True)

    warp = lim.warp_size
    warps_per_block = math.ceil(threads / warp)
    notes: list[str] = []

    # Registers are allocated per warp, in units of `register_allocation_unit`, from each of the
    # SM's sub-partitions; the per-block check rounds warps up to the sub-partition count.
    regs_per_warp = _round_up(regs * warp, lim.register_allocation_unit)
    regs_per_block = regs_per_warp * warps_per_block
    regs_assumed = regs_per_warp * _round_up(warps_per_block, lim.sub_partitions_per_sm)
    if regs_assumed > lim.max_registers_per_block or regs_per_block > lim.max_registers_per_block:
        by_regs: int | None = 0
        notes.append(
            f"{regs} registers x {threads} threads exceed the {lim.max_registers_per_block} "
            "registers a block may use: the launch fails"
        )
    elif regs_per_warp == 0:
        by_regs = UNLIMITED
    else:
        warps_per_partition = (lim.registers_per_sm // lim.sub_partitions_per_sm) // regs_per_warp
        by_regs = warps_per_partition * lim.sub_partitions_per_sm // warps_per_block

    by_warps = lim.max_warps_per_sm // warps_per_block
    by_blocks = lim.max_blocks_per_sm

    # Shared memory: the driver reserves some per block; allocation is in units; the SM's
    # shared size is the carveout preference, raised to the next supported size if one block
    # would not fit.
    smem_per_block = _round_up(static_smem + lim.reserved_shared_memory_per_block_bytes + dynamic_smem,
                               lim.shared_memory_allocation_unit_bytes)
    preference = lim.shared_memory_per_sm_bytes
    if carveout_percent is not None:
        preference = carveout_percent * lim.shared_memory_per_sm_bytes // 100
    elif carveout_bytes is not None:
        preference = carveout_bytes
    preference = _carveout_at_least(lim, preference)
    smem_per_sm = preference if preference >= smem_per_block else _carveout_at_least(lim, smem_per_block)
    by_smem = UNLIMITED if smem_per_block == 0 else smem_per_sm // smem_per_block
    if dynamic_smem + static_smem > lim.default_shared_memory_per_block_bytes:
        notes.append(
            f"more than {_kib(lim.default_shared_memory_per_block_bytes)} of shared memory per block "
            "needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)"
        )

    limits: dict[Limiter, int | None] = {
        Limiter.REGISTERS: by_regs,
        Limiter.SHARED_MEMORY: by_smem,
        Limiter.WARPS: by_warps,
        Limiter.BLOCKS: by_blocks,
    }
    # From cc 9.0 on, block barriers are a per-SM resource too.
    if lim.compute_capability_tuple[0] >= 9 and block_barriers > 0:
        limits[Limiter.BARRIERS] = by_blocks * lim.block_barrier_factor // block_barriers
    return _finish(limits, warps_per_block, lim.max_warps_per_sm, warp, regs_per_block,
                   smem_per_block, smem_per_sm, threads, notes)


def _carveout_at_least(lim: NvidiaArchLimits, size: int) -> int:
    """The smallest supported L1/shared split holding `size` bytes of shared memory."""
    for option in lim.shared_memory_carveouts_bytes:
        if option >= size:
            return option
    return lim.shared_memory_carveouts_bytes[-1]


# --------------------------------------------------------------------------- AMD


def _amd(lim: AmdArchLimits, threads: int, vgprs: int, lds: int, sgprs: int | None) -> OccupancyResult:
    """CDNA model (LLVM AMDGPU occupancy rules):

    - a workgroup's waves (64 threads each) are spread over the CU's SIMDs; each SIMD holds at
      most `max_waves_per_simd` waves, fewer when VGPRs (rounded to the allocation granule,
      from a file of `vgprs_per_simd_lane` per lane) or SGPRs (800 per SIMD) run out;
    - workgroups per CU = floor(waves per SIMD x SIMDs / waves per workgroup);
    - multi-wave workgroups are also capped at `max_workgroups_per_cu` (barrier resources);
    - LDS: floor(LDS per CU / LDS per workgroup), without allocation-granule rounding.
    """
    where = f"{lim.key}"
    _check_int("threads per workgroup", threads, 1, lim.max_workgroup_size, where)
    _check_int("VGPRs per thread", vgprs, 0, lim.max_vgprs_per_thread, where)
    _check_int("LDS per workgroup", lds, 0, lim.max_shared_memory_per_block_bytes, where, bytes_=True)
    if sgprs is not None:
        _check_int("SGPRs per wave", sgprs, 0, lim.max_sgprs_per_wave, where)
    waves_per_wg = math.ceil(threads / lim.wavefront_size)
    waves_per_simd = lim.max_waves_per_simd
    by_regs: int | None = UNLIMITED
    reg_waves = waves_per_simd
    if vgprs > 0:
        reg_waves = min(reg_waves, lim.vgprs_per_simd_lane // _round_up(vgprs, lim.vgpr_allocation_granule))
    if sgprs:
        reg_waves = min(reg_waves, lim.sgprs_per_simd // _round_up(sgprs, lim.sgpr_allocation_granule))
    if vgprs > 0 or sgprs:
        by_regs = reg_waves * lim.simds_per_cu // waves_per_wg
    by_warps = waves_per_simd * lim.simds_per_cu // waves_per_wg
    by_blocks = lim.max_workgroups_per_cu if waves_per_wg > 1 else lim.max_warps_per_sm
    by_lds = UNLIMITED if lds == 0 else lim.shared_memory_per_sm_bytes // lds
    limits = {
        Limiter.REGISTERS: by_regs,
        Limiter.SHARED_MEMORY: by_lds,
        Limiter.WARPS: by_warps,
        Limiter.BLOCKS: by_blocks,
    }
    regs_per_wg = _round_up(vgprs, lim.vgpr_allocation_granule) * lim.wavefront_size * waves_per_wg
    return _finish(limits, waves_per_wg, lim.max_warps_per_sm, lim.wavefront_size, regs_per_wg,
                   lds, lim.shared_memory_per_sm_bytes, threads, [])


# --------------------------------------------------------------------------- Intel


def _intel(lim: IntelArchLimits, threads: int, grf: int, slm: int, subgroup: int | None) -> OccupancyResult:
    """Xe-HPC model (oneAPI GPU occupancy calculator):

    - each sub-group runs on one hardware thread; an Xe-core has vector engines x threads per
      engine of them, half as many in large-GRF mode (more than 128 registers per thread);
    - work-groups per Xe-core = floor(hardware threads / sub-groups per work-group), at most
      `max_workgroups_per_xe_core`, and at most `barriers_per_xe_core` when a work-group has
      more than one sub-group (it needs a barrier);
    - SLM per work-group is rounded up to the next allocation size.
    """
    where = f"{lim.key}"
    subgroup = subgroup or lim.warp_size
    if subgroup not in lim.subgroup_sizes:
        raise OccupancyInputError(
            f"sub-group size must be one of {', '.join(map(str, lim.subgroup_sizes))} on {where} (got {subgroup})"
        )
    _check_int("threads per work-group", threads, 1, lim.max_workgroup_size, where)
    _check_int("registers per thread", grf, 0, lim.max_registers_per_thread, where)
    _check_int("SLM per work-group", slm, 0, lim.max_shared_memory_per_block_bytes, where, bytes_=True)
    large_grf = grf > lim.registers_per_thread_small_grf
    subgroups = math.ceil(threads / subgroup)
    by_blocks = lim.max_workgroups_per_xe_core
    slm_alloc = next(s * 1024 for s in lim.slm_allocation_sizes_kib if s * 1024 >= slm)
    by_slm = UNLIMITED if slm_alloc == 0 else lim.shared_memory_per_sm_bytes // slm_alloc
    limits = {
        Limiter.REGISTERS: (lim.max_warps_per_sm // 2) // subgroups if large_grf else UNLIMITED,
        Limiter.SHARED_MEMORY: by_slm,
        Limiter.WARPS: lim.max_warps_per_sm // subgroups,
        Limiter.BLOCKS: by_blocks,
    }
    if subgroups > 1:
        limits[Limiter.BARRIERS] = lim.barriers_per_xe_core
    notes = ["large-GRF mode (more than 128 registers per thread) halves the hardware threads"] if large_grf else []
    return _finish(limits, subgroups, lim.max_warps_per_sm, subgroup, grf * subgroup * subgroups,
                   slm_alloc, lim.shared_memory_per_sm_bytes, threads, notes)


# --------------------------------------------------------------------------- shared


def _finish(
    limits: dict[Limiter, int | None],
    warps_per_block: int,
    max_warps: int,
    warp_size: int,
    regs_per_block: int,
    smem_per_block: int,
    smem_per_sm: int,
    threads: int,
    notes: list[str],
) -> OccupancyResult:
    finite = [n for n in limits.values() if n is not None]
    blocks = min(finite)
    limiters = tuple(lim for lim in _LIMITER_ORDER if limits.get(lim, -1) == blocks)
    if threads % warp_size:
        notes.append(
            f"{threads} threads is not a multiple of the warp size {warp_size}: "
            f"{warps_per_block * warp_size - threads} lanes of the last warp idle"
        )
    if blocks == 0 and not any("fails" in n for n in notes):
        notes.append(f"no block fits on an SM ({limiters[0].value} exhausted): the launch fails")
    active_warps = blocks * warps_per_block
    return OccupancyResult(
        active_blocks_per_sm=blocks,
        active_warps_per_sm=active_warps,
        max_warps_per_sm=max_warps,
        occupancy=active_warps / max_warps,
        limiter=limiters[0],
        limiters=limiters,
        block_limits=limits,
        warps_per_block=warps_per_block,
        warp_size=warp_size,
        allocated_registers_per_block=regs_per_block,
        allocated_shared_memory_per_block_bytes=smem_per_block,
        shared_memory_per_sm_bytes=smem_per_sm,
        notes=tuple(notes),
    )


def _limits_of(limits: AnyArchLimits | Gpu) -> AnyArchLimits:
    return limits.limits if isinstance(limits, Gpu) else limits


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def _check_int(
    what: str, value: object, low: int, high: int, where: str, *, bytes_: bool = False, hint: str = ""
) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OccupancyInputError(f"{what} must be a whole number (got {value!r})")
    if low <= value <= high:
        return
    shown = (lambda n: _kib(n)) if bytes_ else str
    message = f"{what} must be between {shown(low)} and {shown(high)} on {where} (got {shown(value)})"
    raise OccupancyInputError(message + (f"; {hint}" if hint else ""))


# --------------------------------------------------------------------------- block size


@dataclass(frozen=True, slots=True)
class BlockSizeSuggestion:
    block_size: int
    active_blocks_per_sm: int
    occupancy: float
    min_grid_size: int | None  # blocks to fill every SM once (None without an SM count)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def best_block_size(
    limits: AnyArchLimits | Gpu,
    registers_per_thread: int,
    static_smem_bytes: int = 0,
    dynamic_smem_bytes: int | Callable[[int], int] = 0,
    *,
    max_threads_per_block: int | None = None,
    sm_count: int | None = None,
    **kwargs: Any,
) -> BlockSizeSuggestion:
    """The block size with the most resident threads, as `cudaOccupancyMaxPotentialBlockSize`.

    Block sizes are tried from the largest (capped by `max_threads_per_block`, e.g. from
    `__launch_bounds__`) down in warp-size steps; the first that reaches the maximum wins, and
    ties keep the larger block. `dynamic_smem_bytes` may depend on the block size.
    """
    limits = _limits_of(limits)
    limit = limits.max_threads_per_block
    if max_threads_per_block is not None:
        _check_int("max threads per block", max_threads_per_block, 1, limit, limits.key)
        limit = max_threads_per_block
    step = kwargs.get("subgroup_size") or limits.warp_size
    best = (0, 0, 0)  # threads resident, block size, blocks
    max_threads_resident = limits.max_warps_per_sm * step
    for aligned in range(_round_up(limit, step), 0, -step):
        size = min(limit, aligned)
        dyn = dynamic_smem_bytes(size) if callable(dynamic_smem_bytes) else dynamic_smem_bytes
        try:
            result = occupancy(limits, size, registers_per_thread, static_smem_bytes, dyn, **kwargs)
            blocks = result.active_blocks_per_sm
        except OccupancyInputError:
            if size == limit and not callable(dynamic_smem_bytes):
                raise  # the kernel's own figures are invalid, not just this size
            blocks = 0
        if size * blocks > best[0]:
            best = (size * blocks, size, blocks)
        if best[0] == max_threads_resident:
            break
    _, size, blocks = best
    return BlockSizeSuggestion(
        block_size=size,
        active_blocks_per_sm=blocks,
        occupancy=(blocks * math.ceil(size / step)) / limits.max_warps_per_sm if size else 0.0,
        min_grid_size=None if sm_count is None else blocks * sm_count,
    )


# --------------------------------------------------------------------------- next step


@dataclass(frozen=True, slots=True)
class NextStep:
    """What it takes to fit one more block per SM, changing one resource at a time."""

    current: OccupancyResult
    target_active_blocks_per_sm: int | None  # None: already at the block-size ceiling
    target_occupancy: float | None
    max_registers_per_thread: int | None  # None: registers alone cannot reach the target
    max_shared_memory_per_block_bytes: int | None  # static + dynamic; None: smem alone cannot
    explanation: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "target_active_blocks_per_sm": self.target_active_blocks_per_sm,
            "target_occupancy": self.target_occupancy,
            "max_registers_per_thread": self.max_registers_per_thread,
            "max_shared_memory_per_block_bytes": self.max_shared_memory_per_block_bytes,
            "explanation": list(self.explanation),
        }


def what_would_it_take(
    limits: AnyArchLimits | Gpu,
    threads_per_block: int,
    registers_per_thread: int,
    static_smem_bytes: int = 0,
    dynamic_smem_bytes: int = 0,
    **kwargs: Any,
) -> NextStep:
    """Registers per thread, or shared memory per block, that give one more resident block."""
    limits = _limits_of(limits)
    current = occupancy(limits, threads_per_block, registers_per_thread, static_smem_bytes,
                        dynamic_smem_bytes, **kwargs)
    target = current.active_blocks_per_sm + 1
    ceiling = min(
        n for lim, n in current.block_limits.items()
        if n is not None and lim not in (Limiter.REGISTERS, Limiter.SHARED_MEMORY)
    )
    if target > ceiling:
        names = ", ".join(
            lim.value for lim, n in current.block_limits.items()
            if n == ceiling and lim not in (Limiter.REGISTERS, Limiter.SHARED_MEMORY)
        )
        return NextStep(
            current, None, None, None, None,
            (f"{current.active_blocks_per_sm} blocks per SM is the ceiling for "
             f"{threads_per_block}-thread blocks ({names}); only a different block size changes it",),
        )
    target_occ = target * current.warps_per_block / current.max_warps_per_sm

    def blocks_with(regs: int, smem_total: int) -> int:
        static = min(static_smem_bytes, smem_total)
        return occupancy(limits, threads_per_block, regs, static, smem_total - static,
                         **kwargs).active_blocks_per_sm

    total_smem = static_smem_bytes + dynamic_smem_bytes
    max_regs = next((r for r in range(registers_per_thread, -1, -1)
                     if blocks_with(r, total_smem) >= target), None)
    max_smem = _largest_smem(limits, total_smem, lambda s: blocks_with(registers_per_thread, s) >= target)
    if max_regs == registers_per_thread:
        max_regs = None  # registers are not what holds it back
    if max_smem == total_smem:
        max_smem = None
    lines = [f"{target} blocks per SM ({target_occ:.0%} occupancy) needs:"]
    if max_regs is not None:
        lines.append(f"at most {max_regs} registers per thread (now {registers_per_thread}), "
                     "e.g. with __launch_bounds__ or -maxrregcount")
    if max_smem is not None:
        lines.append(f"at most {_kib(max_smem)} of shared memory per block (now {_kib(total_smem)})")
    if max_regs is None and max_smem is None:
        lines.append("fewer registers and less shared memory together; neither alone is enough")
    return NextStep(current, target, target_occ, max_regs, max_smem, tuple(lines))


def _largest_smem(limits: AnyArchLimits, total: int, fits: Callable[[int], bool]) -> int | None:
    """The largest shared-memory size <= total (in allocation units) for which `fits` holds."""
    unit = max(1, limits.shared_memory_allocation_unit_bytes)
    top = total - total % unit
    if isinstance(limits, NvidiaArchLimits):
        # a carveout preference can make blocks-per-SM non-monotone in size: scan every unit
        return next((s for s in range(top, -1, -unit) if fits(s)), None)
    if not fits(0):
        return None
    low, high = 0, top // unit  # LDS / SLM limits only fall as the size grows: bisect
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid * unit):
            low = mid
        else:
            high = mid - 1
    return low * unit
