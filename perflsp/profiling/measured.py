"""From profiled launches to measured roofline evidence per kernel and GPU.

Launches of one kernel are summed (operations, bytes, time) before dividing, so a kernel's
intensity is its total work over its total DRAM traffic. The verdict uses the same rule as the
static engine (`perflsp.analysis.roofline.classify`) with the GPU's ridges.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from perflsp.analysis.roof import roof_summary
from perflsp.analysis.roofline import Precision, Verdict, classify
from perflsp.kernels.models import Dim3
from perflsp.profiling import metrics as M
from perflsp.profiling.gpus import MeasuredGpu
from perflsp.profiling.ncu_csv import NcuLaunch


@dataclass(frozen=True)
class KernelCounters:
    ops: Mapping[Precision, float]  # FP add + mul + 2*fma per precision; INT32: integer instructions
    dram_read_bytes: float
    dram_write_bytes: float
    duration_ns: float
    missing: frozenset[str] = frozenset()  # roofline metrics absent from the report

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    @classmethod
    def from_launch(cls, launch: NcuLaunch) -> KernelCounters:
        values = launch.metrics
        needed = [
            *(m for t in M.FLOP_METRICS.values() for m in t),
            M.INTEGER_METRIC,
            M.DRAM_READ,
            M.DRAM_WRITE,
            M.DURATION,
        ]
        ops = {
            precision: values.get(add, 0.0) + values.get(mul, 0.0) + 2.0 * values.get(fma, 0.0)
            for precision, (add, mul, fma) in M.FLOP_METRICS.items()
        }
        ops[Precision.INT32] = values.get(M.INTEGER_METRIC, 0.0)
        return cls(
            ops=ops,
            dram_read_bytes=values.get(M.DRAM_READ, 0.0),
            dram_write_bytes=values.get(M.DRAM_WRITE, 0.0),
            duration_ns=values.get(M.DURATION, 0.0),
            missing=frozenset(m for m in needed if m not in values),
        )

    def __add__(self, other: KernelCounters) -> KernelCounters:
        return KernelCounters(
            ops={p: self.ops.get(p, 0.0) + other.ops.get(p, 0.0) for p in {*self.ops, *other.ops}},
            dram_read_bytes=self.dram_read_bytes + other.dram_read_bytes,
            dram_write_bytes=self.dram_write_bytes + other.dram_write_bytes,
            duration_ns=self.duration_ns + other.duration_ns,
            missing=self.missing | other.missing,
        )

    def to_json(self) -> dict:
        return {
            "ops": {p.value: v for p, v in sorted(self.ops.items())},
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "duration_ns": self.duration_ns,
            "missing": sorted(self.missing),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> KernelCounters:
        return cls(
            ops={Precision(p): float(v) for p, v in data["ops"].items()},
            dram_read_bytes=float(data["dram_read_bytes"]),
            dram_write_bytes=float(data["dram_write_bytes"]),
            duration_ns=float(data["duration_ns"]),
            missing=frozenset(data.get("missing", ())),
        )


@dataclass(frozen=True)
class MeasuredKernel:
    """All profiled launches of one kernel (by the name ncu reported)."""

    name: str
    launches: int
    counters: KernelCounters
    block: Dim3 | None = None  # of the first launch
    grid: Dim3 | None = None
    shapes_vary: bool = False  # launches had different block/grid shapes
    registers_per_thread: int | None = None
    achieved_occupancy_pct: float | None = None  # time-weighted over launches
    sm_clock_hz: float | None = None  # time-weighted over launches
    device_name: str | None = None


def _weighted(values: list[tuple[float | None, float]]) -> float | None:
    pairs = [(v, w) for v, w in values if v is not None]
    if not pairs:
        return None
    total = sum(w for _, w in pairs)
    if total <= 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / total


def group_launches(launches: Iterable[NcuLaunch]) -> list[MeasuredKernel]:
    """One MeasuredKernel per reported kernel name, in the order kernels first ran."""
    groups: dict[str, list[NcuLaunch]] = {}
    for launch in launches:
        groups.setdefault(launch.kernel_name, []).append(launch)
    kernels = []
    for name, group in groups.items():
        counters = KernelCounters.from_launch(group[0])
        for launch in group[1:]:
            counters = counters + KernelCounters.from_launch(launch)
        first = group[0]
        shapes = {(launch.block, launch.grid) for launch in group}
        durations = [launch.metric(M.DURATION) for launch in group]
        registers = first.metrics.get(M.REGISTERS)
        kernels.append(
            MeasuredKernel(
                name=name,
                launches=len(group),
                counters=counters,
                block=first.block or _dim_from_total(first.metrics.get(M.BLOCK_SIZE)),
                grid=first.grid or _dim_from_total(first.metrics.get(M.GRID_SIZE)),
                shapes_vary=len(shapes) > 1,
                registers_per_thread=int(registers) if registers is not None else None,
                achieved_occupancy_pct=_weighted(
                    [(launch.metrics.get(M.OCCUPANCY), d) for launch, d in zip(group, durations, strict=True)]
                ),
                sm_clock_hz=_weighted([(launch.metrics.get(M.SM_CLOCK), d) for launch, d in zip(group, durations, strict=True)]),
                device_name=first.text.get(M.DEVICE_NAME) or None,
            )
        )
    return kernels


def _dim_from_total(total: float | None) -> Dim3 | None:
    return (int(total), 1, 1) if total else None


def intensity_of(counters: KernelCounters) -> dict[Precision, float]:
    """Operations per DRAM byte for each precision; a kernel that moved no DRAM bytes but did
    work has infinite intensity (the labels treat it the same way: caches are not modelled)."""
    result = {}
    for precision, ops in counters.ops.items():
        if counters.dram_bytes > 0:
            result[precision] = ops / counters.dram_bytes
        else:
            result[precision] = math.inf if ops > 0 else 0.0
    return result


@dataclass(frozen=True)
class MeasuredEvidence:
    kernel_name: str
    gpu: str
    peak_clock_mhz: float  # the clock the GPU's peaks hold for
    measured_clock_mhz: float | None  # the SM clock during the run (None when not recorded)
    launches: int
    duration_ns: float
    dram_bytes: float
    intensity: Mapping[Precision, float]
    achieved_ops_per_s: Mapping[Precision, float]
    achieved_bytes_per_s: float | None
    pct_of_peak_ops: Mapping[Precision, float]
    pct_of_peak_bandwidth: float | None
    verdict: Verdict | None  # None when the report lacks the metrics a verdict needs
    deciding_precision: Precision | None
    ridge: Mapping[Precision, float]
    notes: tuple[str, ...] = ()
    kernel_hash: str | None = None  # body hash of the source kernel it was mapped to
    stale: bool = False  # the kernel's text changed since it was measured

    def marked(self, *, kernel_hash: str | None, current_hash: str | None) -> MeasuredEvidence:
        return replace(self, kernel_hash=kernel_hash, stale=current_hash is not None and kernel_hash != current_hash)

    def summary(self) -> str:
        """One line for hover and diagnostics: verdict, deciding intensity vs ridge, bandwidth."""
        head = f"measured on {self.gpu}"
        if self.measured_clock_mhz:
            head += f" at {self.measured_clock_mhz:.0f} MHz"
        if self.stale:
            head += " (stale: the kernel changed since)"
        if self.verdict is None:
            return f"{head}: no verdict ({'; '.join(self.notes)})"
        parts = [f"{head}: {self.verdict}-bound"]
        roof = roof_summary(self.deciding_precision, self.intensity, self.ridge)
        if roof is not None:  # quoted as a static estimate is (`perflsp.analysis.roof`)
            parts.append(roof)
        if self.achieved_bytes_per_s is not None and self.pct_of_peak_bandwidth is not None:
            parts.append(f"{self.achieved_bytes_per_s / 1e9:.3g} GB/s ({self.pct_of_peak_bandwidth:.3g}% of peak)")
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel_name,
            "gpu": self.gpu,
            "peak_clock_mhz": self.peak_clock_mhz,
            "measured_clock_mhz": self.measured_clock_mhz,
            "launches": self.launches,
            "duration_ns": self.duration_ns,
            "dram_bytes": self.dram_bytes,
            "intensity": _precision_json(self.intensity),
            "ridge": _precision_json(self.ridge),
            "achieved_gops": _precision_json({p: v / 1e9 for p, v in self.achieved_ops_per_s.items()}),
            "achieved_gbs": None if self.achieved_bytes_per_s is None else self.achieved_bytes_per_s / 1e9,
            "pct_of_peak_ops": _precision_json(self.pct_of_peak_ops),
            "pct_of_peak_bandwidth": self.pct_of_peak_bandwidth,
            "verdict": self.verdict,
            "deciding_precision": self.deciding_precision.value if self.deciding_precision else None,
            "kernel_hash": self.kernel_hash,
            "stale": self.stale,
            "notes": list(self.notes),
            "source": "measured",
        }


def _precision_json(values: Mapping[Precision, float]) -> dict[str, float | str]:
    return {p.value: (v if math.isfinite(v) else "inf") for p, v in sorted(values.items())}


_CLOCK_TOLERANCE = 0.03


def evaluate(kernel: MeasuredKernel, gpu: MeasuredGpu) -> MeasuredEvidence:
    counters = kernel.counters
    notes: list[str] = []
    intensity = intensity_of(counters)
    seconds = counters.duration_ns * 1e-9
    achieved_ops = {p: ops / seconds for p, ops in counters.ops.items()} if seconds > 0 else {}
    achieved_bytes = counters.dram_bytes / seconds if seconds > 0 else None
    pct_ops = {
        p: 100.0 * rate / gpu.peak_ops_per_s[p] for p, rate in achieved_ops.items() if gpu.peak_ops_per_s.get(p, 0) > 0
    }
    pct_bw = 100.0 * achieved_bytes / gpu.bandwidth_bytes_per_s if achieved_bytes is not None else None

    verdict: Verdict | None
    deciding: Precision | None
    essential = {M.DRAM_READ, M.DRAM_WRITE}
    if counters.missing & essential:
        verdict, deciding = None, None
        notes.append("no verdict: the report lacks " + ", ".join(sorted(counters.missing & essential)))
    else:
        verdict, deciding = classify(intensity, gpu.ridge)
        if counters.missing:
            notes.append("not in the report (counted as 0): " + ", ".join(sorted(counters.missing)))
    if seconds <= 0:
        notes.append(f"no {M.DURATION} in the report: achieved rates unknown")
    if counters.dram_bytes == 0 and verdict is not None:
        notes.append("no DRAM traffic measured: intensity is unbounded (data stayed in cache)")

    measured_mhz = kernel.sm_clock_hz / 1e6 if kernel.sm_clock_hz else None
    if measured_mhz and abs(measured_mhz - gpu.clock_mhz) > _CLOCK_TOLERANCE * gpu.clock_mhz:
        notes.append(
            f"measured at {measured_mhz:.0f} MHz but the peaks are for {gpu.clock_mhz:.0f} MHz "
            "(ncu --clock-control base locks base clocks)"
        )
    if kernel.device_name and kernel.device_name.strip() and _norm(kernel.device_name) != _norm(gpu.name):
        notes.append(f"profiled on {kernel.device_name}, judged with the figures of {gpu.name}")
    return MeasuredEvidence(
        kernel_name=kernel.name,
        gpu=gpu.name,
        peak_clock_mhz=gpu.clock_mhz,
        measured_clock_mhz=measured_mhz,
        launches=kernel.launches,
        duration_ns=counters.duration_ns,
        dram_bytes=counters.dram_bytes,
        intensity=intensity,
        achieved_ops_per_s=achieved_ops,
        achieved_bytes_per_s=achieved_bytes,
        pct_of_peak_ops=pct_ops,
        pct_of_peak_bandwidth=pct_bw,
        verdict=verdict,
        deciding_precision=deciding,
        ridge=dict(gpu.ridge),
        notes=tuple(notes),
    )


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())
