"""Pure functions of the host code, folded where they are called with foldable arguments:
`int iDivUp(int a, int b) { return (a + b - 1) / b; }` (or `constexpr`, a template), a body of
one `return` of an expression over its value parameters; and a body of guarded returns, read
as one expression:

    size_t roundUp(int group, size_t n) {
        if (n == 0) return group;
        int r = n % group;
        if (r == 0) { return n; } else { return n + group - r; }
    }

is `(n == 0) ? (group) : (((n % group)) == 0) ? (n) : (n + group - (n % group))`. Only
straight-line forms are read: locals initialised once and never written, `if`/`else` whose
arms end in a `return`, and a last `return`; a loop, a call statement or a write leaves the
function unread (None)."""

from __future__ import annotations

import re

from tree_sitter import Node

from perflsp.source.parser import parse

PureFunction = tuple[str, tuple[str, ...], str]  # (name, value parameters, the expression it returns)

_WORD = re.compile(r"[A-Za-z_]\w*")
_MAX_STATEMENTS = 16  # (a helper of a few lines: a longer body is not a formula)


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _writes(node: Node) -> bool:
    """Whether an expression assigns, updates or takes an address (`&x`: a call may write
    through it)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("assignment_expression", "update_expression"):
            return True
        if n.type == "pointer_expression" and n.children and n.children[0].type == "&":
            return True
        stack.extend(n.named_children)
    return False


def _statements(node: Node) -> list[Node]:
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.locals: dict[str, str] = {}  # local name -> its initializer, already substituted
        self.budget = _MAX_STATEMENTS

    def expression(self, node: Node) -> str | None:
        if _writes(node):
            return None
        text = _text(self.data, node)
        return _WORD.sub(lambda m: f"({self.locals[m.group()]})" if m.group() in self.locals else m.group(), text)

    def block(self, statements: list[Node]) -> str | None:
        """The value a run of statements returns (each path must reach a `return`)."""
        for at, statement in enumerate(statements):
            self.budget -= 1
            if self.budget < 0:
                return None
            kind = statement.type
            if kind == "return_statement":
                values = statement.named_children
                return self.expression(values[0]) if len(values) == 1 else None
            if kind == "declaration":
                if not self._declare(statement):
                    return None
                continue
            if kind == "if_statement":
                return self._branch(statement, statements[at + 1 :])
            return None
        return None  # (falls off the end: no value)

    def _declare(self, node: Node) -> bool:
        declarators = node.children_by_field_name("declarator")
        if not declarators:
            return False
        for declarator in declarators:
            name = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
            value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
            if name is None or value is None or name.type != "identifier" or value.type in (
                    "initializer_list", "argument_list"):
                return False
            expression = self.expression(value)
            if expression is None:
                return False
            self.locals[_text(self.data, name)] = expression
        return True

    def _branch(self, node: Node, rest: list[Node]) -> str | None:
        condition = node.child_by_field_name("condition")
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if condition is None or consequence is None or "init" in _fields(node):
            return None
        inner = [c for c in condition.named_children if c.type != "comment"]
        test = self.expression(inner[0]) if len(inner) == 1 else None
        if test is None:
            return None
        saved = dict(self.locals)
        taken = self.block(_statements(consequence))
        self.locals = dict(saved)
        if alternative is not None:
            arm = alternative.named_children[-1] if alternative.type == "else_clause" else alternative
            otherwise = self.block(_statements(arm) + rest)
        else:
            otherwise = self.block(rest)
        self.locals = saved
        if taken is None or otherwise is None:
            return None
        return f"({test}) ? ({taken}) : ({otherwise})"


def _fields(node: Node) -> set[str]:
    return {name for i in range(node.child_count) if (name := node.field_name_for_child(i)) is not None}


def returned_expression(data: bytes, body: Node) -> str | None:
    """The expression a function body of locals, guarded returns and a last `return` computes
    over its parameters; None where the body does anything else."""
    statements = _statements(body)
    if len(statements) < 2:
        return None  # (one `return` is read as it is)
    return _Reader(data).block(statements)


def pure_function(data: bytes, node: Node) -> PureFunction | None:
    """A pure function definition (`node`, or the one a template declaration holds): its name,
    value parameters and the expression it returns (`ConstEnv.pure_functions` binds them)."""
    function = node if node.type == "function_definition" else \
        next((c for c in node.named_children if c.type == "function_definition"), None)
    body = function.child_by_field_name("body") if function is not None else None
    declarator = function.child_by_field_name("declarator") if function is not None else None
    if body is None or declarator is None or declarator.type != "function_declarator":
        return None  # (a pointer or reference result: not a value)
    name = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters")
    if name is None or name.type != "identifier" or parameters is None:
        return None
    names: list[str] = []
    for parameter in parameters.named_children:
        ident = parameter.child_by_field_name("declarator")
        if parameter.type != "parameter_declaration" or ident is None or ident.type != "identifier":
            return None  # (a pointer, a reference, an array, a default: not a plain value)
        names.append(_text(data, ident))
    statements = _statements(body)
    if len(statements) == 1 and statements[0].type == "return_statement" and statements[0].named_children:
        expression = statements[0].named_children[0]
        text = None if _writes(expression) else _text(data, expression)
    else:
        text = returned_expression(data, body)
    return (_text(data, name), tuple(names), text) if text is not None else None


# a definition's head at a line start: `size_t roundUp(int g, size_t n) {`, `T f(T v)\n{`
_DEFINITION = re.compile(rb"^[ \t]*(?:template\s*<[^<>;{}]*>\s*)?[A-Za-z_][\w:<>\t *&]*?\b([A-Za-z_]\w*)\s*\([^(){};]*\)\s*\{",
                         re.MULTILINE)
_MAX_BODY = 800  # bytes: a helper of a few lines (a longer function is not parsed for this)


def scan_pure_functions(data: bytes) -> list[PureFunction]:
    """The small pure functions of an included file (`utils.h`: `isPowerOf2(T val)`), each
    parsed on its own: the text between its head and the brace that closes it."""
    found: list[PureFunction] = []
    for m in _DEFINITION.finditer(data):
        if m.group(1) in (b"if", b"for", b"while", b"switch", b"return"):
            continue
        end = _closing_brace(data, m.end() - 1)
        if end is None or b"return" not in data[m.end() : end]:
            continue
        snippet = data[m.start() : end + 1]
        root = parse(snippet).root_node
        for child in root.named_children:
            function = pure_function(snippet, child) if child.type in ("function_definition",
                                                                       "template_declaration") else None
            if function is not None:
                found.append(function)
    return found


def _closing_brace(data: bytes, start: int) -> int | None:
    """The offset of the `}` closing the `{` at `start`, within `_MAX_BODY` bytes."""
    depth = 0
    for at in range(start, min(len(data), start + _MAX_BODY)):
        char = data[at]
        if char == 0x7B:
            depth += 1
        elif char == 0x7D:
            depth -= 1
            if depth == 0:
                return at
    return None
