"""What the host code stores in an array, on average: the values a kernel later reads as its
loop bounds.

A loop over a count or a row read from memory (`for (p = 0; p < links[i]; p++)`,
`ptr[i]..ptr[i + 1]`) has no trip count in the kernel's source, but a program that makes up
its input says how it fills that array, and the average is all the trip count needs:

- values: `links[i] = dist(g);` with `std::uniform_int_distribution<int> dist(0, 32)` holds 16
  on average; `count[i] = rand() % 10 + 1;` 5.5; a constant, itself;
- running sums (offsets: each row starts where the one before it ends):
  `offset[i] = offset[i - 1] + (rand() % n + 1) * cols;` or `offset[n] = total; total += len;`
  step by the mean of what is added, the average row.

Only fills inside a loop are read, and only when every part of the expression has a known mean
(a constant the host code folds, a uniform or normal distribution, `rand()`): a value computed
from the loop's index or read from a file has none, and nothing is said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tree_sitter import Node

if TYPE_CHECKING:
    from perflsp.kernels.program import ProgramModel

_SOURCE_CHARS = 80  # the statement as notes quote it
RAND_MAX = 2147483647.0  # glibc's; `rand() % n` (n far below it) does not depend on it
_LOOPS = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_UNIFORM = re.compile(r"\b(uniform_int_distribution|uniform_real_distribution|normal_distribution)\s*<[^<>;]*>\s*"
                      r"(\w+)\s*[({]([^;]*)[)}]\s*;")


@dataclass(frozen=True, slots=True)
class HostFill:
    """What the host stores in an array: the mean of its values (`mean`) or, for offsets built
    as a running sum, the mean difference of neighbouring elements (`step`); `source` is the
    statement that stores them."""

    mean: float | None
    step: float | None
    source: str


class _Host:
    """The file's host code as the averages read it: its constants and its distributions."""

    def __init__(self, model: ProgramModel):
        self.model = model
        text = model.data.decode("latin-1")  # one character per byte: offsets are byte offsets
        self.distributions: dict[str, tuple[str, int, list[str]]] = {}
        for m in _UNIFORM.finditer(text):
            self.distributions.setdefault(m.group(2), (m.group(1), m.start(), [a.strip() for a in m.group(3).split(",")]))
        self.varying: frozenset[str] = frozenset()  # the loop variables around the fill being read (`_fill`)

    def fold_at(self, offset: int, text: str) -> object:
        if self.varying and set(re.findall(r"[A-Za-z_]\w*", text)) & self.varying:
            return None  # (a loop's variable folds to its first value, not to its mean)
        return self.model.fold_at(offset, text)


def host_fill(model: ProgramModel, name: str) -> HostFill | None:
    """How the host code fills array `name` in a loop (see the module doc), None when it does
    not say (no such fill, or a value with no known mean)."""
    pattern = re.compile(rb"\b" + re.escape(name.encode()) + rb"\s*\[")
    root = model.tree.root_node
    host = None
    for m in pattern.finditer(model.data):
        node = root.descendant_for_byte_range(m.start(), m.start())
        assignment = _assignment_storing(node, name)
        if assignment is None or not _in_loop(assignment):
            continue
        host = host or _Host(model)
        found = _fill(host, assignment, name)
        if found is not None:
            return found
    return None


def _assignment_storing(node: Node | None, name: str) -> Node | None:
    """The `name[...] = value` assignment whose left side holds `node`, else None."""
    while node is not None and node.type not in ("subscript_expression", "expression_statement", "compound_statement"):
        node = node.parent
    if node is None or node.type != "subscript_expression":
        return None
    argument = node.child_by_field_name("argument")
    parent = node.parent
    if argument is None or argument.type != "identifier" or _text(argument) != name or parent is None \
            or parent.type != "assignment_expression" or parent.child_by_field_name("left") != node \
            or _text(parent.child_by_field_name("operator")) != "=":
        return None
    return parent


