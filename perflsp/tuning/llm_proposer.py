"""The LLM as `LlmStrategy`'s proposer: one request per round to any configured provider
(OpenAI-compatible, Ollama, Anthropic), answering with the next configurations to measure.

The prompt gives the kernel's source, the GPU's figures, the space (values and restrictions) and
every measurement so far; the model answers JSON `{"configs": [{param: value, ...}], "reason": "..."}`.
The answer is data: `LlmStrategy` checks every proposed configuration against the space before
anything is evaluated. Calls are synchronous for the strategy (which runs in a worker thread):
each round runs the provider on the proposer's own event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from perflsp.hardware.models import Gpu
from perflsp.llm.prompts import Message
from perflsp.llm.providers import Provider, ProviderConfig, make_provider

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "configs": {"type": "array", "items": {"type": "object"}, "maxItems": 16},
        "reason": {"type": "string"},
    },
    "required": ["configs"],
}

SYSTEM = ("You tune GPU kernel launch parameters. You get the kernel, the GPU's figures, the tuning space "
          "(parameter values and restrictions) and the measured time of every configuration tried so far. "
          "Propose the next configurations to measure, most promising first: only values from the lists, "
          "only configurations that satisfy every restriction and were not measured yet. Answer only JSON: "
          '{"configs": [{"<param>": <value>, ...}], "reason": "<one sentence>"}.')

MAX_SOURCE_CHARS = 6000
MAX_MEASUREMENTS = 40


def gpu_figures(gpu: Gpu | None) -> dict[str, Any]:
    if gpu is None:
        return {}
    limits = gpu.limits
    return {"name": gpu.name, "vendor": str(gpu.vendor), "sm_count": gpu.sm_count,
            "warp_size": gpu.warp_size, "memory_bandwidth_gbs": gpu.memory_bandwidth_gbs,
            "max_threads_per_block": limits.max_threads_per_block,
            "max_shared_memory_per_block_bytes": getattr(limits, "max_shared_memory_per_block_bytes", None),
            "l2_cache_mib": gpu.l2_cache_mib}


def render(context: dict[str, Any], source: str | None, gpu: Gpu | None) -> list[Message]:
    measurements = context["measurements"]
    shown = measurements if len(measurements) <= MAX_MEASUREMENTS else (
        sorted((m for m in measurements if m["time_ms"] is not None), key=lambda m: m["time_ms"])[:20]
        + measurements[-(MAX_MEASUREMENTS - 20):])
    space = context["space"]
    body = {
        "kernel": space["kernel"],
        "gpu": gpu_figures(gpu),
        "tune_params": space["tune_params"],
        "restrictions": space["restrictions"],
        "measurements": [{"config": m["config"], "time_ms": m["time_ms"]} for m in shown],
        "measured_count": len(measurements),
        "best": context.get("best"),
        "static_hints": context.get("hints", []),
        "propose": context.get("per_round", 4),
    }
    text = ""
    if source:
        text += "Kernel source:\n```cuda\n" + source[:MAX_SOURCE_CHARS] + "\n```\n\n"
    text += "Tuning state (JSON):\n```json\n" + json.dumps(body, default=str) + "\n```\n"
    text += f"Propose {context.get('per_round', 4)} new configurations."
    return [Message("system", SYSTEM), Message("user", text)]


def parse_answer(text: str) -> list[dict[str, Any]]:
    """The `configs` of the model's answer (code fences and surrounding prose tolerated)."""
    stripped = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", stripped, re.DOTALL)
    if fence:
        stripped = fence.group(1)
    start, end = stripped.find("{"), stripped.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the answer holds no JSON object")
    data = json.loads(stripped[start:end + 1])
    configs = data.get("configs") if isinstance(data, dict) else None
    if not isinstance(configs, list):
        raise ValueError("the answer has no `configs` list")
    return [c for c in configs if isinstance(c, dict)]


class LlmProposer:
    """`proposer(context)` for `LlmStrategy` over one provider."""

    def __init__(self, config: ProviderConfig, api_key: Any = None, *, source: str | None = None,
                 gpu: Gpu | None = None, provider: Provider | None = None):
        self.config = config
        self.api_key = api_key
        self.source = source
        self.gpu = gpu
        self._provider = provider
        self._loop: asyncio.AbstractEventLoop | None = None
        self.requests = 0
        self.label = f"LLM: {config.model}"

    def __call__(self, context: dict[str, Any]) -> list[dict[str, Any]]:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        if self._provider is None:
            self._provider = make_provider(self.config, self.api_key)
        messages = render(context, self.source, self.gpu)
        self.requests += 1
        completion = self._loop.run_until_complete(self._provider.complete_json(messages, SCHEMA))
        return parse_answer(completion.text)

    def close(self) -> None:
        if self._loop is not None:
            if self._provider is not None:
                self._loop.run_until_complete(self._provider.aclose())
            self._loop.close()
            self._loop = None
            self._provider = None


__all__ = ["SCHEMA", "LlmProposer", "gpu_figures", "parse_answer", "render"]
