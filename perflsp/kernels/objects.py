"""Object state: the members of a C++ object as one of its methods sees them.

A method that launches a kernel or holds an OpenMP region (`void Sim::run() { k<<<g, b>>>(n_); }`)
reads members the program set elsewhere: in the constructor (`Sim::Sim(int n) : n_(n) {}`, `npart_
= 2000;`, `set_npart(16000);`) and in setters the caller applies before the call (`sim.set_npart(
atoi(argv[1])); sim.run();`). The first call `obj.run()` (in this file or another source of the
folder) gives the object: its declaration there (`Sim sim(n);`, `Sim *s = new Sim(n);`) runs the
constructor with the folded arguments, then each straight-line `obj.method(args)` and `obj.field =
expr` before the call updates the members it assigns. What runs in a loop, or in a branch whose
condition does not fold, leaves the members it may set unknown; so does passing the object to a
function, for every member a method other than a constructor assigns. Getters of one `return`
(`int get_npart() const { return npart_; }`) fold through the members."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, ReadsApart, Value, try_evaluate
from perflsp.kernels.definitions import function_declarator, written_names

if TYPE_CHECKING:
    from perflsp.kernels.program import ProgramModel

MAX_NESTED_CALLS = 3  # a setter that calls a setter that ...: followed this deep
_CLASS_KINDS = ("class_specifier", "struct_specifier")
_SCOPES = ("translation_unit", "namespace_definition", "declaration_list", "template_declaration",
           "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "linkage_specification")
_CONTROLS = ("if_statement", "for_statement", "while_statement", "do_statement", "for_range_loop",
             "switch_statement", "case_statement", "try_statement", "catch_clause", "lambda_expression",
             "conditional_expression")
_UPDATES = ("assignment_expression", "update_expression")


def _text(data: bytes, node: Node | None) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", errors="replace") if node is not None else ""


@dataclass
class _Method:
    data: bytes
    node: Node  # its function_definition
    params: list[tuple[str, str | None]]  # (name, default argument text)


@dataclass
class ClassIndex:
    """What the program's sources say of one class: its members (with default initialisers),
    its methods (in the class body and out of line, `C::f`), and which members only
    constructors assign."""

    name: str
    members: dict[str, str | None] = field(default_factory=dict)  # name -> default initialiser text
    member_data: bytes = b""
    methods: dict[str, list[_Method]] = field(default_factory=dict)
    _references: dict[str, str] | None = None

    def references(self) -> dict[str, str]:
        """Methods that return a member by non-const reference (`Index_t& numReg() { return
        m_numReg; }`), by the member: `numReg() = nr;` assigns it."""
        if self._references is None:
            self._references = {}
            for name, methods in self.methods.items():
                member = _referenced_member(methods[0]) if len(methods) == 1 else None
                if member is not None:
                    self._references[name] = member
        return self._references

    def method(self, name: str, count: int) -> _Method | None:
        """The definition of `name` that takes `count` arguments (defaults counted)."""
        for method in self.methods.get(name, []):
            required = sum(1 for _, default in method.params if default is None)
            if required <= count <= len(method.params):
                return method
        return None

    def set_by_methods(self) -> set[str]:
        """Members that a method other than a constructor assigns."""
        found: set[str] = set()
        for name, methods in self.methods.items():
            if name == self.name:
                continue
            for method in methods:
                found |= _assigned_members(method.data, method.node, self.members, self.references())
        return found


def method_class(data: bytes, function: Node) -> str | None:
    """The class a method belongs to: `C` of an out-of-line `T C::f(...)` (`C<T>::f` too), or
    the class whose body defines it."""
    declarator = function_declarator(function)
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    if name is not None and name.type == "qualified_identifier":
        scope = name.child_by_field_name("scope")
        simple = re.sub(r"<.*", "", _text(data, scope)).strip()
        return simple.rsplit("::", 1)[-1] if re.fullmatch(r"[\w:]+", simple) else None
    parent = function.parent
    if parent is not None and parent.type == "template_declaration":
        parent = parent.parent
    if parent is not None and parent.type == "field_declaration_list" and parent.parent is not None \
            and parent.parent.type in _CLASS_KINDS:
        return _text(data, parent.parent.child_by_field_name("name")) or None
    return None


def _parameters(data: bytes, function: Node) -> list[tuple[str, str | None]] | None:
    declarator = function_declarator(function)
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    if params is None:
        return None
    out: list[tuple[str, str | None]] = []
    for param in params.named_children:
        if param.type == "comment":
            continue
        if param.type == "variadic_parameter_declaration":
            return None
        text = _text(data, param)
        if text.strip() == "void":
            continue
        default = param.child_by_field_name("default_value")
        head = text[: default.start_byte - param.start_byte].rstrip().rstrip("=") if default is not None else text
        m = re.search(r"(\w+)\s*(?:\[[^\]]*\])*\s*$", head)
        out.append((m.group(1) if m else "", _text(data, default) if default is not None else None))
    return out


def _definition_name(data: bytes, function: Node) -> str | None:
    declarator = function_declarator(function)
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return re.sub(r"<.*", "", _text(data, name)).rsplit("::", 1)[-1].strip() or None if name is not None else None


def index_class(name: str, sources: list[tuple[bytes, Node]]) -> ClassIndex | None:
    """The class `name` as these (text, syntax tree root) sources define it; None where none
    declares its body."""
    index = ClassIndex(name)
    found = False
    for data, root in sources:
        stack = [root]
        while stack:
            node = stack.pop()
            for child in node.named_children:
                if child.type in _CLASS_KINDS and _text(data, child.child_by_field_name("name")) == name \
                        and child.child_by_field_name("body") is not None:
                    found = True
                    index.member_data = data
                    _index_body(index, data, child.child_by_field_name("body"))
                elif child.type == "function_definition":
                    if method_class(data, child) == name:
                        _add_method(index, data, child)
                elif child.type in _SCOPES or (child.type == "declaration" and child.named_child_count < 4):
                    stack.append(child)
    return index if found else None


def _index_body(index: ClassIndex, data: bytes, body: Node | None) -> None:
    for member in body.named_children if body is not None else ():
        node = member
        if node.type == "template_declaration":
            node = next((c for c in node.named_children if c.type == "function_definition"), node)
        if node.type == "function_definition":
            _add_method(index, data, node)
        elif node.type == "field_declaration":
            default = node.child_by_field_name("default_value")
            for declarator in node.children_by_field_name("declarator"):
                if declarator.type == "field_identifier":
                    index.members[_text(data, declarator)] = _text(data, default) if default is not None else None


def _add_method(index: ClassIndex, data: bytes, function: Node) -> None:
    name = _definition_name(data, function)
    params = _parameters(data, function)
    if name and params is not None and function.child_by_field_name("body") is not None:
        index.methods.setdefault(name, []).append(_Method(data, function, params))


def _referenced_member(method: _Method) -> str | None:
    """The member a method of no parameters returns by non-const reference, if it does."""
    declarator = method.node.child_by_field_name("declarator")
    body = method.node.child_by_field_name("body")
    statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    if method.params or declarator is None or declarator.type != "reference_declarator" \
            or re.search(r"\bconst\b", method.data[method.node.start_byte:declarator.start_byte].decode("latin-1")) \
            or len(statements) != 1 or statements[0].type != "return_statement" or not statements[0].named_children:
        return None
    returned: Node | None = statements[0].named_children[0]
    if returned is not None and returned.type == "field_expression" \
            and _text(method.data, returned.child_by_field_name("argument")) == "this":
        returned = returned.child_by_field_name("field")
    return _text(method.data, returned) if returned is not None and returned.type in ("identifier", "field_identifier") \
        else None


def _member_written(data: bytes, node: Node, members: dict[str, str | None],
                    references: dict[str, str] | None = None) -> str | None:
    """The member an assignment or `++`/`--` writes (`n_ = ...`, `this->n_ += ...`, `numReg() = nr`
    through a method in `references`), if any."""
    target = node.child_by_field_name("left") if node.type == "assignment_expression" \
        else node.child_by_field_name("argument")
    if target is None:
        return None
    if target.type == "call_expression" and references:
        arguments = target.child_by_field_name("arguments")
        target = target.child_by_field_name("function") if arguments is not None and not arguments.named_children else None
        if target is not None and target.type == "field_expression" \
                and _text(data, target.child_by_field_name("argument")) == "this":
            target = target.child_by_field_name("field")
        name = _text(data, target) if target is not None and target.type in ("identifier", "field_identifier") else None
        return references.get(name or "")
    if target.type == "field_expression" and _text(data, target.child_by_field_name("argument")) == "this":
        target = target.child_by_field_name("field")
    name = _text(data, target) if target is not None and target.type in ("identifier", "field_identifier") else None
    return name if name in members else None


def _assigned_members(data: bytes, node: Node, members: dict[str, str | None],
                      references: dict[str, str] | None = None) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _UPDATES:
            written = _member_written(data, current, members, references)
            if written is not None:
                found.add(written)
        stack.extend(current.named_children)
    return found


@dataclass
class ObjectState:
    """Members' folded values, those unknown (and why), and those resting on assumed program arguments."""

    values: dict[str, Value] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    assumed: set[str] = field(default_factory=set)

    def put(self, member: str, value: Value | None, why: str, assumed: bool = False) -> None:
        if value is None or isinstance(value, (tuple, str)):
            self.values.pop(member, None)
            self.unknown[member] = why
        else:
            self.values[member] = value
            self.unknown.pop(member, None)
        (self.assumed.add if assumed and value is not None else self.assumed.discard)(member)

    def forget(self, members: set[str], why: str) -> None:
        for member in members:
            self.put(member, None, why)


