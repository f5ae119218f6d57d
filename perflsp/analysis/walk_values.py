"""What the kernel walker tracks and returns: the abstract value of an expression (`Val`), a
memory access, the launch shape, a callee to inline, the walk's result; and the names of the
thread built-ins it knows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from tree_sitter import Node

from perflsp.analysis.ctype import UNKNOWN, CType
from perflsp.analysis.linear import Linear, base_atom
from perflsp.analysis.models import LoopFact, OpCounts
from perflsp.analysis.notes import Note
from perflsp.analysis.struct_layout import Layout

THREAD_ATOMS = {"threadIdx": ("tx", "ty", "tz"), "blockIdx": ("bx", "by", "bz")}
INDEX_ATOMS = frozenset(atom for atoms in THREAD_ATOMS.values() for atom in atoms)  # a thread's and a block's indices


def loop_atom(number: int) -> str:
    """The atom standing for the iteration of the `number`-th loop the walk entered."""
    return f"L{number}"


def is_loop_atom(atom: str) -> bool:
    return atom[:1] == "L" and atom[1:].isdigit()


def index_atom(atom: str) -> bool:
    """A thread's or a block's index, or a tile of a thread index (`tx % 32`)."""
    return base_atom(atom) in INDEX_ATOMS


# OpenMP's runtime calls inside a target region play the roles of CUDA's built-ins
OMP_THREAD_API = {"omp_get_thread_num": ("tx", None), "omp_get_team_num": ("bx", None),
                  "omp_get_num_threads": (None, "block"), "omp_get_num_teams": (None, "grid")}
DIM_NAMES = {"blockDim": "block", "gridDim": "grid"}
# HIP's older spellings of the built-ins (`hipThreadIdx_x` = `threadIdx.x`)
HIP_BUILTINS = {f"hip{family[0].upper()}{family[1:]}_{axis}": (family, "xyz".index(axis))
                for family in ("threadIdx", "blockIdx", "blockDim", "gridDim") for axis in "xyz"}
MAX_INLINE_DEPTH = 4
# where a loop's trip count came from (models.LoopFact.origin)
LoopOrigin = Literal["constant", "launch", "arguments", "grid-stride", "assumed", "data-dependent"]
MAX_NODES = 200_000  # work budget per kernel: pathological inputs stop, not hang


@dataclass(slots=True)
class Val:
    ctype: CType
    value: float | None = None
    lin: Linear = field(default_factory=lambda: Linear(const_known=False))
    root: str | None = None  # the array a pointer value points into
    space: str | None = None  # global | shared | local | const
    dims: tuple[float, ...] = ()  # remaining array dimensions (local/shared arrays)
    static: bool = False  # a compile-time constant (the compiler can fold it), not just a known value
    # a value read from a global array: (array, element index, element bytes), so that a loop
    # bound read from an offsets or counts array can be sized from the arrays around it
    loaded: tuple[str, Linear, float] | None = None
    # a row's count read as the difference of its offsets (`ptr[i + 1] - ptr[i]`): (array, index of
    # the row's first offset, element bytes), so that a loop up to it is sized as `ptr[i]..ptr[i + 1]`
    counted: tuple[str, Linear, float] | None = None
    counted_less: float = 0.0  # ... less this constant (`len - 1` of such a count `len`)
    # the most an unknown value can be: the constant it is the least of (`min(n, 12)`,
    # `12 < n ? 12 : n`), so that a loop up to it runs no more passes than that
    most: float | None = None

    @property
    def known(walker) -> bool:
        return walker.value is not None


UNKNOWN_VAL = Val(UNKNOWN, lin=Linear(const_known=False))


@dataclass(slots=True)
class Access:
    array: str
    space: str
    elem_bytes: int
    is_store: bool
    lin: Linear
    count: float  # per work item
    atomic: bool = False
    line: int = 0
    loops: frozenset[str] = frozenset()  # atoms of the loops enclosing the access
    sized: bool = True  # the element's size comes from its type (False: a struct or type not known, 4 B assumed)


@dataclass(slots=True)
class LaunchShape:
    grid: tuple[float, float, float] | None
    block: tuple[float, float, float] | None


@dataclass
class Callee:
    node: Node  # function_definition
    data: bytes
    path: str | None = None  # its file (None: not known, or the text it is bound in)
    line_base: int | None = None  # the file's 0-based row of `data`'s first line (None: lines not known)


@dataclass
class WalkResult:
    counts: OpCounts
    accesses: list[Access]
    loops: list[LoopFact]
    assumptions: list[Note]
    cardinality: dict[str, float]
    notes: list[Note]
    truncated: bool = False
    shared_bytes: float = 0.0
    layouts: dict[str, Layout] = field(default_factory=dict)  # arrays of structs the source lays out


def type_is_auto(ctype: CType) -> bool:
    return ctype.kind in ("unknown", "struct")


WARP_SIZE = 32.0
IDENT = re.compile(r"[A-Za-z_]\w*")
