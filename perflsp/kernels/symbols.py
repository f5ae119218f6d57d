"""Constant environments for folding: the file's `#define`s, enums and const/constexpr values,
and a function's local variables as they stand at a given point."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import TypeVar, cast

from tree_sitter import Node, QueryCursor

from perflsp.kernels.argument_loops import read_argument_loop, read_counting_loop
from perflsp.kernels.command_options import getopt_call, parse_options
from perflsp.kernels.consteval import ConstEnv, ReadsApart, Value, note_assumed_read, numbered_enumerators, string_value, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import declarations_before, non_const_reference, parameter_declarations, written_names
from perflsp.kernels.fields import bind_field, forget_fields
from perflsp.kernels.helper_runs import HelperCalls, assigned_condition
from perflsp.kernels.out_parameters import DEREFERENCED, ends_function, file_definitions, out_parameter_value, returned
from perflsp.kernels.return_forms import pure_function
from perflsp.kernels.sibling_functions import sibling_function
from perflsp.source.parser import query

T = TypeVar("T")

_SCOPE_CONTAINERS = {
    "translation_unit", "declaration_list", "preproc_else", "linkage_specification", "namespace_definition",
}
_CONDITIONALS = {"preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef"}
_COMPOUND = {"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"}


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

    preprocessor = macros if macros is not None else IncludeResolver().env_for(None, ctx.data)
    env = ConstEnv(parent=preprocessor)
    _collect_scope(ctx, ctx.tree.root_node.named_children, env, preprocessor)
    env.helpers = HelperCalls(ctx, env)  # (a call no other rule folds: its definition run on the values)
    return env


def _collect_scope(ctx: ExtractionContext, nodes: list[Node], env: ConstEnv, macros: ConstEnv) -> None:
    for child in nodes:
        kind = child.type
        if kind in _CONDITIONALS:
            _collect_scope(ctx, active_contents(ctx, child, macros), env, macros)
        elif kind in _SCOPE_CONTAINERS:
            _collect_scope(ctx, child.named_children, env, macros)
        elif kind == "namespace_definition":
            body = child.child_by_field_name("body")
            if body is not None:
                _collect_scope(ctx, body.named_children, env, macros)
        elif kind == "declaration":
            if _is_constant_declaration(ctx, child):
                _bind_declaration(ctx, child, env)
        elif kind in ("enum_specifier",):
            _bind_enum(ctx, child, env)
        elif kind == "function_definition" or kind == "template_declaration":
            found = pure_function(ctx.data, child)
            if found is not None:
                env.pure_functions.setdefault(found[0], found[1:])
        elif kind == "alias_declaration":
            name, aliased = child.child_by_field_name("name"), child.child_by_field_name("type")
            if name is not None and aliased is not None:
                env.type_aliases.setdefault(ctx.text(name), ctx.text(aliased))
        elif kind == "type_definition" or kind == "expression_statement":
            _bind_typedef(ctx, child, env)
            for sub in child.named_children:
                if sub.type == "enum_specifier":
                    _bind_enum(ctx, sub, env)
    # enums nested in declarations such as `enum { A = 1 } x;` are rare enough to ignore



def active_contents(ctx: ExtractionContext, conditional: Node, macros: ConstEnv) -> list[Node]:
    """What of `#if`/`#ifdef` ... `#else` the compiler sees, as the nodes it holds: the taken
    branch's alone when the macros decide the condition (`#ifdef SIZE_FROM_SCRIPT const int n = SIZE_FROM_SCRIPT; #else
    const int n = 1024; #endif` with `SIZE_FROM_SCRIPT` undefined: the second `n`), every branch's (its
    `#else`/`#elif` among them) when they do not, or when the condition tests `__CUDA_ARCH__`,
    which differs between the host and the device passes."""
    from perflsp.kernels.includes import evaluate_condition, is_defined

    alternative = conditional.child_by_field_name("alternative")
    taken: bool | None
    if conditional.type in ("preproc_ifdef", "preproc_elifdef"):
        name = conditional.child_by_field_name("name")
        negated = bool(conditional.children) and "ndef" in ctx.text(conditional.children[0])
        taken = None if name is None or "__CUDA_ARCH__" in ctx.text(name) else \
            is_defined(macros, ctx.text(name)) != negated
    else:
        condition = conditional.child_by_field_name("condition")
        text = ctx.text(condition) if condition is not None else ""
        taken = None if condition is None or "__CUDA_ARCH__" in text else evaluate_condition(macros, text)
    if taken is None:
        return list(conditional.named_children)
    if taken:
        return [c for c in conditional.named_children if alternative is None or c.id != alternative.id]
    if alternative is None:
        return []
    if alternative.type in _CONDITIONALS:
        return active_contents(ctx, alternative, macros)
    return list(alternative.named_children)


def _bind_typedef(ctx: ExtractionContext, node: Node, env: ConstEnv) -> None:
    """`typedef double real;` (`typedef float *vec;`): the alias a `sizeof` of it folds through."""
    aliased = node.child_by_field_name("type")
    if node.type != "type_definition" or aliased is None or aliased.type not in ("primitive_type", "sized_type_specifier",
                                                                                 "type_identifier"):
        return
    for declarator in node.children_by_field_name("declarator"):
        name = re.sub(r"[^\w]", "", ctx.text(declarator))
        if name and declarator.type in ("type_identifier", "pointer_declarator"):
            env.type_aliases.setdefault(name, ctx.text(aliased) + "*" * ctx.text(declarator).count("*"))


def mutable_globals(ctx: ExtractionContext) -> dict[str, str]:
    """File- and namespace-scope variables that are not `const` but are initialised with an
    expression (`int ARRAY_SIZE = 33554432;`): name -> initializer text. Device variables
    (`__device__`, `__constant__`, `__managed__`) are left out: device code or a copy to the
    symbol writes them."""
    found: dict[str, str] = {}
    stack = [ctx.tree.root_node]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _SCOPE_CONTAINERS:
                stack.append(child)
            elif child.type == "declaration" and not _is_constant_declaration(ctx, child):
                head = ctx.text(child).split("=", 1)[0]
                if re.search(r"__(?:device|constant|managed|shared)__|\bextern\b", head):
                    continue
                for declarator in child.children_by_field_name("declarator"):
                    if declarator.type != "init_declarator":
                        continue
                    name_node = declarator.child_by_field_name("declarator")
                    value = declarator.child_by_field_name("value")
                    if name_node is None or name_node.type != "identifier" or value is None \
                            or value.type in ("argument_list", "initializer_list"):
                        continue
                    found.setdefault(ctx.text(name_node), ctx.text(value))
    return found


def is_write(identifier: Node) -> bool:
    """Whether this use of a variable may change it: the left of an assignment, the operand of
    `++`/`--`, or `&name` (a call writes through the pointer)."""
    parent = identifier.parent
    if parent is None:
        return False
    if parent.type == "assignment_expression":
        left = parent.child_by_field_name("left")
        return left is not None and left.start_byte == identifier.start_byte and left.end_byte == identifier.end_byte
    if parent.type == "update_expression":
        return True
    if parent.type == "pointer_expression":
        operator = parent.child_by_field_name("operator")
        return operator is not None and operator.type == "&"
    return False


def declares(ctx: ExtractionContext, function: Node, name: str, before: int) -> bool:
    """Whether `function` has a parameter or a local named `name` declared before `before`
    (which then hides a file-scope variable of that name there)."""
    if name in _function_params(function):
        return True
    body = function.child_by_field_name("body")
    if body is None:
        return False
    for node in declarations_before(body, before):
        for declarator in node.children_by_field_name("declarator"):
            inner: Node | None = declarator
            while inner is not None and inner.type != "identifier":
                inner = inner.child_by_field_name("declarator")
            if inner is not None and ctx.text(inner) == name:
                return True
    return False


def never_runs(ctx: ExtractionContext, node: Node, function: Node, env_at: Callable[[int], ConstEnv]) -> bool:
    """Whether `node` sits where its function never goes: in the branch of an `if` whose
    condition folds the other way, or in a loop whose condition fails on entry (`env_at` gives
    the constants where each control statement starts)."""
    body = function.child_by_field_name("body")
    chain = _chain(node, body) if body is not None else None
    for control, part in chain or ():
        if control.type == "if_statement":
            if part == "condition":
                continue
            status = _fold_condition(ctx, control, env_at(control.start_byte))
            if status is not _UNKNOWN and bool(status) != (part == "consequence"):
                return True
        elif control.type in ("for_statement", "while_statement") and part != "initializer" \
                and _fold_condition(ctx, control, env_at(control.start_byte)) is False:
            return True
    return False


def _is_constant_declaration(ctx: ExtractionContext, decl: Node) -> bool:
    return any(child.type == "type_qualifier" and ctx.text(child) in ("const", "constexpr") for child in decl.children)


def _bind_enum(ctx: ExtractionContext, enum: Node, env: ConstEnv) -> None:
    body = enum.child_by_field_name("body")
    if body is None:
        return
    items: list[tuple[str, str | None]] = []
    for item in body.named_children:
        name = item.child_by_field_name("name") if item.type == "enumerator" else None
        if name is not None:
            value = item.child_by_field_name("value")
            items.append((ctx.text(name), ctx.text(value) if value is not None else None))
    for constant, text in numbered_enumerators(items):
        env.constants.setdefault(constant, text)


def _bind_declaration(ctx: ExtractionContext, decl: Node, env: ConstEnv, override: bool = False) -> list[str]:
    """Bind every `name = value` of a declaration; return the names declared."""
    type_node = decl.child_by_field_name("type")
    is_dim3 = type_node is not None and ctx.text(type_node) in ("dim3", "const dim3")
    names: list[str] = []
    for declarator in decl.children_by_field_name("declarator"):
        name, value = _declarator_value(ctx, declarator, is_dim3)
        if name is None and declarator.type == "init_declarator" and _is_constant_declaration(ctx, decl):
            name, value = _constant_array(ctx, declarator)
        if name is None:
            continue
        names.append(name)
        if override and (name in env.constants or name in env.unknown):
            # an inner `for (int n = 0; ...)` of a name the code read before (`nb = (n + 127) / 128`)
            _freeze_dependents(env, name)
        if override and forget_fields(env, name, dry=True):
            _freeze_dependents(env, name)
            forget_fields(env, name)
        if value is not None:
            if override:
                env.constants[name] = value
                env.unknown.pop(name, None)
            else:
                env.constants.setdefault(name, value)
        elif override:
            env.unknown[name] = "is not initialised with a constant"
    return names


def _constant_array(ctx: ExtractionContext, declarator: Node) -> tuple[str | None, str | None]:
    """`const int sizes[] = {64, 128};`: the name and its initializer list, braces kept (a
    `ConstEnv` folds `sizes[i]` from it; the array is never written)."""
    array = declarator.child_by_field_name("declarator")
    value = declarator.child_by_field_name("value")
    name = array.child_by_field_name("declarator") if array is not None and array.type == "array_declarator" else None
    if name is None or name.type != "identifier" or value is None or value.type != "initializer_list":
        return None, None
    return ctx.text(name), ctx.text(value)


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


def function_env(ctx: ExtractionContext, function: Node | None, before_byte: int, parent: ConstEnv,
                 arguments: Mapping[str, Value] | None = None, assumed: Collection[str] = ()) -> ConstEnv:
    """Locals of `function` as they stand when execution first reaches `before_byte`.

    A local initialised with a foldable expression is known, and later assignments, compound
    assignments and `++`/`--` in straight-line code update it. Control flow is followed where
    its condition folds at that point (`if (argc > 1) n = atoi(argv[1]);`, a loop whose
    condition is false on entry never runs). The point itself is reached on the first pass of
    the loops around it (their variables take their first value, their update clauses have not
    run yet) through the branches that contain it. An assignment in a loop or branch that does
    not contain the point, whose condition does not fold, and taking a variable's address make
    it unknown. Parameters are unknown, but those `arguments` gives (what a caller passes: the
    branches on them then fold too; `assumed`: those that rest on assumed program arguments).
    """
    if function is None:
        return parent.child()
    body = function.child_by_field_name("body")
    path = _control_path(body, before_byte) if body is not None else ()
    cache: dict[tuple[object, ...], _Replay] = ctx.local_replays
    bound = tuple(sorted(arguments.items())) if arguments else ()
    key = (function.start_byte, path, bound, tuple(sorted(assumed)))
    replay = cache.get(key)
    if replay is None or replay.position > before_byte:
        events = _function_events(ctx, function)
        replay = _Replay(ctx, events, ConstEnv(parent=parent, constants=dict(bound), assumed=set(assumed)), dict(path))
        cache[key] = replay
    return replay.advance(before_byte, parent)


# The parts of a control statement a node can sit in, by field; `for_range_loop` and `do` bodies
# run an unknown number of times (at least once for `do`).
_CONTROL_PARTS: dict[str, tuple[str, ...]] = {
    "if_statement": ("condition", "consequence", "alternative"),
    "for_statement": ("initializer", "condition", "update", "body"),
    "while_statement": ("condition", "body"),
    "do_statement": ("body", "condition"),
    "for_range_loop": ("declarator", "right", "body"),
    "switch_statement": ("condition", "body"),
}
_Chain = tuple[tuple[Node, str], ...]  # (control statement, part), outermost first


def _part_of(control: Node, node: Node) -> str:
    """The part of `control` (an `if`, loop or `switch`) that holds `node`: a field name, or for
    a `switch` body the start of the `case` that holds it."""
    for name in _CONTROL_PARTS[control.type]:
        for child in control.children_by_field_name(name):
            if child.start_byte <= node.start_byte and node.end_byte <= child.end_byte:
                if control.type == "switch_statement" and name == "body":
                    case = node
                    while case is not None and case.parent is not None and case.parent != child:
                        case = case.parent
                    if case is not None and case.type == "case_statement":
                        return f"case@{case.start_byte}"
                return name
    if control.type == "for_statement":
        # `for (int i = 0; ...)`: the grammar names the declaration `initializer` only in some
        # versions; anything before the first `;` is the initializer
        return "initializer"
    return "body"


def _chain(node: Node, body: Node) -> _Chain | None:
    """The control statements around `node` inside `body`, with the part holding it; None
    inside a nested function, lambda or class (its statements are not this function's)."""
    chain: list[tuple[Node, str]] = []
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in _NESTED_DEFINITIONS:
            return None
        if parent.type in _CONTROL_PARTS:
            # (the node itself, not the child: a `switch` part is the `case` that holds it)
            chain.append((parent, _part_of(parent, node)))
        parent = parent.parent
    chain.reverse()
    return tuple(chain)


def _control_path(body: Node, offset: int) -> tuple[tuple[int, str], ...]:
    """(start, part) of each control statement of `body` that contains `offset`."""
    node = body.descendant_for_byte_range(offset, offset)
    if node is None or not (body.start_byte <= offset < body.end_byte):
        return ()
    chain = _chain(node, body) or ()
    return tuple((control.start_byte, part) for control, part in chain
                 if control.start_byte <= offset < control.end_byte)


class _Replay:
    """Applies a function's binding events in order for one control path (the loops and
    branches around the point asked about); points on the same path are asked in source order,
    so each continues where the previous stopped instead of replaying the whole body."""

    def __init__(self, ctx: ExtractionContext, events: list[_Event], env: ConstEnv, path: dict[int, str]):
        self.ctx = ctx
        self.events = events
        self.env = env
        self.path = path
        self.status: dict[int, object] = {}  # control start -> what its condition folded to on entry
        self.assumed_controls: set[int] = set()  # those whose condition read assumed program arguments
        self.next = 0
        self.position = 0
        self._snapshot: tuple[int, int, ConstEnv] | None = None  # (events applied, parent id, env)

    def advance(self, before_byte: int, parent: ConstEnv) -> ConstEnv:
        while self.next < len(self.events):
            start, end, chain, apply = self.events[self.next]
            if start >= before_byte or end > before_byte:
                break
            mode = self._mode(chain)
            if mode != "skip":
                apply(self, mode == "control")
            self.next += 1
        self.position = before_byte
        # launches with no binding between them share one snapshot (and its folding memo)
        if self._snapshot is not None and self._snapshot[:2] == (self.next, id(parent)):
            return self._snapshot[2]
        env = ConstEnv(constants=dict(self.env.constants), unknown=dict(self.env.unknown), parent=parent,
                       assumed=set(self.env.assumed))
        self._snapshot = (self.next, id(parent), env)
        return env

    def _mode(self, chain: _Chain) -> str:
        """How an event in `chain` runs before the point: 'straight' (once, in order), 'skip'
        (not at all) or 'control' (an unknown number of times: what it sets is unknown)."""
        mode = "straight"
        for control, part in chain:
            on_path = self.path.get(control.start_byte)
            kind = control.type
            if on_path is not None:
                # the point is inside `control`: reached through `on_path` on the first pass
                if kind == "if_statement" or kind == "switch_statement":
                    if part != "condition" and part != on_path:
                        return "skip"
                elif part == "update" and on_path != "update":
                    return "skip"  # runs after the first pass of the body
                elif kind == "do_statement" and part == "condition" and on_path == "body":
                    return "skip"
                continue
            status = self.status.get(control.start_byte, _UNKNOWN)
            if kind == "if_statement":
                if part == "condition":
                    continue
                if status is _UNKNOWN:
                    mode = "control"
                elif bool(status) != (part == "consequence"):
                    return "skip"
            elif kind == "switch_statement":
                if part == "condition":
                    continue
                if status is _UNKNOWN or not isinstance(status, tuple):
                    mode = "control"
                elif part not in status:
                    return "skip"
            elif kind in ("for_statement", "while_statement"):
                loop = _loop_mode(status, part)
                if loop == "skip":
                    return "skip"
                mode = loop or mode
            else:
                mode = "control"
        return mode


    def read_options(self, control: Node) -> bool:
        """A `while ((opt = getopt(argc, argv, "n:i:")) != -1)` loop over known program
        arguments: its body runs once per option they give, `opt` the option's character and
        `optarg` its argument (`case 'n': n = atoi(optarg);`), as glibc's `getopt` reads them.
        Returns whether the loop was such a loop and was run so."""
        condition = control.child_by_field_name("condition")
        body = control.child_by_field_name("body")
        call = getopt_call(self.ctx.text(condition)) if condition is not None else None
        variable = _assigned_from_call(self.ctx, condition) if condition is not None else None
        argv = self.env.program_arguments()
        if body is None or call is None or variable is None or argv is None:
            return False
        options = parse_options(call[1], argv, long_only=call[0] == "getopt_long_only")
        if options is None:
            return False
        if self.env.arguments_assumed():
            note_assumed_read()
            self.assumed_controls.add(control.start_byte)  # (what it sets rests on that)
        inside = []
        for index in range(self.next + 1, len(self.events)):
            start = self.events[index][0]
            if start >= control.end_byte:
                break
            if start >= body.start_byte:
                inside.append(index)
        self.status[control.start_byte] = _OPTIONS_PASS
        for letter, argument in options:
            _freeze_dependents(self.env, _OPTARG)  # (`n = atoi(optarg)` keeps this option's value)
            for name in (variable, _OPTARG):
                self.env.unknown.pop(name, None)
                self.env._memo.pop(name, None)
            self.env.constants[variable] = ord(letter)
            if argument is not None:
                self.env.constants[_OPTARG] = string_value(argument)
            else:
                _mark_unknown(_OPTARG, "is not given for this option")(self.env)
            for index in inside:
                _, _, chain, apply = self.events[index]
                mode = self._mode(chain)
                if mode != "skip":
                    apply(self, mode == "control")
        _freeze_dependents(self.env, _OPTARG)
        _mark_unknown(_OPTARG, "is the argument of the option being read")(self.env)
        self.status[control.start_byte] = _OPTIONS_READ
        return True


def _assigned_from_call(ctx: ExtractionContext, condition: Node) -> str | None:
    """The variable a loop condition assigns a call's result to (`(c = getopt(...)) != -1`)."""
    stack = [condition]
    while stack:
        node = stack.pop()
        if node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            right = node.child_by_field_name("right")
            if left is not None and left.type == "identifier" and right is not None and right.type == "call_expression":
                return ctx.text(left)
        stack.extend(node.named_children)
    return None


def _loop_mode(status: object, part: str) -> str | None:
    """How an event in `part` of a loop whose entry folded to `status` runs: 'skip', 'control',
    or None (as its surroundings say)."""
    if status is _OPTIONS_PASS:
        return None  # (`read_options` runs the body once per option given)
    if status is _OPTIONS_READ:
        return "skip" if part == "body" else "control"
    if status is False:
        # (the initializer runs once: a loop that never runs leaves it so)
        return "skip" if part != "initializer" else None
    return "control"  # (the initializer too: `for (i = 0; ...)` leaves `i` changed)


_UNKNOWN = object()
_OPTIONS_PASS = object()  # a `getopt` loop whose body runs for one option now
_OPTIONS_READ = object()  # a `getopt` loop run for every option given: its body is done
_OPTARG = "optarg"
_Event = tuple[int, int, _Chain, Callable[[_Replay, bool], None]]


def _function_events(ctx: ExtractionContext, function: Node) -> list[_Event]:
    """The binding events of `function`, in source order, with the control statements around
    each (one list per function, shared by the replays of its control paths)."""
    cache: dict[int, list[_Event]] = ctx.local_events
    events = cache.get(function.start_byte)
    if events is None:
        events = []
        for name in _function_params(function):
            events.append((function.start_byte, function.start_byte, (), _parameter(name)))
        body = function.child_by_field_name("body")
        if body is not None:
            _collect_events(ctx, body, events)
            events.extend(_scope_events(ctx, body))
        events.sort(key=lambda e: e[0])
        cache[function.start_byte] = events
    return events


_SCOPES = ("compound_statement", "for_statement", "for_range_loop")
# the statements that can hold a block (a lambda's or a local class's body is not this function's)
_STATEMENT_CONTAINERS = frozenset({"compound_statement", "for_statement", "for_range_loop", "while_statement",
                                   "do_statement", "if_statement", "else_clause", "switch_statement",
                                   "case_statement", "labeled_statement", "try_statement", "catch_clause",
                                   "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"})


def _scope_events(ctx: ExtractionContext, body: Node) -> list[_Event]:
    """For each block (and `for` statement) inside `body` that declares names: at its start,
    what those names were bound to; at its end, that binding back. A point after the block reads
    the outer variable, not the block's own of the same name (`for (int n = 0; ...)` after a
    parameter `n`). Events with no control chain: they run whatever the block's mode."""
    events: list[_Event] = []
    stack = [body]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type not in _STATEMENT_CONTAINERS:
                continue  # (expressions and declarations hold no block: not descended)
            stack.append(child)
            if child.type not in _SCOPES:
                continue
            names = _names_declared_in(ctx, child)
            if names:
                saved: list[dict[str, tuple[object, object]]] = []
                events.append((child.start_byte, child.start_byte, (), _save_bindings(names, saved)))
                events.append((child.end_byte, child.end_byte, (), _restore_bindings(names, saved)))
    return events


def _names_declared_in(ctx: ExtractionContext, scope: Node) -> set[str]:
    """Names a block declares directly (a `for` statement: in its initializer)."""
    if scope.type == "compound_statement":
        declarations = [c for c in scope.named_children if c.type == "declaration"]
    elif scope.type == "for_statement":
        loop_body = scope.child_by_field_name("body")
        declarations = [c for c in scope.named_children if c.type == "declaration"
                        and (loop_body is None or c.end_byte <= loop_body.start_byte)]
    else:
        declarator = scope.child_by_field_name("declarator")
        return {ctx.text(declarator)} if declarator is not None and declarator.type == "identifier" else set()
    names: set[str] = set()
    for declaration in declarations:
        for declarator in declaration.children_by_field_name("declarator"):
            inner: Node | None = declarator
            while inner is not None and inner.type != "identifier":
                inner = inner.child_by_field_name("declarator")
            if inner is not None:
                names.add(ctx.text(inner))
    return names


_MISSING = object()


def _save_bindings(names: set[str], saved: list[dict[str, tuple[object, object]]]
                   ) -> Callable[[_Replay, bool], None]:
    def save(replay: _Replay, control: bool) -> None:
        env = replay.env
        saved.append({name: (env.constants.get(name, _MISSING), env.unknown.get(name, _MISSING)) for name in names})
    return save


def _restore_bindings(names: set[str], saved: list[dict[str, tuple[object, object]]]
                      ) -> Callable[[_Replay, bool], None]:
    def restore(replay: _Replay, control: bool) -> None:
        if not saved:
            return
        env = replay.env
        for name, (constant, unknown) in saved.pop().items():
            if env.constants.get(name, _MISSING) == constant and env.unknown.get(name, _MISSING) == unknown:
                continue  # (the block left it as it was)
            _freeze_dependents(env, name)  # (what the block's own variable set keeps its value)
            env.constants.pop(name, None)
            env.unknown.pop(name, None)
            env._memo.pop(name, None)
            if constant is not _MISSING:
                env.constants[name] = constant  # type: ignore[assignment]
            if unknown is not _MISSING:
                env.unknown[name] = unknown  # type: ignore[assignment]
    return restore


def _parameter(name: str) -> Callable[[_Replay, bool], None]:
    """A parameter is unknown where it starts, unless a caller's argument binds it."""
    unknown = _mark_unknown(name, "is a parameter of the enclosing function")

    def start(replay: _Replay, control: bool) -> None:
        if name not in replay.env.constants:
            passed = {path: v for path, v in replay.env.constants.items() if path.startswith(name + ".")}
            unknown(replay.env)
            for path, value in passed.items():  # (a struct's fields its caller passes: `p.n`)
                replay.env.constants[path] = value
                replay.env.unknown.pop(path, None)

    return start


def _replayed(apply: Callable[[ConstEnv], None]) -> Callable[[_Replay, bool], None]:
    def run(replay: _Replay, control: bool) -> None:
        apply(replay.env)

    return run


def _mark_unknown(name: str, reason: str) -> Callable[[ConstEnv], None]:
    def apply(env: ConstEnv) -> None:
        _freeze_dependents(env, name)
        forget_fields(env, name)
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
    """Record, in source order, how each statement changes what is known about locals, and
    where each control statement's condition is folded."""
    cursor = QueryCursor(query("local_bindings"))
    cursor.set_byte_range(body.start_byte, body.end_byte)
    for node, capture in _ordered_captures(cursor.captures(body)):
        if capture == "control":
            chain = _chain(node, body)
            if chain is not None and node.type in _CONTROL_PARTS:
                events.append((node.start_byte, node.start_byte, chain, _control_entry(ctx, node)))
                events.append((node.end_byte, node.end_byte, chain, _control_exit(ctx, node)))
            continue
        if capture in ("address", "argument"):  # a variable a call may write through a pointer or reference
            written = _address_taken(ctx, node) if capture == "address" else _reference_argument(ctx, node)
            chain = _chain(node, body)
            if chain is None and not _in_nested_definition(node, body):
                chain = ()
            if written is not None and chain is not None:
                events.append((node.start_byte, node.start_byte, chain, written))
            continue
        chain = _chain(node, body)
        if chain is None or _inner_part_of_expression(node, body):
            continue
        if capture == "extraction":
            for name in _extracted(ctx, node):
                events.append((node.start_byte, node.start_byte, chain, _replayed(_mark_unknown(name, "is read from a stream"))))
            continue
        if capture == "exit":
            if chain and not ends_function(node, body):  # (a branch or loop the run takes, or may take, ends it there)
                events.append((node.start_byte, node.start_byte, chain, lambda replay, control: returned(replay.env, control)))
        elif capture == "declaration":
            def bind(replay: _Replay, control: bool, decl: Node = node) -> None:
                declared = _bind_declaration(ctx, decl, replay.env, override=True)
                if control:
                    for name in declared:
                        _mark_unknown(name, "is set inside a loop or branch")(replay.env)

            events.append((node.start_byte, node.end_byte, chain, bind))
        elif capture == "assignment":
            def assign(replay: _Replay, control: bool, assignment: Node = node) -> None:
                _bind_assignment(ctx, assignment, replay.env, control)

            events.append((node.start_byte, node.start_byte, chain, assign))
        else:
            updated = _update_event(ctx, node)
            if updated is not None:
                events.append((node.start_byte, node.start_byte, chain, updated))


def _update_event(ctx: ExtractionContext, node: Node) -> Callable[[_Replay, bool], None] | None:
    """The event of `x++` (or `p.count++`: the path is unknown after); None for anything else."""
    target = node.child_by_field_name("argument")
    if target is not None and target.type == "identifier":
        def update(replay: _Replay, control: bool, name: str = ctx.text(target), upd: Node = node) -> None:
            _bind_update(ctx, upd, name, replay.env, control)

        return update
    if target is not None and target.type == "field_expression":  # `p.count++`
        return _replayed(_mark_unknown(re.sub(r"\s+", "", ctx.text(target)), "is modified by ++/--"))
    return None


def _extracted(ctx: ExtractionContext, node: Node) -> list[str]:
    """The variables (or member paths, `p.n`) `in >> a >> p.n` reads into: the right operands
    of the chain of `>>`."""
    names: list[str] = []
    while node.type == "binary_expression" and ctx.text(node.child_by_field_name("operator")) == ">>":
        right = node.child_by_field_name("right")
        if right is not None and right.type in ("identifier", "field_expression"):
            names.append(re.sub(r"\s+", "", ctx.text(right)).replace("->", "."))
        left = node.child_by_field_name("left")
        if left is None:
            break
        node = left
    return names


def _reference_argument(ctx: ExtractionContext, node: Node) -> Callable[[_Replay, bool], None] | None:
    """The event of a variable passed to a function of the file (or of a source beside it) whose
    parameter there is a non-const reference (`launch_shape(n, blocks, threads)` into
    `int &threads`): the variable may be set there, and is unknown after; None for any other
    argument."""
    call = node.parent.parent if node.parent is not None else None
    function = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
    if function is None or node.parent is None \
            or function.type not in ("identifier", "template_function", "qualified_identifier"):
        return None
    positions = _reference_positions(ctx, re.sub(r"<.*", "", ctx.text(function), flags=re.S).split("::")[-1].strip())
    if not positions:
        return None
    arguments = [a for a in node.parent.named_children if a.type != "comment"]
    position = next((i for i, a in enumerate(arguments) if a.id == node.id), None)
    if position not in positions:
        return None
    return _address(ctx, node, ctx.text(node), reference=True)


def _reference_positions(ctx: ExtractionContext, name: str) -> frozenset[int]:
    """The positions of the non-const reference parameters of the function `name` defined in the
    file or in a source beside it (none where it is defined in neither), once per file and name."""
    found = ctx.reference_parameters.get(name)
    if found is None:
        definition = file_definitions(ctx).get(name)
        if definition is None:
            sibling = sibling_function(ctx, name, by_reference=True)
            definition = sibling[1] if sibling is not None else None
        parameters = parameter_declarations(definition) if definition is not None else []
        found = ctx.reference_parameters[name] = frozenset(
            i for i, parameter in enumerate(parameters) if non_const_reference((parameter.text or b"").decode("utf-8", "replace")))
    return found


def _address_taken(ctx: ExtractionContext, node: Node) -> Callable[[_Replay, bool], None] | None:
    """The event of `&x`, `&p.n` or `&(p->n)` (the path `p.n`); none for an address listed in an
    array's initializer (`void *args[] = {&a, &n}`: the arguments of a runtime kernel launch)."""
    outer = node.parent
    while outer is not None and outer.type in ("cast_expression", "parenthesized_expression"):
        outer = outer.parent
    if outer is not None and outer.type == "initializer_list":
        return None
    target = node.child_by_field_name("argument")
    operator = node.child_by_field_name("operator")
    if target is not None and target.type == "parenthesized_expression":
        target = target.named_children[0]  # `&(opts->nx)`
    if target is not None and target.type == "identifier" and operator is not None and ctx.text(operator) == "&":
        return _address(ctx, node, ctx.text(target))
    if target is not None and target.type == "field_expression":
        return _address(ctx, node, re.sub(r"\s+", "", ctx.text(target)).replace("->", "."))
    return None


def _address(ctx: ExtractionContext, node: Node, name: str, reference: bool = False) -> Callable[[_Replay, bool], None]:
    """`&x` (`&p.n`, `&(p->n)`: `name` is the path): a same-file callee that assigns `*p` or
    `p->field` on a run that reaches its end sets `x` or its fields; else `x` is unknown.
    `reference`: `x` passed to a reference parameter the callee assigns (`threads = ...;`)."""
    how = "a reference parameter" if reference else "its address"

    def taken(replay: _Replay, control: bool) -> None:
        found = None if control else out_parameter_value(
            ctx, node, replay.env, _function_params,
            lambda at, callee, end, bound: function_env(at, callee, end, replay.env.parent or replay.env, bound),
            reference)
        if found is None:
            _mark_unknown(name, f"may be set through {how}")(replay.env)
            return
        for suffix, value in found[0].items():
            path = name + suffix
            if value is None:
                _mark_unknown(path, f"is set through {how} to a value not known")(replay.env)
                continue
            _freeze_dependents(replay.env, path)
            replay.env.constants[path] = value
            replay.env.unknown.pop(path, None)
            replay.env._memo.pop(path, None)
            (replay.env.assumed.add if found[1] else replay.env.assumed.discard)(path)

    return taken


def _control_entry(ctx: ExtractionContext, control: Node) -> Callable[[_Replay, bool], None]:
    """What `control`'s condition folds to where it starts: an `if`'s truth, whether a loop
    runs at all (False: its condition fails on entry), the cases a `switch` takes."""

    def enter(replay: _Replay, in_control: bool) -> None:
        status: object = _UNKNOWN
        if not in_control and control.type == "while_statement" and control.start_byte not in replay.path \
                and replay.read_options(control):
            return
        if not in_control and read_argument_loop(replay, control, _OPTIONS_PASS, _OPTIONS_READ):
            return
        if not in_control and read_counting_loop(replay, control, _OPTIONS_PASS, _OPTIONS_READ):
            return
        if not in_control:
            with ReadsApart() as reads:
                status = _fold_condition(ctx, control, replay.env)
            if reads.seen and status is not _UNKNOWN:
                replay.assumed_controls.add(control.start_byte)
        replay.status[control.start_byte] = status

    return enter


def _control_exit(ctx: ExtractionContext, control: Node) -> Callable[[_Replay, bool], None]:
    """After a control statement whose condition folded only with the assumed program
    arguments (a run without any): what it sets, or would have set, rests on that assumption."""

    def leave(replay: _Replay, in_control: bool) -> None:
        if control.start_byte in replay.assumed_controls:
            replay.env.assumed.update(written_names(ctx.data, control))

    return leave


def _fold_condition(ctx: ExtractionContext, control: Node, env: ConstEnv) -> object:
    kind = control.type
    condition = control.child_by_field_name("condition")
    if kind == "if_statement":
        text = None if condition is None else ctx.text(condition) if not _has_side_effects(condition) \
            else assigned_condition(ctx.data, condition)  # (`if ((i = ArgPos(...)) > 0)`)
        if text is None:
            return _UNKNOWN
        value, _ = try_evaluate(text, env)
        return bool(value) if isinstance(value, (int, float)) else _UNKNOWN
    if kind == "while_statement":
        if condition is None or _has_side_effects(condition):
            return _UNKNOWN
        value, _ = try_evaluate(ctx.text(condition), env)
        return False if isinstance(value, (int, float)) and not value else _UNKNOWN
    if kind == "for_statement":
        if condition is None or _has_side_effects(condition):
            return _UNKNOWN
        scratch = ConstEnv(constants=dict(env.constants), unknown=dict(env.unknown), parent=env.parent,
                           assumed=set(env.assumed))
        for init in control.children_by_field_name("initializer"):
            if init.type == "declaration":
                _bind_declaration(ctx, init, scratch, override=True)
            elif init.type == "assignment_expression":
                _bind_assignment(ctx, init, scratch, False)
        value, _ = try_evaluate(ctx.text(condition), scratch)
        return False if isinstance(value, (int, float)) and not value else _UNKNOWN
    if kind == "switch_statement":
        if condition is None or _has_side_effects(condition):
            return _UNKNOWN
        value, _ = try_evaluate(ctx.text(condition), env)
        body = control.child_by_field_name("body")
        if not isinstance(value, (int, float)) or body is None:
            return _UNKNOWN
        taken: list[str] = []
        default: str | None = None
        for case in body.named_children:
            if case.type != "case_statement":
                continue
            label = case.child_by_field_name("value")
            if label is None:
                default = f"case@{case.start_byte}"
                continue
            case_value, _ = try_evaluate(ctx.text(label), env)
            if case_value is None:
                return _UNKNOWN
            if taken or case_value == value:
                taken.append(f"case@{case.start_byte}")  # (and the cases it falls through to)
                if _ends_with_break(case):
                    break
        if not taken and default is not None:
            taken.append(default)
        return tuple(taken)
    return _UNKNOWN


def _ends_with_break(case: Node) -> bool:
    statements = [c for c in case.named_children if c.type not in ("comment",)]
    return bool(statements) and statements[-1].type in ("break_statement", "return_statement", "compound_statement") \
        and (statements[-1].type != "compound_statement" or any(c.type in ("break_statement", "return_statement")
                                                                  for c in statements[-1].named_children))


def _has_side_effects(node: Node) -> bool:
    """Whether an expression assigns or updates something (`while ((c = next()) != -1)`)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("assignment_expression", "update_expression"):
            return True
        stack.extend(n.named_children)
    return False


def _ordered_captures(captures: dict[str, list[Node]]) -> list[tuple[Node, str]]:
    flat = [(node, name) for name, nodes in captures.items() for node in nodes]
    flat.sort(key=lambda item: (item[0].start_byte, item[1] != "control"))
    return flat


_NESTED_DEFINITIONS = {"function_definition", "lambda_expression", "class_specifier", "struct_specifier"}


def _inner_part_of_expression(node: Node, body: Node) -> bool:
    """`int a = b = 3` style nesting: the inner part is not a statement of its own."""
    if node.type == "declaration":
        return False
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in ("declaration", "assignment_expression"):
            return True
        if parent.type in _CONTROL_PARTS or parent.type in ("expression_statement", "compound_statement"):
            return False
        parent = parent.parent
    return False


def _in_nested_definition(node: Node, body: Node) -> bool:
    parent = node.parent
    while parent is not None and parent != body:
        if parent.type in _NESTED_DEFINITIONS:
            return True
        parent = parent.parent
    return False


def _bind_update(ctx: ExtractionContext, update: Node, name: str, env: ConstEnv, in_control: bool) -> None:
    """`i++`, `--n`: the value moves by one in straight-line code, else it is unknown."""
    operator = update.child_by_field_name("operator")
    op = ctx.text(operator) if operator is not None else ("++" if "++" in ctx.text(update) else "--")
    _freeze_dependents(env, name)
    if not in_control and name in env.constants:
        value, _ = _evaluate_noting(env, name, name)
        if isinstance(value, (int, float)):
            env.constants[name] = value + (1 if op == "++" else -1)
            env._memo.pop(name, None)
            return
    _mark_unknown(name, "is modified by ++/--")(env)


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
        if current is None:  # (`p->n = v;` through a struct pointer too: the path `p.n` reads it)
            bind_field(env, f"{name}.{ctx.text(member)}", ctx.text(right), in_control or ctx.text(op) != "=",
                       _freeze_dependents)
            return
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
    if left.type == "pointer_expression" and ctx.text(left).startswith("*"):
        target = left.child_by_field_name("argument")
        if target is not None and target.type == "identifier":  # `*count = n;` (`out_parameters`)
            key = DEREFERENCED + ctx.text(target)
            if in_control or ctx.text(op) != "=":
                env.unknown[key] = "is set inside a loop or branch" if in_control else "is updated in place"
                env.constants.pop(key, None)
            else:
                env.constants[key] = ctx.text(right)
                env.unknown.pop(key, None)
            env._memo.pop(key, None)
        return
    if left.type != "identifier":
        return
    if right.type == "assignment_expression" and (op is None or ctx.text(op) == "="):
        # `N = M = K = 2048;`: the inner assignments happen first, and `N` takes what `M` now holds
        _bind_assignment(ctx, right, env, in_control)
        inner = right.child_by_field_name("left")
        right = inner if inner is not None and inner.type == "identifier" else right
    name = ctx.text(left)
    if forget_fields(env, name, dry=True):
        _freeze_dependents(env, name)
        forget_fields(env, name)
    operator = ctx.text(op) if op is not None else "="
    if not in_control and operator != "=" and operator[:-1] in _COMPOUND and name in env.constants:
        # `n *= 2;` in straight-line code: the value it had, updated
        value, _ = _evaluate_noting(env, name, f"({name}) {operator[:-1]} ({ctx.text(right)})")
        _freeze_dependents(env, name)
        if isinstance(value, (int, float)):
            env.constants[name] = value
            env.unknown.pop(name, None)
            env._memo.pop(name, None)
            return
    if in_control or operator != "=":
        _freeze_dependents(env, name)
        env.unknown[name] = "is reassigned inside a loop or branch" if in_control else "is updated in place"
        env.constants.pop(name, None)
        return
    text = ctx.text(right)
    env.assumed.discard(name)
    if name in _names_in(text):
        # `n = n * 2;`: the value the name had, updated (its text would name itself)
        value, reason = _evaluate_noting(env, name, text)
        _freeze_dependents(env, name)
        env._memo.pop(name, None)
        if value is None:
            env.unknown[name] = f"is set to `{text}` ({reason})"
            env.constants.pop(name, None)
            return
        env.constants[name] = value
        env.unknown.pop(name, None)
        return
    _freeze_dependents(env, name)
    env.constants[name] = text
    env.unknown.pop(name, None)
    env._memo.pop(name, None)


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _evaluate_noting(env: ConstEnv, name: str, text: str) -> tuple[Value | None, str | None]:
    """`text` folded for a new value of `name`, which then rests on the assumed program
    arguments when the fold read them."""
    with ReadsApart() as reads:
        value, reason = try_evaluate(text, env)
    if reads.seen:
        env.assumed.add(name)
    return value, reason


@lru_cache(maxsize=4096)
def _names_in(text: str) -> frozenset[str]:
    return frozenset(_IDENTIFIER.findall(text))


def _freeze_dependents(env: ConstEnv, name: str) -> None:
    """Before `name` changes: the locals whose (unfolded) text names it keep the value they
    have now (`int a = b; b = 5;` leaves `a` as it was)."""
    for other, source in list(env.constants.items()):
        if other != name and isinstance(source, str) and name.split(".")[0] in _names_in(source):
            # (`*count`, a callee's out-parameter, is no name a text can say: its source is folded)
            value, reason = _evaluate_noting(env, other, f"({source})" if other.startswith(DEREFERENCED) else other)
            if value is None:
                env.unknown[other] = f"depends on `{name}`, which changes later ({reason})"
                env.constants.pop(other, None)
            else:
                env.constants[other] = value
            env._memo.pop(other, None)
