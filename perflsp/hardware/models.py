"""Validated models of the GPU database: architecture limits, peaks and GPUs.

Two kinds of models live here: the *entries* as written in a TOML file (`GpuEntry`, `PeakEntry`,
strict about unknown fields so typos are reported) and the *resolved* objects the rest of
perflsp uses (`Gpu`, `Peak`, the `*ArchLimits`). The loader in `database.py` turns one into the
other and checks what a single model cannot (arch exists, rates agree with values, ...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from perflsp.hardware.precision import ROOFLINE_PRECISIONS, Precision

Vendor = Literal["NVIDIA", "AMD", "Intel"]
KIB = 1024
MIB = 1024 * 1024


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- architectures


class NvidiaThroughput(_Frozen):
    """Results per clock per SM (an FMA is one result); CUDA Best Practices Guide Table 5."""

    fp32: int = Field(gt=0)
    fp64: int = Field(gt=0)
    fp16: int = Field(gt=0)  # scalar half results
    int32_add: int = Field(gt=0)
    int32_mad: int = Field(gt=0)


class NvidiaArchLimits(_Frozen):
    """Occupancy limits and per-SM throughput of one NVIDIA compute capability."""

    vendor: Literal["NVIDIA"]
    key: str  # the compute capability, e.g. "8.6"
    family: str
    warp_size: int = Field(gt=0)
    max_threads_per_block: int = Field(gt=0)
    max_threads_per_sm: int = Field(gt=0)
    max_warps_per_sm: int = Field(gt=0)
    max_blocks_per_sm: int = Field(gt=0)
    registers_per_sm: int = Field(gt=0)
    max_registers_per_block: int = Field(gt=0)
    max_registers_per_thread: int = Field(gt=0)
    register_allocation_unit: int = Field(gt=0)
    sub_partitions_per_sm: int = Field(gt=0)
    unified_l1_shared_kib: int = Field(gt=0)
    shared_memory_per_sm_kib: int = Field(gt=0)
    shared_memory_carveouts_kib: tuple[int, ...]
    max_shared_memory_per_block_kib: int = Field(gt=0)
    default_shared_memory_per_block_kib: int = Field(gt=0)
    reserved_shared_memory_per_block_kib: int = Field(ge=0)
    shared_memory_allocation_unit_bytes: int = Field(gt=0)
    block_barrier_factor: int = Field(gt=0)
    results_per_clk_per_sm: NvidiaThroughput
    sources: tuple[str, ...] = ()
    notes: str | None = None

    @property
    def compute_capability(self) -> str:
        return self.key

    @property
    def compute_capability_tuple(self) -> tuple[int, int]:
        major, minor = self.key.split(".")
        return int(major), int(minor)

    @property
    def shared_memory_per_sm_bytes(self) -> int:
        return self.shared_memory_per_sm_kib * KIB

    @property
    def max_shared_memory_per_block_bytes(self) -> int:
        """The opt-in maximum (static + dynamic) a block may use."""
        return self.max_shared_memory_per_block_kib * KIB

    @property
    def default_shared_memory_per_block_bytes(self) -> int:
        """Without `cudaFuncSetAttribute` opt-in; also the limit for static `__shared__` data."""
        return self.default_shared_memory_per_block_kib * KIB

    @property
    def reserved_shared_memory_per_block_bytes(self) -> int:
        return self.reserved_shared_memory_per_block_kib * KIB

    @property
    def shared_memory_carveouts_bytes(self) -> tuple[int, ...]:
        return tuple(k * KIB for k in self.shared_memory_carveouts_kib)

    @property
    def max_registers_per_thread_for_occupancy(self) -> int:
        return self.max_registers_per_thread


class AmdArchLimits(_Frozen):
    """Occupancy parameters of one AMD gfx target (LLVM AMDGPU backend, ROCm docs)."""

    vendor: Literal["AMD"]
    key: str  # gfx target, e.g. "gfx90a"
    family: str
    products: tuple[str, ...] = ()
    wavefront_size: int = Field(gt=0)
    max_workgroup_size: int = Field(gt=0)
    simds_per_cu: int = Field(gt=0)
    max_waves_per_simd: int = Field(gt=0)
    lds_per_cu_kib: int = Field(gt=0)
    max_lds_per_workgroup_kib: int = Field(gt=0)
    vgprs_per_simd_lane: int = Field(gt=0)
    max_vgprs_per_thread: int = Field(gt=0)
    unified_agprs: bool
    vgpr_allocation_granule: int = Field(gt=0)
    sgprs_per_simd: int = Field(gt=0)
    max_sgprs_per_wave: int = Field(gt=0)
    sgpr_allocation_granule: int = Field(gt=0)
    max_workgroups_per_cu: int = Field(gt=0)
    ops_per_clk_per_cu: dict[Precision, int] = {}
    sources: tuple[str, ...] = ()
    notes: str | None = None

    @property
    def warp_size(self) -> int:
        return self.wavefront_size

    @property
    def max_threads_per_block(self) -> int:
        return self.max_workgroup_size

    @property
    def max_warps_per_sm(self) -> int:
        return self.simds_per_cu * self.max_waves_per_simd

    @property
    def max_registers_per_thread(self) -> int:
        return self.max_vgprs_per_thread

    @property
    def max_shared_memory_per_block_bytes(self) -> int:
        return self.max_lds_per_workgroup_kib * KIB

    @property
    def shared_memory_per_sm_bytes(self) -> int:
        return self.lds_per_cu_kib * KIB

    @property
    def shared_memory_allocation_unit_bytes(self) -> int:
        return 1  # LDS granularity is not modelled (not in the sourced tables)


class IntelArchLimits(_Frozen):
    """Occupancy parameters of an Intel Xe device (oneAPI GPU occupancy calculator)."""

    vendor: Literal["Intel"]
    key: str  # occupancy-calculator device code, e.g. "xe_hpc_pvc"
    family: str
    products: tuple[str, ...] = ()
    vector_engines_per_xe_core: int = Field(gt=0)
    threads_per_vector_engine: int = Field(gt=0)
    subgroup_sizes: tuple[int, ...]
    registers_per_thread_small_grf: int = Field(gt=0)
    slm_per_xe_core_kib: int = Field(gt=0)
    max_slm_per_workgroup_kib: int = Field(gt=0)
    slm_allocation_sizes_kib: tuple[int, ...]
    max_workgroup_size: int = Field(gt=0)
    max_workgroups_per_xe_core: int = Field(gt=0)
    barriers_per_xe_core: int = Field(gt=0)
    ops_per_clk_per_xe_core: dict[Precision, int] = {}
    sources: tuple[str, ...] = ()
    notes: str | None = None

    @property
    def warp_size(self) -> int:
        """The narrowest sub-group; compilers pick 16 or 32 per kernel."""
        return min(self.subgroup_sizes)

    @property
    def max_threads_per_block(self) -> int:
        return self.max_workgroup_size

    @property
    def max_warps_per_sm(self) -> int:
        """Hardware threads per Xe-core in small-GRF mode (one sub-group each)."""
        return self.vector_engines_per_xe_core * self.threads_per_vector_engine

    @property
    def max_registers_per_thread(self) -> int:
        return 2 * self.registers_per_thread_small_grf  # large-GRF mode

    @property
    def max_shared_memory_per_block_bytes(self) -> int:
        return self.max_slm_per_workgroup_kib * KIB

    @property
    def shared_memory_per_sm_bytes(self) -> int:
        return self.slm_per_xe_core_kib * KIB

    @property
    def shared_memory_allocation_unit_bytes(self) -> int:
        return KIB


ArchLimits = Annotated[
    NvidiaArchLimits | AmdArchLimits | IntelArchLimits, Field(discriminator="vendor")
]


class Source(_Frozen):
    title: str
    url: str | None = None
    kind: Literal["vendor-doc", "vendor-doc-copy", "third-party", "derived"]


# --------------------------------------------------------------------------- file entries


class PeakEntry(_Frozen):
    """One peak as written in a file: a value, a per-SM rate, or both."""

    tflops: float | None = Field(default=None, gt=0)
    ops_per_clk_per_sm: float | None = Field(default=None, gt=0)
    results_per_clk_per_sm: float | None = Field(default=None, gt=0)  # FMA-style: x2 ops
    clock: Literal["boost", "base", "unstated"] | None = None
    clock_mhz: float | None = Field(default=None, gt=0)
    origin: Literal["quoted", "computed"] | None = None
    sources: tuple[str, ...] = ()


class GpuEntry(_Frozen):
    """One `[[gpu]]` table, shipped or user-defined."""

    id: str = Field(min_length=1)
    name: str | None = None
    vendor: Vendor
    aliases: tuple[str, ...] = ()
    architecture: str | None = None
    chip: str | None = None
    compute_capability: str | None = None
    gfx_target: str | None = None
    sm_count: int = Field(gt=0)
    base_clock_mhz: float | None = Field(default=None, gt=0)
    boost_clock_mhz: float = Field(gt=0)
    memory_gb: float | None = Field(default=None, gt=0)
    memory_type: str | None = None
    memory_bus_bits: int | None = Field(default=None, gt=0)
    memory_bandwidth_gbs: float = Field(gt=0)
    l2_cache_mib: float | None = Field(default=None, gt=0)
    last_level_cache_mib: float | None = Field(default=None, gt=0)
    tdp_w: float | None = Field(default=None, gt=0)
    other_dram_traffic_gbs: float = Field(default=0.0, ge=0)  # a display's scanout while kernels run
    unsupported: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    notes: str | None = None
    sources: dict[str, tuple[str, ...]] = {}
    peaks: dict[Precision, PeakEntry] = {}


# Fields a GPU may list as `unknown` besides precisions.
OPTIONAL_GPU_FIELDS = (
    "base_clock_mhz",
    "memory_gb",
    "memory_type",
    "memory_bus_bits",
    "l2_cache_mib",
    "last_level_cache_mib",
    "tdp_w",
)


# --------------------------------------------------------------------------- resolved


class Peak(_Frozen):
    precision: Precision
    tflops: float = Field(gt=0)  # TOPS for integer kinds
    ops_per_clk_per_sm: float | None = None
    clock_mhz: float | None = None  # the clock the figure assumes; None = not stated
    clock_basis: Literal["boost", "base", "stated", "unstated"]
    origin: Literal["quoted", "computed", "derived"]
    sources: tuple[str, ...] = ()

    @property
    def ops_per_s(self) -> float:
        return self.tflops * 1e12

    def describe_clock(self) -> str:
        if self.clock_mhz is None:
            return "clock not stated by the source"
        if self.clock_basis in ("boost", "base"):
            return f"{self.clock_basis} clock {self.clock_mhz:g} MHz"
        return f"{self.clock_mhz:g} MHz"


class Gpu(_Frozen):
    id: str
    name: str
    vendor: Vendor
    aliases: tuple[str, ...] = ()
    architecture: str | None = None
    chip: str | None = None
    compute_capability: str | None = None
    gfx_target: str | None = None
    sm_count: int
    base_clock_mhz: float | None = None
    boost_clock_mhz: float
    memory_gb: float | None = None
    memory_type: str | None = None
    memory_bus_bits: int | None = None
    memory_bandwidth_gbs: float
    l2_cache_mib: float | None = None
    last_level_cache_mib: float | None = None
    tdp_w: float | None = None
    # DRAM traffic of other clients while a kernel runs (a desktop card's display scanout): what
    # a profiler's DRAM counters add per second of run time; 0 for a headless card
    other_dram_traffic_gbs: float = Field(default=0.0, ge=0.0)
    peaks: dict[Precision, Peak] = {}
    unsupported: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    notes: str | None = None
    sources: dict[str, tuple[str, ...]] = {}
    limits: ArchLimits
    defined_in: str = "builtin"  # "builtin", a user file path, or the settings origin

    # -- figures the analysis needs ------------------------------------------------------

    @property
    def arch_key(self) -> str:
        return self.limits.key

    @property
    def warp_size(self) -> int:
        return self.limits.warp_size

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gbs * 1e9

    @property
    def l2_cache_bytes(self) -> int | None:
        return None if self.l2_cache_mib is None else round(self.l2_cache_mib * MIB)

    @property
    def compute_capability_tuple(self) -> tuple[int, int] | None:
        if self.compute_capability is None:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def peak(self, precision: Precision | str) -> Peak | None:
        return self.peaks.get(Precision(precision))

    def peak_ops_per_s(self, precision: Precision | str) -> float | None:
        peak = self.peak(precision)
        return None if peak is None else peak.ops_per_s

    def ridge(self, precision: Precision | str) -> float | None:
        """Ridge point in operations per DRAM byte (peak ops/s over bandwidth), or None."""
        ops = self.peak_ops_per_s(precision)
        return None if ops is None else ops / self.memory_bandwidth_bytes_per_s

    def ridges(self) -> dict[Precision, float]:
        """Ridge points of the roofline precisions that this GPU has a peak for."""
        return {p: r for p in ROOFLINE_PRECISIONS if (r := self.ridge(p)) is not None}

    def why_missing(self, precision: Precision | str) -> str | None:
        """Why a precision has no peak: "unsupported", "unknown" or "not recorded"."""
        p = Precision(precision)
        if p in self.peaks:
            return None
        if p.value in self.unsupported:
            return "unsupported"
        if p.value in self.unknown:
            return "unknown"
        return "not recorded"

    # -- output --------------------------------------------------------------------------

    def summary_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "aliases": list(self.aliases),
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "gfx_target": self.gfx_target,
            "sm_count": self.sm_count,
            "warp_size": self.warp_size,
            "base_clock_mhz": self.base_clock_mhz,
            "boost_clock_mhz": self.boost_clock_mhz,
            "memory_gb": self.memory_gb,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "l2_cache_mib": self.l2_cache_mib,
            "l2_cache_bytes": self.l2_cache_bytes,
            "peaks_tflops": {p.value: peak.tflops for p, peak in self.peaks.items()},
            "ridge_ops_per_byte": {
                p.value: self.ridge(p) for p in self.peaks
            },
            "defined_in": self.defined_in,
        }

    def detail_json(self) -> dict[str, Any]:
        data = self.summary_json()
        data.update(
            {
                "chip": self.chip,
                "memory_type": self.memory_type,
                "memory_bus_bits": self.memory_bus_bits,
                "last_level_cache_mib": self.last_level_cache_mib,
                "tdp_w": self.tdp_w,
                "other_dram_traffic_gbs": self.other_dram_traffic_gbs,
                "peaks": {
                    p.value: peak.model_dump(mode="json", exclude={"precision"})
                    for p, peak in self.peaks.items()
                },
                "unsupported": list(self.unsupported),
                "unknown": list(self.unknown),
                "notes": self.notes,
                "sources": {k: list(v) for k, v in self.sources.items()},
                "limits": self.limits.model_dump(mode="json"),
            }
        )
        return data
