"""Unsuffixed floating-point literals that drag single-precision GPU code into FP64.

In C and C++ `0.5` is a `double`. `x * 0.5` with a float `x` converts `x` to double, multiplies
in FP64 and (usually) narrows the result back: on most GPUs FP64 runs at 1/32 to 1/64 of the
FP32 rate, and the conversions cost instructions of their own. The fix is the `f` suffix.

The rule fires where a double literal meets float data at run time:
- an operand of `+ - * /` or a comparison whose other operand is float (`x * 0.5`, `t > 0.0`);
- a compound assignment to a float (`x *= 0.5`);
- a run-time expression of literals and integers narrowed into a float (`float v = i * 0.5`,
  `y[i] = n / 2.0`, an argument of `sinf`, a `return` from a float function).
It never fires in double code, on integer literals, on `float v = 0.5;` (converted at compile
time), nor on template code whose type parameter is not float in any launched instantiation.
"""

from __future__ import annotations

from tree_sitter import Node

from perflsp.analysis.exprtypes import (
    ARITH_OPS,
    COMPARE_OPS,
    COMPOUND_FLOAT_OPS,
    DOUBLE,
    FLIT,
    FLOAT,
    ExprTyper,
    call_name,
    double_literals,
    is_float_math,
    is_runtime,
    normalise_type,
)
from perflsp.analysis.fixes import EditError, float_literal_fix
from perflsp.analysis.lints.context import GpuCode, LintContext, walk
from perflsp.analysis.models import Finding

CODE = "precision/double-promotion"
NAME = "double-promotion"
DEFAULT_SEVERITY = "warning"


def check(ctx: LintContext) -> list[Finding]:
    found: dict[int, Finding] = {}
    for code in ctx.gpu_code():
        for node in walk(code.node):
            for value, why in _float_sinks(ctx, code, node):
                for literal in double_literals(value):
                    if literal.start_byte not in found:
                        found[literal.start_byte] = _finding(ctx, code, literal, why)
    return list(found.values())


def _is(ty, kind: str) -> bool:
    return ty is not None and ty.scalar == kind


def _float_sinks(ctx: LintContext, code: GpuCode, node: Node):
    """(value, reason) pairs: `value` is an intended-neutral expression (literals and integers)
    whose result ends up mixed with, or converted to, float at run time."""
    typer: ExprTyper = code.typer
    kind = node.type
    if kind == "binary_expression":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is None or left is None or right is None or (op.type not in ARITH_OPS and op.type not in COMPARE_OPS):
            return
        for value, partner in ((right, left), (left, right)):
            if _is(typer.intended(partner), FLOAT) and _is(typer.intended(value), FLIT):
                if _destination_is_double(code, node):
                    return  # mixed-precision code computing into a double: the promotion is wanted
                yield value, f"promotes `{_short(ctx, partner)}` (float) and the `{op.type}` to FP64"
    elif kind == "assignment_expression":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is None or left is None or right is None or not _is(typer.intended(left), FLOAT):
            return
        if not _is(typer.intended(right), FLIT):
            return
        if op.type in COMPOUND_FLOAT_OPS:
            yield right, f"makes `{_short(ctx, node)}` an FP64 operation on a float"
        elif op.type == "=" and is_runtime(right):
            yield right, "is computed in FP64 and then narrowed to float"
    elif kind == "init_declarator":
        value = node.child_by_field_name("value")
        declaration = node.parent
        type_node = declaration.child_by_field_name("type") if declaration is not None else None
        target = node.child_by_field_name("declarator")
        if value is None or type_node is None or target is None or target.type != "identifier":
            return
        if normalise_type(ctx.text(type_node), typer.aliases) == FLOAT and _is(typer.intended(value), FLIT) and is_runtime(value):
            yield value, "is computed in FP64 and then narrowed to float"
    elif kind == "call_expression":
        name = call_name(node)
        args = node.child_by_field_name("arguments")
        if name is None or args is None or not is_float_math(name):
            return
        for arg in args.named_children:
            if _is(typer.intended(arg), FLIT) and is_runtime(arg):
                yield arg, f"is computed in FP64 and then passed to `{name}` as a float"
    elif kind == "cast_expression":
        value = node.child_by_field_name("value")
        cast_to = typer.actual(node)
        if value is not None and _is(cast_to, FLOAT) and _is(typer.intended(value), FLIT) and is_runtime(value):
            yield value, "is computed in FP64 and then cast to float"
    elif kind == "return_statement" and code.returns is not None and code.returns.scalar == FLOAT:
        value = next((c for c in node.named_children if c.type != "comment"), None)
        if value is not None and _is(typer.intended(value), FLIT) and is_runtime(value):
            yield value, "is computed in FP64 and then returned as a float"


_PASS_THROUGH = frozenset({"binary_expression", "parenthesized_expression", "unary_expression",
                           "conditional_expression", "cast_expression"})


def _destination_is_double(code: GpuCode, node: Node) -> bool:
    """Whether the full expression around `node` is stored into (or returned as) a double."""
    top = node
    while top.parent is not None and top.parent.type in _PASS_THROUGH:
        if top.parent.type == "cast_expression":
            return _is(code.typer.actual(top.parent), DOUBLE)
        if top.parent.type == "binary_expression" and top.parent.child_by_field_name("operator").type not in ARITH_OPS:
            return False
        top = top.parent
    parent = top.parent
    if parent is None:
        return False
    if parent.type == "init_declarator":
        declaration = parent.parent
        type_node = declaration.child_by_field_name("type") if declaration is not None else None
        target = parent.child_by_field_name("declarator")
        return (type_node is not None and target is not None and target.type == "identifier"
                and normalise_type(type_node.text.decode("utf-8", "replace"), code.typer.aliases) == DOUBLE)
    if parent.type == "assignment_expression" and parent.child_by_field_name("right") == top:
        return _is(code.typer.intended(parent.child_by_field_name("left")), DOUBLE)
    if parent.type == "return_statement":
        return code.returns is not None and code.returns.scalar == DOUBLE
    return False


def _finding(ctx: LintContext, code: GpuCode, literal: Node, why: str) -> Finding:
    text = ctx.text(literal)
    where = f" in `{code.instantiation}`" if code.instantiation else ""
    message = f"`{text}` is a double literal: it {why}{where}; write `{text}f`"
    fixes = ()
    try:
        fixes = (float_literal_fix(ctx.data, ctx.tree, ctx.span(literal)),)
    except EditError:
        pass
    return Finding(code=CODE, message=message, span=ctx.span(literal), severity=DEFAULT_SEVERITY, fixes=fixes,
                   kernel=code.label)


def _short(ctx: LintContext, node: Node, limit: int = 40) -> str:
    text = " ".join(ctx.text(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
