"""Render the versioned templates in `prompts/` into chat messages for one `KernelQuestion`.

The kernel text, its device functions and launch sites are quoted inside fences longer than any
backtick run they contain, under headings that mark them UNTRUSTED, so nothing in a user's file
can close the quote and pose as our instructions. A prompt over the token budget sheds optional
parts (few-shot examples, then device functions, then extra launch sites) before it is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from perflsp.analysis.roofline import Precision
from perflsp.llm.request import KernelQuestion
from perflsp.llm.schema import LlmVerdict
from perflsp.llm.tokens import estimate_tokens
from perflsp.resources import data_dir

Role = Literal["system", "user", "assistant"]
DEFAULT_MAX_PROMPT_TOKENS = 8000
_MAX_LAUNCH_SITES_WHEN_TRIMMED = 2


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


class PromptTooLarge(ValueError):
    """The kernel alone does not fit the prompt budget."""


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    messages: tuple[Message, ...]
    estimated_tokens: int
    prompt_version: str
    trimmed: tuple[str, ...] = ()  # what was left out to fit the budget, for the status/hover

    @property
    def digest(self) -> str:
        """sha256 of the exact messages: the cache key changes iff what we ask changes."""
        text = json.dumps([[m.role, m.content] for m in self.messages], separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _num(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def fence_for(*texts: str) -> str:
    """A backtick fence longer than the longest backtick run in `texts` (CommonMark rule)."""
    longest = max((len(run) for text in texts for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def number_lines(source: str) -> str:
    lines = source.rstrip("\n").split("\n")
    width = len(f"L{len(lines)}")
    return "\n".join(f"{f'L{i}':<{width}} {line}".rstrip() for i, line in enumerate(lines, 1))


@cache
def prompt_version(folder: Path | None = None) -> str:
    path = (folder or data_dir("prompts")) / "VERSION"
    return path.read_text(encoding="utf-8").strip()


class PromptRenderer:
    """Turns questions into messages. One instance per templates folder; cheap to share."""

    def __init__(self, folder: Path | None = None, max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS):
        self.folder = folder or data_dir("prompts")
        self.max_prompt_tokens = max_prompt_tokens
        self.version = prompt_version(self.folder)
        self._env = ImmutableSandboxedEnvironment(
            loader=FileSystemLoader(self.folder),
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
        )
        self._env.filters["num"] = _num

    # -- public ----------------------------------------------------------------------------
    def render(self, question: KernelQuestion, *, few_shot: bool = False) -> RenderedPrompt:
        """Messages for `question`, trimmed to the budget; raises PromptTooLarge if impossible."""
        json_task = question.task != "explain"
        use_examples = few_shot and json_task
        trimmed: list[str] = []
        q = question
        while True:
            messages = self._messages(q, use_examples)
            tokens = sum(estimate_tokens(m.content) for m in messages)
            if tokens <= self.max_prompt_tokens:
                return RenderedPrompt(tuple(messages), tokens, self.version, tuple(trimmed))
            if use_examples:
                use_examples = False
                trimmed.append("few-shot examples")
            elif q.device_functions:
                dropped = q.device_functions[-1]
                q = q.model_copy(update={"device_functions": q.device_functions[:-1]})
                trimmed.append(f"device function {dropped.name}")
            elif len(q.launch_sites) > _MAX_LAUNCH_SITES_WHEN_TRIMMED:
                extra = len(q.launch_sites) - _MAX_LAUNCH_SITES_WHEN_TRIMMED
                q = q.model_copy(update={"launch_sites": q.launch_sites[:_MAX_LAUNCH_SITES_WHEN_TRIMMED]})
                trimmed.append(f"{extra} launch site(s)")
            else:
                raise PromptTooLarge(
                    f"kernel {question.name} needs about {tokens} prompt tokens, over the budget "
                    f"of {self.max_prompt_tokens}"
                )

    def repair_message(self, error: str) -> Message:
        text = self._env.get_template("repair.j2").render(error=error[:1000])
        return Message("user", text.strip())

    def user_prompt(self, question: KernelQuestion) -> str:
        fence = fence_for(
            question.kernel_source,
            *(f.source for f in question.device_functions),
            *(s.text for s in question.launch_sites),
        )
        return self._env.get_template("kernel.j2").render(
            q=question,
            fence=fence,
            listing=number_lines(question.kernel_source),
            precisions=[p.value for p in Precision],
        ).strip()

    def system_prompt(self, task: str, language: str) -> str:
        return self._env.get_template("system.j2").render(task=task, language=language).strip()

    def few_shot_examples(self) -> list[tuple[KernelQuestion, LlmVerdict]]:
        path = self.folder / "few_shot.toml"
        if not path.is_file():
            return []
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return [
            (KernelQuestion.model_validate(ex["question"]), LlmVerdict.model_validate(ex["answer"]))
            for ex in data.get("example", [])
        ]

    # -- internals -------------------------------------------------------------------------
    def _messages(self, q: KernelQuestion, use_examples: bool) -> list[Message]:
        messages = [Message("system", self.system_prompt(q.task, q.language))]
        if use_examples:
            for example, answer in self.few_shot_examples():
                example = example.model_copy(update={"task": q.task})
                messages.append(Message("user", self.user_prompt(example)))
                messages.append(Message("assistant", answer.model_dump_json()))
        messages.append(Message("user", self.user_prompt(q)))
        return messages
