"""Launch-configuration expressions as a block-size fix rewrites them: parsing a launch's
arguments, and the references to the old block size (`(n + 255) / 256`) it rewrites."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from perflsp.analysis.exprtypes import call_name
from perflsp.analysis.fixes.document import EditError, _node_text, _text, _unwrap
from perflsp.analysis.models import ByteEdit
from perflsp.kernels.consteval import try_evaluate
from perflsp.source.parser import parse


@dataclass
class _Expr:
    """Expression nodes from some parse (the document's, or a snippet's) and the offset that
    maps their bytes to the document's."""

    nodes: list[Node]
    base: int

    def start(self, node: Node) -> int:
        return node.start_byte + self.base

    def end(self, node: Node) -> int:
        return node.end_byte + self.base


def _parse_args(data: bytes, start: int, end: int) -> _Expr:
    """Parse `data[start:end]` (a parenthesised argument list) as call arguments."""
    prefix = b"void __perflsp_f(void) { __perflsp_g"
    text = data[start:end]
    if text.startswith(b"{") and text.endswith(b"}"):
        text = b"(" + text[1:-1] + b")"  # `dim3 grid{a, b}`: same bytes, read as arguments
    snippet = prefix + text + b"; }"
    root = parse(snippet).root_node
    call = next((n for n in _walk(root) if n.type == "call_expression"), None)
    args = call.child_by_field_name("arguments") if call is not None else None
    if args is None or args.has_error:
        raise EditError(f"cannot read `{_text(data, start, end)}` as arguments")
    return _Expr([a for a in args.named_children if a.type != "comment"], start - len(prefix))


def _parse_text_expression(data: bytes, start: int, end: int) -> _Expr:
    prefix = b"void __perflsp_f(void) { __perflsp_g("
    snippet = prefix + data[start:end] + b"); }"
    root = parse(snippet).root_node
    call = next((n for n in _walk(root) if n.type == "call_expression"), None)
    args = call.child_by_field_name("arguments") if call is not None else None
    if args is None or args.has_error or len(args.named_children) != 1:
        raise EditError(f"cannot read `{_text(data, start, end)}` as an expression")
    return _Expr([args.named_children[0]], start - len(prefix))


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _int_value(node: Node) -> int | None:
    if node.type != "number_literal":
        return None
    value, _ = try_evaluate(_node_text(node))
    return value if isinstance(value, int) else None


