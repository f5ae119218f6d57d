"""Host-side types of the variables an OpenMP region uses: the enclosing function's parameters
and locals and the file-scope variables, read from the macro-expanded function (`FP (*a)[N]`
with `#define FP float`), and how the region's walker binds them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection

from tree_sitter import Node

from perflsp.analysis.ctype import F32, INT, CType, parse_type
from perflsp.analysis.extents import Extent, leading_name, omp_extent
from perflsp.analysis.finish import Extents
from perflsp.analysis.linear import Linear
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.struct_layout import Layout, declared_struct_name, struct_layout
from perflsp.analysis.unit import AnalysisUnit, HostTypes
from perflsp.analysis.walk_values import Val
from perflsp.analysis.walker import KernelWalker
from perflsp.kernels.consteval import ConstEnv, Value
from perflsp.kernels.definitions import template_arguments
from perflsp.kernels.program import function_around


def host_types(unit: AnalysisUnit, function: Node | None, offset: int, deduce: bool = True,
               named: tuple[str, ...] | None = None) -> HostTypes:
    """Types of the enclosing function's parameters and locals (and file-scope variables),
    read from the macro-expanded function (`FP (*a)[N]` with `#define FP float`). A function
    template's type parameters take the type of its first instantiating call in this file
    (`deduce`; without it, or with none found, float), or those of the instantiation `named`."""
    cache = unit.host_types
    span = (function.start_byte, function.end_byte) if function is not None else function_around(unit.data, offset)
    key = (span[0] if span is not None else -1, named)
    if key in cache:
        return cache[key]
    out: HostTypes = {}
    _collect_host_types(unit.type_aliases, unit, [n for n in unit.tree.root_node.named_children if n.type == "declaration"], unit.data, out)
    text = unit.data[span[0] : span[1]].decode("utf-8", errors="replace") if span is not None else None
    if text is None:
        # a fragment `#include`d inside a function of another file (`{ #include "step.h" }`):
        # its variables are that function's
        text = unit.model.including_function_text()
        function = None
    aliases = dict(unit.type_aliases)
    instantiated = template_types(unit, function, named) if deduce and function is not None else {}
    for parameter in unit.model.template_type_parameters(offset):
        # `T *a` in `template <class T> void Stream<T>::copy()`: instantiated elsewhere
        found = instantiated.get(parameter)
        aliases.setdefault(parameter, found[0][1] if found else F32)
    class_name = _enclosing_class(unit, function, text)
    if class_name is not None:
        # a method's members are in scope (`a[i] = b[i] + scalar * c[i]` over `T *a;` members,
        # allocated in the constructor): typed as declared; its locals below shadow them
        out.update(class_member_types(unit, class_name, aliases))
    if text is not None:
        expanded = unit.model.expand(text)
        fn: Node | None
        if expanded != text or function is None:
            data = expanded.encode("utf-8", errors="replace")
            parsed = unit.model.parse_function(data)
            fn = parsed.node if parsed is not None else None
        else:
            data, fn = unit.data, function
        if fn is not None:
            nodes: list[Node] = []
            declarator = fn.child_by_field_name("declarator")
            while declarator is not None and declarator.type != "function_declarator":
                declarator = declarator.child_by_field_name("declarator")
            params = declarator.child_by_field_name("parameters") if declarator is not None else None
            if params is not None:
                nodes.extend(p for p in params.named_children if p.type.endswith("parameter_declaration"))
            stack = [fn.child_by_field_name("body")]
            while stack:
                n = stack.pop()
                if n is None:
                    continue
                for child in n.named_children:
                    if child.type == "declaration":
                        nodes.append(child)
                    elif child.type not in ("function_definition", "lambda_expression"):
                        stack.append(child)
            _collect_host_types(aliases, unit, nodes, data, out)
            # `T (*a)[N] = ...` parses as an expression in the grammar: read it from the text
            for m in _POINTER_TO_ARRAY.finditer(data.decode("utf-8", errors="replace")):
                base = parse_type(m.group(1), aliases)
                dims = tuple(_fold_float(unit, d) for d in re.findall(r"\[([^\]]*)\]", m.group(3)))
                out[m.group(2)] = (CType(base.kind, base.size_bytes, base.lanes, 1 + len(dims), base.wide), (0.0, *dims))
    if deduce:
        cache[key] = out  # (a caller's types read for a deduction, without its own: not kept)
    return out


def class_member_types(unit: AnalysisUnit, class_name: str, aliases: dict[str, CType]) -> HostTypes:
    """The types of the members the class `class_name` declares (in this file or its headers)."""
    out: HostTypes = {}
    for data_of_class, fields in unit.model.class_fields(class_name):
        _collect_host_types(aliases, unit, fields, data_of_class, out)
    return out


def _enclosing_class(unit: AnalysisUnit, function: Node | None, text: str | None) -> str | None:
    """The class whose method `function` (or the function `text`) is: the class around an
    inline definition, or the scope of `Stream<T>::copy()`."""
    node = function.parent if function is not None else None
    while node is not None:
        if node.type in ("class_specifier", "struct_specifier"):
            name = node.child_by_field_name("name")
            return unit.data[name.start_byte : name.end_byte].decode("utf-8", errors="replace") if name else None
        node = node.parent
    if text is None:
        return None
    head = text.split("{", 1)[0]
    m = _METHOD_SCOPE.search(head)
    return m.group(1) if m is not None else None


_METHOD_SCOPE = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>(){};]*>)?\s*::\s*~?[A-Za-z_]\w*\s*\(")
_POINTER_TO_ARRAY = re.compile(r"\b([A-Za-z_]\w*)\s*\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*((?:\[[^\]]*\]\s*)+)")


def _fold_float(unit: AnalysisUnit, text: str) -> float:
    value = unit.model.evaluate(text)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _collect_host_types(aliases: dict[str, CType], unit: AnalysisUnit, nodes: list[Node], data: bytes,
                        out: HostTypes) -> None:
    def text(node: Node | None) -> str:
        return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace") if node is not None else ""

    for node in nodes:
        type_text = text(node.child_by_field_name("type"))
        base = parse_type(type_text, aliases)
        vector = re.search(r"(?:vector|unique_ptr|shared_ptr|array)\s*<\s*([^,>]+)", type_text)
        if vector:
            inner = parse_type(vector.group(1), aliases)
            base = CType(inner.kind, inner.size_bytes, inner.lanes, inner.pointer + 1, inner.wide)
        deduced = re.fullmatch(r"(?:const\s+)?auto(?:\s+const)?", type_text.strip()) is not None
        for declarator in node.children_by_field_name("declarator"):
            shape = _declarator_shape(unit, declarator, text)
            if shape is None:
                continue
            name, stars, dims = shape
            typed = _initialiser_type(text(declarator.child_by_field_name("value")), aliases) if deduced else None
            if deduced and typed is None:
                continue
            own = typed or base
            ctype = CType(own.kind, own.size_bytes, own.lanes, own.pointer + stars + len(dims), own.wide)
            out[name] = (ctype, dims if stars == 0 else (0.0, *dims))


# what an `auto` variable's initialiser says it is: `static_cast<Atom *>(std::malloc(...))`,
# `(float *)malloc(...)`, `new float[n]`
_CAST = re.compile(r"(?:static_cast|reinterpret_cast)\s*<\s*([^<>]+?\*+)\s*>|\(\s*((?:const\s+)?[\w:]+\s*\*+)\s*\)")
_NEW = re.compile(r"new\s+([\w:]+)\s*\[")


def _initialiser_type(value: str, aliases: dict[str, CType]) -> CType | None:
    """The pointer type an `auto` declaration's initialiser names by a cast or `new T[n]`."""
    value = value.strip()
    cast = _CAST.match(value)
    if cast is not None:
        found = parse_type(cast.group(1) or cast.group(2), aliases)
        return found if found.kind != "unknown" and found.pointer else None
    new = _NEW.match(value)
    if new is not None:
        element = parse_type(new.group(1), aliases)
        return None if element.kind == "unknown" else CType(element.kind, element.size_bytes, element.lanes,
                                                              element.pointer + 1, element.wide)
    return None


