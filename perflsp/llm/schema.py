"""The answer a model must give: a validated verdict with its reasons and bounded proposals.

Model output is data, never instructions: everything it says passes through `LlmVerdict`
(unknown fields rejected, every number bounded, every text length-capped) before any other part
of perflsp looks at it. Proposals become edits only through the static code-action builders.

`response_json_schema()` exports the same model as a self-contained JSON schema for each
provider's structured-output mechanism (OpenAI `response_format`, Ollama `format`, Anthropic tool
`input_schema`).
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from perflsp.llm.sanitize import clean

LlmVerdictKind = Literal["compute", "bandwidth", "latency"]

MAX_FACTORS = 10
MAX_CODE_CHANGES = 8


CodeChange = Annotated[str, StringConstraints(min_length=1, max_length=500)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _clean_text(self) -> _Strict:
        """Model text is data: control sequences out of every string (after the checks, so that
        this model and the exported JSON schema accept exactly the same answers)."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, clean(value))
            elif isinstance(value, list) and any(isinstance(v, str) for v in value):
                object.__setattr__(self, name, [clean(v) if isinstance(v, str) else v for v in value])
        return self


class Factor(_Strict):
    """One reason for the verdict, tied to a line of the kernel listing when it has one."""

    text: str = Field(min_length=1, max_length=300)
    line: int | None = Field(
        default=None, ge=1, le=100_000, description="the line number shown in the kernel listing, or null"
    )


class LaunchBoundsProposal(_Strict):
    max_threads: int = Field(ge=32, le=1024, description="__launch_bounds__ maxThreadsPerBlock")
    min_blocks: int | None = Field(
        default=None, ge=1, le=64, description="__launch_bounds__ minBlocksPerMultiprocessor"
    )


class Proposals(_Strict):
    block_size: int | None = Field(default=None, ge=32, le=1024, description="threads per block")
    launch_bounds: LaunchBoundsProposal | None = None
    num_teams: int | None = Field(default=None, ge=1, le=1 << 20, description="OpenMP num_teams")
    thread_limit: int | None = Field(default=None, ge=32, le=1024, description="OpenMP thread_limit")
    code_changes: list[CodeChange] = Field(
        default_factory=list,
        max_length=MAX_CODE_CHANGES,
        description="code changes described in words; never applied automatically",
    )

    @property
    def empty(self) -> bool:
        return (
            self.block_size is None
            and self.launch_bounds is None
            and self.num_teams is None
            and self.thread_limit is None
            and not self.code_changes
        )


class LlmVerdict(_Strict):
    """What the model answers for one kernel on one GPU."""

    verdict: LlmVerdictKind = Field(
        description="compute: some precision reaches its ridge point; bandwidth: every precision "
        "stays below its ridge; latency: neither unit is kept busy (too little parallelism, "
        "serialisation, launch overhead)"
    )
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1, max_length=2000)
    factors: list[Factor] = Field(default_factory=list, max_length=MAX_FACTORS)
    proposals: Proposals = Field(default_factory=Proposals)


# Keywords some structured-output implementations reject (OpenAI strict mode lists the keywords it
# supports; string lengths are not among them). pydantic still enforces them on the answer.
_OPENAI_UNSUPPORTED = {"maxLength", "minLength"}
_DROPPED_EVERYWHERE = {"title", "default"}


def response_json_schema(dialect: Literal["generic", "openai"] = "generic") -> dict[str, Any]:
    """The JSON schema of `LlmVerdict`, self-contained (no `$ref`) and closed.

    Every object lists all its properties as required and forbids others, the form OpenAI's strict
    mode demands; optional values are expressed as `null` alternatives instead of omissions.
    """
    raw = LlmVerdict.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].rsplit("/", 1)[-1]]
                merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged)
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key in _DROPPED_EVERYWHERE:
                    continue
                if dialect == "openai" and key in _OPENAI_UNSUPPORTED:
                    continue
                if key == "properties":
                    out[key] = {name: walk(sub) for name, sub in value.items()}
                else:
                    out[key] = walk(value)
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(raw)