class _Refs:
    """Rewrites the block size inside a grid (or num_teams) expression: `(n + B - 1) / B`,
    `(n + 255) / 256`, `ceil(n / (float)B)`, `div_up(n, B)`, `(n - 1) / B + 1`.

    A reference is the old size as a literal, or a name for it (`is_block_name`)."""

    def __init__(self, old: int | None, new: int, is_block_name: Callable[[str], bool]):
        self.old = old
        self.new = new
        self.is_block_name = is_block_name

    def is_ref(self, node: Node | None) -> bool:
        if node is None:
            return False
        node = _unwrap(node)
        if node.type == "identifier":
            return self.is_block_name(_node_text(node))
        return self.old is not None and _int_value(node) == self.old

    def rewrite(self, expr: _Expr, what: str) -> list[ByteEdit]:
        edits: dict[int, ByteEdit] = {}
        handled: set[tuple[int, int]] = set()

        def set_ref(node: Node, value: int) -> None:
            node = _unwrap(node)
            edits[node.start_byte] = ByteEdit(expr.start(node), expr.end(node), str(value))
            handled.add((node.start_byte, node.end_byte))

        for root in expr.nodes:
            for node in _walk(root):
                divisor = node.child_by_field_name("right") if node.type == "binary_expression" else None
                if divisor is not None and _op(node) == "/" and self.is_ref(divisor):
                    if self._ceiling_division(node, set_ref):
                        set_ref(divisor, self.new)
                elif node.type == "call_expression":
                    name = (call_name(node) or "").lower()
                    args = node.child_by_field_name("arguments")
                    items = [a for a in args.named_children if a.type != "comment"] if args is not None else []
                    if len(items) >= 2 and re.search(r"div|ceil|up", name) and self.is_ref(items[-1]):
                        set_ref(items[-1], self.new)  # div_up(n, B), iDivUp(n, B), ceil_div(n, B)
        for root in expr.nodes:
            for node in _walk(root):
                if (node.start_byte, node.end_byte) in handled:
                    continue
                if node.type == "identifier" and self.is_ref(node):
                    raise EditError(f"{what} uses `{_node_text(node)}` outside a ceiling division; rewrite it by hand")
                parent = node.parent
                if (self.old is not None and _int_value(node) == self.old and parent is not None
                        and parent.type == "binary_expression" and _op(parent) == "/"
                        and (right := parent.child_by_field_name("right")) is not None and _unwrap(right) == node):
                    raise EditError(f"{what} divides by {self.old} without rounding up; rewrite it by hand")
        return list(edits.values())

    def rewrite_all(self, expr: _Expr) -> list[ByteEdit]:
        """Every mention of the block size (a dynamic shared-memory size: `B * sizeof(float)`)."""
        edits = []
        for root in expr.nodes:
            for node in _walk(root):
                if node.type in ("identifier", "number_literal") and self.is_ref(node):
                    edits.append(ByteEdit(expr.start(node), expr.end(node), str(self.new)))
        return edits

    def _ceiling_division(self, div: Node, set_ref: Callable[[Node, int], None]) -> bool:
        dividend = div.child_by_field_name("left")
        if dividend is None:
            return False
        terms = _sum_terms(_unwrap(dividend))
        plus_refs = [t for t, sign in terms if sign > 0 and self.is_ref(t)]
        minus_one = [t for t, sign in terms if sign < 0 and _int_value(_unwrap(t)) == 1]
        minus_one_literal = [t for t, sign in terms if sign > 0 and self.old is not None
                             and _int_value(_unwrap(t)) == self.old - 1]
        if plus_refs and minus_one:  # (n + B - 1) / B
            set_ref(plus_refs[0], self.new)
            return True
        if minus_one_literal:  # (n + 255) / 256
            set_ref(minus_one_literal[0], self.new - 1)
            return True
        parent = div.parent
        while parent is not None and parent.type in ("parenthesized_expression", "cast_expression"):
            parent = parent.parent
        if parent is not None and parent.type == "binary_expression" and _op(parent) == "+" and any(
                c is not None and _int_value(_unwrap(c)) == 1
                for c in (parent.child_by_field_name("left"), parent.child_by_field_name("right"))) and any(
                sign < 0 and _int_value(_unwrap(t)) == 1 for t, sign in terms):
            return True  # (n - 1) / B + 1
        ancestor = div.parent
        while ancestor is not None and ancestor.type in ("parenthesized_expression", "cast_expression", "argument_list",
                                                         "binary_expression"):
            ancestor = ancestor.parent
        if ancestor is not None and ancestor.type == "call_expression" and re.fullmatch(
                r"(std::)?ceilf?", call_name(ancestor) or ""):
            return True  # ceil(n / (float)B)
        if parent is not None and parent.type == "binary_expression" and _op(parent) == "+":
            other = parent.child_by_field_name("right")
            if other is not None and other != div:
                for node in _walk(other):  # n / B + (n % B != 0)
                    modulus = node.child_by_field_name("right") if node.type == "binary_expression" else None
                    if modulus is not None and _op(node) == "%" and self.is_ref(modulus):
                        set_ref(modulus, self.new)
                        return True
        return False


def _op(node: Node) -> str | None:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else None


def _sum_terms(node: Node, sign: int = 1) -> list[tuple[Node, int]]:
    """Flatten `a + (b - 1)` into [(a, +1), (b, +1), (1, -1)]."""
    node = node if node.type != "parenthesized_expression" else _unwrap_parens(node)
    if node.type == "binary_expression" and _op(node) in ("+", "-"):
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is not None and right is not None:
            return _sum_terms(left, sign) + _sum_terms(right, sign if _op(node) == "+" else -sign)
    return [(node, sign)]


def _unwrap_parens(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[-1]
    return node
