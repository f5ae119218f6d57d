"""What extraction finds in one source file: CUDA functions, OpenMP offload regions, launch sites.

Plain frozen dataclasses (cheap to build on every keystroke); ranges are byte spans with their
LSP positions precomputed, so every consumer (hover, JSON, SARIF) agrees on where things are.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from perflsp.source.positions import LineIndex, Position

Dim3 = tuple[int, int, int]


class Span:
    """A byte range with its LSP positions (0-based line, UTF-16 character).

    Positions are computed on first use: most spans of a file are never shown, and converting
    every one of them would cost more than finding them.
    """

    __slots__ = ("_end", "_lines", "_start", "end_byte", "moved_by", "start_byte")

    def __init__(self, start_byte: int, end_byte: int, start: Position | None = None, end: Position | None = None,
                 lines: LineIndex | None = None):
        self.start_byte = start_byte
        self.end_byte = end_byte
        self._lines = lines
        self._start = start
        self._end = end
        self.moved_by = 0  # the last edit that moved this span in place (kernels/incremental.py: `move_spans`)

    @property
    def start(self) -> Position:
        if self._start is None:
            self._start = self._lines.position(self.start_byte) if self._lines else Position(0, 0)
        return self._start

    @property
    def end(self) -> Position:
        if self._end is None:
            self._end = self._lines.position(self.end_byte) if self._lines else Position(0, 0)
        return self._end

    @property
    def line(self) -> int:
        """1-based line of the start, as editors and compilers print it."""
        return self.start.line + 1

    def contains(self, byte_offset: int) -> bool:
        return self.start_byte <= byte_offset <= self.end_byte

    @staticmethod
    def known_positions(path: str) -> Callable[[Any], tuple[Position | None, Position | None]]:
        """A getter of the span at attribute `path` of an object: its (start, end) positions as
        computed so far (None where not yet), read in C with no property call (a loop over a
        thousand spans per keystroke compares them with the last ones it read)."""
        return operator.attrgetter(f"{path}._start", f"{path}._end")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Span) and (self.start_byte, self.end_byte) == (other.start_byte, other.end_byte)

    def __hash__(self) -> int:
        return hash((self.start_byte, self.end_byte))

    def __repr__(self) -> str:
        return f"Span({self.start_byte}, {self.end_byte})"

    def to_json(self) -> dict[str, Any]:
        return {
            "start": {"line": self.start.line, "character": self.start.character},
            "end": {"line": self.end.line, "character": self.end.character},
        }


@dataclass(frozen=True, slots=True)
class Param:
    name: str | None
    type: str  # declared type as written, without the name, e.g. "const float *__restrict__"
    element_type: str  # the type without pointers/qualifiers, e.g. "float", "T", "float4"
    pointer_depth: int = 0
    is_const: bool = False  # the pointee (or value) is const
    is_restrict: bool = False
    is_reference: bool = False
    array_dims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TemplateParam:
    kind: Literal["type", "value", "template"]
    name: str
    type: str | None = None  # for value parameters, e.g. "int"
    default: str | None = None


class ConstValue:
    """An expression at a launch site or in a clause, folded to a value when possible.

    Folding can be deferred: `ConstValue.lazy(text, span, fold)` calls `fold()` -> (value,
    reason) the first time the value is asked for, so extraction does not pay for folding
    the arguments of launches nobody looks at.
    """

    __slots__ = ("_fold", "_reason", "_value", "span", "text")

    def __init__(self, text: str, span: Span | None, value: int | float | Dim3 | None = None,
                 reason: str | None = None):
        self.text = text
        self.span = span
        self._value = value
        self._reason = reason
        self._fold: Callable[[], tuple[object, str | None]] | None = None

    @classmethod
    def lazy(cls, text: str, span: Span | None, fold: Callable[[], tuple[object, str | None]]) -> ConstValue:
        value = cls(text, span)
        value._fold = fold
        return value

    def _resolve(self) -> None:
        fold, self._fold = self._fold, None
        if fold is not None:
            self._value, self._reason = fold()  # type: ignore[assignment]

    @property
    def value(self) -> int | float | Dim3 | None:
        if self._fold is not None:
            self._resolve()
        return self._value

    @property
    def reason(self) -> str | None:  # why `value` is None ("depends on runtime variable n", ...)
        if self._fold is not None:
            self._resolve()
        return self._reason

    @property
    def known(self) -> bool:
        return self.value is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstValue) and (self.text, self.span, self.value, self.reason) == (
            other.text, other.span, other.value, other.reason)

    def __hash__(self) -> int:
        return hash((self.text, self.value if not isinstance(self.value, list) else tuple(self.value)))

    def __repr__(self) -> str:
        return f"ConstValue(text={self.text!r}, value={self.value!r}, reason={self.reason!r})"


@dataclass(frozen=True, slots=True)
class LaunchBounds:
    max_threads: ConstValue
    min_blocks: ConstValue | None = None
    max_blocks_cluster: ConstValue | None = None
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class CudaFunction:
    """A `__global__` kernel or a `__device__` function."""

    space: Literal["global", "device"]
    name: str
    qualified_name: str  # with namespaces and classes, e.g. "ns::Solver::step"
    params: tuple[Param, ...]
    template_params: tuple[TemplateParam, ...]
    specialization_args: tuple[str, ...] | None  # `template<> __global__ void k<float>(...)`
    launch_bounds: LaunchBounds | None
    span: Span  # the whole definition (template header included)
    name_span: Span
    body_span: Span
    body_hash: str  # hash of the normalised text (comments and whitespace removed)
    recovered: bool = False  # found by the token-level fallback, not the tree
    is_host_device: bool = False

    kind: Literal["cuda"] = "cuda"

    @property
    def line(self) -> int:
        return self.name_span.line

    @property
    def is_kernel(self) -> bool:
        return self.space == "global"


@dataclass(frozen=True, slots=True)
class ArraySection:
    """`a[lo:len]` items of a map/depend clause; a bare variable has no sections."""

    variable: str
    sections: tuple[tuple[str | None, str | None], ...] = ()  # (lower, length) per dimension


@dataclass(frozen=True, slots=True)
class OmpClause:
    name: str  # "map", "num_teams", "reduction", ...
    text: str  # the argument text inside the parentheses (None-like "" for bare clauses)
    modifier: str | None = None  # map type ("to", "tofrom"), reduction operator, schedule kind
    items: tuple[ArraySection, ...] = ()  # variables / array sections
    value: ConstValue | None = None  # num_teams, thread_limit, collapse, chunk size


@dataclass(frozen=True, slots=True)
class LoopHeader:
    """One `for` loop of an offloaded nest: `for (var = lower; var <op> upper; step)`."""

    variable: str | None
    lower: str | None
    upper: str | None
    condition_op: str | None  # "<", "<=", ">", ">=", "!="
    step: str | None  # "+1", "-1", "+=2", ... as written, normalised
    span: Span


@dataclass(frozen=True, slots=True)
class OmpRegion:
    """A kernel-creating `#pragma omp target ...` and the statement it applies to."""

    directive: str  # normalised construct words, e.g. "target teams distribute parallel for"
    clauses: tuple[OmpClause, ...]
    pragma_text: str  # the whole directive with continuations joined
    span: Span  # the pragma line(s)
    body_span: Span | None  # the associated statement (loop or block)
    loops: tuple[LoopHeader, ...]  # the loop nest (collapsed loops first, then inner loops)
    function: str | None  # qualified name of the enclosing function
    function_span: Span | None
    body_hash: str
    recovered: bool = False

    kind: Literal["omp"] = "omp"

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def name(self) -> str:
        return f"{self.function or '<file>'}@l{self.line}"

    def clause(self, name: str) -> OmpClause | None:
        return next((c for c in self.clauses if c.name == name), None)

    def clauses_named(self, name: str) -> list[OmpClause]:
        return [c for c in self.clauses if c.name == name]


@dataclass(frozen=True, slots=True)
class LaunchSite:
    """`kernel<<<grid, block, shmem, stream>>>(args)`."""

    callee: str  # as written, e.g. "ns::k<float, 4>"
    name: str  # simple name, e.g. "k"
    template_args: tuple[str, ...]
    kernel: str | None  # qualified name of the resolved kernel in the same file
    grid: ConstValue
    block: ConstValue
    shared_mem_bytes: ConstValue | None
    stream: ConstValue | None
    args: tuple[ConstValue, ...]
    span: Span  # the whole call
    config_span: Span  # `<<<...>>>`
    callee_span: Span
    function: str | None  # enclosing function
    # per argument: bytes of the allocation it points to and whether that is mapped host memory,
    # when known (filled by the analysis when the launch lives in another file)
    arg_extents: tuple[tuple[float | None, bool], ...] = ()

    @property
    def line(self) -> int:
        return self.span.line


class LaunchIndex:
    """Qualified kernel name -> its launch sites, built in one pass over a `launches` list and
    rebuilt when that list is replaced or changes length (incremental extraction builds new
    lists; tests append). A cache, not data: every index equals every other, so comparing or
    signing a `FileKernels` ignores it."""

    __slots__ = ("_by_kernel", "_length", "_list")

    def __init__(self) -> None:
        self._by_kernel: dict[str | None, list[LaunchSite]] = {}
        self._list: list[LaunchSite] | None = None  # held, so its identity cannot be reused
        self._length = 0

    def of(self, launches: list[LaunchSite]) -> dict[str | None, list[LaunchSite]]:
        if self._list is not launches or self._length != len(launches):
            by_kernel: dict[str | None, list[LaunchSite]] = {}
            for site in launches:
                by_kernel.setdefault(site.kernel, []).append(site)
            self._by_kernel, self._list, self._length = by_kernel, launches, len(launches)
        return self._by_kernel

    def clear(self) -> None:
        self._by_kernel, self._list, self._length = {}, None, 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LaunchIndex)

    def __hash__(self) -> int:
        return 0


@dataclass(slots=True)
class FileKernels:
    """Everything extraction found in one file."""

    path: str | None
    kernels: list[CudaFunction] = field(default_factory=list)  # __global__ only
    device_functions: list[CudaFunction] = field(default_factory=list)
    omp_regions: list[OmpRegion] = field(default_factory=list)
    launches: list[LaunchSite] = field(default_factory=list)
    has_errors: bool = False  # the tree contains ERROR/MISSING nodes (beyond the grammar gaps `has_syntax_errors` knows)
    notes: list[str] = field(default_factory=list)
    _launch_index: LaunchIndex = field(default_factory=lambda: LaunchIndex(), init=False, repr=False, compare=False)

    def kernel_named(self, name: str) -> list[CudaFunction]:
        return [k for k in self.kernels if k.name == name or k.qualified_name == name]

    def launches_of(self, kernel: CudaFunction) -> list[LaunchSite]:
        """The file's launch sites of `kernel`, in document order (an index: one pass over
        `launches`, not one per kernel)."""
        return list(self._launches_by_kernel().get(kernel.qualified_name, ()))

    def has_launch(self, site: LaunchSite) -> bool:
        """Whether `site` itself (not an equal one) is one of this file's launch sites."""
        return any(s is site for s in self._launches_by_kernel().get(site.kernel, ()))

    def invalidate_launch_index(self) -> None:
        """Forget the index; for code that replaces an element of `launches` in place."""
        self._launch_index.clear()

    def _launches_by_kernel(self) -> dict[str | None, list[LaunchSite]]:
        return self._launch_index.of(self.launches)
