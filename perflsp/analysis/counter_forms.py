"""A loop condition that compares a multiple of the counter, or the counter plus a constant, with
its bound: `for (mb = 0; 2 * mb <= j; mb++)`, `for (i = s; i + 3 <= d; i++)`. Solved for the
counter, the bound is `(j - offset) / scale`, rounded to the counter's last value for `<=`/`>=`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.folding import number_literal

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

Form = tuple[float, float]  # side = scale * counter + offset
PLAIN: Form = (1.0, 0.0)


def counter_form(walker: Walker, var: str, node: Node | None) -> Form | None:
    """(scale, offset) when `node` is `var`, `k * var`, `var * k`, `var + c` or `var - c` with
    `k > 0` and `c` numbers or names of known values (`offset + rowStride <= BM`, a template's
    constant); None otherwise."""
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node is None:
        return None
    if walker.text(node) == var:
        return PLAIN
    if node.type != "binary_expression":
        return None
    op = walker.text(node.child_by_field_name("operator"))
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None:
        return None
    if op == "*":
        counter, factor = (left, right) if walker.text(left) == var else (right, left)
        value = _known(walker, factor) if walker.text(counter) == var else None
        return (value, 0.0) if value is not None and value > 0 else None
    if op in ("+", "-") and walker.text(left) == var:
        value = _known(walker, right)
        return (1.0, value if op == "+" else -value) if value is not None else None
    return None


def _known(walker: Walker, node: Node) -> float | None:
    """A number literal's value, or that of a name whose value the walk knows."""
    if node.type == "identifier":
        bound = walker.lookup(walker.text(node))
        return bound.value if bound is not None and not bound.ctype.pointer else None
    return number_literal(walker.text(node)).value


def solved_bound(bound: float | None, form: Form | None, op: str | None) -> float | None:
    """The bound of the counter itself, for the condition `form(counter) op bound`."""
    if bound is None or form is None or form == PLAIN:
        return bound
    scale, offset = form
    solved = (bound - offset) / scale
    if op == "<=":
        return float(math.floor(solved + 1e-9))
    if op == ">=":
        return float(math.ceil(solved - 1e-9))
    return solved


def geometric_passes(start: float, bound: float, factor: float, kind: str, op: str) -> float | None:
    """Passes of a loop multiplying (`kind` "mul") or dividing ("div", integer division) its
    counter by `factor` from `start` while `counter op bound`: `for (s = 128; s > 0; s >>= 1)`
    runs 8 times (128 .. 1), `while (x < 1000) x *= 2` 10 times (1 .. 512). None for a direction
    the comparison does not end (the caller's own reading)."""
    eps = 1e-9
    if kind == "mul" and op in ("<", "<=", "!=") and start >= 1:
        if op == "<=":
            return math.floor(math.log(bound / start, factor) + eps) + 1.0 if start <= bound else 0.0
        return max(0.0, math.ceil(math.log(bound / start, factor) - eps)) if start < bound else 0.0
    if kind == "div" and op in (">", ">=", "!=") and start >= 1:
        least = math.floor(bound) + 1 if op in (">", "!=") else max(1, math.ceil(bound))  # smallest value that passes
        return math.floor(math.log(start / least, factor) + eps) + 1.0 if start >= least else 0.0
    return None


def spread_geometric_passes(low: float, high: float, bound: float, factor: float, kind: str, op: str,
                            samples: int = 256) -> float | None:
    """The mean passes of a geometric loop (`geometric_passes`) whose counter starts at each
    thread's own value, spread evenly over `low`..`high` (`n = i; while (n > 0) n >>= 1;` over
    a launch's thread indices: about log2 of each, not of the smallest). None where one of
    those starts gives no reading."""
    count = max(1, min(samples, int(high - low) + 1))
    total = 0.0
    for k in range(count):
        start = float(math.floor(low + (high - low) * k / max(1, count - 1))) if count > 1 else float(low)
        passes = geometric_passes(start, bound, factor, kind, op)
        if passes is None:
            if start < 1:
                continue  # (a start of 0 runs no pass of either kind: counted as none)
            return None
        total += passes
    return total / count