def _declarator_shape(unit: AnalysisUnit, node: Node | None, text: Callable[[Node | None], str]
                      ) -> tuple[str, int, tuple[float, ...]] | None:
    """(name, pointer depth, array dimensions) of a declarator: `*p`, `a[M][N]`, `(*a)[N]`."""
    stars = 0
    dims: list[float] = []
    while node is not None:
        kind = node.type
        if kind in ("identifier", "field_identifier"):
            return text(node), stars, tuple(dims)
        if kind in ("pointer_declarator", "abstract_pointer_declarator"):
            stars += 1
        elif kind == "array_declarator":
            size = node.child_by_field_name("size")
            value = unit.model.evaluate(text(size)) if size is not None else None
            dims.insert(0, float(value) if isinstance(value, (int, float)) else 0.0)
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type not in ("type_qualifier", "comment")), None)
        node = nxt
    return None


def bind_host_variables(unit: AnalysisUnit, walker: KernelWalker, host_types: HostTypes,
                        host_env: ConstEnv, text: str, function: Node | None = None,
                        named: tuple[str, ...] | None = None) -> Extents:
    """Bind the host variables `text` (the region's body) names; returns the arrays' extents.
    An array that is a parameter of `function` (the function around the region) without a
    `map` section or allocation of its own has the extent of what its callers pass."""
    extents: Extents = {}
    instantiated: dict[str, list[float]] | None = None

    def fold(name: str) -> Value | None:
        """The host value of `name`, with the function's template values where it needs them
        (`auto iters = size / CHANNELS;` in `template <int CHANNELS> void f(...)`)."""
        nonlocal instantiated
        if function is None:
            return unit.model.evaluate(name, host_env)
        # the function's template values: those of the instantiation judged, else of each call
        # (said where they differ), not only the first caller's that `host_env` holds
        # (`ProgramModel.arguments_passed`)
        if instantiated is None:
            instantiated = template_values(unit, function, named)
        if name in instantiated:
            _say_instantiations(walker, instantiated, [name])
            return instantiated[name][0]
        source = _local_text(host_env, name)
        used = [n for n in instantiated if source is not None and re.search(rf"\b{re.escape(n)}\b", source)]
        if source is not None and used:
            value = unit.model.evaluate(source, unit.model.scoped({n: instantiated[n][0] for n in used}, host_env))
            if value is not None:
                _say_instantiations(walker, instantiated, used)
                return value
        return unit.model.evaluate(name, host_env)

    field_reads: dict[str, set[str]] = {}  # `p.n`, `q->n` (not a method call): p -> {n}
    for base, field in _FIELD_READ.findall(text):
        field_reads.setdefault(base, set()).add(field)
    for name in sorted(set(re.findall(r"[A-Za-z_]\w*", text))):
        if name not in host_types:
            value = fold(name)
            if isinstance(value, (int, float)):
                walker.bind(name, Val(INT if float(value).is_integer() else F32, float(value), Linear.constant(float(value))))
                continue
            values = (instantiated or {}).get(name)
            if values:
                walker.bind(name, Val(INT, values[0], Linear.constant(values[0]), static=True))
                _say_instantiations(walker, instantiated or {}, [name])
            continue
        ctype, dims = host_types[name]
        if ctype.pointer:
            walker.bind(name, Val(ctype, root=name, space="global", dims=dims if len(dims) > 1 else ()))
            _bind_folded_fields(unit, walker, name, field_reads.get(name, ()), host_env)
            elem = ctype.size_bytes if ctype.kind not in ("unknown", "struct") else 4
            layout = _host_struct_layout(unit, walker, name, function) if ctype.kind == "struct" else None
            if layout is not None:
                walker.layouts[name] = layout
                elem = layout.size_bytes
            if dims and all(dims):
                extents[name] = (elem * math.prod(dims), False)
            else:
                extent = omp_extent(unit, name, elem)
                if extent.bytes is None and function is not None:
                    extent = _passed_extent(unit, function, name, elem) or extent
                extents[name] = (extent.bytes, extent.host_memory)
            continue
        value = fold(name)
        if isinstance(value, (int, float)):
            walker.bind(name, Val(ctype, float(value), Linear.constant(float(value))))
        else:
            walker.bind(name, Val(ctype, None, Linear(const_known=False)))
            _bind_folded_fields(unit, walker, name, field_reads.get(name, ()), host_env)
    return extents