class _Runner:
    """Runs constructors and setters of one class over an `ObjectState`."""

    def __init__(self, index: ClassIndex, base: ConstEnv, envs: dict[int, ConstEnv]):
        self.index = index
        self.base = base  # where the object is used: its arguments fold there
        self.envs = envs  # a method's own file's constants, by the identity of its text

    def env(self, state: ObjectState, local: dict[str, Value]) -> ConstEnv:
        members = ConstEnv(parent=self.base, constants=dict(state.values), unknown=dict(state.unknown))
        return ConstEnv(parent=members, constants=dict(local))

    def fold(self, text: str, state: ObjectState, local: dict[str, Value], assumed: bool) -> tuple[Value | None, bool]:
        with ReadsApart() as reads:
            value, _ = try_evaluate(text, self.env(state, local))
        uses = set(re.findall(r"[A-Za-z_]\w*", text))
        return value, assumed or reads.seen or bool(uses & state.assumed)

    def construct(self, state: ObjectState, args: list[tuple[Value | None, bool]]) -> bool:
        """Default member initialisers, then the constructor taking these arguments; False
        when the class defines constructors but none takes them."""
        for member, default in self.index.members.items():
            if default is not None:
                text = default[1:-1] if default[:1] == "{" else default
                value, assumed = self.fold(text, state, {}, False)
                state.put(member, value, f"has the initialiser `{default}`", assumed)
        if self.index.name not in self.index.methods:
            return not args
        ctor = self.index.method(self.index.name, len(args))
        if ctor is None:
            return False
        self.call(ctor, args, state, 0)
        return True

    def call(self, method: _Method, args: list[tuple[Value | None, bool]], state: ObjectState, depth: int) -> None:
        """Apply what `method` does to the members, called with `args` (value, assumed)."""
        data, name = method.data, _definition_name(method.data, method.node) or "?"
        outer = self.base
        self.base = self.envs.get(id(data), outer)
        try:
            self._run(method, args, state, depth, data, name)
        finally:
            self.base = outer

    def _run(self, method: _Method, args: list[tuple[Value | None, bool]], state: ObjectState, depth: int,
             data: bytes, name: str) -> None:
        local: dict[str, Value] = {}
        assumed_locals: set[str] = set()
        for i, (param, default) in enumerate(method.params):
            if i < len(args):
                value, assumed = args[i]
            elif default is not None:
                value, assumed = self.fold(default, state, {}, False)
            else:
                value, assumed = None, False
            if value is not None and not isinstance(value, str):
                local[param] = value
                if assumed:
                    assumed_locals.add(param)
        where = f"`{self.index.name}::{name}`"
        for child in method.node.named_children:
            if child.type == "field_initializer_list":
                for init in child.named_children:
                    member = init.named_children[0] if init.named_children else None
                    value_node = init.named_children[-1] if len(init.named_children) > 1 else None
                    member_name = _text(data, member)
                    if member_name in self.index.members and value_node is not None:
                        text = _text(data, value_node)[1:-1]
                        value, assumed = self.fold(text, state, local, bool(set(re.findall(r"\w+", text)) & assumed_locals))
                        state.put(member_name, value, f"is set to `{text}` by {where}", assumed)
        body = method.node.child_by_field_name("body")
        for statement in body.named_children if body is not None else ():
            if statement.type == "return_statement":
                return
            if statement.type == "declaration":
                self._declare(data, statement, state, local, assumed_locals)
                continue
            expression = statement.named_children[0] if statement.type == "expression_statement" \
                and statement.named_children else None
            if expression is not None and self._straight(data, expression, state, local, assumed_locals, where, depth):
                continue
            # anything else (a loop, a branch, a call not followed): what it may set is unknown,
            # the constructor's own locals too (`for (...) if (v > most) most = v;`)
            for name in written_names(data, statement):
                local.pop(name, None)
            state.forget(_assigned_members(data, statement, self.index.members, self.index.references()),
                         f"is set inside a loop or branch of {where}")
            for called in self._called_methods(data, statement):
                state.forget(self._sets(called, depth), f"may be set by `{called}` inside a loop or branch of {where}")

    def _declare(self, data: bytes, statement: Node, state: ObjectState, local: dict[str, Value],
                 assumed_locals: set[str]) -> None:
        for declarator in statement.children_by_field_name("declarator"):
            name = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
            value_node = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
            key = _text(data, name)
            local.pop(key, None)
            if value_node is not None and name is not None and name.type == "identifier":
                text = _text(data, value_node)
                value, assumed = self.fold(text, state, local, bool(set(re.findall(r"\w+", text)) & assumed_locals))
                if value is not None and not isinstance(value, str):
                    local[key] = value
                    if assumed:
                        assumed_locals.add(key)

    def _straight(self, data: bytes, expression: Node, state: ObjectState, local: dict[str, Value],
                  assumed_locals: set[str], where: str, depth: int) -> bool:
        """Apply a straight-line statement's expression: True if understood."""
        if expression.type == "assignment_expression":
            member = _member_written(data, expression, self.index.members, self.index.references())
            left = expression.child_by_field_name("left")
            if left is not None and left.type == "identifier" and _text(data, left) in local:
                # a local set again (`m = m * 4;`): its new value, or none
                name, right = _text(data, left), _text(data, expression.child_by_field_name("right"))
                operator = _text(data, expression.child_by_field_name("operator"))
                text = right if operator == "=" else f"({name}) {operator[:-1]} ({right})"
                value, assumed = self.fold(text, state, local, bool(set(re.findall(r"\w+", text)) & assumed_locals))
                local.pop(name, None)
                assumed_locals.discard(name)
                if value is not None and not isinstance(value, str):
                    local[name] = value
                    if assumed:
                        assumed_locals.add(name)
                return True
            if member is None:
                return not _assigned_members(data, expression, self.index.members, self.index.references())
            operator = _text(data, expression.child_by_field_name("operator"))
            right = _text(data, expression.child_by_field_name("right"))
            text = right if operator == "=" else f"({member}) {operator[:-1]} ({right})"
            value, assumed = self.fold(text, state, local, bool(set(re.findall(r"\w+", right)) & assumed_locals))
            state.put(member, value, f"is set to `{right}` by {where}", assumed)
            return True
        if expression.type == "call_expression":
            for written in written_names(data, expression):  # (`fscanf(f, "%d", &n);`)
                local.pop(written, None)
            function = expression.child_by_field_name("function")
            if function is not None and function.type == "field_expression" \
                    and _text(data, function.child_by_field_name("argument")) == "this":
                function = function.child_by_field_name("field")
            name = _text(data, function) if function is not None and function.type in ("identifier", "field_identifier") else ""
            arguments = expression.child_by_field_name("arguments")
            passed = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
            called = self.index.method(name, len(passed))
            if called is None:
                return not _assigned_members(data, expression, self.index.members, self.index.references())
            if depth >= MAX_NESTED_CALLS:
                state.forget(self._sets(name, depth), f"may be set by `{name}`, called too deep to follow")
                return True
            args = [self.fold(_text(data, a), state, local, bool(set(re.findall(r"\w+", _text(data, a))) & assumed_locals))
                    for a in passed]
            self.call(called, args, state, depth + 1)
            return True
        if expression.type not in _UPDATES and not _assigned_members(data, expression, self.index.members,
                                                                      self.index.references()):
            for name in written_names(data, expression):  # (`file >> n;`, `n++;`, `read(&n);`)
                local.pop(name, None)
            return True
        return False

    def _called_methods(self, data: bytes, node: Node) -> set[str]:
        found: set[str] = set()
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type == "call_expression":
                function = current.child_by_field_name("function")
                if function is not None and function.type == "field_expression":
                    function = function.child_by_field_name("field")
                name = _text(data, function)
                if name in self.index.methods:
                    found.add(name)
            stack.extend(current.named_children)
        return found

    def _sets(self, name: str, depth: int) -> set[str]:
        """Members the method `name` (any of its overloads, and what it calls) may assign."""
        found: set[str] = set()
        for method in self.index.methods.get(name, []):
            found |= _assigned_members(method.data, method.node, self.index.members, self.index.references())
            if depth < MAX_NESTED_CALLS:
                for called in self._called_methods(method.data, method.node) - {name}:
                    found |= self._sets(called, depth + 1)
        return found


