"""GNU statement expressions: `({ __typeof__(x) _x = (x); __typeof__(y) _y = (y); _x < _y ? _x : _y; })`,
the `min`/`max` macros of generated (polyhedral) code and of C headers. Their value is their last
expression statement, over the declarations before it (in a scope of their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.walk_values import UNKNOWN_VAL, Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

# `__typeof__(x) _x = (x);`: the grammar reads a call of `__typeof__` assigned to, the declared name an error
_TYPEOF = ("__typeof__", "__typeof", "typeof", "decltype")


def eval_statement_expression(walker: Walker, block: Node) -> Val:
    """The value of `({ ...; last; })`: each statement walked (counted like any other), the
    last expression statement's value returned."""
    statements = [c for c in block.named_children if c.type != "comment"]
    walker.scopes.append({})
    try:
        value = UNKNOWN_VAL
        for index, statement in enumerate(statements):
            declared = typeof_declaration(walker, statement)
            if declared is not None:
                name, initializer = declared
                walker.scopes[-1][name] = walker.eval(initializer)
            elif index == len(statements) - 1 and statement.type == "expression_statement" \
                    and statement.named_child_count:
                value = walker.eval(statement.named_children[0])
            else:
                walker.walk_statement(statement)
        return value
    finally:
        walker.scopes.pop()


def typeof_declaration(walker: Walker, statement: Node) -> tuple[str, Node] | None:
    """(name, initializer) of `__typeof__(x) name = init;`, which the grammar misreads as an
    assignment to a call (the name left as an error node between them)."""
    if statement.type != "expression_statement" or not statement.named_child_count:
        return None
    assignment = statement.named_children[0]
    if assignment.type != "assignment_expression":
        return None
    left = assignment.child_by_field_name("left")
    right = assignment.child_by_field_name("right")
    function = left.child_by_field_name("function") if left is not None and left.type == "call_expression" else None
    if function is None or right is None or walker.text(function) not in _TYPEOF:
        return None
    error = next((c for c in assignment.children if c.type == "ERROR"), None)
    names = [c for c in error.named_children if c.type == "identifier"] if error is not None else []
    if len(names) != 1:
        return None
    return walker.text(names[0]), right
