"""`__global__` kernels and `__device__` functions: from the tree, with a token-level fallback
for definitions that tree-sitter loses in macro-heavy code."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from tree_sitter import Node, QueryCursor

from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.includes import inactive_lines
from perflsp.kernels.models import ConstValue, CudaFunction, LaunchBounds, Param, TemplateParam
from perflsp.kernels.text import function_space_mentions, line_is_directive, match_close, text_hash
from perflsp.source.parser import query

_SPACE_TOKENS = {"__global__": "global", "__device__": "device"}
_SCOPE_NAMES = {"namespace_definition", "class_specifier", "struct_specifier", "union_specifier"}
_WORD = re.compile(r"\w+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_QUALIFIER_WORDS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "constexpr",
                    "struct", "class", "typename", "enum", "union", "mutable", "__shared__",
                    "__constant__"}


def macro_aliases(env: ConstEnv) -> dict[str, str]:
    """Macros that expand to `__global__`/`__device__`: `#define GLOBAL __global__`, through
    other macros (`#define KERNEL DEVICE_SPACE`), and function-like ones
    (`#define KERNEL(name) __global__ void name`)."""
    objects = env.all_macros()
    functions = env.all_function_macros()
    aliases: dict[str, str] = {}
    bodies = {**{n: b for n, b in objects.items()}, **{n: b for n, (_, b) in functions.items()}}
    for _ in range(4):  # macros that expand to other such macros
        before = len(aliases)
        for name, body in bodies.items():
            if name in aliases:
                continue
            words = re.findall(r"\w+", body)
            for word in words:
                space = _SPACE_TOKENS.get(word) or aliases.get(word)
                if space is not None:
                    aliases[name] = space
                    break
        if len(aliases) == before:
            break
    return aliases


def extract_functions(ctx: ExtractionContext, env: ConstEnv) -> tuple[list[CudaFunction], list[CudaFunction]]:
    """Return (kernels, device functions) in source order."""
    aliases = macro_aliases(env)
    found: list[CudaFunction] = []
    seen_names: set[int] = set()
    macro_names = _macro_names(env)  # (once per file, not once per function)
    for node in function_definitions(ctx, aliases):
        fn = from_definition(ctx, node, env, aliases, macro_names)
        if fn is not None and fn.name_span.start_byte not in seen_names:
            found.append(fn)
            seen_names.add(fn.name_span.start_byte)
    # The token scan costs a blanking pass: only needed when the tree may have lost a definition.
    needs_scan = (bool(aliases) or ctx.tree.root_node.has_error
                  or function_space_mentions(ctx.data, more_than=len(found)) > len(found))
    for fn in token_fallback(ctx, env, aliases, seen_names) if needs_scan else ():
        found.append(fn)
        seen_names.add(fn.name_span.start_byte)
    found.sort(key=lambda f: f.name_span.start_byte)
    found = _active_definitions(ctx, env, found)
    kernels = [f for f in found if f.space == "global"]
    device = [f for f in found if f.space == "device"]
    return kernels, device


def _active_definitions(ctx: ExtractionContext, env: ConstEnv, found: list[CudaFunction]) -> list[CudaFunction]:
    """Of a function defined in several preprocessor branches (`#ifdef SLOW __device__ float
    f(float x) {...} #else __device__ float f(float x) {...} #endif`), the definitions of the
    branch the macros take; every one where none or all are (overloads, or branches the macros
    do not decide)."""
    groups: dict[tuple[str, str, int], list[CudaFunction]] = {}
    for fn in found:
        groups.setdefault((fn.qualified_name, fn.space, len(fn.params)), []).append(fn)
    if all(len(group) == 1 for group in groups.values()):
        return found
    inactive = inactive_lines(ctx.data, env)
    dropped: set[int] = set()
    for group in groups.values():
        active = [fn for fn in group if fn.name_span.start.line not in inactive]
        if len(group) > 1 and 0 < len(active) < len(group):
            dropped.update(id(fn) for fn in group if fn not in active)
    return [fn for fn in found if id(fn) not in dropped]


def function_definitions(ctx: ExtractionContext, aliases: dict[str, str]) -> Iterable[Node]:
    root = ctx.tree.root_node
    nodes = {g["function"][0].start_byte: g["function"][0] for g in ctx.matches["function"]}
    if aliases:
        for n in QueryCursor(query("function_definitions")).captures(root).get("function", []):
            nodes.setdefault(n.start_byte, n)
    return [nodes[k] for k in sorted(nodes)]


def _space_of(ctx: ExtractionContext, node: Node, aliases: dict[str, str]) -> tuple[str | None, bool]:
    """('global'|'device'|None, is_host_device) from the specifiers before the declarator."""
    spaces: set[str] = set()
    host = False
    data = ctx.data
    for child in node.children:
        kind = child.type
        if kind in ("function_declarator", "compound_statement") or kind.endswith("declarator"):
            break
        if kind in _SPACE_TOKENS:
            spaces.add(_SPACE_TOKENS[kind])
        elif kind == "__host__":
            host = True
        elif aliases or data.find(b"__", child.start_byte, child.end_byte) >= 0:
            # (a space word inside another node, or an alias macro: most specifiers, `void`,
            # `static`, a return type, have neither and are not decoded)
            for word in _WORD.findall(ctx.text(child)):
                if word in aliases:
                    spaces.add(aliases[word])
                elif word in _SPACE_TOKENS:
                    spaces.add(_SPACE_TOKENS[word])
                elif word == "__host__":
                    host = True
    if "global" in spaces:
        return "global", False
    if "device" in spaces:
        return "device", host
    return None, False


def _function_declarator(node: Node) -> Node | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator


def from_definition(ctx: ExtractionContext, node: Node, env: ConstEnv, aliases: dict[str, str],
                    macro_names: frozenset[str] | None = None) -> CudaFunction | None:
    space, host_device = _space_of(ctx, node, aliases)
    if space is None:
        return None
    declarator = _function_declarator(node)
    body = node.child_by_field_name("body")
    if declarator is None or body is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    if name_node is None:
        return None
    specialization: tuple[str, ...] | None = None
    scope_prefix: list[str] = []
    if name_node.type == "qualified_identifier":
        scope_prefix, name_node = _split_qualified(ctx, name_node)
    if name_node.type == "template_function":
        args = name_node.child_by_field_name("arguments")
        specialization = tuple(ctx.text(a) for a in args.named_children) if args is not None else ()
        name_node = name_node.child_by_field_name("name") or name_node
    if name_node.type not in ("identifier", "field_identifier", "destructor_name", "operator_name"):
        return None
    name = ctx.text(name_node)
    outer = node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
    scopes = _enclosing_scopes(ctx, node) + scope_prefix
    plist = declarator.child_by_field_name("parameters")
    params = _parameters(ctx, plist, env, _macro_names(env) if macro_names is None else macro_names)
    launch_bounds = _launch_bounds(ctx, node, env)
    return CudaFunction(
        space=space,  # type: ignore[arg-type]
        name=name,
        qualified_name="::".join([*scopes, name]),
        params=params,
        template_params=_template_params(ctx, outer) if outer is not node else (),
        specialization_args=specialization,
        launch_bounds=launch_bounds,
        span=ctx.span(outer),
        name_span=ctx.span(name_node),
        body_span=ctx.span(body),
        body_hash=text_hash(ctx.data[outer.start_byte : node.end_byte]),
        recovered=node.has_error,
        is_host_device=host_device,
    )


def _split_qualified(ctx: ExtractionContext, node: Node) -> tuple[list[str], Node]:
    scopes: list[str] = []
    while node.type == "qualified_identifier":
        scope = node.child_by_field_name("scope")
        if scope is not None:
            scopes.append(ctx.text(scope))
        inner = node.child_by_field_name("name")
        if inner is None:
            break
        node = inner
    return scopes, node


def _enclosing_scopes(ctx: ExtractionContext, node: Node) -> list[str]:
    scopes: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type in _SCOPE_NAMES:
            name = parent.child_by_field_name("name")
            if name is not None:
                scopes.append(ctx.text(name))
        parent = parent.parent
    return list(reversed(scopes))


def _template_params(ctx: ExtractionContext, template: Node) -> tuple[TemplateParam, ...]:
    plist = template.child_by_field_name("parameters")
    if plist is None:
        return ()
    out: list[TemplateParam] = []
    for p in plist.named_children:
        kind = p.type
        if kind in ("type_parameter_declaration", "variadic_type_parameter_declaration"):
            ident = next((c for c in p.named_children if c.type == "type_identifier"), None)
            out.append(TemplateParam("type", ctx.text(ident) if ident else ""))
        elif kind == "optional_type_parameter_declaration":
            name = p.child_by_field_name("name")
            default = p.child_by_field_name("default_type")
            out.append(TemplateParam("type", ctx.text(name), default=ctx.text(default) or None))
        elif kind in ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"):
            type_node = p.child_by_field_name("type")
            ident = _declared_identifier(p)
            default = p.child_by_field_name("default_value")
            out.append(TemplateParam("value", ctx.text(ident) if ident else "", type=ctx.text(type_node),
                                     default=ctx.text(default) or None))
        elif kind == "template_template_parameter_declaration":
            ident = next((c for c in p.named_children if c.type == "type_identifier"), None)
            out.append(TemplateParam("template", ctx.text(ident) if ident else ""))
    return tuple(out)


def _declared_identifier(node: Node) -> Node | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        if declarator.type in ("identifier", "field_identifier"):
            return declarator
        nxt = declarator.child_by_field_name("declarator")
        if nxt is None:
            return next((c for c in declarator.named_children if c.type == "identifier"), None)
        declarator = nxt
    return None


def _macro_names(env: ConstEnv) -> frozenset[str]:
    return frozenset(env.all_macros()) | frozenset(env.all_function_macros())


def _parameters(ctx: ExtractionContext, plist: Node | None, env: ConstEnv,
                macro_names: frozenset[str]) -> tuple[Param, ...]:
    """The parameters of a function, read once per distinct parameter list of the file: a
    `Param` holds no position, and the same list (templated and generated code repeats a few
    signatures thousands of times) reads the same; those functions share the tuple."""
    if plist is None:
        return ()
    key = ctx.data[plist.start_byte:plist.end_byte]
    known = ctx.parameter_lists.get(key) if not plist.has_error else None
    if known is not None:
        return known
    params = _expanded_params(ctx, plist, env, macro_names)
    if params is None:
        params = _params(ctx, plist)
    if not plist.has_error:
        ctx.parameter_lists[key] = params
    return params


def _params(ctx: ExtractionContext, plist: Node | None) -> tuple[Param, ...]:
    if plist is None:
        return ()
    out: list[Param] = []
    for p in plist.named_children:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"):
            continue
        type_node = p.child_by_field_name("type")
        base = ctx.text(type_node)
        if base == "void" and p.child_by_field_name("declarator") is None:
            continue
        const = restrict = reference = False
        depth = 0
        dims: list[str] = []
        for child in p.children:
            if child.type == "type_qualifier" and ctx.text(child) == "const":
                const = True
        declarator = p.child_by_field_name("declarator")
        name_node: Node | None = None
        node = declarator
        while node is not None:
            if node.type in ("pointer_declarator", "abstract_pointer_declarator"):
                depth += 1
            elif node.type in ("reference_declarator", "abstract_reference_declarator"):
                reference = True
            elif node.type in ("array_declarator", "abstract_array_declarator"):
                size = node.child_by_field_name("size")
                dims.insert(0, ctx.text(size) if size is not None else "")  # outermost node = last dimension
            for child in node.children:
                if child.type == "type_qualifier" and ctx.text(child) in ("__restrict__", "__restrict", "restrict"):
                    restrict = True
            if node.type in ("identifier", "field_identifier"):
                name_node = node
                break
            nxt = node.child_by_field_name("declarator")
            if nxt is None:
                # parenthesized/reference declarators keep their inner declarator as a plain child
                nxt = next((c for c in node.named_children if c.type not in ("type_qualifier", "comment")), None)
                if nxt is None:
                    break
            node = nxt
        type_text = ctx.text(p)
        if name_node is not None:
            type_text = (ctx.text_bytes(p.start_byte, name_node.start_byte) + ctx.text_bytes(name_node.end_byte, p.end_byte)).strip()
        out.append(Param(
            name=ctx.text(name_node) if name_node is not None else None,
            type=" ".join(type_text.split()),
            element_type=_element_type(base),
            pointer_depth=depth + len(dims),
            is_const=const,
            is_restrict=restrict,
            is_reference=reference,
            array_dims=tuple(dims),
        ))
    return tuple(out)


def _expanded_params(ctx: ExtractionContext, plist: Node, env: ConstEnv,
                     macro_names: frozenset[str] | None = None) -> tuple[Param, ...] | None:
    """The parameters read from the macro-expanded list when a macro that is not a plain number
    occurs in it (`double * RESTRICT a` with `#define RESTRICT __restrict__`: the tree reads
    `RESTRICT` as the name); None when the list as written can be read directly."""
    text = ctx.text(plist)
    if macro_names is None:
        macro_names = _macro_names(env)
    if macro_names.isdisjoint(_IDENTIFIER.findall(text)):
        return None
    return _params_of_text(ctx, text, env)


def _params_of_text(ctx: ExtractionContext, text: str, env: ConstEnv) -> tuple[Param, ...]:
    """Parameters of a `( ... )` list parsed on its own, after macro expansion."""
    from perflsp.kernels.preprocess import expand_macros
    from perflsp.source.parser import parse

    expanded = expand_macros(text, env, keep_constants=True)
    snippet = ("void f" + expanded + ";").encode("utf-8", errors="replace")
    tree = parse(snippet)
    sub = ExtractionContext(snippet, tree, ctx.lines, ctx.path)
    plist = next((n for n in _walk(tree.root_node) if n.type == "parameter_list"), None)
    return _params(sub, plist) if plist is not None else ()


@lru_cache(maxsize=4096)
def _element_type(base: str) -> str:
    words = [w for w in base.replace("*", " ").replace("&", " ").split() if w not in _QUALIFIER_WORDS]
    return " ".join(words) or base


def _launch_bounds(ctx: ExtractionContext, node: Node, env: ConstEnv) -> LaunchBounds | None:
    lb = next((c for c in node.children if c.type == "launch_bounds"), None)
    if lb is None:
        return None
    args = [c for c in lb.named_children if c.type != "comment"]
    values = [_const_value(ctx, a, env) for a in args]
    if not values:
        return None
    return LaunchBounds(
        max_threads=values[0],
        min_blocks=values[1] if len(values) > 1 else None,
        max_blocks_cluster=values[2] if len(values) > 2 else None,
        span=ctx.span(lb),
    )


def _const_value(ctx: ExtractionContext, node: Node, env: ConstEnv) -> ConstValue:
    text = ctx.text(node)
    value, reason = try_evaluate(text, env)
    return ConstValue(text=text, span=ctx.span(node), value=value, reason=reason)


# --------------------------------------------------------------------------------------------
# Token-level fallback
# --------------------------------------------------------------------------------------------

_IDENT = re.compile(rb"[A-Za-z_]\w*")


def token_fallback(ctx: ExtractionContext, env: ConstEnv, aliases: dict[str, str], seen_names: set[int]) -> list[CudaFunction]:
    """Find `__global__ ... name(...) {` where the tree lost the definition (ERROR nodes)."""
    words = [*_SPACE_TOKENS, *aliases]
    if not words:
        return []
    blanked = ctx.blanked
    functions = env.all_function_macros()
    pattern = re.compile(rb"\b(" + b"|".join(re.escape(w.encode()) for w in words) + rb")\b")
    out: list[CudaFunction] = []
    for m in pattern.finditer(blanked):
        word = m.group(1).decode()
        space = _SPACE_TOKENS.get(word) or aliases.get(word)
        if space is None or line_is_directive(blanked, m.start()):
            continue
        start_scan, name_hint = m.end(), None
        if word in functions:
            # `KERNEL(name)(params) {`: the definition's name is the macro's last argument word
            open_at = _next_nonblank(blanked, m.end())
            if blanked[open_at : open_at + 1] != b"(":
                continue
            close = match_close(blanked, open_at)
            names = list(_IDENT.finditer(blanked, open_at, close)) if close else []
            if close is None or not names:
                continue
            start_scan, name_hint = close, (names[-1].start(), names[-1].end())
        hit = _scan_definition(ctx, start_scan, space, name_hint)
        if hit is None:
            continue
        name_start, name_end, params_open, params_close, body_open, body_close = hit
        if name_start in seen_names:
            continue
        fn = _recovered_function(ctx, env, space, m.start(), name_start, name_end, params_open, params_close, body_open, body_close)
        out.append(fn)
        seen_names.add(name_start)
    return out


def _next_nonblank(blanked: bytes, pos: int) -> int:
    while pos < len(blanked) and blanked[pos : pos + 1].isspace():
        pos += 1
    return pos


def _scan_definition(ctx: ExtractionContext, pos: int, space: str, name_hint: tuple[int, int] | None = None
                     ) -> tuple[int, int, int, int, int, int] | None:
    blanked = ctx.blanked
    limit = min(len(blanked), pos + 2000)
    i = pos
    last_ident: tuple[int, int] | None = name_hint
    while i < limit:
        c = blanked[i : i + 1]
        if c.isspace():
            i += 1
            continue
        m = _IDENT.match(blanked, i)
        if m:
            word = m.group()
            if word in (b"__launch_bounds__", b"__maxnreg__", b"__cluster_dims__"):
                j = blanked.find(b"(", m.end())
                close = match_close(blanked, j) if j >= 0 else None
                if close is None:
                    return None
                i = close
                continue
            last_ident = (m.start(), m.end())
            i = m.end()
            continue
        if c == b"<":
            close = match_close(blanked, i)
            if close is None or close - i > 500:
                return None
            i = close
            continue
        if c == b":" and blanked[i : i + 2] == b"::":
            i += 2
            continue
        if c in (b"*", b"&"):
            i += 1
            continue
        if c == b"(":
            if last_ident is None:
                return None
            close = match_close(blanked, i)
            if close is None:
                return None
            j = close
            # skip trailing qualifiers up to the body
            while j < len(blanked):
                if blanked[j : j + 1].isspace():
                    j += 1
                    continue
                mm = _IDENT.match(blanked, j)
                if mm and mm.group() in (b"const", b"noexcept", b"override", b"final"):
                    j = mm.end()
                    continue
                break
            if blanked[j : j + 1] != b"{":
                if _IDENT.match(blanked, j):
                    # `LAUNCH_BOUNDS(256, 2) name(...)`: the group was a macro call, keep going
                    last_ident = None
                    i = j
                    continue
                return None  # a prototype or a call
            body_close = match_close(blanked, j)
            if body_close is None:
                body_close = len(blanked)
            return last_ident[0], last_ident[1], i, close, j, body_close
        return None
    return None


def _recovered_function(ctx: ExtractionContext, env: ConstEnv, space: str, start: int, name_start: int,
                        name_end: int, params_open: int, params_close: int, body_open: int, body_close: int) -> CudaFunction:
    name = ctx.text_bytes(name_start, name_end)
    # Parse the parameter list on its own: it is usually intact even when the body is not.
    params = _params_of_text(ctx, ctx.text_bytes(params_open, params_close), env)
    bounds = None
    lb = re.search(rb"__launch_bounds__\s*\(", ctx.blanked[start:name_start])
    if lb:
        open_at = start + lb.end() - 1
        close = match_close(ctx.blanked, open_at)
        if close:
            parts = [p.strip() for p in ctx.text_bytes(open_at + 1, close - 1).split(",")]
            vals = [ConstValue(p, None, *try_evaluate(p, env)) for p in parts if p]
            if vals:
                bounds = LaunchBounds(vals[0], vals[1] if len(vals) > 1 else None, span=ctx.span_bytes(start + lb.start(), close))
    scopes = _scopes_at(ctx, name_start)
    return CudaFunction(
        space=space,  # type: ignore[arg-type]
        name=name,
        qualified_name="::".join([*scopes, name]),
        params=params,
        template_params=(),
        specialization_args=None,
        launch_bounds=bounds,
        span=ctx.span_bytes(start, body_close),
        name_span=ctx.span_bytes(name_start, name_end),
        body_span=ctx.span_bytes(body_open, body_close),
        body_hash=text_hash(ctx.data[start:body_close]),
        recovered=True,
    )


def _scopes_at(ctx: ExtractionContext, byte: int) -> list[str]:
    node = ctx.tree.root_node.descendant_for_byte_range(byte, byte)
    return _enclosing_scopes(ctx, node) if node is not None else []


def _walk(node: Node) -> Iterable[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))
