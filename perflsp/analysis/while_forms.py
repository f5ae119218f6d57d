"""`while` and `do` loops whose condition is not a counter against a bound but whose form states
a fair expectation of their passes:

- retry loops around a compare-and-swap (`do { assumed = old; old = atomicCAS(p, assumed, v); }
  while (assumed != old);`): one pass when the address is not contended;
- binary searches (`while (low < high) { mid = (low + high) >> 1; ... low = mid + 1; ... }`,
  `while (length > 1) { ... length = upper - lower; }` around a midpoint): log2 of the range;
- loops halving a variable in their condition (`while (n >>= 1) ++log;`): log2 of its value.

A halved value the walk cannot fold is read at production scale (`CostModel.assumed_problem_size`,
as an unknown size is: a size, a key or an exponent, not a loop's trip count); a searched range it
cannot fold is the range an unknown loop is assumed to cover (`CostModel.assumed_trip_count`).
Either takes log2 of it passes."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.notes import Note, NoteKind, NoteSource, assumed

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

_CAS = re.compile(r"\b(?:atomicCAS(?:_block|_system)?|__sync_(?:val|bool)_compare_and_swap|"
                  r"compare_exchange_(?:strong|weak)|__atomic_compare_exchange(?:_n)?)\s*\(")
_MIDPOINT = re.compile(r">>\s*1\b|/\s*2\b")
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")
_HALVING = {">>=": 2.0, "/=": None}


def while_expectation(walker: Walker, node: Node, cond: Node | None, body: Node | None) -> tuple[float, Note] | None:
    """(passes, the note saying why) for a loop of one of the forms above; None otherwise."""
    if cond is None or body is None:
        return None
    inner = _unwrapped(cond)
    if _CAS.search(walker.text(node)) and not _has_loop(body):
        return 1.0, assumed(NoteKind.LOOP_TRIP, "retry loop around a compare-and-swap: one pass assumed (the swap "
                            "succeeds the first time when the address is not contended)",
                            line=walker.line(node), value=1.0, unit="iterations")
    halving = _halving_condition(walker, inner)
    if halving is not None:
        name, factor = halving
        return _log_passes(walker, node, f"`{name}` halved until zero", _value(walker, name), factor, floor=True,
                           unknown=walker.cost.assumed_problem_size)
    search = _search_range(walker, inner, body)
    if search is not None:
        what, span = search
        return _log_passes(walker, node, f"binary search over {what}", span, 2.0, floor=False,
                           unknown=walker.cost.assumed_trip_count)
    return None


def _log_passes(walker: Walker, node: Node, what: str, span: float | None, factor: float,
                floor: bool, unknown: float) -> tuple[float, Note]:
    line = walker.line(node)
    if span is None:
        assumed_span = unknown
        passes = max(1.0, math.ceil(math.log(assumed_span, factor)))
        return passes, assumed(NoteKind.LOOP_TRIP, f"{what}, range unknown: assumed {passes:g} passes "
                               f"(log{factor:g} of {assumed_span:g})", line=line, value=passes, unit="iterations")
    if span < 1:
        passes = 0.0
    elif floor:
        passes = math.floor(math.log(span, factor) + 1e-9)
    else:
        passes = max(1.0, math.ceil(math.log(span + 1, factor) - 1e-9))
    return passes, Note(NoteKind.LOOP_TRIP, NoteSource.SOURCE, f"{what} ({span:g}): {passes:g} passes",
                        value=passes, unit="iterations", line=line)


def _unwrapped(node: Node) -> Node:
    while node.type in ("parenthesized_expression", "condition_clause") and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _has_loop(node: Node) -> bool:
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type in _LOOPS or current.type == "lambda_expression":
            return True
        pending.extend(current.named_children)
    return False


def _value(walker: Walker, name: str) -> float | None:
    val = walker.lookup(name)
    return val.value if val is not None else None


def _halving_condition(walker: Walker, cond: Node) -> tuple[str, float] | None:
    """`n >>= 1`, `(n >>= 1) > 0`, `n /= 2` as the condition: (n, the factor)."""
    if cond.type == "binary_expression" and walker.text(cond.child_by_field_name("operator")) in (">", "!=") \
            and walker.text(cond.child_by_field_name("right")).strip() == "0":
        left = cond.child_by_field_name("left")
        cond = _unwrapped(left) if left is not None else cond
    if cond.type != "assignment_expression":
        return None
    target = cond.child_by_field_name("left")
    operator = walker.text(cond.child_by_field_name("operator"))
    amount = walker.text(cond.child_by_field_name("right")).strip()
    if target is None or target.type != "identifier" or not amount.isdigit() or int(amount) < 1:
        return None
    if operator == ">>=":
        return walker.text(target), float(2 ** int(amount))
    if operator == "/=" and int(amount) > 1:
        return walker.text(target), float(amount)
    return None


def _search_range(walker: Walker, cond: Node, body: Node) -> tuple[str, float | None] | None:
    """A bisection: the condition compares two variables (`low < high`, `left <= right`) or
    one with 1 (`length > 1`), and the body computes a midpoint and assigns one of them.
    (what is searched, the range's size when the walk folds it)."""
    if cond.type != "binary_expression" or walker.text(cond.child_by_field_name("operator")) not in ("<", "<=", ">", ">="):
        return None
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if left is None or right is None or left.type != "identifier":
        return None
    body_text = walker.text(body)
    if not _MIDPOINT.search(body_text):
        return None
    names = [walker.text(left)] + ([walker.text(right)] if right.type == "identifier" else [])
    if not any(re.search(rf"\b{re.escape(n)}\s*=[^=]", body_text) for n in names):
        return None
    if right.type == "identifier":
        low, high = _value(walker, names[0]), _value(walker, names[1])
        span = abs(high - low) if low is not None and high is not None else None
        return f"`{names[0]}`..`{names[1]}`", span
    if walker.text(right).strip() == "1" and walker.text(cond.child_by_field_name("operator")) == ">":
        return f"a range of `{names[0]}`", _value(walker, names[0])
    return None