def _in_loop(node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type not in ("function_definition", "translation_unit"):
        if parent.type in _LOOPS:
            return True
        parent = parent.parent
    return False


def _fill(host: _Host, assignment: Node, name: str) -> HostFill | None:
    right = assignment.child_by_field_name("right")
    if right is None:
        return None
    host.varying = _loop_variables(assignment)
    left = assignment.child_by_field_name("left")
    index = (left.child_by_field_name("indices") or left.child_by_field_name("index")) if left is not None else None
    if index is None or not set(re.findall(r"[A-Za-z_]\w*", _text(index))) & host.varying:
        return None  # one element (`offset[0] = 0`), not the array's values
    source = " ".join(_text(assignment).split())
    if len(source) > _SOURCE_CHARS:
        source = source[:_SOURCE_CHARS - 1] + "…"
    inner = _unwrapped(right)
    if inner.type == "binary_expression" and _text(inner.child_by_field_name("operator")) == "+":
        left, other = inner.child_by_field_name("left"), inner.child_by_field_name("right")
        for previous, added in ((left, other), (other, left)):
            if previous is not None and added is not None and _reads(previous, name):
                # `offset[i] = offset[i - 1] + len`: rows of `len` elements, one after another
                step = _mean(host, added)
                return HostFill(None, step, source) if step is not None else None
    if _mentions(right, name):
        return None
    if inner.type == "identifier":
        # `offset[n] = total; total += len;`: a running total stored as each row's start
        step = _running_increment(host, assignment, _text(inner))
        if step is not None:
            return HostFill(None, step, source)
    if not _random(host, right) and inner.type != "number_literal":
        return None  # (a value the loop computes: its mean would need the loop's range)
    mean = _mean(host, right)
    return HostFill(mean, None, source) if mean is not None else None


def _loop_variables(node: Node) -> frozenset[str]:
    """The variables the loops around `node` declare or step in their headers."""
    names: set[str] = set()
    parent = node.parent
    while parent is not None and parent.type not in ("function_definition", "translation_unit"):
        if parent.type == "for_statement":
            # (what the header assigns or steps; the bound it compares with stays foldable)
            for field in ("initializer", "update"):
                part = parent.child_by_field_name(field)
                if part is not None:
                    names.update(re.findall(r"[A-Za-z_]\w*", _text(part)))
        parent = parent.parent
    return frozenset(names)


def _running_increment(host: _Host, assignment: Node, total: str) -> float | None:
    """The mean of what the loop around `assignment` adds to `total` each pass (`total += len`)."""
    loop = assignment.parent
    while loop is not None and loop.type not in _LOOPS:
        loop = loop.parent
    if loop is None:
        return None
    pending = [loop]
    while pending:
        node = pending.pop()
        if node.type == "assignment_expression" and _text(node.child_by_field_name("operator")) == "+=" \
                and _text(node.child_by_field_name("left")) == total:
            added = node.child_by_field_name("right")
            return _mean(host, added) if added is not None else None
        pending.extend(node.named_children)
    return None


def _mean(host: _Host, node: Node, depth: int = 0) -> float | None:
    """The average value of a host expression whose parts are constants or random draws of a
    known distribution (draws taken as independent), None otherwise."""
    node = _unwrapped(node)
    if depth > 32:
        return None
    if node.type == "binary_expression":
        op = _text(node.child_by_field_name("operator"))
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return None
        if op == "%" and _random(host, left):
            # a draw far wider than the divisor: each remainder as likely
            divisor = _constant(host, right)
            return (divisor - 1.0) / 2.0 if divisor is not None and divisor >= 1 else None
        if op in ("+", "-", "*", "/") and (_random(host, left) or _random(host, right)):
            a, b = _mean(host, left, depth + 1), _mean(host, right, depth + 1)
            if a is None or b is None:
                return None
            if op == "/":
                # only a constant divisor keeps the mean a quotient of means
                return a / b if b and not _random(host, right) else None
            return a + b if op == "+" else a - b if op == "-" else a * b
        return _constant(host, node)
    if node.type == "call_expression":
        draw = _draw_mean(host, node)
        if draw is not None:
            return draw
    return _constant(host, node)


def _draw_mean(host: _Host, call: Node) -> float | None:
    """The mean of a random draw: `rand()`, or `dist(engine)` for a distribution declared in the
    file (`std::uniform_int_distribution<int> dist(a, b)`)."""
    function = call.child_by_field_name("function")
    name = _text(function).split("::")[-1].strip() if function is not None else ""
    if name == "rand":
        return RAND_MAX / 2.0
    declared = host.distributions.get(name)
    if declared is None:
        return None
    kind, offset, args = declared
    values = [host.fold_at(offset, arg) for arg in args]
    if len(values) != 2 or not all(isinstance(v, (int, float)) for v in values):
        return None
    low, high = float(values[0]), float(values[1])  # type: ignore[arg-type]
    return low if kind == "normal_distribution" else (low + high) / 2.0


def _random(host: _Host, node: Node) -> bool:
    """Whether an expression draws a random number."""
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type == "call_expression" and _draw_mean(host, current) is not None:
            return True
        pending.extend(current.named_children)
    return False


def _constant(host: _Host, node: Node) -> float | None:
    value = host.fold_at(node.start_byte, _text(node))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _reads(node: Node, name: str) -> bool:
    """Whether `node` is an element of `name` (`offset[i - 1]`)."""
    node = _unwrapped(node)
    argument = node.child_by_field_name("argument") if node.type == "subscript_expression" else None
    return argument is not None and _text(argument) == name


def _mentions(node: Node, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", _text(node)) is not None


def _unwrapped(node: Node) -> Node:
    while node.type in ("parenthesized_expression", "cast_expression"):
        if node.type == "cast_expression":
            inner = node.child_by_field_name("value")
        else:
            inner = node.named_children[0] if node.named_children else None
        if inner is None:
            break
        node = inner
    return node


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""