def _fold(model: ProgramModel, node: Node, depth: int) -> tuple[Value | None, bool]:
    with ReadsApart() as reads:
        value, _ = try_evaluate(_text(model.data, node), model.env_at(node.start_byte, depth))
    return (value if not isinstance(value, str) else None), reads.seen


def _runs(model: ProgramModel, node: Node, body: Node, depth: int) -> tuple[bool | None, bool]:
    """Whether `node` runs once on the way through `body` (None: in a loop, or in a branch whose
    condition does not fold), and whether that rests on assumed program arguments."""
    child, parent = node, node.parent
    assumed = False
    while parent is not None and parent.start_byte >= body.start_byte and parent != body:
        if parent.type == "if_statement" and child != parent.child_by_field_name("condition"):
            condition = parent.child_by_field_name("condition")
            value, read = _fold(model, condition, depth) if condition is not None else (None, False)
            assumed = assumed or read
            if value is None:
                return None, assumed
            taken = child == parent.child_by_field_name("consequence")
            if bool(value) != taken:
                return False, assumed
        elif parent.type in _CONTROLS or parent.type == "function_definition":
            return None, assumed
        child, parent = parent, parent.parent
    return True, assumed


def _declarations_of(data: bytes, body: Node, name: str) -> list[Node]:
    """The declarations of `name` in `body` (their declarators), in order."""
    found: list[Node] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "declaration":
            for declarator in node.children_by_field_name("declarator"):
                inner: Node | None = declarator
                while inner is not None and inner.type not in ("identifier", "field_identifier"):
                    inner = inner.child_by_field_name("declarator")
                if inner is not None and _text(data, inner) == name:
                    found.append(declarator)
        if node.type not in ("lambda_expression", "function_definition") or node == body.parent:
            stack.extend(node.named_children)
    return sorted(found, key=lambda n: n.start_byte)


