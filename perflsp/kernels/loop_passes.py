"""The later passes of a host loop around a call.

`for (n = 1; n <= 11; n++) constant(n);` calls `constant` with 1 first, then 2, ... . Where
the first pass cannot reach what is asked about (`constant` launches only `if (n > 1)`), the
first launch the program makes is on the first pass that does: the caller's arguments are read
on the k-th pass, the loop variable stepped k times by the loop's own update (`n++`, `n += 2`,
`n *= 2`, `n = n + step`) while the loop's condition holds.
"""

from __future__ import annotations

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, Value, try_evaluate
from perflsp.kernels.context import ExtractionContext

MAX_LATER_PASSES = 16  # (a sweep's first passes: a launch no early pass reaches is read as none)
_FUNCTIONS = ("function_definition", "lambda_expression")


def later_pass_env(ctx: ExtractionContext, call: Node, env: ConstEnv, passes: int) -> ConstEnv | None:
    """`env` (the constants where `call` stands on the first pass of its loops) with the
    innermost `for` loop's variable stepped `passes` times; None where no such loop holds the
    call, its variable or update does not fold, or the loop has ended by then."""
    loop = _enclosing_for(call)
    if loop is None:
        return None
    variable = _loop_variable(ctx, loop)
    update = loop.child_by_field_name("update")
    if variable is None or update is None:
        return None
    value, _ = try_evaluate(variable, env)
    for _ in range(passes):
        if not isinstance(value, (int, float)):
            return None
        value = _stepped(ctx, update, variable, value, env)
    if not isinstance(value, (int, float)):
        return None
    stepped = ConstEnv(parent=env, constants={variable: value})
    condition = loop.child_by_field_name("condition")
    if condition is not None:
        holds, _ = try_evaluate(ctx.text(condition), stepped)
        if isinstance(holds, (int, float)) and not holds:
            return None
    return stepped


def _enclosing_for(call: Node) -> Node | None:
    """The innermost `for` loop whose body holds `call`, inside the call's function."""
    node = call
    parent = call.parent
    while parent is not None and parent.type not in _FUNCTIONS:
        if parent.type == "for_statement" and node == parent.child_by_field_name("body"):
            return parent
        node, parent = parent, parent.parent
    return None


def _loop_variable(ctx: ExtractionContext, loop: Node) -> str | None:
    """The variable a `for` loop's initializer sets (`int n = 1`, `n = 1`)."""
    for init in loop.children_by_field_name("initializer"):
        if init.type == "assignment_expression":
            left = init.child_by_field_name("left")
            return ctx.text(left) if left is not None and left.type == "identifier" else None
        if init.type == "declaration":
            declarator = init.child_by_field_name("declarator")
            if declarator is not None and declarator.type == "init_declarator":
                name = declarator.child_by_field_name("declarator")
                return ctx.text(name) if name is not None and name.type == "identifier" else None
    return None


def _stepped(ctx: ExtractionContext, update: Node, variable: str, value: float, env: ConstEnv) -> Value | None:
    """The variable's value after one run of the loop's `update`, or None."""
    text: str | None = None
    if update.type == "update_expression":
        operand = update.child_by_field_name("argument")
        if operand is not None and ctx.text(operand) == variable:
            text = f"({variable}) {'+' if '++' in ctx.text(update) else '-'} 1"
    elif update.type == "assignment_expression":
        left, right = update.child_by_field_name("left"), update.child_by_field_name("right")
        operator = ctx.text(update.child_by_field_name("operator"))
        if left is not None and right is not None and ctx.text(left) == variable:
            text = ctx.text(right) if operator == "=" else f"({variable}) {operator[:-1]} ({ctx.text(right)})"
    if text is None:
        return None
    stepped, _ = try_evaluate(text, ConstEnv(parent=env, constants={variable: value}))
    return stepped
