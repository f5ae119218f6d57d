"""Constant environments for folding: the file's `#define`s, enums and const/constexpr values,
and a function's local variables as they stand at a given point."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from tree_sitter import Node, QueryCursor

from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.source.parser import query

T = TypeVar("T")

_SCOPE_CONTAINERS = {
    "translation_unit", "declaration_list", "preproc_if", "preproc_ifdef", "preproc_else",
    "preproc_elif", "preproc_elifdef", "linkage_specification", "namespace_definition",
}
_LOOP_OR_BRANCH = {"for_statement", "for_range_loop", "while_statement", "do_statement",
                   "if_statement", "switch_statement", "else_clause", "case_statement"}


class TopLevelFacts:
    """What a file's top-level declarations (outside function bodies) say: its constants over
    the preprocessor's macros (`env`, `file_env`), and what the analysis reads from the same
    declarations on first use (`memo`: typedefs, file-scope device variables).

    An edit confined to one function definition leaves every top-level declaration as it was
    (`perflsp.kernels.incremental`): the next version's extraction and program model take this
    same object, so none of it is read again per keystroke. Nothing in it is a byte offset or a
    node, so the text the edit moved does not make it stale."""

    __slots__ = ("_memo", "env")

    def __init__(self, env: ConstEnv):
        self.env = env
        self._memo: dict[str, object] = {}

    def remembered(self, key: str, build: Callable[[], T]) -> T:
        """`build()` the first time `key` is asked for, then what it gave."""
        if key not in self._memo:
            self._memo[key] = build()
        return cast(T, self._memo[key])

    def known(self) -> set[str]:
        """The keys remembered so far."""
        return set(self._memo)


def file_env(ctx: ExtractionContext, macros: ConstEnv | None = None) -> ConstEnv:
    """Enumerators and file/namespace-scope constants, over the preprocessor's macros
    (`macros`, from `IncludeResolver.env_for`; without it, the file's own `#define`s)."""
    from perflsp.kernels.includes import IncludeResolver

    env = ConstEnv(parent=macros if macros is not None else IncludeResolver().env_for(None, ctx.data))
    _collect_scope(ctx, ctx.tree.root_node, env)
    return env


def _collect_scope(ctx: ExtractionContext, node: Node, env: ConstEnv) -> None:
    for child in node.named_children:
        kind = child.type
        if kind in _SCOPE_CONTAINERS:
            _collect_scope(ctx, child, env)
        elif kind == "namespace_definition":
            body = child.child_by_field_name("body")
            if body is not None:
                _collect_scope(ctx, body, env)
        elif kind == "declaration":
            if _is_constant_declaration(ctx, child):
                _bind_declaration(ctx, child, env)
        elif kind in ("enum_specifier",):
            _bind_enum(ctx, child, env)
        elif kind == "type_definition" or kind == "expression_statement":
            for sub in child.named_children:
                if sub.type == "enum_specifier":
                    _bind_enum(ctx, sub, env)
    # enums nested in declarations such as `enum { A = 1 } x;` are rare enough to ignore



def _is_constant_declaration(ctx: ExtractionContext, decl: Node) -> bool:
    return any(child.type == "type_qualifier" and ctx.text(child) in ("const", "constexpr") for child in decl.children)


def _bind_enum(ctx: ExtractionContext, enum: Node, env: ConstEnv) -> None:
    body = enum.child_by_field_name("body")
    if body is None:
        return
    previous: str | None = None
    for item in body.named_children:
        if item.type != "enumerator":
            continue
        name = item.child_by_field_name("name")
        value = item.child_by_field_name("value")
        if name is None:
            continue
        text = ctx.text(value) if value is not None else (f"({previous}) + 1" if previous else "0")
        env.constants.setdefault(ctx.text(name), text)
        previous = ctx.text(name)


def _bind_declaration(ctx: ExtractionContext, decl: Node, env: ConstEnv, override: bool = False) -> list[str]:
    """Bind every `name = value` of a declaration; return the names declared."""
    type_node = decl.child_by_field_name("type")
    is_dim3 = type_node is not None and ctx.text(type_node) in ("dim3", "const dim3")
    names: list[str] = []
    for declarator in decl.children_by_field_name("declarator"):
        name, value = _declarator_value(ctx, declarator, is_dim3)
        if name is None:
            continue
        names.append(name)
        if value is not None:
            if override:
                env.constants[name] = value
                env.unknown.pop(name, None)
            else:
                env.constants.setdefault(name, value)
        elif override:
            env.unknown[name] = "is not initialised with a constant"
    return names


def _declarator_value(ctx: ExtractionContext, declarator: Node, is_dim3: bool) -> tuple[str | None, str | None]:
    kind = declarator.type
    if kind == "identifier":
        return ctx.text(declarator), ("dim3()" if is_dim3 else None)
    if kind == "init_declarator":
        name_node = declarator.child_by_field_name("declarator")
        value = declarator.child_by_field_name("value")
        if name_node is None or name_node.type != "identifier":
            return None, None
        name = ctx.text(name_node)
        if value is None:
            return name, None
        if value.type in ("argument_list", "initializer_list"):
            inner = ctx.text(value)[1:-1]
            return name, (f"dim3({inner})" if is_dim3 else inner)
        return name, ctx.text(value)
    if kind == "function_declarator" and is_dim3:
        # `dim3 grid(n / 256, 1);` parses like a function declaration (the most vexing parse).
        name_node = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters")
        if name_node is not None and params is not None:
            return ctx.text(name_node), f"dim3{ctx.text(params)}"
    return None, None


def function_env(ctx: ExtractionContext, function: Node | None, before_byte: int, parent: ConstEnv) -> ConstEnv:
    """Locals of `function` as they stand at `before_byte`.

    A local initialised with a foldable expression is known; a later plain assignment replaces it
    when it sits in the same straight-line code; an assignment inside a loop or branch, `++`, or
    a compound assignment makes it unknown. Parameters are unknown.
    """
    if function is None:
        return parent.child()
    cache = ctx.local_replays
    replay = cache.get(function.start_byte)
    if replay is None or replay.position > before_byte:
        events: list[_Event] = []
        for name in _function_params(function):
            events.append((function.start_byte, function.start_byte, _mark_unknown(name, "is a parameter of the enclosing function")))
        body = function.child_by_field_name("body")
        if body is not None:
            _collect_events(ctx, body, events)
        replay = _Replay(events, ConstEnv(parent=parent))
        cache[function.start_byte] = replay
    return replay.advance(before_byte, parent)


class _Replay:
    """Applies a function's binding events in order; launches are visited in source order, so
    each one continues where the previous stopped instead of replaying the whole body."""

    def __init__(self, events: list[_Event], env: ConstEnv):
        self.events = events
        self.env = env
        self.next = 0
        self.position = 0
        self._snapshot: tuple[int, int, ConstEnv] | None = None  # (events applied, parent id, env)

    def advance(self, before_byte: int, parent: ConstEnv) -> ConstEnv:
        while self.next < len(self.events):
            start, end, apply = self.events[self.next]
            if start >= before_byte or end > before_byte:
                break
            apply(self.env)
            self.next += 1
        self.position = before_byte
        # launches with no binding between them share one snapshot (and its folding memo)
        if self._snapshot is not None and self._snapshot[:2] == (self.next, id(parent)):
            return self._snapshot[2]
        env = ConstEnv(constants=dict(self.env.constants), unknown=dict(self.env.unknown), parent=parent)
        self._snapshot = (self.next, id(parent), env)
        return env


_Event = tuple[int, int, Callable[[ConstEnv], None]]


def _mark_unknown(name: str, reason: str) -> Callable[[ConstEnv], None]:
    def apply(env: ConstEnv) -> None:
        env.unknown[name] = reason
        env.constants.pop(name, None)
        env._memo.pop(name, None)

    return apply


def _function_params(function: Node) -> list[str]:
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in ("function_declarator",):
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return []
    params = declarator.child_by_field_name("parameters")
    names = []
    if params is not None:
        for p in params.named_children:
            ident = _innermost_identifier(p)
            if ident is not None:
                names.append((ident.text or b"").decode("utf-8", errors="replace"))
    return names


def _innermost_identifier(node: Node) -> Node | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "identifier":
        nxt = declarator.child_by_field_name("declarator")
        if nxt is None:
            # pointer_declarator etc. keep the identifier as a named child
            for child in declarator.named_children:
                if child.type == "identifier":
                    return child
            return None
        declarator = nxt
    return declarator


def _collect_events(ctx: ExtractionContext, body: Node, events: list[_Event]) -> None:
    """Record, in source order, how each statement changes what is known about locals."""
    cursor = QueryCursor(query("local_bindings"))
    cursor.set_byte_range(body.start_byte, body.end_byte)
    for node, capture in _ordered_captures(cursor.captures(body)):
        enclosing = _nested_scope(node, body)
        if enclosing == "skip" and not (capture == "address" and not _in_nested_definition(node, body)):
            continue
        in_control = enclosing == "control"
        if capture == "declaration":
            def bind(env: ConstEnv, decl: Node = node, control: bool = in_control) -> None:
                declared = _bind_declaration(ctx, decl, env, override=True)
                if control:
                    for name in declared:
                        _mark_unknown(name, "is set inside a loop or branch")(env)

            events.append((node.start_byte, node.end_byte, bind))
        elif capture == "assignment":
            def assign(env: ConstEnv, assignment: Node = node, control: bool = in_control) -> None:
                _bind_assignment(ctx, assignment, env, control)

            events.append((node.start_byte, node.start_byte, assign))
        elif capture == "address":
            target = node.child_by_field_name("argument")
            operator = node.child_by_field_name("operator")
            if target is not None and target.type == "identifier" and operator is not None and ctx.text(operator) == "&":
                events.append((node.start_byte, node.start_byte,
                               _mark_unknown(ctx.text(target), "may be set through its address")))
        else:
            target = node.child_by_field_name("argument")
            if target is not None and target.type == "identifier":
                events.append((node.start_byte, node.start_byte, _mark_unknown(ctx.text(target), "is modified by ++/--")))


def _ordered_captures(captures: dict[str, list[Node]]) -> list[tuple[Node, str]]:
    flat = [(node, name) for name, nodes in captures.items() for node in nodes]
    flat.sort(key=lambda item: item[0].start_byte)
    return flat


_NESTED_DEFINITIONS = {"function_definition", "lambda_expression", "class_specifier", "struct_specifier"}


def _nested_scope(node: Node, body: Node) -> str:
    """'skip' inside a nested function/lambda/class, 'control' under a loop or branch, else ''."""
    state = ""
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in _NESTED_DEFINITIONS:
            return "skip"
        if parent.type in _LOOP_OR_BRANCH:
            state = "control"
        elif parent.type in ("declaration", "assignment_expression") and node.type != "declaration":
            return "skip"  # `int a = b = 3` style nesting: ignore the inner part
        parent = parent.parent
    return state


def _in_nested_definition(node: Node, body: Node) -> bool:
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in _NESTED_DEFINITIONS:
            return True
        parent = parent.parent
    return False


def _bind_assignment(ctx: ExtractionContext, assignment: Node, env: ConstEnv, in_control: bool) -> None:
    left = assignment.child_by_field_name("left")
    right = assignment.child_by_field_name("right")
    op = assignment.child_by_field_name("operator")
    if left is None or right is None:
        return
    if left.type == "field_expression":
        # `grid.x = n / 256;`: fold by rewriting the dim3 when it is already known
        base = left.child_by_field_name("argument")
        member = left.child_by_field_name("field")
        if base is None or member is None or base.type != "identifier":
            return
        name = ctx.text(base)
        current = env.constants.get(name)
        if in_control or current is None or ctx.text(op) != "=":
            env.unknown[name] = "is modified member by member"
            env.constants.pop(name, None)
            return
        idx = "xyz".find(ctx.text(member))
        value, _ = try_evaluate(name, env)
        if idx < 0 or not isinstance(value, tuple):
            env.unknown[name] = "is modified member by member"
            env.constants.pop(name, None)
            return
        member_value, _ = try_evaluate(ctx.text(right), env)
        if not isinstance(member_value, (int, float)):
            env.unknown[name] = f"has its .{ctx.text(member)} set to a runtime value"
            env.constants.pop(name, None)
            return
        parts = list(value)
        parts[idx] = int(member_value)
        env.constants[name] = (parts[0], parts[1], parts[2])
        env._memo.pop(name, None)
        return
    if left.type != "identifier":
        return
    name = ctx.text(left)
    if in_control or (op is not None and ctx.text(op) != "="):
        env.unknown[name] = "is reassigned inside a loop or branch" if in_control else "is updated in place"
        env.constants.pop(name, None)
        return
    env.constants[name] = ctx.text(right)
    env.unknown.pop(name, None)
    env._memo.pop(name, None)
