"""What the static engine says about a kernel: facts, per-GPU estimates, lint findings, edits.

Every number carries its evidence and assumptions so hover can show *why*, and nothing here is
presented as a measurement (`source` says where a verdict came from).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from perflsp.analysis.notes import Note
from perflsp.analysis.roof import nearest_roof, roof_of, roof_summary
from perflsp.hardware.occupancy import OccupancyResult
from perflsp.hardware.precision import Precision
from perflsp.kernels.models import CudaFunction, LaunchSite, OmpRegion, Span

Kernel = CudaFunction | OmpRegion
VerdictKind = Literal["compute", "bandwidth", "uncertain"]
Severity = Literal["error", "warning", "information", "hint"]


@dataclass(slots=True)
class OpCounts:
    """Operations of one work item (a CUDA thread, or one iteration of an OpenMP loop nest).

    FP counts are FLOP (an FMA is 2); `int32` counts integer instructions as the hardware
    executes them (address arithmetic, loop counters, compares included). Bytes are as the
    program accesses them, before any cache.
    """

    fp64: float = 0.0
    fp32: float = 0.0
    fp16: float = 0.0
    int32: float = 0.0
    special: float = 0.0  # special-function unit instructions (rsqrt, exp2, sin, ...)
    atomics: float = 0.0
    global_load_bytes: float = 0.0
    global_store_bytes: float = 0.0
    shared_load_bytes: float = 0.0
    shared_store_bytes: float = 0.0
    local_bytes: float = 0.0  # local memory (stack arrays, spills) loaded and stored: compiled code only
    global_loads: float = 0.0
    global_stores: float = 0.0
    shared_accesses: float = 0.0
    loop_iterations: float = 0.0
    int_address: float = 0.0  # of int32: address arithmetic of memory accesses
    int_loop: float = 0.0  # of int32: loop counters and their compares
    # tensor-core operations (an m×n×k matrix multiply-accumulate is 2·m·n·k), by input precision
    tensor_fp64: float = 0.0
    tensor_tf32: float = 0.0
    tensor_fp16: float = 0.0  # FP32 accumulate
    tensor_fp16_fp16acc: float = 0.0
    tensor_bf16: float = 0.0
    tensor_int8: float = 0.0

    def ops(self, precision: Precision) -> float:
        return {Precision.FP64: self.fp64, Precision.FP32: self.fp32, Precision.FP16: self.fp16,
                Precision.INT32: self.int32, Precision.FP64_TENSOR: self.tensor_fp64,
                Precision.TF32_TENSOR: self.tensor_tf32, Precision.FP16_TENSOR: self.tensor_fp16,
                Precision.FP16_TENSOR_FP16ACC: self.tensor_fp16_fp16acc, Precision.BF16_TENSOR: self.tensor_bf16,
                Precision.INT8_TENSOR: self.tensor_int8}.get(precision, 0.0)

    def scaled(self, factor: float) -> OpCounts:
        return OpCounts(**{k: getattr(self, k) * factor for k in self.__slots__})

    def add(self, other: OpCounts, factor: float = 1.0) -> None:
        for k in self.__slots__:
            setattr(self, k, getattr(self, k) + getattr(other, k) * factor)


@dataclass(frozen=True, slots=True)
class StackFrames:
    """The compiled code's stack: local memory for the arrays it indexes at run time and the
    registers it spills, one frame per thread."""

    bytes_per_thread: int  # the kernel's frame and its callees' deepest
    threads: float  # threads launched, each with its frame
    registers: int | None = None  # a thread's registers in that code (what sets the threads an SM holds)


@dataclass(frozen=True, slots=True)
class LoopFact:
    line: int  # 1-based
    variable: str | None
    trip_count: float
    origin: Literal["constant", "launch", "arguments", "grid-stride", "assumed", "data-dependent"]
    note: str  # e.g. "k < K (K = 1024 from the launch site)"
    parallel: bool = False  # an OpenMP worksharing loop: its trips are the region's work items


@dataclass(slots=True)
class KernelFacts:
    """Architecture-independent facts about one kernel (or OpenMP region)."""

    per_item: OpCounts  # per thread (CUDA) or per iteration of the offloaded nest (OpenMP)
    work_items: float | None  # threads launched (CUDA) / iterations (OpenMP); None = unknown
    work_items_note: str
    total: OpCounts
    dram_bytes: float  # estimated DRAM traffic of one launch (after reuse and caching)
    dram_note: str
    dram_remarks: tuple[str, ...] = ()  # of `dram_note`: what it adds beyond the figures (a floor assumed)
    loops: list[LoopFact] = field(default_factory=list)
    assumptions: list[Note] = field(default_factory=list)
    evidence: list[Note] = field(default_factory=list)
    uncertain: str | None = None  # set when the engine could not understand the kernel
    traffic: Any = None  # memory.Traffic: per access group footprint and streamed bytes
    # where the operation counts come from: "compiled" (the compiled code's instructions, each
    # block weighted by how often the source walk says it runs) or "source" (the walk alone)
    operations: Literal["source", "compiled"] = "source"
    stack: StackFrames | None = None  # the compiled code's stack frames (local memory), where it has one


@dataclass(slots=True)
class Estimate:
    """The roofline verdict of one kernel on one GPU."""

    gpu: str
    verdict: VerdictKind
    deciding: Precision | None  # the precision whose intensity reached its ridge
    confidence: float  # 0..1
    intensity: dict[Precision, float]  # ops per DRAM byte
    ridge: dict[Precision, float]
    occupancy: OccupancyResult | None
    occupancy_note: str | None
    evidence: list[Note]
    to_cross: str  # what would move the kernel across the ridge
    source: Literal["static", "llm", "measured"] = "static"
    dram_bytes_per_item: float | None = None  # estimated DRAM bytes per work item
    dram_bytes: float | None = None  # the launch's DRAM bytes judged on this GPU (its own L2: `reuse_window`)

    def main_precision(self) -> Precision | None:
        """The precision every surface quotes (`perflsp.analysis.roof.roof_of`). Compute-bound:
        the roof that was reached. Otherwise the kernel's main arithmetic: the floating-point
        precision nearest its roof (FP32 for a float kernel), INT32 only for a kernel without
        floating-point work."""
        return roof_of(self.deciding, self.intensity, self.ridge)

    def nearest_roof(self) -> Precision | None:
        return nearest_roof(self.intensity, self.ridge)

    def roof_summary(self) -> str | None:
        """`FP32 intensity 0.17 < ridge 20.0 FLOP/B` (with the INT32 nearest-roof note): the text
        every surface quotes the verdict with."""
        return roof_summary(self.deciding, self.intensity, self.ridge)

    def headline_parts(self) -> list[str]:
        """`bandwidth-bound on H100 · 12 B DRAM per work item · FP32 intensity 0.083 < ridge 20.0
        FLOP/B`; INT32 is named as integer instructions, and only when that roof is the nearest one."""
        if self.verdict == "uncertain":
            return [f"uncertain on {self.gpu}"]
        parts = [f"{self.verdict}-bound on {self.gpu}"]
        if self.verdict == "bandwidth" and self.dram_bytes_per_item:
            parts.append(f"{_fmt(self.dram_bytes_per_item)} B DRAM per work item")
        roof = self.roof_summary()
        if roof is not None:
            parts.append(roof)
        return parts

    def headline(self) -> str:
        """`compute-bound on H100 · FP32 intensity 41 ≥ ridge 20.0 FLOP/B · 75% occupancy`."""
        parts = self.headline_parts()
        if self.verdict != "uncertain" and self.occupancy is not None:
            parts.append(f"{self.occupancy.occupancy:.0%} occupancy")
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class ByteEdit:
    """Replace bytes [start, end) of the document with `text` (UTF-8)."""

    start_byte: int
    end_byte: int
    text: str


@dataclass(frozen=True, slots=True)
class Fix:
    title: str
    edits: tuple[ByteEdit, ...]
    kind: Literal["quickfix", "refactor"] = "quickfix"
    preferred: bool = False


FixAction = Literal["float-literal", "float-function", "square", "block-size", "launch-bounds", "thread-limit"]


@dataclass(frozen=True, slots=True)
class FixRequest:
    """A fix a lint proposes, as data: what to change (`action`), where (`span`: the literal, the
    call, the launch site, the kernel's name or the target region) and to what (`value`).
    `perflsp.analysis.fixes.build_fix` builds and validates the edit only when it is asked for, so
    linting on the typing path never re-parses the file."""

    action: FixAction
    span: Span
    value: int | None = None  # block size, `__launch_bounds__` threads, `thread_limit`
    preferred: bool = False
    language: Literal["c", "cpp"] = "cpp"  # float-function: C has no float overloads
    warp_size: int = 32  # block-size: the grid follows in warp multiples


@dataclass(frozen=True, slots=True)
class Finding:
    """A lint finding (or a roofline verdict rendered as a diagnostic)."""

    code: str  # stable rule code, e.g. "precision/double-promotion"
    message: str
    span: Span
    severity: Severity
    fixes: tuple[Fix, ...] = ()
    related: tuple[tuple[Span, str], ...] = ()
    kernel: str | None = None  # qualified name / region name it belongs to
    fix_requests: tuple[FixRequest, ...] = ()  # built into `fixes` on request (analysis.fixes.build_fixes)


@dataclass(slots=True)
class InstantiationReport:
    """One instantiation of a kernel template judged on its own (`analysis.instantiations`)."""

    label: str  # `scale<double>`
    arguments: tuple[str, ...]  # its template arguments, as the compiled code (or the source) names them
    facts: KernelFacts
    estimates: list[Estimate]  # one per GPU, in the order of the kernel's own estimates


@dataclass(slots=True)
class KernelReport:
    kernel: Kernel
    launches: list[LaunchSite]
    facts: KernelFacts
    estimates: list[Estimate]
    # a template's instantiations (in the compiled code, else the source), each judged; empty unless several
    instantiations: list[InstantiationReport] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.kernel.qualified_name if isinstance(self.kernel, CudaFunction) else self.kernel.name


@dataclass(slots=True)
class FileReport:
    path: str | None
    kernels: list[KernelReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2g}"
