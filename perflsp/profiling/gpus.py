"""The GPU figures a measured verdict needs: peaks per precision, DRAM bandwidth, ridges.

Deliberately a small explicit record: the hardware layer owns the GPU database, and
`MeasuredGpu.from_hardware` is the one place that adapts its models. The built-in entry is the
RTX 3080 at its 1.44 GHz base clock, the figures that define the evaluation labels.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from perflsp.analysis.roofline import ROOFLINE_PRECISIONS, Precision
from perflsp.hardware.models import Gpu
from perflsp.profiling.errors import ProfilingError


@dataclass(frozen=True)
class MeasuredGpu:
    name: str
    clock_mhz: float  # the SM clock the peaks hold for
    peak_ops_per_s: Mapping[Precision, float]
    bandwidth_bytes_per_s: float
    ridge: Mapping[Precision, float] = field(default_factory=dict)  # ops per DRAM byte; derived if empty
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.ridge and self.bandwidth_bytes_per_s > 0:
            derived = {p: peak / self.bandwidth_bytes_per_s for p, peak in self.peak_ops_per_s.items() if peak > 0}
            object.__setattr__(self, "ridge", derived)

    @classmethod
    def from_lanes(
        cls,
        name: str,
        *,
        sm_count: int,
        clock_mhz: float,
        lanes_per_sm: Mapping[Precision, int],
        bandwidth_gbs: float,
        aliases: tuple[str, ...] = (),
    ) -> MeasuredGpu:
        """Peaks from per-SM lanes: lanes x SMs x clock x 2 (an FMA counts two operations)."""
        clock_hz = clock_mhz * 1e6
        peaks = {p: lanes * sm_count * clock_hz * 2 for p, lanes in lanes_per_sm.items()}
        return cls(name, clock_mhz, peaks, bandwidth_gbs * 1e9, aliases=aliases)

    @classmethod
    def from_hardware(cls, gpu: Gpu) -> MeasuredGpu:
        """A GPU of the hardware database at its base clock, the clock `ncu --clock-control base`
        (its default) locks: each peak quoted at another clock is scaled to it. Without a base
        clock the peaks stay at the clock they were quoted for."""
        clock_mhz = gpu.base_clock_mhz or gpu.boost_clock_mhz
        peaks = {}
        for precision in ROOFLINE_PRECISIONS:
            peak = gpu.peak(precision)
            if peak is None:
                continue
            scale = clock_mhz / peak.clock_mhz if peak.clock_mhz and gpu.base_clock_mhz else 1.0
            peaks[precision] = peak.ops_per_s * scale
        return cls(gpu.name, clock_mhz, peaks, gpu.memory_bandwidth_bytes_per_s, aliases=(gpu.id, *gpu.aliases))

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "clock_mhz": self.clock_mhz,
            "bandwidth_gbs": self.bandwidth_bytes_per_s / 1e9,
            "peak_tops": {p.value: v / 1e12 for p, v in self.peak_ops_per_s.items()},
            "ridge": {p.value: v for p, v in self.ridge.items()},
        }


# GA102 in the RTX 3080: 68 SMs; per SM and clock 128 FP32 lanes, 2 FP64, 64 INT32, FP16 (non
# tensor) at the FP32 rate; 760.3 GB/s. Base clock 1440 MHz, which ncu locks by default.
RTX_3080 = MeasuredGpu.from_lanes(
    "NVIDIA GeForce RTX 3080",
    sm_count=68,
    clock_mhz=1440,
    lanes_per_sm={Precision.FP32: 128, Precision.FP64: 2, Precision.FP16: 128, Precision.INT32: 64},
    bandwidth_gbs=760.3,
    aliases=("rtx3080", "geforce rtx 3080", "3080"),
)

BUILTIN_GPUS: tuple[MeasuredGpu, ...] = (RTX_3080,)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("nvidia").strip())


def find_measured_gpu(name: str, gpus: tuple[MeasuredGpu, ...] = BUILTIN_GPUS) -> MeasuredGpu | None:
    """Match a user-typed or ncu-reported name ("rtx3080", "NVIDIA GeForce RTX 3080")."""
    wanted = _key(name)
    if not wanted:
        return None
    for gpu in gpus:
        if wanted in {_key(gpu.name), *(_key(a) for a in gpu.aliases)}:
            return gpu
    return None


def resolve_measured_gpu(name: str, gpus: tuple[MeasuredGpu, ...] = BUILTIN_GPUS) -> MeasuredGpu:
    gpu = find_measured_gpu(name, gpus)
    if gpu is None:
        known = ", ".join(g.name for g in gpus)
        raise ProfilingError("unknown-gpu", f"unknown GPU {name!r} (known: {known})")
    return gpu


def database_resolver(database) -> Callable[[str], MeasuredGpu | None]:
    """Figures for a GPU named by a user or a report: the built-in GPUs (at the clock the labels
    use), else the GPU database (`perflsp.hardware.GpuDatabase`) at the GPU's base clock."""
    return _database_resolver(database)


@functools.lru_cache(maxsize=8)
def _database_resolver(database) -> Callable[[str], MeasuredGpu | None]:
    @functools.lru_cache(maxsize=64)
    def resolve(name: str) -> MeasuredGpu | None:
        builtin = find_measured_gpu(name)
        if builtin is not None:
            return builtin
        gpu = database.find(name)
        return MeasuredGpu.from_hardware(gpu) if gpu is not None else None

    return resolve
