"""The question the advisor asks about one kernel: plain data the static engine fills in.

These models know nothing about parsing or the engine's internals: `perflsp.llm.questions`
builds a `KernelQuestion` from extraction (`perflsp.kernels.models`), the GPU database and the
static estimate, and the server/CLI hand it to `Advisor.ask` / `Advisor.explain_stream`. Only what
the question needs travels: the kernel, the `__device__` functions it calls, the file-scope
definitions they use, its launch sites, the GPU's figures and the engine's facts — never the whole
file, never its path."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from perflsp.analysis.roofline import Precision

Task = Literal["verdict", "explain", "launch_params"]
StaticVerdictKind = Literal["compute", "bandwidth", "latency"]


class _Plain(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceFunction(_Plain):
    """A `__device__` function the kernel calls (directly or through another device function)."""

    name: str
    source: str


class Definition(_Plain):
    """A file-scope macro, constant, global variable or type alias the kernel's text uses
    (`#define BLOCK 256`, `__constant__ float coeff[16]`): what the kernel alone leaves open."""

    name: str
    source: str


class LaunchSiteFacts(_Plain):
    """One `kernel<<<...>>>(...)` call or the OpenMP clauses that size a target region.

    `values` holds what the engine could fold, e.g. {"grid": "(4096, 1, 1)", "block": "256",
    "shared_bytes": "0"} or {"num_teams": "unknown: depends on n"}. No line number: a launch site
    moving in the file must not change the question (and so must not re-ask the model).
    """

    text: str
    values: dict[str, str] = Field(default_factory=dict)


class GpuFacts(_Plain):
    name: str
    peak_tflops: dict[Precision, float] = Field(
        default_factory=dict, description="peak throughput per precision, TFLOP/s (TOP/s for int)"
    )
    bandwidth_gbs: float = Field(gt=0, description="DRAM bandwidth, GB/s")
    ridge_flop_per_byte: dict[Precision, float] = Field(
        default_factory=dict, description="peak / bandwidth per precision, FLOP/byte"
    )
    l2_mb: float | None = None
    sm_count: int | None = None


class StaticFacts(_Plain):
    """The static engine's estimate for this kernel on this GPU, with its evidence."""

    verdict: StaticVerdictKind
    confidence: float = Field(ge=0.0, le=1.0)
    intensity_flop_per_byte: dict[Precision, float] = Field(default_factory=dict)
    limiting_precision: Precision | None = None
    evidence: list[str] = Field(default_factory=list)  # "3 FP32 FMA per 8 bytes loaded", ...
    assumptions: list[str] = Field(default_factory=list)  # "trip count of k loop unknown: 64"
    occupancy: str | None = None  # "50% (registers: 64/thread)"


class MeasuredFacts(_Plain):
    """Profiler figures when the kernel has been measured (they make models far more accurate)."""

    intensity_flop_per_byte: dict[Precision, float] = Field(default_factory=dict)
    dram_throughput_pct: float | None = None
    compute_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    duration_us: float | None = None


class KernelQuestion(_Plain):
    """Everything the advisor may tell the model about one kernel, and what it should answer.

    `kernel_source` is the kernel's own text (a `__global__` function, or an OpenMP pragma with its
    loop nest). The prompt numbers its lines L1..Ln; `first_line` (1-based line of L1 in the file)
    lets the advisor turn the model's L-numbers back into file lines without putting file positions
    into the prompt, so moving a kernel down the file keeps its cache entry.
    """

    kernel_id: str  # stable identity within the workspace, e.g. "file:///a.cu#saxpy"
    kernel_hash: str  # hash of the normalised kernel text (CudaFunction.body_hash or equivalent)
    name: str
    language: Literal["cuda", "omp"]
    kernel_source: str
    first_line: int = Field(default=1, ge=1)
    device_functions: list[DeviceFunction] = Field(default_factory=list)
    definitions: list[Definition] = Field(default_factory=list)
    launch_sites: list[LaunchSiteFacts] = Field(default_factory=list)
    gpu: GpuFacts
    static: StaticFacts
    measured: MeasuredFacts | None = None
    task: Task = "verdict"

    @property
    def kernel_line_count(self) -> int:
        return self.kernel_source.count("\n") + (0 if self.kernel_source.endswith("\n") else 1)

    def content_digest(self) -> str:
        """sha256 of everything that reaches the prompt (not `kernel_id` or `first_line`)."""
        payload = self.model_dump(mode="json", exclude={"kernel_id", "first_line"})
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
