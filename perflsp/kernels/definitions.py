"""Plain function definitions of a syntax tree by simple name (what an OpenMP target region
may call: a function of a `declare target` block, or one the compiler makes a device function
because a region calls it, says nothing like `__device__`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tree_sitter import Node

# nodes whose children may define functions (namespaces, `extern "C" {}`, templates, #if arms)
_CONTAINERS = ("translation_unit", "namespace_definition", "declaration_list", "linkage_specification",
               "template_declaration", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif")
_MAX_NESTING = 6
# a class's body: its member functions (a region in one member calling a static sibling)
_CLASS_BODIES = ("class_specifier", "struct_specifier", "field_declaration_list")


def definition_nodes(root: Node) -> Iterator[tuple[Node, bool]]:
    """Every function definition at file or namespace scope or in a class body: (its node,
    whether it is a member)."""
    stack: list[tuple[Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, in_class = stack.pop()
        for child in node.named_children:
            if child.type == "function_definition":
                yield child, in_class
            elif depth < _MAX_NESTING and (child.type in _CONTAINERS or child.type in _CLASS_BODIES):
                stack.append((child, depth + 1, in_class or child.type in _CLASS_BODIES))


def function_definitions(root: Node, data: bytes) -> dict[str, Node]:
    """Simple name -> the first definition of that name at file or namespace scope, then the
    member functions defined in class bodies under names no such definition has."""
    found: dict[str, Node] = {}
    members: dict[str, Node] = {}
    for node, in_class in definition_nodes(root):
        name = defined_name(node, data)
        if name is not None:
            (members if in_class else found).setdefault(name, node)
    for name, node in members.items():
        found.setdefault(name, node)
    return found


def function_declarator(fn: Node) -> Node | None:
    """The `function_declarator` of a function definition (or declaration): under the pointer
    and reference declarators of its return type (`float *f(...)`, `T &f(...)`: a reference
    declarator names no field, its declarator is its last named child)."""
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator") or (
            declarator.named_children[-1] if declarator.type == "reference_declarator" and declarator.named_children
            else None)
    return declarator


def parameter_names(fn: Node, data: bytes) -> list[str | None]:
    """The names of a function's parameters in order, None for an unnamed one: `n` of
    `int n = 4`, `a` of `float a[]`, `run` of `void (*run)(int)`."""
    declarator = function_declarator(fn)
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    names: list[str | None] = []
    for param in params.named_children if params is not None else ():
        if param.type == "comment":
            continue
        named = param.child_by_field_name("declarator")
        text = data[named.start_byte:named.end_byte].decode("utf-8", "replace") if named is not None else ""
        text = re.sub(r"\([^()]*\)\s*$", "", text)  # a function pointer's parameter list
        words = re.findall(r"[A-Za-z_]\w*", re.sub(r"(\s*\[[^\]]*\])+\s*$", "", text))
        names.append(words[-1] if words else None)
    return names


def defined_name(fn: Node, data: bytes) -> str | None:
    """The simple name a function definition defines (`f` of `float *ns::f(...)`)."""
    declarator = function_declarator(fn)
    if declarator is None:
        return None
    name = declarator.child_by_field_name("declarator")
    if name is None:
        return None
    text = data[name.start_byte : name.end_byte].decode("utf-8", errors="replace")
    simple = text.split("::")[-1].strip()
    return simple if simple.isidentifier() else None


def parameter_declarations(fn: Node) -> list[Node]:
    """The parameter declarations of a function definition (or declaration), in order."""
    declarator = function_declarator(fn)
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    return [p for p in params.named_children if p.type != "comment"] if params is not None else []


def template_value_names(fn: Node) -> tuple[str | None, ...]:
    """The template parameters of a function template's definition, in order: a value
    parameter's name (`N` of `template <typename T, int N>`), None for a type parameter; () for
    a function that is not a template."""
    return tuple(name if kind == "value" else None for kind, name in _template_parameters(fn))


def template_type_names(fn: Node) -> tuple[str | None, ...]:
    """The same, naming the type parameters (`T`), None for a value parameter."""
    return tuple(name if kind == "type" else None for kind, name in _template_parameters(fn))


def _template_parameters(fn: Node) -> list[tuple[str, str | None]]:
    """(`type` or `value`, its name where it has one) of each template parameter of a function
    template's definition, in order; [] for a function that is not a template."""
    template = fn.parent
    parameters = template.child_by_field_name("parameters") if template is not None and template.type == "template_declaration" else None
    if parameters is None:
        return []
    found: list[tuple[str, str | None]] = []
    for parameter in parameters.named_children:
        if parameter.type == "comment":
            continue
        if parameter.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            ident = next((c for c in parameter.named_children if c.type == "type_identifier"), None)
            found.append(("type", ident.text.decode("utf-8", errors="replace") if ident is not None and ident.text else None))
            continue
        ident = parameter.child_by_field_name("declarator") \
            if parameter.type in ("parameter_declaration", "optional_parameter_declaration") else None
        found.append(("value", ident.text.decode("utf-8", errors="replace")
                      if ident is not None and ident.type == "identifier" and ident.text is not None else None))
    return found