def _declaration_of(data: bytes, body: Node, name: str, before: int) -> Node | None:
    """The last declaration of `name` in `body` before `before` (its declarator)."""
    return next((d for d in reversed(_declarations_of(data, body, name)) if d.start_byte < before), None)


def _constructor_arguments(data: bytes, node: Node | None, class_name: str) -> list[Node] | None:
    """The arguments that construct the object: `C obj(a, b)`, `C obj{a, b}`, `= C(a, b)`,
    `new C(a, b)`, none for `C obj;`; None for anything else (a copy of another object, a call)."""
    if node is None:
        return []
    if node.type in ("argument_list", "initializer_list"):
        return [a for a in node.named_children if a.type != "comment"]
    if node.type == "new_expression":
        type_node = node.child_by_field_name("type")
        if re.sub(r"<.*", "", _text(data, type_node)).strip().rsplit("::", 1)[-1] != class_name:
            return None
        return _constructor_arguments(data, node.child_by_field_name("arguments"), class_name)
    if node.type in ("call_expression", "compound_literal_expression"):
        callee = node.child_by_field_name("function") or node.child_by_field_name("type")
        if re.sub(r"<.*", "", _text(data, callee)).strip().rsplit("::", 1)[-1] != class_name:
            return None
        return _constructor_arguments(data, node.child_by_field_name("arguments") or node.child_by_field_name("value"),
                                      class_name)
    return None


