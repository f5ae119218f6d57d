"""Loop bounds that vary with the block index, the thread index, an OpenMP worksharing loop's
index or an enclosing loop's counter:
`for (c1 = 0; c1 <= min(368, 32 * b0 + 30); c1 += 32)` with `b0 = blockIdx.x`, and inside it
`for (c3 = max(0, 184 * t0 - c1); c3 <= min(31, 183 * t0 - c1 + 368); c3++)`, the shapes of
generated polyhedral code (the last blocks of a tile run fewer iterations, each thread its own
band of the tile). The walker counts one work item, so such a loop runs the average of its trip
counts over those indices; its start and bound are folded at a bounded, evenly spread sample."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.linear import UNKNOWN_COEFF, Linear, tile_parts
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.walk_values import Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

BLOCK_ATOMS = {"bx": 0, "by": 1, "bz": 2}
THREAD_ATOMS = {"tx": 0, "ty": 1, "tz": 2}
PARALLEL_ATOM = "o"  # the index of an OpenMP worksharing loop (`o0`, `o1` for a collapsed nest)
MAX_POINTS = 512  # start and bound evaluations per loop: every index up to this many, an even sample beyond


def fixed_value(lin: Linear, fixed: dict[str, float]) -> float | None:
    """The value of a linear form when its atoms are held at `fixed`; None when it has other
    atoms or a part that is not linear."""
    if lin.nonlinear or not lin.const_known:
        return None
    total = lin.const
    for atom, coeff in lin.coeffs:
        if atom not in fixed or coeff == UNKNOWN_COEFF:
            return None
        total += coeff * fixed[atom]
    return total


def at_fixed_atoms(val: Val, fixed: dict[str, float]) -> Val:
    """`val` with the held atoms substituted, when that makes it a number."""
    if val.value is not None or val.ctype.pointer:
        return val
    value = fixed_value(val.lin, fixed)
    if value is None:
        return val
    return Val(val.ctype, value, Linear.constant(value), static=val.static)


def index_points(extents: dict[str, float]) -> list[dict[str, float]]:
    """Index values to fold the bound at: every value of each index when there are few, evenly
    spaced ones (first and last included) otherwise, at most `MAX_POINTS` in all."""
    per_axis = max(2, int(MAX_POINTS ** (1.0 / len(extents)) + 1e-9))
    axes = []
    for extent in extents.values():
        count = max(1, int(extent))
        if count <= per_axis:
            axes.append([float(i) for i in range(count)])
        else:
            axes.append([float(round(i * (count - 1) / (per_axis - 1))) for i in range(per_axis)])
    return [dict(zip(extents, point)) for point in itertools.product(*axes)]


def index_extents(walker: Walker, atoms: frozenset[str]) -> dict[str, float] | None:
    """How many values each atom takes (blocks of the grid, threads of the block, passes of an
    enclosing loop); None when one is not such an index or its extent is not known."""
    grid, block = walker.launch.grid, walker.launch.block
    extents = {}
    for atom in sorted(atoms):
        if atom in BLOCK_ATOMS and grid is not None:
            extents[atom] = grid[BLOCK_ATOMS[atom]]
        elif atom in THREAD_ATOMS and block is not None:
            extents[atom] = block[THREAD_ATOMS[atom]]
        elif (atom in walker.loop_atoms or atom.startswith(PARALLEL_ATOM)) and atom in walker.cardinality:
            extents[atom] = walker.cardinality[atom]  # (an OpenMP worksharing loop's index too)
        elif tile_parts(atom) is not None and atom in walker.cardinality:
            extents[atom] = walker.cardinality[atom]  # a tile of an index (`tx % 32`, `bx / 256`): its own values
        else:
            return None
    return extents


def start_node(walker: Walker, loop: Node, var: str) -> Node | None:
    """The expression a `for` loop's initializer gives its counter (`int c = e`, `c = e`)."""
    init = loop.child_by_field_name("initializer")
    if init is None:
        return None
    if init.type == "declaration":
        for declarator in init.children_by_field_name("declarator"):
            if declarator.type == "init_declarator" and walker.text(declarator.child_by_field_name("declarator")) == var:
                return declarator.child_by_field_name("value")
        return None
    if init.type == "assignment_expression" and walker.text(init.child_by_field_name("left")) == var:
        return init.child_by_field_name("right")
    return None


def per_block_trip(walker: Walker, var: str, bound: Val, bound_node: Node, start: Val | None, step: Val | None,
                   inclusive: bool, loop: Node) -> float | None:
    """The average trip count of a loop whose start and bound depend only on the block and
    thread indices and enclosing loops' counters, stepping by a known amount; None for any
    other loop, or when an index's extent is not known. Said as evidence (the trip counts are
    the source's, per index)."""
    if start is None or step is None or not step.value or walker.fixed_atoms:
        return None
    linear_start = start.value is not None or (not start.lin.nonlinear and start.lin.const_known)
    # a start that is not linear in the indices (`max(0, 184 * t0 - c1)`) is folded again too
    first_node = None if linear_start else start_node(walker, loop, var)
    atoms = bound.lin.atoms | start.lin.atoms
    if not bound.lin.atoms or "data" in atoms or (not linear_start and first_node is None):
        return None
    extents = index_extents(walker, atoms)
    if extents is None:
        return None
    trips = []
    saved = walker.mult, walker.visited
    walker.mult = 0.0  # folding the bound again counts nothing
    try:
        for point in index_points(extents):
            walker.fixed_atoms = point
            end = walker.eval(bound_node).value
            first = start.value if start.value is not None else (
                walker.eval(first_node).value if first_node is not None else fixed_value(start.lin, point))
            if end is None or first is None:
                return None
            span = end - first + (math.copysign(1.0, step.value) if inclusive else 0.0)
            trips.append(max(0.0, math.ceil(span / step.value)) if (span > 0) == (step.value > 0) else 0.0)
    finally:
        walker.fixed_atoms = {}
        walker.mult, walker.visited = saved
    trip = sum(trips) / len(trips)
    words = [word for first, word in _INDEX_WORDS if any(a.startswith(first) for a in extents)]
    over = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    walker.notes.append(Note(NoteKind.LOOP_TRIP, NoteSource.SOURCE,
                             f"the `{var}` loop's bounds depend on {over}: {trip:.4g} iterations on average "
                             f"({min(trips):g} to {max(trips):g})",
                             subject=var, value=trip, unit="iterations", line=walker.line(loop)))
    return trip


_INDEX_WORDS = (("b", "the block index"), ("t", "the thread index"), ("L", "the enclosing loops' counters"),
                (PARALLEL_ATOM, "the parallel loop's index"))
