"""Host helpers that compute a size in a loop, run on their known arguments:

    int getLevels(unsigned int length, unsigned int *levels) {
        for (unsigned int i = 0; i < 24; ++i)
            if (length == (1U << i)) { *levels = i; return 0; }
        return 1;
    }

`getLevels(1024, &levels)` returns 0 and leaves 10 in `levels`; `ArgPos("-size", argc, argv)`
scanning the program's arguments with `strcmp` returns the index it finds. A run is bounded
(`MAX_STEPS` statements, then it gives up) and reads only integer, floating-point and string
values: locals, value parameters, what the caller's `&x` arguments point to (`*p`, `p->n`,
`p[0]`) and the program's arguments; anything else (a write to a global, a call that is not
folded, a `switch`, a `goto`) leaves the call unfolded (`NotConstant`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, NotConstant, Value, assumed_reads, evaluate, note_assumed_read
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import function_definitions
from perflsp.kernels.sample_options import RETURNING, WRITING, returned, written
from perflsp.kernels.sibling_functions import sibling_function

MAX_STEPS = 4096  # statements one run may execute (a helper's loop of a few thousand passes)
MAX_DEPTH = 3  # helpers a run may call in turn (each with its own budget share)

_FLOATING = re.compile(r"\b(float|double|half|__half)\b")
_ASSIGN_OPS = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "<<=": "<<", ">>=": ">>",
               "&=": "&", "|=": "|", "^=": "^"}


_ENDS_PROGRAM = {"exit", "abort", "std::exit", "std::abort", "_exit", "quick_exit"}


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Value | None):
        super().__init__()
        self.value = value


@dataclass
class Outcome:
    """What a run gives: the value returned (None: it falls off the end) and, by pointer
    parameter, what it wrote through it ("" for `*p`, ".n" for `p->n`)."""

    returned: Value | None
    written: dict[str, dict[str, Value]] = field(default_factory=dict)


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def parameters(data: bytes, function: Node, aliases: Mapping[str, str]) -> list[tuple[str, bool, bool]] | None:
    """(name, is a pointer, is of a floating-point type or points to one) of each parameter; None where one is not read
    (an unnamed one, a function pointer, a reference the function may write through)."""
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    if params is None:
        return None
    found: list[tuple[str, bool, bool]] = []
    for parameter in params.named_children:
        if parameter.type == "comment":
            continue
        if parameter.type != "parameter_declaration":
            return None
        inner = parameter.child_by_field_name("declarator")
        pointer = False
        while inner is not None and inner.type in ("pointer_declarator", "reference_declarator",
                                                   "array_declarator"):
            if inner.type == "reference_declarator" and "const" not in _text(data, parameter).split():
                return None  # (a write through it would change the caller's variable unseen)
            pointer = pointer or inner.type != "reference_declarator"
            inner = inner.child_by_field_name("declarator") or next(
                (c for c in inner.named_children if c.type == "identifier"), None)
        if inner is None or inner.type != "identifier":
            return None
        kind = parameter.child_by_field_name("type")
        floating = kind is not None and _is_floating(_text(data, kind), aliases)
        found.append((_text(data, inner), pointer, floating))
    return found


class _Run:
    def __init__(self, data: bytes, env: ConstEnv, pointers: set[str], floating: set[str], steps: int,
                 aliases: Mapping[str, str]):
        self.data = data
        self.aliases = aliases  # a template's parameters, by the types it is called with
        self.env = env  # the run's locals, over the caller's environment (its macros, argv)
        self.pointers = pointers  # pointer parameters that point at the caller's variables
        self.floating = floating  # locals of a floating-point type (the others truncate)
        self.steps = steps
        self.written: dict[str, dict[str, Value]] = {name: {} for name in pointers}

    # -- expressions -------------------------------------------------------------------------

    def _deref_name(self, node: Node) -> str | None:
        """The local name `*p`, `p[0]` or `p->n` of a pointer parameter stands for."""
        if node.type == "pointer_expression":
            argument = node.child_by_field_name("argument")
            operator = node.child_by_field_name("operator")
            if argument is not None and argument.type == "identifier" and operator is not None \
                    and _text(self.data, operator) == "*" and _text(self.data, argument) in self.pointers:
                return "*" + _text(self.data, argument)
        if node.type == "subscript_expression":
            argument = node.child_by_field_name("argument")
            index = node.child_by_field_name("indices") or node.child_by_field_name("index")
            if argument is not None and argument.type == "identifier" and _text(self.data, argument) in self.pointers \
                    and index is not None and _text(self.data, index).strip("[] ") == "0":
                return "*" + _text(self.data, argument)
        if node.type == "field_expression":
            argument = node.child_by_field_name("argument")
            member = node.child_by_field_name("field")
            if argument is not None and argument.type == "identifier" and member is not None \
                    and _text(self.data, argument) in self.pointers:
                return f"{_text(self.data, argument)}.{_text(self.data, member)}"
        return None

    def _spliced(self, node: Node) -> str:
        """The text of `node` with each `*p` / `p->n` of a pointer parameter renamed to the
        local that holds what it points to."""
        parts: list[str] = []
        at = node.start_byte

        def visit(n: Node) -> None:
            nonlocal at
            name = self._deref_name(n)
            if name is not None:
                parts.append(self.data[at : n.start_byte].decode("utf-8", errors="replace"))
                parts.append(_local_key(name))
                at = n.end_byte
                return
            for child in n.named_children:
                visit(child)

        visit(node)
        parts.append(self.data[at : node.end_byte].decode("utf-8", errors="replace"))
        return "".join(parts)

    def value(self, node: Node) -> Value:
        self._tick()
        if node.type in ("assignment_expression", "update_expression", "comma_expression"):
            raise NotConstant("a condition with a side effect")
        return evaluate(self._spliced(node), self.env, strings=True)

    # -- statements --------------------------------------------------------------------------

    def _tick(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise NotConstant(f"a helper's run past {MAX_STEPS} steps")

    def block(self, node: Node) -> None:
        for child in node.named_children:
            if child.type != "comment":
                self.statement(child)

    def statement(self, node: Node) -> None:
        self._tick()
        kind = node.type
        if kind == "compound_statement":
            self.block(node)
        elif kind == "declaration":
            self._declare(node)
        elif kind == "expression_statement":
            for expression in node.named_children:
                self._effect(expression)
        elif kind == "if_statement":
            self._if(node)
        elif kind in ("for_statement", "while_statement", "do_statement"):
            self._loop(node)
        elif kind == "break_statement":
            raise _Break()
        elif kind == "continue_statement":
            raise _Continue()
        elif kind == "return_statement":
            values = [c for c in node.named_children if c.type != "comment"]
            raise _Return(self.value(values[0]) if values else None)
        elif kind != "comment":
            raise NotConstant(f"a helper's `{kind}` is not run")

    def _declare(self, node: Node) -> None:
        kind = node.child_by_field_name("type")
        floating = kind is not None and _is_floating(_text(self.data, kind), self.aliases)
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "identifier":
                name = _text(self.data, declarator)
                self.env.constants.pop(name, None)
                self.env.unknown[name] = "is not initialised"
                (self.floating.add if floating else self.floating.discard)(name)
                continue
            target = declarator.child_by_field_name("declarator")
            value = declarator.child_by_field_name("value")
            if declarator.type != "init_declarator" or target is None or target.type != "identifier" \
                    or value is None or value.type in ("initializer_list", "argument_list"):
                raise NotConstant("a helper's local that is not a plain value")
            name = _text(self.data, target)
            (self.floating.add if floating else self.floating.discard)(name)
            self._set(name, self.value(value))

    def _set(self, name: str, value: Value) -> None:
        if isinstance(value, tuple):
            raise NotConstant("a dim3 in a helper")
        if "." in name:
            pass  # (a field of what a pointer points to: its type is not read, the value kept)
        elif isinstance(value, float) and name not in self.floating:
            value = int(value)  # (C's conversion to an integer type truncates)
        elif isinstance(value, int) and name in self.floating:
            value = float(value)
        self.env.unknown.pop(name, None)
        self.env.constants[_local_key(name)] = value
        if name.startswith("*") or "." in name:
            pointer = name.lstrip("*").split(".", 1)[0]
            self.written[pointer]["" if name.startswith("*") else name[len(pointer):]] = value

    def _target(self, node: Node) -> str:
        """The name an assignment writes: a local or parameter, or what a pointer parameter
        points to; anything else (a global, an array element) is not followed."""
        if node.type == "parenthesized_expression" and node.named_children:
            return self._target(node.named_children[0])
        deref = self._deref_name(node)
        if deref is not None:
            return deref
        name = _text(self.data, node)
        if node.type == "identifier" and (name in self.env.constants or name in self.env.unknown):
            return name
        raise NotConstant(f"a helper writes `{name}`")

    def _current(self, name: str) -> Value:
        return evaluate(_local_key(name), self.env, strings=True)

    def _effect(self, node: Node) -> None:
        kind = node.type
        if kind == "comma_expression":
            for child in node.named_children:
                self._effect(child)
        elif kind == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            operator = node.child_by_field_name("operator")
            if left is None or right is None or operator is None:
                raise NotConstant("an assignment not read")
            name = self._target(left)
            op = _text(self.data, operator)
            value = self.value(right)
            if op != "=":
                if op not in _ASSIGN_OPS:
                    raise NotConstant(f"`{op}` in a helper")
                value = evaluate(f"({_local_key(name)}) {_ASSIGN_OPS[op]} ({value!r})", self.env)
            self._set(name, value)
        elif kind == "update_expression":
            argument = node.child_by_field_name("argument")
            if argument is None:
                raise NotConstant("an update not read")
            name = self._target(argument)
            step = 1 if "++" in _text(self.data, node) else -1
            current = self._current(name)
            if not isinstance(current, (int, float)) or isinstance(current, str):
                raise NotConstant("an update of a value that is not a number")
            self._set(name, current + step)
        elif kind == "parenthesized_expression":
            for child in node.named_children:
                self._effect(child)
        elif kind == "call_expression":
            self._call(node)
        elif kind != "comment":
            self.value(node)  # (a statement of a value: read, nothing kept)

    def _call(self, node: Node) -> None:
        """A call statement (`printf(...)`, `free(p)`): run for nothing where it cannot reach
        the run's locals (no `&local` argument, no pointer parameter handed on)."""
        function = node.child_by_field_name("function")
        if function is not None and _text(self.data, function) in _ENDS_PROGRAM:
            raise NotConstant("a helper that ends the program")
        arguments = node.child_by_field_name("arguments")
        for argument in arguments.named_children if arguments is not None else ():
            text = _text(self.data, argument)
            if (argument.type == "pointer_expression" and text.startswith("&")) \
                    or (argument.type == "identifier" and text in self.pointers):
                raise NotConstant("a helper hands a variable's address on")

    def _if(self, node: Node) -> None:
        condition = node.child_by_field_name("condition")
        inner = [c for c in condition.named_children if c.type != "comment"] if condition is not None else []
        if len(inner) != 1:
            raise NotConstant("an `if` with a declaration in a helper")
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if self.value(inner[0]):
            if consequence is not None:
                self.statement(consequence)
        elif alternative is not None:
            arm = alternative.named_children[-1] if alternative.type == "else_clause" else alternative
            self.statement(arm)

    def _loop(self, node: Node) -> None:
        body = node.child_by_field_name("body")
        condition = node.child_by_field_name("condition")
        if node.type == "for_statement":
            initializer = node.child_by_field_name("initializer")
            if initializer is None:
                initializer = next((c for c in node.named_children if c.type == "declaration"), None)
            if initializer is not None:
                if initializer.type == "declaration":
                    self._declare(initializer)
                else:
                    self._effect(initializer)
        update = node.child_by_field_name("update")
        first = node.type == "do_statement"
        while True:
            if not first and condition is not None:
                test = condition.named_children[0] if condition.type in ("condition_clause", "parenthesized_expression") \
                    and condition.named_children else condition
                if not self.value(test):
                    return
            first = False
            try:
                if body is not None:
                    self.statement(body)
            except _Break:
                return
            except _Continue:
                pass
            if update is not None:
                self._effect(update)
            if node.type == "do_statement" and condition is not None:
                test = condition.named_children[0] if condition.named_children else condition
                if not self.value(test):
                    return
                first = True