class _Tracker:
    """The state of one object of the caller, followed from its declaration to the call."""

    def __init__(self, model: ProgramModel, index: ClassIndex, runner: _Runner, name: str, depth: int):
        self.model, self.index, self.runner, self.name, self.depth = model, index, runner, name, depth
        self.state = ObjectState()
        self.outside = index.set_by_methods()

    def construct(self, arguments: list[Node]) -> bool:
        self.state = ObjectState()
        for member in self.index.members:
            self.state.unknown[member] = f"is not set by `{self.index.name}`'s constructor"
        args = [_fold(self.model, a, self.depth) for a in arguments]
        if self.index.name not in self.index.methods and args and all(d is None for d in self.index.members.values()):
            # an aggregate: `Params p{1024, 8};` sets the members in their order
            for member, (value, assumed) in zip(self.index.members, args, strict=False):
                self.state.put(member, value, "is set by the aggregate initialiser", assumed)
            return True
        return self.runner.construct(self.state, args)

    def event(self, node: Node, body: Node) -> None:
        data = self.model.data
        runs, assumed = _runs(self.model, node, body, self.depth)
        if assumed:  # (taken or skipped because of the assumed arguments: what it sets rests on them)
            self.state.assumed |= self._touched(node) & set(self.state.values)
        if runs is False:
            return
        written = _written_through(data, node, self.index)
        if written is not None:  # `obj.numReg() = 5;`: a member assigned through its reference
            update = node.parent
            right = update.child_by_field_name("right") if update is not None else None
            if runs is None or update is None or right is None or _text(data, update.child_by_field_name("operator")) != "=":
                self.state.put(written, None, f"is set through `{self.name}` in a loop or branch, or updated in place")
            else:
                value, read = _fold(self.model, right, self.depth)
                self.state.put(written, value, f"is set to `{_text(data, right)}`", read)
        elif node.type == "call_expression":
            function = node.child_by_field_name("function")
            method = _text(data, function.child_by_field_name("field")) if function is not None else ""
            arguments = node.child_by_field_name("arguments")
            passed = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
            called = self.index.method(method, len(passed))
            if called is None:
                self.state.forget(self.outside, f"may be set by `{self.name}.{method}()`, not found")
            elif runs is None:
                self.state.forget(self.runner._sets(method, 0),
                                  f"may be set by `{self.name}.{method}()` inside a loop or branch")
            else:
                self.runner.call(called, [_fold(self.model, a, self.depth) for a in passed], self.state, 1)
        elif node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            member = _text(data, left.child_by_field_name("field")) if left is not None else ""
            if member not in self.index.members:
                return
            operator = _text(data, node.child_by_field_name("operator"))
            if runs is None or operator != "=":
                self.state.put(member, None, f"is set through `{self.name}` in a loop or branch, or updated in place")
                return
            value, assumed = _fold(self.model, node.child_by_field_name("right") or node, self.depth)
            self.state.put(member, value, f"is set to `{_text(data, node.child_by_field_name('right'))}`", assumed)
        else:  # the object handed to a function, or its address taken
            self.state.forget(self.outside, f"may be changed where `{self.name}` is passed to a function")
        if assumed:
            self.state.assumed |= self._touched(node) & set(self.state.values)

    def _touched(self, node: Node) -> set[str]:
        """The members an event may set."""
        data = self.model.data
        written = _written_through(data, node, self.index)
        if written is not None:
            return {written}
        if node.type == "call_expression":
            function = node.child_by_field_name("function")
            return self.runner._sets(_text(data, function.child_by_field_name("field")) if function is not None else "", 0)
        if node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            return {_text(data, left.child_by_field_name("field"))} if left is not None else set()
        return set(self.outside)


def _written_through(data: bytes, call: Node, index: ClassIndex) -> str | None:
    """The member a call of a method returning it by reference assigns or updates
    (`obj.numReg() = 5;`, `obj->cycle()++`), if it does."""
    parent = call.parent
    if call.type != "call_expression" or parent is None or parent.type not in _UPDATES \
            or call != (parent.child_by_field_name("left") or parent.child_by_field_name("argument")):
        return None
    function = call.child_by_field_name("function")
    return index.references().get(_text(data, function.child_by_field_name("field"))) \
        if function is not None and function.type == "field_expression" else None


def _is_event(data: bytes, node: Node, name: str) -> bool:
    """Whether `node` may change the object `name`: a call of its method (`obj.f(...)`,
    `obj->f(...)`), an assignment to it or to its field, a call it is passed to."""
    if node.type == "call_expression":
        function = node.child_by_field_name("function")
        return function is not None and function.type == "field_expression" \
            and _text(data, function.child_by_field_name("argument")) == name
    if node.type == "assignment_expression":
        left = node.child_by_field_name("left")
        if left is not None and left.type == "field_expression":
            left = left.child_by_field_name("argument")
        return _text(data, left) == name
    return node.type == "argument_list" and node.parent is not None and node.parent.type == "call_expression" \
        and any(re.sub(r"[\s&*()]", "", _text(data, a)) == name for a in node.named_children)


def object_state(model: ProgramModel, index: ClassIndex, runner: _Runner, caller: Node, name: str,
                 before: int, depth: int, memo: dict[object, object] | None = None) -> ObjectState | None:
    """The members of the object `name` of `caller` where execution reaches `before`; None
    where its construction is not understood. `memo` keeps the object's events and its states
    between calls for points of one function (the state is then shared: not to be changed)."""
    body = caller.child_by_field_name("body")
    if body is None:
        return None
    declarations_key = ("declarations", caller.start_byte, name)
    declarations = memo.get(declarations_key) if memo is not None else None
    if not isinstance(declarations, list):
        declarations = _declarations_of(model.data, body, name)
        if memo is not None:
            memo[declarations_key] = declarations
    declarator = next((d for d in reversed(declarations) if d.start_byte < before), None)
    if declarator is None:
        return None
    events_key = ("events", caller.start_byte, name, declarator.start_byte)
    all_events = memo.get(events_key) if memo is not None else None
    if not isinstance(all_events, list):
        all_events = _object_events(model.data, body, declarator, name, index, runner)
        if memo is not None:
            memo[events_key] = all_events
    events = [node for node in all_events if node.start_byte < before]
    state_key = ("state", caller.start_byte, name, declarator.start_byte, len(events), depth)
    if memo is not None and state_key in memo:
        known = memo[state_key]
        return known if isinstance(known, ObjectState) else None
    result = _state_after(model, index, runner, body, declarator, name, events, depth)
    if memo is not None:
        memo[state_key] = result
    return result