def _host_struct_layout(unit: AnalysisUnit, walker: KernelWalker, name: str, function: Node | None) -> Layout | None:
    """The layout of the struct a host array of the function around the region holds."""
    if function is None:
        return None
    text = unit.data[function.start_byte : function.end_byte].decode("utf-8", errors="replace")
    struct_name = declared_struct_name(text, name)
    return struct_layout(unit.model, struct_name, walker.aliases) if struct_name else None


_FIELD_READ = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\.|->)\s*([A-Za-z_]\w*)\b(?!\s*\()")


def _bind_folded_fields(unit: AnalysisUnit, walker: KernelWalker, name: str, read: Collection[str],
                        host_env: ConstEnv) -> None:
    """`p.n` (`p->n`) in a region, where the host code set `p.n = 1000;` (or a caller passed the
    struct: `kernels.objects.passed_fields`): the field holds that value; other fields stay unread."""
    fields: dict[str, Val] = {}
    for field in sorted(read):
        if not host_env.binds(f"{name}.{field}"):
            continue
        value = unit.model.evaluate(f"{name}.{field}", host_env)
        if isinstance(value, (int, float)):
            ctype = INT if float(value).is_integer() else F32
            fields[field] = Val(ctype, float(value), Linear.constant(float(value)))
    if fields:
        walker.members[name] = fields


def _local_text(env: ConstEnv, name: str) -> str | None:
    """The text a local of the host code was set to (`output_size / CHANNELS`), if one."""
    scope: ConstEnv | None = env
    while scope is not None:
        if name in scope.unknown:
            return None
        source = scope.constants.get(name)
        if source is not None:
            return source if type(source) is str and not source.startswith("{") else None
        scope = scope.parent
    return None


def _say_instantiations(walker: KernelWalker, instantiated: dict[str, list[float]], names: list[str]) -> None:
    for name in names:
        values = instantiated[name]
        if len(values) > 1:
            walker.assume(assumed(NoteKind.TEMPLATE_ARGUMENT, f"template value `{name}` differs between the instantiations "
                                  f"({', '.join(f'{v:g}' for v in values)}): assumed {values[0]:g}, the first",
                                  subject=name, value=values[0]))


def template_values(unit: AnalysisUnit, function: Node, named: tuple[str, ...] | None = None) -> dict[str, list[float]]:
    """The values a function template's value parameters take (`template <int R> void f()`
    called as `f<3>(...)`): by name, the distinct values of its calls in this file with
    explicit template arguments, in the order of the calls (or the parameter's default); those
    of the instantiation `named` (its template arguments) when it is this template's."""
    template = function.parent
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
    parameters = template.child_by_field_name("parameters") if template is not None and template.type == "template_declaration" else None
    if parameters is None or name_node is None:
        return {}
    listed = [p for p in parameters.named_children if p.type != "comment"]
    wanted: dict[int, tuple[str, str | None]] = {}  # position -> (name, default text)
    for position, parameter in enumerate(listed):
        if parameter.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue  # (a type parameter)
        ident = parameter.child_by_field_name("declarator")
        default_node = parameter.child_by_field_name("default_value")
        if ident is not None and ident.type == "identifier":
            wanted[position] = (unit.ctx.text(ident), unit.ctx.text(default_node) if default_node is not None else None)
    found: dict[str, list[float]] = {}
    if not wanted:
        return found
    if named is not None and len(named) == len(listed):
        for position, (name, _) in wanted.items():
            value = unit.model.evaluate(named[position])
            if isinstance(value, (int, float)):
                found[name] = [float(value)]
        return found
    callee_name = unit.ctx.text(name_node).split("::")[-1]
    given: list[tuple[int, list[str]]] = []  # (where a call stands, its explicit template arguments)
    for call in unit.model.calls_to(callee_name):
        explicit = template_arguments(call.child_by_field_name("function"))
        if explicit is not None:  # (else deduced from the call's arguments: no value parameters given)
            given.append((call.start_byte, [unit.ctx.text(a) for a in explicit]))
    given += [(m.site.start_byte, list(m.template_arguments)) for m in unit.model.macro_calls_to(callee_name)
              if m.template_arguments is not None]  # (`#define RUN(n) run<n>(x)`, then `RUN(64);`)
    for start, texts in sorted(given, key=lambda g: g[0]):
        if function.start_byte <= start < function.end_byte:
            continue  # (a recursive call)
        for position, (name, default) in wanted.items():
            text = texts[position] if position < len(texts) else default
            value = unit.model.fold_at(start, text) if text is not None else None
            if isinstance(value, (int, float)) and float(value) not in found.setdefault(name, []):
                found[name].append(float(value))
    return found


def template_types(unit: AnalysisUnit, function: Node | None, named: tuple[str, ...] | None = None
                   ) -> dict[str, list[tuple[str, CType]]]:
    """The types a function template's type parameters take in the calls of this file that
    instantiate it: by name, the distinct (text, type) of the explicit template argument
    (`run<double>(x, n)`), else deduced from the call's argument for a parameter declared with
    it (`run(x, n)` with `double *x` for `T *a`), in the order of the calls; those of the
    instantiation `named` (its template arguments) when it is this template's."""
    template = function.parent if function is not None else None
    if function is None or template is None or template.type != "template_declaration":
        return {}
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
    parameters = template.child_by_field_name("parameters")
    if parameters is None or name_node is None or declarator is None:
        return {}
    listed = [p for p in parameters.named_children if p.type != "comment"]
    wanted: dict[int, str] = {}  # position -> name
    for position, parameter in enumerate(listed):
        if parameter.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            ident = next((c for c in parameter.named_children if c.type == "type_identifier"), None)
            if ident is not None:
                wanted[position] = unit.ctx.text(ident)
    if not wanted:
        return {}
    if named is not None and len(named) == len(listed):
        return {name: [(named[position], parse_type(named[position], unit.type_aliases))] for position, name in wanted.items()}
    declared = _typed_parameters(unit, declarator, set(wanted.values()))
    found: dict[str, list[tuple[str, CType]]] = {}
    for call in unit.model.calls_to(unit.ctx.text(name_node).split("::")[-1]):
        if function.start_byte <= call.start_byte < function.end_byte:
            continue  # (a recursive call)
        given = [unit.ctx.text(a) for a in template_arguments(call.child_by_field_name("function")) or []]
        arguments = call.child_by_field_name("arguments")
        passed = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        caller_types: HostTypes | None = None
        for position, name in wanted.items():
            typed: tuple[str, CType] | None = None
            if position < len(given):
                text = unit.model.expand(given[position]).strip() or given[position]
                typed = (text, parse_type(text, unit.type_aliases))
            elif len(passed) == len(declared):
                for slot, argument in zip(declared, passed, strict=True):
                    if slot is None or slot[0] != name or argument.type != "identifier":
                        continue
                    if caller_types is None:
                        caller = unit.model.enclosing_function(call.start_byte)
                        caller_types = host_types(unit, caller, call.start_byte, deduce=False) if caller is not None else {}
                    ctype = caller_types.get(unit.ctx.text(argument), (None, ()))[0]
                    if ctype is not None and ctype.pointer >= slot[1] and ctype.kind in ("f64", "f32", "f16", "int", "bool"):
                        base = CType(ctype.kind, ctype.size_bytes, ctype.lanes, ctype.pointer - slot[1], ctype.wide)
                        typed = (_type_name(base), base)
                        break
            if typed is not None and typed[1].kind != "unknown" and all(t[1] != typed[1] for t in found.get(name, [])):
                found.setdefault(name, []).append(typed)
    return found


def _typed_parameters(unit: AnalysisUnit, declarator: Node, names: set[str]) -> list[tuple[str, int] | None]:
    """For each parameter of a function, the type parameter among `names` it is declared with and
    its pointer depth (`T *a`, `const T &x`; not `vector<T>`, `T2`, nor `T::value_type`)."""
    declared: list[tuple[str, int] | None] = []
    function_parameters = declarator.child_by_field_name("parameters")
    for p in function_parameters.named_children if function_parameters is not None else []:
        if p.type == "comment":
            continue
        type_text = unit.ctx.text(p.child_by_field_name("type"))
        words = [w for w in re.findall(r"[A-Za-z_]\w*", type_text) if w not in ("const", "volatile", "restrict", "__restrict__")]
        rest = unit.ctx.text(p.child_by_field_name("declarator"))
        if len(words) == 1 and words[0] in names and "<" not in type_text and "::" not in type_text \
                and "[" not in rest and "(" not in rest:
            declared.append((words[0], rest.count("*")))
        else:
            declared.append(None)
    return declared


def _type_name(ctype: CType) -> str:
    base = {"f64": "double", "f32": "float", "f16": "half", "bool": "bool"}.get(ctype.kind) \
        or {1: "char", 2: "short", 8: "long"}.get(ctype.size_bytes, "int")
    return base + " " + "*" * ctype.pointer if ctype.pointer else base


def _passed_extent(unit: AnalysisUnit, function: Node, name: str, elem_bytes: float) -> Extent | None:
    """The largest extent among the arrays the callers of `function` in this file pass for its
    parameter `name` (one level: `run(h_a, n)` with `h_a` mapped or allocated in `main`)."""
    best: Extent | None = None
    for node in unit.model.caller_argument_nodes(function, name):
        passed = leading_name(unit.ctx.text(node))
        if passed is None or passed == name:
            continue
        extent = omp_extent(unit, passed, elem_bytes)
        if extent.bytes is not None and (best is None or best.bytes is None or extent.bytes > best.bytes):
            best = extent
    return best
