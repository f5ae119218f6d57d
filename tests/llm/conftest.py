"""Fixtures for the LLM advisor tests: questions, scripted loopback servers, fake clocks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from llm_fakes import WIRES, ScriptedServer, Wire

from perflsp.llm.request import (
    DeviceFunction,
    GpuFacts,
    KernelQuestion,
    LaunchSiteFacts,
    StaticFacts,
)

API_KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e"  # a fake key every test checks never leaks

KERNEL = """__global__ void axpy_like(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = helper(a, x[i]) + y[i];
  }
}"""


def make_question(
    name: str = "axpy_like",
    source: str = KERNEL,
    *,
    first_line: int = 10,
    static_verdict: str = "bandwidth",
    task: str = "verdict",
    kernel_id: str | None = None,
) -> KernelQuestion:
    return KernelQuestion(
        kernel_id=kernel_id or f"file:///work/demo.cu#{name}",
        kernel_hash="h-" + hashlib.sha256(source.encode()).hexdigest()[:16],
        name=name,
        language="cuda",
        kernel_source=source,
        first_line=first_line,
        device_functions=[
            DeviceFunction(name="helper", source="__device__ float helper(float a, float x) { return a * x; }")
        ],
        launch_sites=[
            LaunchSiteFacts(
                text=f"{name}<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);",
                values={"block": "256", "grid": "unknown: depends on n"},
            )
        ],
        gpu=GpuFacts(
            name="RTX 3080",
            peak_tflops={"fp32": 29.8, "fp64": 0.47},
            bandwidth_gbs=760.0,
            ridge_flop_per_byte={"fp32": 39.2, "fp64": 0.61},
            l2_mb=5.0,
            sm_count=68,
        ),
        static=StaticFacts(
            verdict=static_verdict,
            confidence=0.85,
            intensity_flop_per_byte={"fp32": 0.17},
            limiting_precision="fp32",
            evidence=["1 FP32 FMA per 12 bytes moved"],
            assumptions=["helper inlined: 1 FP32 multiply"],
            occupancy="100% (registers: 16/thread)",
        ),
        task=task,
    )


def answer(verdict: str = "bandwidth", **overrides) -> str:
    data = {
        "verdict": verdict,
        "confidence": 0.8,
        "rationale": "Two loads and one store per FMA keep the kernel far below the FP32 ridge.",
        "factors": [{"text": "one FMA per 12 bytes", "line": 4}, {"text": "no reuse", "line": None}],
        "proposals": {
            "block_size": 256,
            "launch_bounds": None,
            "num_teams": None,
            "thread_limit": None,
            "code_changes": [],
        },
    }
    data.update(overrides)
    return json.dumps(data)


@pytest.fixture(params=WIRES, ids=lambda w: w.kind)
def wire(request) -> Wire:
    return request.param


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def bystander() -> Iterator[ScriptedServer]:
    """A second host that must never receive anything."""
    with ScriptedServer() as srv:
        yield srv


class FakeSleep:
    """Records the delays the advisor asks for and returns at once (no wall-clock waiting)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_sleep() -> FakeSleep:
    return FakeSleep()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()
