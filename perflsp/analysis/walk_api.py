"""The walker as its handlers see it: `Walker`, the state and the callbacks that the handler
modules (`walk_loops`, `walk_branches`, `walk_expressions`, `walk_accesses`, `walk_calls`,
`walk_tensor`, `walk_profile`) use.

Why a protocol: the dispatcher (`walker.KernelWalker`) imports every handler to build its
dispatch tables, and every handler calls back into the walker (`eval`, `walk_statement`,
`assume`, ...) and reads its state. Typed against `KernelWalker` itself, each handler imported
the dispatcher back, and the handlers and the dispatcher formed one import circle. The handlers
depend on the walker's interface, not on the dispatcher: they type their `walker` parameter with
this protocol, which imports neither, and `KernelWalker` satisfies it structurally (mypy checks
that where the dispatcher hands itself to the handlers). Nothing here runs: a member added to a
handler's use of the walker is declared here with the same type as on `KernelWalker`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from tree_sitter import Node

from perflsp.analysis.costs import CostModel
from perflsp.analysis.ctype import CType
from perflsp.analysis.models import LoopFact, OpCounts
from perflsp.analysis.notes import Note
from perflsp.analysis.struct_layout import Layout
from perflsp.analysis.walk_values import Access, Callee, LaunchShape, Val
from perflsp.compiled.profile import SourceProfile
from perflsp.kernels.host_fills import HostFill


class Walker(Protocol):
    """What the handler modules read, write and call on the walk they are part of (see
    `KernelWalker` for what each member means)."""

    # -- the kernel's text and the launch it is walked for ----------------------------------
    data: bytes
    cost: CostModel
    launch: LaunchShape
    aliases: dict[str, CType]
    callees: Mapping[str, Callee]
    line_offset: int
    resolve_bound: Callable[[str], float | None] | None
    array_extents: dict[str, tuple[float | None, bool]]
    host_fill: Callable[[str], HostFill | None]
    layouts: dict[str, Layout]
    constant_lookup: Callable[[str], tuple[float, str] | None] | None

    # -- what the walk found ----------------------------------------------------------------
    counts: OpCounts
    accesses: list[Access]
    loops: list[LoopFact]
    notes: list[Note]
    said_once: set[str]
    declared_types: dict[str, str]

    # -- the state of the statement walked ---------------------------------------------------
    mult: float
    scopes: list[dict[str, Val]]
    cardinality: dict[str, float]
    counted_parallel_atoms: set[str]
    loop_depth: int
    loop_counter: int
    loop_atoms: list[str]
    unrolled_atoms: set[str]
    guessed_atoms: set[str]  # counters of loops whose trip count is assumed or data-dependent
    geometric_loops: dict[str, float]
    trip_is_static: bool
    last_step_kind: str | None
    inline_stack: list[str]
    return_values: list[Val]
    returned_members: dict[str, Val]
    lambdas: dict[str, tuple[Callee, dict[str, Val] | None]]
    members: dict[str, dict[str, Val]]
    size_parameters: set[str]
    learned_sizes: set[str]
    shape_assumed: bool
    thread_extents: list[float]
    learned_extents: dict[str, tuple[float, str | None]]
    offset_before_size: bool
    grid_sized: Callable[[], frozenset[str]]
    fragments: dict[str, tuple[str, tuple[float | None, ...], str]]
    exited_share: float

    # -- the source profile -----------------------------------------------------------------
    path: str | None
    profile: SourceProfile | None
    callsites: tuple[tuple[str, int], ...]
    call_line: int
    trip_product: float
    profile_loops: list[int]
    outer_trip_products: list[float]
    profile_load_bytes: list[float]
    profile_load_keys: list[set[tuple[object, ...]]]
    fixed_atoms: dict[str, float]
    visited: int

    # -- callbacks --------------------------------------------------------------------------
    def assume(self, note: Note) -> None: ...

    def text(self, node: Node | None) -> str: ...

    def line(self, node: Node) -> int: ...

    def lookup(self, name: str) -> Val | None: ...

    def members_of(self, name: str) -> dict[str, Val]: ...

    def assign(self, name: str, val: Val) -> None: ...

    def count_op(self, ctype: CType, flops: float = 1.0, ints: float = 0.0) -> None: ...

    def count_int(self, n: float) -> None: ...

    def count_math(self, fp: float, special: float, ints: float, precision: CType) -> None: ...

    def walk_statement(self, node: Node | None) -> None: ...

    def walk_declaration(self, node: Node) -> None: ...

    def eval(self, node: Node | None) -> Val: ...