def _is_floating(type_text: str, aliases: Mapping[str, str]) -> bool:
    words = re.sub(r"[A-Za-z_]\w*", lambda m: aliases.get(m.group(), m.group()), type_text)
    return _FLOATING.search(words) is not None


def _template_parameters(data: bytes, function: Node) -> list[str]:
    """The type parameters of the template that holds `function` (`template <typename T>`)."""
    holder = function.parent
    params = holder.child_by_field_name("parameters") if holder is not None and holder.type == "template_declaration" else None
    found: list[str] = []
    for param in params.named_children if params is not None else ():
        name = next((c for c in param.named_children if c.type == "type_identifier"), None)
        found.append(_text(data, name) if param.type == "type_parameter_declaration" and name is not None else "")
    return found


def _local_key(name: str) -> str:
    """How a run binds `*p` (what pointer parameter `p` points to): a plain name."""
    return "__pointee_" + name[1:] if name.startswith("*") else name


_active: set[tuple[int, int]] = set()  # runs under way (by data and definition): a recursive call is not run


def run(data: bytes, function: Node, arguments: list[Value | None], pointees: Mapping[int, dict[str, Value]],
        caller: ConstEnv, types: tuple[str, ...] = ()) -> Outcome:
    """Run `function` (a definition in `data`) with these argument values (None: a pointer
    argument, with what it points to in `pointees` by position, "" for `*p`, ".n" for `p->n`),
    over the caller's environment (`types`: a template's explicit arguments, `<unsigned int>`).
    Raises NotConstant where the run is not followed."""
    aliases = dict(zip(_template_parameters(data, function), types))
    params = parameters(data, function, aliases)
    body = function.child_by_field_name("body")
    key = (id(data), function.start_byte)
    if params is None or body is None or len(params) != len(arguments):
        raise NotConstant("a helper whose parameters are not read")
    if key in _active or len(_active) >= MAX_DEPTH:
        raise NotConstant("a helper called from itself")
    env = ConstEnv(parent=caller, type_aliases=aliases)  # (`sizeof(T)`)
    pointers: set[str] = set()
    floating: set[str] = set()
    for position, ((name, pointer, is_float), value) in enumerate(zip(params, arguments, strict=True)):
        if is_float:
            floating.add("*" + name if pointer else name)  # (`float *out`: what it points to)
        if pointer and value is None and position in pointees:
            pointers.add(name)
            for suffix, held in pointees[position].items():
                env.constants[_local_key("*" + name) if not suffix else name + suffix] = held
        elif value is not None:
            env.constants[name] = float(value) if is_float and isinstance(value, int) else value
        elif name not in ("argc", "argv"):
            env.unknown[name] = "is not known to the helper's run"
    runner = _Run(data, env, pointers, floating, MAX_STEPS, aliases)
    returned: Value | None = None
    _active.add(key)
    try:
        runner.block(body)
    except _Return as done:
        returned = done.value
    except (_Break, _Continue):
        raise NotConstant("a `break` outside a loop") from None
    except RecursionError:
        raise NotConstant("a helper nested too deep") from None
    finally:
        _active.discard(key)
    return Outcome(returned, {name: runner.written[name] for name in pointers})