def _object_events(data: bytes, body: Node, declarator: Node, name: str, index: ClassIndex, runner: _Runner) -> list[Node]:
    """What may change the object after its declaration, in order (a call of a method that
    assigns no member, a getter, changes nothing)."""
    events: list[Node] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.end_byte <= declarator.end_byte:
            continue
        if _is_event(data, node, name):
            function = node.child_by_field_name("function") if node.type == "call_expression" else None
            method = _text(data, function.child_by_field_name("field")) if function is not None else ""
            if function is None or method not in index.methods or runner._sets(method, 0) \
                    or _written_through(data, node, index) is not None:
                events.append(node)
        stack.extend(node.named_children)
    return sorted(events, key=lambda n: n.start_byte)


def _state_after(model: ProgramModel, index: ClassIndex, runner: _Runner, body: Node, declarator: Node, name: str,
                 events: list[Node], depth: int) -> ObjectState | None:
    tracker = _Tracker(model, index, runner, name, depth)
    value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
    arguments = _constructor_arguments(model.data, value, index.name)
    if declarator.type == "function_declarator":  # `Mesh mesh(edge);` parses as a declaration of a function
        parameters = declarator.child_by_field_name("parameters")
        arguments = [p for p in parameters.named_children if p.type != "comment"] if parameters is not None else None
    constructed = False
    if declarator.type != "pointer_declarator" and not (declarator.type == "init_declarator" and value is None):
        if arguments is None or not tracker.construct(arguments):
            return None
        constructed = True
    elif value is not None and arguments is not None:
        if not tracker.construct(arguments):
            return None
        constructed = True
    for node in events:
        if node.type == "assignment_expression" and _text(model.data, node.child_by_field_name("left")) == name:
            args = _constructor_arguments(model.data, node.child_by_field_name("right"), index.name)
            runs, _ = _runs(model, node, body, depth)
            if args is None or runs is None:
                return None
            if runs and not tracker.construct(args):
                return None
            constructed = constructed or bool(runs)
            continue
        if constructed:
            tracker.event(node, body)
    return tracker.state if constructed else None


def _member_calls(data: bytes, root: Node, name: str) -> list[Node]:
    """The calls `x.name(...)` and `x->name(...)` of a text, in order."""
    found: list[Node] = []
    for m in re.finditer(rb"(?:\.|->)\s*" + re.escape(name.encode()) + rb"\s*\(", data):
        node: Node | None = root.descendant_for_byte_range(m.start(), m.start() + 1)
        while node is not None and node.type != "call_expression":
            node = node.parent
        if node is not None and (not found or found[-1] != node):
            found.append(node)
    return found


def getters(index: ClassIndex) -> dict[str, tuple[tuple[str, ...], str]]:
    """Methods whose body is one `return` of an expression (`int size() const { return n_; }`)."""
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    for name, methods in index.methods.items():
        if len(methods) != 1 or name == index.name:
            continue
        method = methods[0]
        body = method.node.child_by_field_name("body")
        statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
        if len(statements) == 1 and statements[0].type == "return_statement" and statements[0].named_children \
                and all(default is None for _, default in method.params):
            expression = statements[0].named_children[0]
            if not _assigned_members(method.data, expression, index.members) and expression.type != "call_expression":
                found[name] = (tuple(p for p, _ in method.params), _text(method.data, expression))
    return found


def member_env(model: ProgramModel, function: Node, depth: int, parent: ConstEnv) -> ConstEnv | None:
    """`parent` with the members of the object a method is first called on (and the class's
    getters), where `function` is a method and that object's state is understood."""
    class_name = method_class(model.data, function)
    name = _definition_name(model.data, function) if class_name is not None else None
    if class_name is None or name is None or name == class_name or name.startswith("~"):
        return None
    models, headers = model.class_sources(class_name, name)
    sources = [(m.data, m.tree.root_node) for m in models] + headers
    index = index_class(class_name, sources)
    if index is None or not index.members:
        return None
    envs = {id(m.data): m.env for m in models}
    for caller_model in models:
        for call in _member_calls(caller_model.data, caller_model.tree.root_node, name):
            function_node = call.child_by_field_name("function")
            obj = function_node.child_by_field_name("argument") if function_node is not None \
                and function_node.type == "field_expression" else None
            if obj is None or obj.type != "identifier":
                continue
            caller = caller_model.enclosing_function(call.start_byte)
            if caller is None or method_class(caller_model.data, caller) == class_name:
                continue
            runner = _Runner(index, caller_model.env, envs)
            state = object_state(caller_model, index, runner, caller, _text(caller_model.data, obj),
                                 call.start_byte, depth + 1)
            if state is None:
                return None
            for member in index.members:
                if member not in state.values and member not in state.unknown:
                    state.unknown[member] = f"is not set by `{class_name}`'s constructor"
            return ConstEnv(parent=parent, constants=dict(state.values), unknown=dict(state.unknown),
                            assumed=set(state.assumed), pure_functions=getters(index))
    return None


def passed_fields(argument: str, parameter: str, env: ConstEnv, values: dict[str, Value | tuple[int, int, int]]
                  ) -> set[str]:
    """A struct passed to a function by value or by address (`run(cfg)`, `run(&cfg)`) carries
    the fields its caller set (`cfg.n = 1024;`): each folded one is bound in `values` under the
    parameter's path (`p.n`, read as `p.n` and `p->n`). Returns the paths that rest on assumed
    program arguments."""
    name = argument.strip().lstrip("&").strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return set()
    prefix = name + "."
    paths = {path for scope in env.chain() for path in (*scope.constants, *scope.unknown) if path.startswith(prefix)}
    assumed: set[str] = set()
    for path in sorted(paths):
        with ReadsApart() as reads:
            value, _ = try_evaluate(path, env)
        if isinstance(value, (int, float)):
            key = parameter + path[len(name):]
            values[key] = value
            if reads.seen:
                assumed.add(key)
    return assumed


