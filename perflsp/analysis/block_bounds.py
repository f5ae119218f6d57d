"""Loop bounds that vary with the block index: `for (c1 = 0; c1 <= min(368, 32 * b0 + 30); c1 += 32)`
with `b0 = blockIdx.x`, the shape of generated polyhedral code (the last blocks of a tile run
fewer iterations). The walker counts one work item, so such a loop runs the average of its
per-block trip counts over the grid; the bound is folded at a bounded sample of block indices."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.linear import UNKNOWN_COEFF, Linear
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.walk_values import Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

BLOCK_ATOMS = {"bx": 0, "by": 1, "bz": 2}
MAX_POINTS = 256  # bound evaluations per loop: every block up to this many, an even sample beyond


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


def block_points(grid: tuple[float, float, float], atoms: list[str]) -> list[dict[str, float]]:
    """Block indices to fold the bound at: every block of each axis the bound reads when the
    grid is small, evenly spaced ones (first and last included) otherwise."""
    per_axis = max(2, int(MAX_POINTS ** (1.0 / len(atoms))))
    axes = []
    for atom in atoms:
        blocks = max(1, int(grid[BLOCK_ATOMS[atom]]))
        if blocks <= per_axis:
            axes.append([float(b) for b in range(blocks)])
        else:
            axes.append([float(round(i * (blocks - 1) / (per_axis - 1))) for i in range(per_axis)])
    return [dict(zip(atoms, point)) for point in itertools.product(*axes)]


def per_block_trip(walker: Walker, var: str, bound: Val, bound_node: Node, start: Val | None, step: Val | None,
                   inclusive: bool, loop: Node) -> float | None:
    """The average over the grid of the trip count of a loop whose bound (and start) depend on
    the block index only, stepping by a known amount; None for any other loop, or when the
    grid is not known. Said as evidence (the trip count is the source's, per block)."""
    grid = walker.launch.grid
    atoms = sorted(bound.lin.atoms | (start.lin.atoms if start is not None else frozenset()))
    if grid is None or not atoms or not set(atoms) <= set(BLOCK_ATOMS) or step is None or not step.value \
            or start is None or walker.fixed_atoms:
        return None
    trips = []
    saved_mult = walker.mult
    walker.mult = 0.0  # folding the bound again counts nothing
    try:
        for point in block_points(grid, atoms):
            walker.fixed_atoms = point
            end = walker.eval(bound_node).value
            first = start.value if start.value is not None else fixed_value(start.lin, point)
            if end is None or first is None:
                return None
            span = end - first + (math.copysign(1.0, step.value) if inclusive else 0.0)
            trips.append(max(0.0, math.ceil(span / step.value)) if (span > 0) == (step.value > 0) else 0.0)
    finally:
        walker.fixed_atoms = {}
        walker.mult = saved_mult
    trip = sum(trips) / len(trips)
    blocks = math.prod(int(grid[BLOCK_ATOMS[a]]) for a in atoms)
    walker.notes.append(Note(NoteKind.LOOP_TRIP, NoteSource.SOURCE,
                             f"the `{var}` loop's bound depends on the block index: {trip:.4g} iterations on average "
                             f"over the {blocks} blocks ({min(trips):g} to {max(trips):g})",
                             subject=var, value=trip, unit="iterations", line=walker.line(loop)))
    return trip
