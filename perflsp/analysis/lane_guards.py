"""Guards that let a known part of a block's threads through: `if (threadIdx.x < 32)` in a block of
256 threads runs its arm for 32 of them, an eighth (the last steps of a reduction, one warp that
computes while the others wait, a tile's first row).

A comparison of the thread index with a size the source does not fix is a bounds guard (nearly
every thread passes); with a number the walk knows, below the block's extent along that axis,
the share of the block it lets through is exact.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.case_chains import unwrapped
from perflsp.analysis.linear import tile_parts
from perflsp.analysis.walk_values import Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

_AXES = {"tx": 0, "ty": 1, "tz": 2}
# the relation as seen from the thread index's side (`32 > tid` is `tid < 32`)
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def lanes_share(walker: Walker, cond: Node | None) -> float | None:
    """The share of a block's threads for which `cond`, a comparison of one thread index
    (`threadIdx.x`, not offset or scaled) or a tile of it (`threadIdx.x % 32`) with a known number
    inside its extent, holds; None for anything else."""
    node = unwrapped(cond)
    if node is None or node.type != "binary_expression" or walker.launch.block is None:
        return None
    op = walker.text(node.child_by_field_name("operator"))
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op not in _MIRROR or left is None or right is None:
        return None
    saved = walker.mult
    walker.mult = 0.0  # evaluated again, and counted, as the condition
    lval, rval = walker.eval(left), walker.eval(right)
    walker.mult = saved
    extent = _thread_extent(walker, lval)
    bound = rval
    if extent is None:
        extent, bound, op = _thread_extent(walker, rval), lval, _MIRROR[op]
    if extent is None or bound.value is None or bound.ctype.pointer or _thread_extent(walker, bound) is not None:
        return None
    value = float(bound.value)
    if extent <= 1 or not 0 < value < extent:
        return None
    passing = {"<": value, "<=": value + 1, ">": extent - value - 1, ">=": extent - value}[op]
    return min(1.0, max(0.0, float(int(passing + 0.999999)) / extent))


def innermost_geometric_loop(walker: Walker, atoms: Collection[str]) -> str | None:
    """The innermost loop doubling or halving its counter (`s *= 2`) among `atoms`, None when
    none is. The walk records such loops as it enters them, so the last recorded is the
    innermost of those around the code (a set's order would change with the hash seed)."""
    found = [atom for atom in walker.geometric_loops if atom in atoms]
    return found[-1] if found else None


def modulus_share(walker: Walker, cond: Node | None) -> float | None:
    """The share of threads for which `cond`, `x % m == k` (or `!=`) with `x` a value of the
    thread index, holds: one value of `x` in `m` for a known `m`; in a loop that doubles or halves
    `m` (`tid % (2 * stride) == 0` of a tree reduction) half the threads, then a quarter, ...:
    about one pass's worth over the loop, 1/passes a pass. None for any other condition."""
    node = unwrapped(cond)
    if node is None or node.type != "binary_expression":
        return None
    op = walker.text(node.child_by_field_name("operator"))
    left, right = unwrapped(node.child_by_field_name("left")), unwrapped(node.child_by_field_name("right"))
    if op not in ("==", "!=") or left is None or right is None:
        return None
    sides = (left, right)
    at = next((i for i, side in enumerate(sides) if _is_remainder(walker, side)), None)
    if at is None:
        return None
    remainder, other = sides[at], sides[1 - at]
    saved = walker.mult
    walker.mult = 0.0  # evaluated again, and counted, as the condition
    try:
        dividend = walker.eval(remainder.child_by_field_name("left"))
        modulus = walker.eval(remainder.child_by_field_name("right"))
        tested = walker.eval(other)
    finally:
        walker.mult = saved
    thread_atoms = {a for a in dividend.lin.atoms | dividend.lin.nonlinear if a in _AXES or tile_parts(a)}
    if not thread_atoms or tested.value is None:
        return None
    geometric = innermost_geometric_loop(walker, modulus.lin.atoms | modulus.lin.nonlinear)
    if geometric is not None:
        share = 1.0 / max(1.0, walker.geometric_loops[geometric])
    elif modulus.value is not None and modulus.value >= 1 and not modulus.lin.atoms:
        share = 1.0 / float(modulus.value)
    else:
        return None
    threads = 1.0
    for atom in thread_atoms:
        threads *= max(1.0, walker.cardinality.get(atom, 1.0))
    share = max(share, 1.0 / threads)  # (a modulus beyond the threads' range: one of them)
    return share if op == "==" else 1.0 - share


def _is_remainder(walker: Walker, node: Node) -> bool:
    return node.type == "binary_expression" \
        and walker.text(node.child_by_field_name("operator")) == "%"


def _thread_extent(walker: Walker, val: Val) -> float | None:
    """The values of a value that is exactly one thread index (`threadIdx.y`: the block's extent
    along it) or a tile of one (`threadIdx.x % 32`: 32), else None."""
    lin = val.lin
    if val.value is not None or lin.nonlinear or len(lin.coeffs) != 1 or not lin.const_known or lin.const != 0:
        return None
    atom, coeff = lin.coeffs[0]
    if coeff != 1.0:
        return None
    axis = _AXES.get(atom)
    if axis is not None and walker.launch.block is not None:
        return walker.launch.block[axis]
    parts = tile_parts(atom)
    return walker.cardinality.get(atom) if parts is not None and parts[0] in _AXES else None