@dataclass(frozen=True)
class DeclaredStruct:
    """A struct `function` declares with known fields: from a call that returns one (`Inputs in =
    read_cli(argc, argv);`: what the callee's local held at its `return`) or an aggregate
    initialiser (`Params p = {1024, 8};`)."""

    end: int  # where the declaration ends
    name: str
    fields: dict[str, Value]
    assumed: frozenset[str]


def _returned_fields(model: ProgramModel, callee: str, depth: int) -> tuple[dict[str, Value], set[str]] | None:
    """The folded fields of the local struct that `callee` (in this file or another source of the
    folder) fills and returns as its last statement (`Inputs in; in.lookups = 17000000; ...;
    return in;`), as its first caller's arguments leave them."""
    defining = model.defining_model(callee)
    definition = defining._plain_definitions.get(callee) if defining is not None else None
    body = definition.child_by_field_name("body") if definition is not None else None
    statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    if defining is None or not statements or statements[-1].type != "return_statement":
        return None
    returned = statements[-1].named_children[0] if statements[-1].named_children else None
    if returned is None or returned.type != "identifier" or body is None or _returns_early(body):
        return None
    env = defining.env_at(statements[-1].start_byte, depth + 1)
    prefix = _text(defining.data, returned) + "."
    fields: dict[str, Value] = {}
    assumed: set[str] = set()
    for path in sorted({p for scope in env.chain() for p in (*scope.constants, *scope.unknown) if p.startswith(prefix)}):
        with ReadsApart() as reads:
            value, _ = try_evaluate(path, env)
        if isinstance(value, (int, float)):
            fields[path[len(prefix):]] = value
            if reads.seen:
                assumed.add(path[len(prefix):])
    return fields, assumed


def _returns_early(body: Node) -> bool:
    """Whether a `return` other than the last statement may end the function."""
    stack = list(body.named_children[:-1])
    while stack:
        node = stack.pop()
        if node.type == "return_statement":
            return True
        if node.type not in ("lambda_expression", "function_definition"):
            stack.extend(node.named_children)
    return False


def declared_fields_env(model: ProgramModel, function: Node, offset: int, depth: int, parent: ConstEnv,
                        cache: dict[tuple[int, int], list[DeclaredStruct]]) -> ConstEnv:
    """`parent` with the fields of the structs `function` declared before `offset` (`DeclaredStruct`:
    `Inputs in = read_cli(argc, argv);` binds `in.lookups`), those whose address is not taken since."""
    key = (function.start_byte, depth)
    if key not in cache:
        cache[key] = []  # (the callee's caller is this function: not followed again)
        cache[key] = _declared_structs(model, function, depth)
    constants: dict[str, str | Value] = {}
    assumed: set[str] = set()
    for found in cache[key]:
        if found.end <= offset and not re.search(rb"&\s*" + re.escape(found.name.encode()) + rb"\b",
                                                    model.data[found.end:offset]):
            constants.update({f"{found.name}.{field}": value for field, value in found.fields.items()})
            assumed |= {f"{found.name}.{field}" for field in found.assumed}
    return ConstEnv(parent=parent, constants=constants, assumed=assumed) if constants else parent


def _declared_structs(model: ProgramModel, function: Node, depth: int) -> list[DeclaredStruct]:
    body = function.child_by_field_name("body")
    found: list[DeclaredStruct] = []
    for statement in body.named_children if body is not None else ():
        if statement.type != "declaration":  # (straight-line declarations of the body only)
            continue
        for declarator in statement.children_by_field_name("declarator"):
            name = declarator.child_by_field_name("declarator")
            value = declarator.child_by_field_name("value")
            callee = value.child_by_field_name("function") if value is not None and value.type == "call_expression" else None
            if declarator.type != "init_declarator" or name is None or name.type != "identifier":
                continue
            if value is not None and value.type == "initializer_list":
                fields = _aggregate_fields(model, statement, value, depth)
                if fields:
                    found.append(DeclaredStruct(statement.end_byte, _text(model.data, name), fields[0], frozenset(fields[1])))
                continue
            if value is None or callee is None or callee.type != "identifier":
                continue
            made = _made_vector(model, _text(model.data, callee), value, depth)
            if made is not None:
                if made[0]:
                    found.append(DeclaredStruct(statement.end_byte, _text(model.data, name), made[0], frozenset(made[1])))
                continue
            returned = _returned_fields(model, _text(model.data, callee), depth)
            if returned is not None and returned[0]:
                found.append(DeclaredStruct(statement.end_byte, _text(model.data, name), returned[0],
                                            frozenset(returned[1])))
    return found


def _aggregate_fields(model: ProgramModel, statement: Node, value: Node, depth: int
                      ) -> tuple[dict[str, Value], set[str]] | None:
    """`Params p = {128, 3, 480};` (or `Params p{...}`) of a struct whose members the file or
    its headers declare: the folded elements, by member in declaration order."""
    type_words = [w for w in re.findall(r"[A-Za-z_]\w*", _text(model.data, statement.child_by_field_name("type")))
                  if w not in ("const", "struct", "static", "constexpr")]
    elements = [e for e in value.named_children if e.type != "comment"]
    if len(type_words) != 1 or any(e.type in ("initializer_list", "initializer_pair", "field_designator") for e in elements):
        return None
    members: list[str] = list(vector_members(type_words[0]))
    for data, declarations in model.class_fields(type_words[0])[:1] if not members else ():
        for declaration in declarations:
            if declaration.child_by_field_name("default_value") is not None or "static" in _text(data, declaration).split():
                return None
            for declarator in declaration.children_by_field_name("declarator"):
                inner: Node | None = declarator
                while inner is not None and inner.type != "field_identifier":
                    inner = inner.child_by_field_name("declarator")
                if inner is None or declarator.type == "function_declarator":
                    return None
                members.append(_text(data, inner))
    if not members or len(elements) > len(members):
        return None
    return _folded_members(model, members, elements, depth)


