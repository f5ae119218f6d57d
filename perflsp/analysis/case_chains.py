"""Chains of cases on a value the thread index selects: `if (Case == 1) {...} if (Case == 2) {...}`
with `Case = (tid % Y) / C + 1`, each thread running exactly one case.

An equality on the thread index (`tid == 0`) holds for one thread in its range. A value made of
the thread index through `%` or `/` takes each of its values for many threads, so that rule
would give each case of such a chain a share of one thread in millions where it has one in N.
Where the same expression is tested against N distinct constants by the `if` statements of one
block (or one `else if` chain), each test is read as holding for 1/N of the threads: the shares
a `switch` on an unknown value gives its cases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.linear import tile_parts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_values import INDEX_ATOMS

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker



def case_share(walker: Walker, cond: Node | None) -> float | None:
    """1/N when `cond` is `v == k` (k a number), v depends on the thread index other than
    linearly and the statements around test v against N >= 2 distinct numbers; else None."""
    test = _equality(walker, cond)
    if test is None or cond is None:
        return None
    subject, _ = test
    node = _enclosing_if(cond)
    if node is None:
        return None
    constants = _tested_constants(walker, node, subject)
    if len(constants) < 2:
        return None
    saved = walker.mult
    walker.mult = 0.0  # evaluated again, and counted, as the condition
    value = walker.eval(_operand(cond, subject, walker))
    walker.mult = saved
    tiles = any(tile_parts(a) for a in value.lin.atoms)
    if not tiles and not (value.lin.nonlinear & INDEX_ATOMS) and not any(a.startswith("o") for a in value.lin.nonlinear):
        return None  # the thread index itself (`tid == 0`), or no thread index
    # in an `else if` chain the threads the earlier tests took are gone: a third of them, then
    # a half of the rest, ...
    share = 1.0 / max(1, len(constants) - _earlier_tests(walker, node, subject))
    walker.assume(assumed(NoteKind.CASE_CHAIN, f"`{subject}` (of the thread index through `%` or `/`) is tested against "
                          f"{len(constants)} constants: each thread runs one case, 1/{len(constants)} of the threads "
                          "each", subject=subject, value=share))
    return share


def unwrapped(node: Node | None) -> Node | None:
    """`node` under its parentheses (and an `if`'s condition clause)."""
    while node is not None and node.type in ("parenthesized_expression", "condition_clause") \
            and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def _equality(walker: Walker, cond: Node | None) -> tuple[str, str] | None:
    """(the tested expression's text, the number's text) of `v == 3` or `3 == v`."""
    node = unwrapped(cond)
    if node is None or node.type != "binary_expression" or walker.text(node.child_by_field_name("operator")) != "==":
        return None
    left, right = unwrapped(node.child_by_field_name("left")), unwrapped(node.child_by_field_name("right"))
    if left is None or right is None:
        return None
    if right.type == "number_literal" and left.type != "number_literal":
        return " ".join(walker.text(left).split()), walker.text(right)
    if left.type == "number_literal" and right.type != "number_literal":
        return " ".join(walker.text(right).split()), walker.text(left)
    return None


def _operand(cond: Node, subject: str, walker: Walker) -> Node:
    node = unwrapped(cond)
    assert node is not None
    for side in ("left", "right"):
        child = unwrapped(node.child_by_field_name(side))
        if child is not None and " ".join(walker.text(child).split()) == subject:
            return child
    return node


def _enclosing_if(cond: Node) -> Node | None:
    node = cond.parent
    while node is not None and node.type != "if_statement":
        node = node.parent if node.type in ("condition_clause", "parenthesized_expression") else None
    return node


def _earlier_tests(walker: Walker, node: Node, subject: str) -> int:
    """How many `if` statements of `node`'s `else if` chain before it test `subject`."""
    count = 0
    while node.parent is not None and node.parent.type == "else_clause" and node.parent.parent is not None \
            and node.parent.parent.type == "if_statement":
        node = node.parent.parent
        test = _equality(walker, node.child_by_field_name("condition"))
        count += test is not None and test[0] == subject
    return count


def _tested_constants(walker: Walker, node: Node, subject: str) -> set[float]:
    """The numbers `subject` is compared with `==` in the `if` statements beside `node` (its
    block's, or its `else if` chain's)."""
    top = node
    while top.parent is not None and top.parent.type == "else_clause" and top.parent.parent is not None \
            and top.parent.parent.type == "if_statement":
        top = top.parent.parent
    block = top.parent
    heads = [c for c in block.named_children if c.type == "if_statement"] \
        if block is not None and block.type == "compound_statement" else [top]
    found: set[float] = set()
    for head in heads:
        current: Node | None = head
        while current is not None and current.type == "if_statement":
            test = _equality(walker, current.child_by_field_name("condition"))
            if test is not None and test[0] == subject:
                try:
                    found.add(float(test[1].rstrip("uUlLfF")))
                except ValueError:
                    pass
            alternative = current.child_by_field_name("alternative")
            current = alternative.named_children[0] if alternative is not None and alternative.named_children else None
    return found
