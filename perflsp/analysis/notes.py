"""Evidence and assumptions as typed records.

Each line of evidence or assumption the engine states is a `Note`: what kind of statement it is,
what it is about (an array, a loop variable, a callee, a type, a precision), the figure it carries
with its unit, where the figure comes from (the source, the compiled code, a measurement, or an
assumption), and the sentence every surface shows. Producers build notes; hover, diagnostics,
`check`, `explain` and the LLM question render them and select them by `kind`, never by matching
their text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class NoteKind(StrEnum):
    """What a note states. Assumptions: problem size, launch shape, loop trip, size bound, exit
    edge, degenerate case, case chain, template argument, guessed type, tensor core, program
    arguments, work limit, L2 reuse, L2 writes. Evidence: per-item counts, DRAM traffic,
    unanalysed call, compiled counts, source counts, intensity, uncertain."""

    PER_ITEM_COUNTS = "per-item-counts"  # operations and bytes of one work item
    DRAM_TRAFFIC = "dram-traffic"  # the launch's DRAM bytes and how they were found
    LOOP_TRIP = "loop-trip"  # a loop's trip count the source does not state
    PROBLEM_SIZE_UNKNOWN = "problem-size-unknown"  # production scale assumed
    LAUNCH_SHAPE = "launch-shape"  # a grid or block the launch does not fix
    SIZE_BOUND = "size-bound"  # a parameter bounding the thread index, read as the extent
    EXIT_EDGE = "exit-edge"  # a guard that leaves the block (`if (t >= n) break;`), read as taken at the edge
    DEGENERATE_CASE = "degenerate-case"  # an arm that only resets the value it tests (`if (n < 1) n = 1;`), read as rare
    CASE_CHAIN = "case-chain"  # `if (c == 1) ... if (c == 2)` on a value of the thread index: one case per thread
    TEMPLATE_ARGUMENT = "template-argument"  # a template type or value not visible at a launch
    GUESSED_TYPE = "guessed-type"  # a type defined nowhere the engine reads
    TENSOR_CORE = "tensor-core"  # a tensor-core fragment's shape or types
    PROGRAM_ARGUMENTS = "program-arguments"  # the host's values for a run without arguments
    WORK_LIMIT = "work-limit"  # the walk stopped at its work limit
    L2_REUSE = "l2-reuse"  # reads repeated by blocks too far apart in launch order to share them in L2
    L2_WRITES = "l2-writes"  # writes a launch whose data fit in L2 leaves there (written back after it)
    OTHER_TRAFFIC = "other-dram-traffic"  # DRAM traffic of other clients (display scanout) while the kernel runs
    LOCAL_MEMORY = "local-memory"  # stack frames (local arrays, spills) too large for L1: they reach DRAM
    UNANALYSED_CALL = "unanalysed-call"  # a call whose definition is not visible
    COMPILED_COUNTS = "compiled-counts"  # operations taken from the compiled code
    SOURCE_COUNTS = "source-counts"  # why operations come from the source although a compile was asked for
    INTENSITY = "intensity"  # a precision's arithmetic intensity against its ridge
    UNCERTAIN = "uncertain"  # why an estimate gives no verdict


class NoteSource(StrEnum):
    """Where a note's figure comes from."""

    SOURCE = "source"  # read from the source text
    COMPILED = "compiled"  # counted in the compiled code
    MEASURED = "measured"  # measured by a profiler
    ASSUMED = "assumed"  # the engine's assumption


@dataclass(frozen=True, slots=True)
class Note:
    """One statement of evidence or assumption.

    `detail` is the sentence without its line: a note about a file line (`line`) renders as
    `line 12: <detail>`, so that a surface that numbers lines differently (the LLM's listing)
    renders it with its own number. `short` is the form a one-line summary quotes, when it differs.
    """

    kind: NoteKind
    source: NoteSource
    detail: str
    subject: str | None = None  # what it is about: an array, a loop variable, a callee, a type, a precision
    value: float | None = None
    unit: str | None = None  # of `value`: "threads", "iterations", "B", "FLOP/B", ...
    line: int | None = None  # the 1-based file line it is about
    short: str | None = None

    @property
    def text(self) -> str:
        """The sentence every surface shows."""
        return self.text_at(self.line)

    def text_at(self, line: int | None) -> str:
        """The sentence, naming `line` for the note's line (another numbering of the same line)."""
        return f"line {line}: {self.detail}" if line is not None else self.detail

    @property
    def summary(self) -> str:
        """The form a one-line verdict summary quotes."""
        return self.short if self.short is not None else self.text

    def to_json(self) -> dict[str, Any]:
        finite = self.value is not None and math.isfinite(self.value)  # JSON has no infinities or NaN
        return {"kind": self.kind.value, "source": self.source.value, "text": self.text, "subject": self.subject,
                "value": self.value if finite else None, "unit": self.unit, "line": self.line}

    def __str__(self) -> str:
        return self.text


def assumed(kind: NoteKind, detail: str, *, subject: str | None = None, value: float | None = None,
            unit: str | None = None, line: int | None = None, short: str | None = None) -> Note:
    """An assumption the engine makes."""
    return Note(kind, NoteSource.ASSUMED, detail, subject, value, unit, line, short)


def problem_size_unknown(scale: str, total: float, unit: str) -> Note:
    """Production scale assumed for a problem the source does not size: `total` work items
    (`unit`), `scale` saying how many and how they are laid out."""
    return assumed(NoteKind.PROBLEM_SIZE_UNKNOWN, f"problem size unknown: assumed large ({scale}), data beyond L2",
                   subject="problem size", value=total, unit=unit, short="problem size unknown: assumed large")


def texts(notes: Iterable[Note]) -> list[str]:
    """The notes' sentences, in order: the string form JSON outputs and prompts carry."""
    return [note.text for note in notes]


def records(notes: Iterable[Note]) -> list[dict[str, Any]]:
    """The notes as JSON objects (`Note.to_json`)."""
    return [note.to_json() for note in notes]


def of_kind(notes: Iterable[Note], *kinds: NoteKind) -> list[Note]:
    return [note for note in notes if note.kind in kinds]