def _folded_members(model: ProgramModel, members: list[str], elements: list[Node], depth: int
                    ) -> tuple[dict[str, Value], set[str]]:
    """The members given by `elements` in order, those that fold; `assumed`: those read from data."""
    fields: dict[str, Value] = {}
    assumed: set[str] = set()
    for member, element in zip(members, elements, strict=False):
        value_folded, read = _fold(model, element, depth + 1)
        if isinstance(value_folded, (int, float)):
            fields[member] = value_folded
            if read:
                assumed.add(member)
    return fields, assumed


# CUDA's built-in vector types (`int3`, `float4`, `uint2`, ...), which no header of the program declares
_VECTOR_TYPE = re.compile(r"(?:u?(?:char|short|int|long|longlong)|float|double)([1-4])")
_VECTOR_MAKER = re.compile(r"make_((?:u?(?:char|short|int|long|longlong)|float|double)[1-4])")


def vector_members(type_name: str) -> tuple[str, ...]:
    """The members of a CUDA vector type (`int3`: x, y, z); () for any other type."""
    match = _VECTOR_TYPE.fullmatch(type_name)
    return ("x", "y", "z", "w")[:int(match.group(1))] if match else ()


def _made_vector(model: ProgramModel, callee: str, call: Node, depth: int
                 ) -> tuple[dict[str, Value], set[str]] | None:
    """`make_int3(v, v, 1)`: its members from the arguments that fold; None for another call."""
    match = _VECTOR_MAKER.fullmatch(callee)
    arguments = call.child_by_field_name("arguments")
    if match is None or arguments is None:
        return None
    elements = [a for a in arguments.named_children if a.type != "comment"]
    members = list(vector_members(match.group(1)))
    if len(elements) != len(members):
        return None
    return _folded_members(model, members, elements, depth)


_following: set[tuple[int, int, str]] = set()  # objects whose state is being followed (this thread's walk)
_GETTER_CALL = re.compile(rb"\b([A-Za-z_]\w*)\s*(?:\.|->)\s*[A-Za-z_]\w*\s*\(\s*\)")


ObjectPaths = dict[tuple[int, int], tuple[list[tuple[str, ClassIndex]], dict[object, object]]]


def object_paths_env(model: ProgramModel, function: Node, offset: int, depth: int, parent: ConstEnv,
                     cache: ObjectPaths) -> ConstEnv:
    """`parent` with the state of the objects `function` declares and calls a getter of
    (`Grid grid(n); int cells = grid.size();`, `p->count()`), as it stands at `offset`:
    `grid.size` and each member (`grid.n_`) by path."""
    key = (function.start_byte, depth)
    if key not in cache:
        cache[key] = ([], {})  # (the objects' constructors may be reached again while this is built)
        cache[key] = (_objects_declared(model, function), {})
    objects, memo = cache[key]
    constants: dict[str, str | Value] = {}
    assumed: set[str] = set()
    for name, index in objects:
        following = (id(model), function.start_byte, name)
        if following in _following:  # (folding its constructor's arguments: the object is not yet built)
            continue
        _following.add(following)
        try:
            state = object_state(model, index, _Runner(index, model.env, {id(model.data): model.env}),
                                 function, name, offset, depth, memo)
        finally:
            _following.discard(following)
        if state is None:
            continue
        members = ConstEnv(parent=model.env, constants=dict(state.values), unknown=dict(state.unknown))
        getters_key = ("getters", name)
        found = memo.get(getters_key)
        if not isinstance(found, dict):
            found = memo[getters_key] = getters(index)
        for getter, (params, expression) in found.items():
            if not params:
                with ReadsApart() as reads:
                    value, _ = try_evaluate(expression, members)
                if isinstance(value, (int, float)):
                    constants[f"{name}.{getter}"] = value
                    if reads.seen or set(re.findall(r"\w+", expression)) & state.assumed:
                        assumed.add(f"{name}.{getter}")
        for member, value in state.values.items():
            constants[f"{name}.{member}"] = value
            if member in state.assumed:
                assumed.add(f"{name}.{member}")
    return ConstEnv(parent=parent, constants=constants, assumed=assumed) if constants else parent


def _objects_declared(model: ProgramModel, function: Node) -> list[tuple[str, ClassIndex]]:
    """The objects of `function` a getter is called on, whose class the program defines."""
    body = function.child_by_field_name("body")
    if body is None:
        return []
    found: list[tuple[str, ClassIndex]] = []
    indexes: dict[str, ClassIndex | None] = {}
    for name in dict.fromkeys(m.group(1).decode("latin-1")
                              for m in _GETTER_CALL.finditer(model.data, body.start_byte, body.end_byte)):
        declarator = _declaration_of(model.data, body, name, body.end_byte)
        declaration = declarator.parent if declarator is not None else None
        while declaration is not None and declaration.type != "declaration":
            declaration = declaration.parent
        words = [w for w in re.findall(r"[A-Za-z_]\w*", re.sub(r"<.*", "", _text(model.data, declaration.child_by_field_name("type"))))
                 if w not in ("const", "struct", "class")] if declaration is not None else []
        if len(words) != 1:
            continue
        class_name = words[0].rsplit("::", 1)[-1]
        if class_name not in indexes:
            models, headers = model.class_sources(class_name, class_name)
            indexes[class_name] = index_class(class_name, [(m.data, m.tree.root_node) for m in models] + headers)
        index = indexes[class_name]
        if index is not None and index.members:
            found.append((name, index))
    return found
