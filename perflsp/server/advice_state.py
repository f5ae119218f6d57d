"""What the LLM advisor keeps per document and per snapshot (`advice.py` fills it): the questions
asked, the answers by question digest, the requests in flight. Plain data, so that a snapshot
(`documents.py`) and a worker (`scheduler.py`) hold it without importing the advisor's service."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from perflsp.analysis.models import KernelReport
from perflsp.llm.advisor import Advisor, AdvisorResult
from perflsp.llm.request import KernelQuestion

Key = tuple[str, str]  # (kernel name, GPU name)


@dataclass(frozen=True, slots=True)
class Asked:
    question: KernelQuestion
    digest: str
    report: KernelReport  # the analysis the question was built from (reused while it is)


@dataclass(frozen=True, slots=True)
class InFlight:
    """A question being asked: its content digest, and the advisor's request."""

    digest: str
    task: asyncio.Task[AdvisorResult]


@dataclass(eq=False)  # compared by identity: a worker's state is replaced, never equal to another
class DocumentAdvice:
    """One document's questions (written by its worker thread) and answers (by the event loop),
    for one advisor."""

    advisor: Advisor | None = None
    asked: dict[Key, Asked] = field(default_factory=dict)
    answers: dict[tuple[Key, str], AdvisorResult] = field(default_factory=dict)  # by (key, question digest)
    retry_at: dict[tuple[Key, str], float] = field(default_factory=dict)  # static fallbacks: ask again after this
    inflight: dict[Key, InFlight] = field(default_factory=dict)

    def cancel(self) -> None:
        for running in self.inflight.values():
            running.task.cancel()
        self.inflight.clear()


@dataclass(frozen=True)
class SnapshotAdvice:
    """The LLM's part of one snapshot: its questions, and where their answers land."""

    state: DocumentAdvice
    asked: Mapping[Key, Asked]
    label: str  # "LLM: <model>"

    def result(self, name: str, gpu: str) -> AdvisorResult | None:
        asked = self.asked.get((name, gpu))
        return None if asked is None else self.state.answers.get(((name, gpu), asked.digest))

    def pending(self, name: str, gpu: str) -> bool:
        return (name, gpu) in self.asked and self.result(name, gpu) is None

    def signature(self, name: str, gpu: str) -> tuple[int, bool]:
        """Changes whenever what a diagnostic shows about the LLM changes (for its cache)."""
        result = self.result(name, gpu)
        return (id(result), self.pending(name, gpu))


__all__ = ["Asked", "DocumentAdvice", "InFlight", "Key", "SnapshotAdvice"]
