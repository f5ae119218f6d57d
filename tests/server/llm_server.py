"""A loopback OpenAI-compatible endpoint for the language server's LLM tests: a scripted
`ScriptedServer` (tests/llm/llm_fakes.py) that answers each request by what it asks."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tests.llm.llm_fakes import Recorded, Reply, ScriptedServer, Wire

WIRE = Wire("openai")
API_KEY = "sk-perflsp-test-4c1d9e7f2a6b8053"  # a fake key the tests check never leaks
MODEL = "fake-model"
LABEL = f"LLM: {MODEL}"

FIVE_KERNELS = """\
#define N (1 << 22)
#define BLOCK 256

__global__ void k1(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}

__global__ void k2(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.0f;
}

__global__ void k3(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] - y[i];
}

__global__ void k4(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * y[i];
}

__global__ void k5(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + y[i];
}

int main() {
    float *x, *y;
    k1<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, N);
    k2<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, N);
    k3<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, N);
    k4<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, N);
    k5<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, N);
    return 0;
}
"""

EXPLANATION = ("**Bandwidth-bound.** Each thread loads 8 bytes and stores 4 for one FP32 operation (L3), "
               "far below the ridge. Fuse it with its neighbours to raise the intensity.")


def answer(verdict: str = "bandwidth", block_size: int | None = None, **extra) -> str:
    data = {
        "verdict": verdict,
        "confidence": 0.8,
        "rationale": f"One FP32 operation per 12 bytes moved: {verdict}-bound on this GPU.",
        "factors": [{"text": "two loads and a store per operation", "line": 3}],
        "proposals": {"block_size": block_size, "launch_bounds": None, "num_teams": None, "thread_limit": None,
                      "code_changes": []},
    }
    data.update(extra)
    return json.dumps(data)


def prompt_of(record: Recorded) -> str:
    parts = []
    for message in record.json["messages"]:
        content = message["content"]
        parts.append(content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content))
    return "\n".join(parts)


def kernel_of(record: Recorded) -> str | None:
    match = re.search(r"(?:Classify|Explain the performance of|Propose launch parameters for) CUDA kernel `(\w+)`",
                      prompt_of(record))
    return match.group(1) if match else None


def task_of(record: Recorded) -> str:
    text = prompt_of(record)
    if "Propose launch parameters for" in text:
        return "launch_params"
    if "Explain the performance of" in text:
        return "explain"
    return "verdict"


def endpoint(verdicts: dict[str, str] | None = None, block_size: int = 128,
             hold: Callable[[Recorded], Reply | None] | None = None, kind: str = "openai") -> ScriptedServer:
    """Answers verdicts (per kernel name, default bandwidth), launch parameters and explanations
    in the wire protocol `kind` (openai, ollama, anthropic)."""
    verdicts = verdicts or {}
    wire = Wire(kind)

    def reply(record: Recorded) -> Reply:
        held = hold(record) if hold is not None else None
        if held is not None:
            return held
        task = task_of(record)
        if task == "explain":
            return wire.reply(EXPLANATION, tool=False)
        if task == "launch_params":
            return wire.reply(answer("bandwidth", block_size=block_size))
        return wire.reply(answer(verdicts.get(kernel_of(record) or "", "bandwidth")))

    return ScriptedServer(reply)


def llm_settings(url: str, provider: str = "openai", **extra) -> dict:
    base = f"{url}/v1" if provider == "openai" else url
    return {"enabled": True, "provider": provider, "baseUrl": base, "model": MODEL, **extra}


def write_workspace(root: Path, text: str = FIVE_KERNELS, config: str = 'gpus = ["h100"]\n') -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".perflsp.toml").write_text(config)
    path = root / "five.cu"
    path.write_text(text)
    return path
