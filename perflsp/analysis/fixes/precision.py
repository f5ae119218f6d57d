"""Precision fixes: a double literal made float (`0.5` -> `0.5f`), a double math function
made its float form (`sqrt` -> `sqrtf`), `pow(x, 2)` made `x * x`."""

from __future__ import annotations

import re

from tree_sitter import Tree

from perflsp.analysis.exprtypes import FLIT, call_name, double_literals, literal_type, math_base_name
from perflsp.analysis.fixes.document import EditError, _node_at, _text, validated_fix
from perflsp.analysis.models import ByteEdit, Fix
from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.models import Span


def float_literal_fix(data: bytes, tree: Tree, literal: Span) -> Fix:
    """`0.5` -> `0.5f`."""
    text = _text(data, literal.start_byte, literal.end_byte)
    if literal_type(text) != FLIT:
        raise EditError(f"`{text}` is not an unsuffixed floating-point literal")
    return validated_fix(data, tree, f"Write `{text}f` (single precision)",
                         [ByteEdit(literal.end_byte, literal.end_byte, "f")], preferred=True)


def float_function_fix(data: bytes, tree: Tree, call: Span, language: str = "cpp") -> Fix:
    """`pow(x, 2.0)` -> `powf(x, 2.0f)`: the float function, with the double literals in its
    arguments made single precision. `std::` names keep their name (the float overload is
    chosen once no argument is double)."""
    node = _node_at(tree, call.start_byte, call.end_byte)
    if node is None or node.type != "call_expression":
        raise EditError("no function call at the given range")
    name = call_name(node)
    if name is None:
        raise EditError("the callee is not a plain function name")
    fn = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    base = math_base_name(name)
    edits: list[ByteEdit] = []
    new_name = name
    if fn is not None and (not name.startswith("std::") or language == "c"):
        new_name = name[: len(name) - len(base)] + base + "f"
        edits.append(ByteEdit(fn.start_byte, fn.end_byte, new_name))
    for literal in double_literals(args) if args is not None else ():
        edits.append(ByteEdit(literal.end_byte, literal.end_byte, "f"))
    if not edits:
        raise EditError(f"`{name}` has no single-precision spelling to switch to")
    title = f"Use `{new_name}`" + (" with float literals" if len(edits) > (new_name != name) else "")
    return validated_fix(data, tree, title, edits, preferred=base != "pow")


_SIMPLE_OPERAND = re.compile(r"^[A-Za-z_][\w.]*(?:\s*(?:\[[^\[\]()=;,]*\]|->\s*\w+|\.\s*\w+))*$")


def square_fix(data: bytes, tree: Tree, call: Span) -> Fix:
    """`pow(x[i], 2.0)` -> `(x[i] * x[i])`: no call at all, and no FP64."""
    node = _node_at(tree, call.start_byte, call.end_byte)
    if node is None or node.type != "call_expression":
        raise EditError("no function call at the given range")
    name = call_name(node) or ""
    args_node = node.child_by_field_name("arguments")
    args = [a for a in args_node.named_children if a.type != "comment"] if args_node is not None else []
    if math_base_name(name) != "pow" or len(args) != 2:
        raise EditError("only `pow(x, 2)` can become `x * x`")
    exponent, _ = try_evaluate(_text(data, args[1].start_byte, args[1].end_byte))
    if exponent != 2:
        raise EditError("the exponent is not 2")
    base = _text(data, args[0].start_byte, args[0].end_byte).strip()
    if not _SIMPLE_OPERAND.match(base) or "++" in base or "--" in base:
        raise EditError(f"`{base}` is not a simple operand: evaluating it twice could change the result")
    parent = node.parent
    bare = parent is not None and parent.type in ("argument_list", "init_declarator", "expression_statement",
                                                  "parenthesized_expression", "return_statement",
                                                  "assignment_expression")
    product = f"{base} * {base}" if bare else f"({base} * {base})"
    return validated_fix(data, tree, f"Replace with `{product}`", [ByteEdit(node.start_byte, node.end_byte, product)],
                         preferred=True)