def template_arguments(callee: Node | None) -> list[Node] | None:
    """The explicit template arguments of a call's callee (`run<T, 256>`: `T`, `256`); None for a
    callee written without them (its template arguments, if any, are deduced)."""
    listed = callee.child_by_field_name("arguments") if callee is not None and callee.type == "template_function" else None
    return [a for a in listed.named_children if a.type != "comment"] if listed is not None else None


def non_const_reference(param_text: str) -> bool:
    """`float &u`, `T& out`: a parameter the callee may assign through (not `const T &`, `&&`)."""
    return "&" in param_text and "&&" not in param_text and re.search(r"\bconst\b", param_text) is None


def declarations_before(body: Node, before: int) -> Iterator[Node]:
    """The declarations inside `body` that start before the byte `before`, in source order."""
    stack = [body]
    while stack:
        node = stack.pop()
        if node.start_byte >= before:
            continue
        if node.type == "declaration":
            yield node
        stack.extend(reversed(node.named_children))


def written_names(data: bytes, node: Node) -> set[str]:
    """The names `node` may write, spaces removed (`p.n`, `*p` as written): assigned, stepped or
    declared (`n = ...`, `n += ...`, `n++`, `int n = ...`), handed on by address (`read(&n)`,
    `&(p->n)`), or read into from a stream (`file >> n;`, a statement of `>>` only)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        target = None
        if current.type == "assignment_expression":
            target = current.child_by_field_name("left")
        elif current.type == "update_expression":
            target = current.child_by_field_name("argument")
        elif current.type == "init_declarator":
            target = current.child_by_field_name("declarator")
        elif current.type == "pointer_expression" and _operator(data, current) == "&":
            target = current.child_by_field_name("argument")
            if target is not None and target.type == "parenthesized_expression" and target.named_children:
                target = target.named_children[0]
        elif current.type == "binary_expression" and _operator(data, current) == ">>" and _extraction(data, current):
            target = current.child_by_field_name("right")
        if target is not None and target.type in ("identifier", "field_expression", "pointer_expression"):
            names.add(re.sub(r"\s+", "", data[target.start_byte:target.end_byte].decode("utf-8", errors="replace")))
        stack.extend(current.named_children)
    return names


def _operator(data: bytes, node: Node) -> str:
    operator = node.child_by_field_name("operator")
    return data[operator.start_byte:operator.end_byte].decode() if operator is not None else ""


def _extraction(data: bytes, node: Node) -> bool:
    """A `>>` chain that is a statement of its own (`file >> a >> b;`), not a shift inside an
    expression (`x = y >> s`)."""
    parent = node.parent
    while parent is not None and parent.type == "binary_expression" and _operator(data, parent) == ">>":
        parent = parent.parent
    return parent is not None and parent.type == "expression_statement"
