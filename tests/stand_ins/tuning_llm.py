"""A deterministic stand-in for an LLM that proposes tuning configurations: a real loopback
HTTP server speaking the OpenAI Chat Completions protocol (`tests.llm.llm_fakes.ScriptedServer`)
whose "model" reads the tuning state JSON from the prompt and proposes the unmeasured
neighbours of the best measured configuration (one value step in one parameter, parameters in
order, then two steps). It does not check restrictions (perflsp must), and with
`out_of_space=True` it leads every answer with configurations outside the space: a value not
in a parameter's list, a parameter that does not exist, and a block of 2048 threads.

It is a stand-in for the protocol and the feedback loop, not a model: the benchmark labels its
rows as such.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.llm.llm_fakes import Recorded, Reply, ScriptedServer, Wire

WIRE = Wire("openai")


def state_from_prompt(text: str) -> dict[str, Any]:
    match = re.search(r"Tuning state \(JSON\):\n```json\n(.*?)\n```", text, re.DOTALL)
    if match is None:
        raise ValueError("no tuning state in the prompt")
    return json.loads(match.group(1))


def propose(state: dict[str, Any], out_of_space: bool = False, count: int = 8) -> list[dict[str, Any]]:
    params: dict[str, list[Any]] = state["tune_params"]
    measured = {json.dumps(m["config"], sort_keys=True) for m in state["measurements"]}
    best = (state.get("best") or {}).get("config") or (state["measurements"][0]["config"] if state["measurements"]
                                                       else {k: v[0] for k, v in params.items()})
    out: list[dict[str, Any]] = []
    if out_of_space:
        first = next(iter(params))
        out.append({**best, first: max(params[first]) * 2 + 1})  # not one of the listed values
        out.append({**best, "no_such_parameter": 1})
        if "block_size_x" in params:
            out.append({**best, "block_size_x": 2048})
    for distance in (1, 2, 3):
        for name, values in params.items():
            index = values.index(best[name]) if best.get(name) in values else 0
            for step in (distance, -distance):
                if 0 <= index + step < len(values):
                    candidate = {**best, name: values[index + step]}
                    key = json.dumps(candidate, sort_keys=True)
                    if key not in measured and candidate not in out:
                        out.append(candidate)
        if len(out) >= count:
            break
    return out[:count]


class TuningLlmServer(ScriptedServer):
    """`with TuningLlmServer() as server:` then point an OpenAI provider at `server.url + "/v1"`."""

    def __init__(self, *, out_of_space: bool = False, fail_first: int = 0):
        self.out_of_space = out_of_space
        self.fail_first = fail_first
        super().__init__(self._answer_request)

    def _answer_request(self, record: Recorded) -> Reply:
        if len(self.requests) <= self.fail_first:
            return WIRE.error(503, "overloaded")
        text = WIRE.prompt_text(record)
        configs = propose(state_from_prompt(text), self.out_of_space)
        stream = bool(record.json.get("stream"))
        return WIRE.reply(json.dumps({"configs": configs, "reason": "neighbours of the best so far"}), stream=stream)


__all__ = ["TuningLlmServer", "propose", "state_from_prompt"]