_CASTS = re.compile(r"\([^()]*\)")


def sample_option_call(name: str, texts: list[str], caller: ConstEnv) -> Value:
    """A CUDA samples' command-line helper (`sample_options`) called with `(argc, argv, "name"
    ...)`: what it returns for the program's arguments (a flag's presence, the option's value,
    whether the option was given)."""
    argv = caller.program_arguments()
    option = evaluate(texts[2], caller, strings=True) if len(texts) >= 3 else None
    if argv is None or not isinstance(option, str) or [_CASTS.sub("", t).strip() for t in texts[:2]] != ["argc", "argv"]:
        raise NotConstant(f"`{name}()` of arguments not known")
    if caller.arguments_assumed():
        note_assumed_read()
    return returned(name, argv, option) if name in RETURNING else written(name, argv, option)[0]


class HelperCalls:
    """The host helpers a file's folded expressions call (`n = roundUpLog2(len)`), defined in
    the file or in another source of its folder (one program's): each run on the values the
    call passes, over the file's environment and the program's arguments, its outcome
    memoised by (name, arguments, program arguments)."""

    def __init__(self, ctx: ExtractionContext, env: ConstEnv):
        self.ctx = ctx
        self.env = env  # the file's environment (its macros and constants)
        self.memo: dict[tuple[object, ...], tuple[Value | None, str, bool]] = {}

    def definition(self, name: str) -> tuple[bytes, Node] | None:
        index = self.ctx.function_index
        if index is None:
            index = self.ctx.function_index = function_definitions(self.ctx.tree.root_node, self.ctx.data)
        found = index.get(name)
        if found is not None:
            return self.ctx.data, found
        sibling = sibling_function(self.ctx, name)
        return (sibling[0].data, sibling[1]) if sibling is not None else None

    def __call__(self, name: str, texts: list[str], caller: ConstEnv, types: tuple[str, ...] = ()) -> Value:
        if name in RETURNING or name in WRITING:
            return sample_option_call(name, texts, caller)
        arguments = [None if _CASTS.sub("", text).strip() == "argv" else evaluate(text, caller, strings=True)
                     for text in texts]  # (`argv` itself: the run reads the program's arguments)
        argv = caller.program_arguments()
        key = (name, tuple(arguments), argv, types)
        known = self.memo.get(key)
        if known is None:
            before = assumed_reads()
            try:
                value: Value | None = self._returned(name, arguments, argv, caller.arguments_assumed(), types)
                reason = ""
            except NotConstant as exc:
                value, reason = None, str(exc)
            known = self.memo[key] = (value, reason, assumed_reads() != before)
        elif known[2]:
            note_assumed_read()  # (the run read assumed program arguments)
        if known[0] is None:
            raise NotConstant(known[1])
        return known[0]

    def _returned(self, name: str, arguments: list[Value | None], argv: tuple[str, ...] | None, assumed: bool,
                  types: tuple[str, ...]) -> Value:
        if "::" in name or "." in name or any(isinstance(a, tuple) for a in arguments):
            raise NotConstant(f"calls `{name}()`")
        found = self.definition(name)
        if found is None:
            raise NotConstant(f"calls `{name}()`")
        env = ConstEnv(parent=self.env, argv=argv, argv_assumed=assumed)
        returned = run(found[0], found[1], list(arguments), {}, env, types).returned
        if returned is None:
            raise NotConstant(f"`{name}()` returns no value")
        return returned


def assigned_condition(data: bytes, condition: Node) -> str | None:
    """The text of a condition whose only side effects are plain assignments to variables
    (`(i = ArgPos("-size", argc, argv)) > 0`), each read as the value it assigns (the
    assignment itself is bound apart); None where it has any other."""
    replaced: list[tuple[int, int, str]] = []
    stack = [condition]
    while stack:
        node = stack.pop()
        if node.type == "update_expression":
            return None
        if node.type == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            operator = node.child_by_field_name("operator")
            if left is None or right is None or operator is None or left.type != "identifier" \
                    or _text(data, operator) != "=" or assigned_condition(data, right) != _text(data, right):
                return None
            replaced.append((node.start_byte, node.end_byte, f"({_text(data, right)})"))
            continue
        stack.extend(node.named_children)
    text = _text(data, condition)
    for start, end, value in sorted(replaced, reverse=True):
        text = text[: start - condition.start_byte] + value + text[end - condition.start_byte :]
    return text
