"""Render the versioned templates in `prompts/` into chat messages for one `KernelQuestion`.

The kernel text, its device functions and launch sites are quoted inside fences longer than any
backtick run they contain, under headings that mark them UNTRUSTED, so nothing in a user's file
can close the quote and pose as our instructions. A prompt over the token budget sheds optional
parts (few-shot examples, then device functions, then extra launch sites, then file-scope
definitions), then leaves out the middle of an over-long kernel, before it is refused.
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

from perflsp.analysis.roofline import ROOFLINE_PRECISIONS
from perflsp.llm.request import KernelQuestion
from perflsp.llm.schema import LlmVerdict
from perflsp.llm.tokens import estimate_tokens
from perflsp.resources import data_dir

Role = Literal["system", "user", "assistant"]
DEFAULT_MAX_PROMPT_TOKENS = 8000
_MAX_LAUNCH_SITES_WHEN_TRIMMED = 2
_MIN_HEAD_LINES = 8  # an elided kernel keeps at least its signature and first statements
_ELISION_NOTE_TOKENS = 40
_ELISION_FILL = 0.95


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


def number_lines(source: str, keep: range | None = None, tail: range | None = None) -> str:
    """The source with its line numbers (1-based, unpadded: a bare number costs one token where
    "L12" costs two); blank lines are left out, their numbers skipped.

    `keep` and `tail` (0-based line ranges) elide the lines between them, marked by one line
    that says which lines are missing.
    """
    lines = source.rstrip("\n").split("\n")
    out: list[str] = []
    for index, line in enumerate(lines):
        if keep is not None and tail is not None and keep.stop <= index < tail.start:
            if index == keep.stop:
                out.append(f"... lines {keep.stop + 1}-{tail.start} left out (the kernel is longer than the "
                           "prompt budget; the estimate above covers all of it) ...")
            continue
        if line.strip():
            out.append(f"{index + 1} {line.rstrip()}")
    return "\n".join(out)


def ridge_precisions(question: KernelQuestion) -> list[str]:
    """Precisions whose ridge the prompt shows: those the kernel does operations in (a nonzero
    intensity), else FP32; in the GPU database's order."""
    used = {p for p, ai in question.static.intensity_flop_per_byte.items() if ai > 0}
    if question.measured is not None:
        used |= {p for p, ai in question.measured.intensity_flop_per_byte.items() if ai > 0}
    shown = [p.value for p in ROOFLINE_PRECISIONS if p.value in used and p in question.gpu.ridge_flop_per_byte]
    return shown or [p for p in ("fp32",) if p in question.gpu.ridge_flop_per_byte]


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
            elif q.definitions:
                q = q.model_copy(update={"definitions": []})
                trimmed.append(f"{len(question.definitions)} file-scope definition(s)")
            else:
                return self._elided(question, q, trimmed, tokens)

    def _elided(self, question: KernelQuestion, q: KernelQuestion, trimmed: list[str], tokens: int) -> RenderedPrompt:
        """The prompt with the middle of an over-long kernel left out: its head (the signature,
        setup, the loops' start) and its tail stay, two lines of head for one of tail."""
        lines = q.kernel_source.rstrip("\n").split("\n")
        fixed = sum(estimate_tokens(m.content) for m in self._messages(q, False, listing=""))
        # aim a little under the budget: the estimate is least safe on the dense code that makes
        # kernels this long
        available = int(self.max_prompt_tokens * _ELISION_FILL) - fixed - _ELISION_NOTE_TOKENS
        costs = [estimate_tokens(f"{i + 1} {line}") + 1 if line.strip() else 0 for i, line in enumerate(lines)]
        head, tail, spent = 0, len(lines), 0
        while head < tail:
            take_head = head < 2 * (len(lines) - tail) + _MIN_HEAD_LINES
            index = head if take_head else tail - 1
            if spent + costs[index] > available:
                break
            spent += costs[index]
            head, tail = (head + 1, tail) if take_head else (head, tail - 1)
        if head < _MIN_HEAD_LINES:
            raise PromptTooLarge(
                f"kernel {question.name} needs about {tokens} prompt tokens, over the budget "
                f"of {self.max_prompt_tokens}"
            )
        while True:
            listing = number_lines(q.kernel_source, range(0, head), range(tail, len(lines)))
            messages = self._messages(q, False, listing=listing)
            total = sum(estimate_tokens(m.content) for m in messages)
            if total <= self.max_prompt_tokens or head <= _MIN_HEAD_LINES:
                break
            head = max(_MIN_HEAD_LINES, head - max(1, head // 10))  # estimates are not additive: shrink
        if total > self.max_prompt_tokens:
            raise PromptTooLarge(
                f"kernel {question.name} needs about {tokens} prompt tokens, over the budget "
                f"of {self.max_prompt_tokens}"
            )
        trimmed.append(f"kernel lines {head + 1}-{tail}")
        return RenderedPrompt(tuple(messages), total, self.version, tuple(trimmed))

    def repair_message(self, error: str) -> Message:
        text = self._env.get_template("repair.j2").render(error=error[:1000])
        return Message("user", text.strip())

    def user_prompt(self, question: KernelQuestion, listing: str | None = None) -> str:
        fence = fence_for(
            question.kernel_source,
            *(f.source for f in question.device_functions),
            *(d.source for d in question.definitions),
            *(s.text for s in question.launch_sites),
        )
        return self._env.get_template("kernel.j2").render(
            q=question,
            fence=fence,
            listing=number_lines(question.kernel_source) if listing is None else listing,
            ridge_precisions=ridge_precisions(question),
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
    def _messages(self, q: KernelQuestion, use_examples: bool, listing: str | None = None) -> list[Message]:
        messages = [Message("system", self.system_prompt(q.task, q.language))]
        if use_examples:
            for example, answer in self.few_shot_examples():
                example = example.model_copy(update={"task": q.task})
                messages.append(Message("user", self.user_prompt(example)))
                messages.append(Message("assistant", answer.model_dump_json()))
        messages.append(Message("user", self.user_prompt(q, listing)))
        return messages
