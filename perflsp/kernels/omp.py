"""OpenMP offload regions: kernel-creating `#pragma omp target ...` directives, their clauses
(parsed, not pattern-matched) and the loop nest they apply to."""

from __future__ import annotations

import re

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.includes import inactive_lines
from perflsp.kernels.launches import enclosing_function, function_name
from perflsp.kernels.models import ArraySection, ConstValue, LoopHeader, OmpClause, OmpRegion
from perflsp.kernels.symbols import function_env
from perflsp.kernels.text import split_top_level, text_hash

CONSTRUCT_WORDS = frozenset({"target", "teams", "distribute", "parallel", "for", "do", "simd", "loop",
                             "data", "enter", "exit", "update", "declare", "end"})
DATA_ONLY = frozenset({"data", "enter", "exit", "update"})
VALUE_CLAUSES = frozenset({"num_teams", "thread_limit", "collapse", "num_threads", "device", "simdlen",
                           "safelen", "ordered"})
LIST_CLAUSES = frozenset({"private", "firstprivate", "lastprivate", "shared", "is_device_ptr",
                          "has_device_addr", "use_device_ptr", "use_device_addr", "nontemporal",
                          "allocate", "uses_allocators"})
MODIFIER_LIST_CLAUSES = frozenset({"map", "reduction", "depend", "in_reduction", "task_reduction", "linear", "aligned"})

_CONTINUATION = re.compile(r"\\\r?\n")
PRAGMA_LINE = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+omp[ \t]+target\b(?![ \t]+(?:data|enter|exit|update)\b)", re.MULTILINE)


def is_kernel_directive(words: list[str]) -> bool:
    """`target ...` creates a kernel unless it only moves data (`target data/enter/exit/update`)."""
    return bool(words) and words[0] == "target" and (len(words) == 1 or words[1] not in DATA_ONLY)


def split_directive(text: str) -> tuple[list[str], str]:
    """Split `omp target teams ... map(...)` (without `#pragma`) into construct words and clauses."""
    body = _CONTINUATION.sub(" ", text).strip()
    if body.startswith("omp"):
        body = body[3:]
    words: list[str] = []
    pos = 0
    for m in re.finditer(r"\s*([A-Za-z_]\w*)", body):
        if m.start() != pos:
            break
        word = m.group(1)
        rest = body[m.end():].lstrip()
        if word not in CONSTRUCT_WORDS or rest.startswith("("):
            break
        words.append(word)
        pos = m.end()
    return words, body[pos:]


def parse_clauses(text: str, env: ConstEnv | None = None) -> tuple[OmpClause, ...]:
    """Parse the clause list: `name`, `name(args)`, separated by blanks or commas."""
    clauses: list[OmpClause] = []
    i = 0
    n = len(text)
    while i < n:
        while i < n and (text[i].isspace() or text[i] == ","):
            i += 1
        m = re.compile(r"[A-Za-z_]\w*").match(text, i)
        if not m:
            if i < n:
                i += 1  # skip stray characters rather than loop forever
            continue
        name = m.group()
        i = m.end()
        j = i
        while j < n and text[j].isspace():
            j += 1
        args: str | None = None
        if j < n and text[j] == "(":
            close = _matching_paren(text, j)
            args = text[j + 1 : close - 1] if close else text[j + 1 :]
            i = close if close else n
        clauses.append(_make_clause(name, args, env))
    return tuple(clauses)


def _matching_paren(text: str, open_at: int) -> int | None:
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] in "([":
            depth += 1
        elif text[k] in ")]":
            depth -= 1
            if depth == 0:
                return k + 1
    return None


def _top_level_colon(text: str) -> int:
    depth = 0
    for k, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0 and text[k : k + 2] != "::" and (k == 0 or text[k - 1] != ":"):
            return k
    return -1


def parse_list_item(item: str) -> ArraySection:
    """`a[0:n][:m]`, `s.field`, `p->q[1:2]`, `arr` -> ArraySection."""
    item = item.strip()
    m = re.match(r"[A-Za-z_][\w.]*(?:->[\w.]+)*", item)
    if not m:
        return ArraySection(item)
    variable = m.group()
    sections: list[tuple[str | None, str | None]] = []
    k = m.end()
    while k < len(item):
        if item[k].isspace():
            k += 1
            continue
        if item[k] != "[":
            break
        close = _matching_paren(item, k)
        inner = item[k + 1 : (close - 1) if close else len(item)]
        colon = _top_level_colon(inner)
        if colon < 0:
            sections.append((inner.strip() or None, "1"))
        else:
            lower, length = inner[:colon].strip(), inner[colon + 1 :].strip()
            sections.append((lower or None, length or None))
        k = close if close else len(item)
    return ArraySection(variable, tuple(sections))


def _make_clause(name: str, args: str | None, env: ConstEnv | None) -> OmpClause:
    text = " ".join((args or "").split())
    if args is None:
        return OmpClause(name=name, text="")
    if name in VALUE_CLAUSES:
        value, reason = try_evaluate(text, env) if env is not None else (None, "no constants available")
        return OmpClause(name=name, text=text, value=ConstValue(text, None, value, reason))
    if name in LIST_CLAUSES:
        return OmpClause(name=name, text=text, items=tuple(parse_list_item(x) for x in split_top_level(text)))
    if name in MODIFIER_LIST_CLAUSES:
        colon = _top_level_colon(text)
        modifier = None
        items_text = text
        if colon >= 0:
            modifier = text[:colon].strip()
            items_text = text[colon + 1 :]
            if name == "map":
                # `always, close, tofrom` -> the map type is the last word
                modifier = split_top_level(modifier)[-1] if modifier else modifier
        return OmpClause(name=name, text=text, modifier=modifier,
                         items=tuple(parse_list_item(x) for x in split_top_level(items_text)))
    if name in ("schedule", "dist_schedule"):
        parts = split_top_level(text)
        kind = parts[0] if parts else None
        chunk = None
        if len(parts) > 1:
            value, reason = try_evaluate(parts[1], env) if env is not None else (None, None)
            chunk = ConstValue(parts[1], None, value, reason)
        return OmpClause(name=name, text=text, modifier=kind, value=chunk)
    return OmpClause(name=name, text=text)


# --------------------------------------------------------------------------------------------


def extract_regions(ctx: ExtractionContext, env: ConstEnv) -> list[OmpRegion]:
    regions = _pragma_regions(ctx, env)
    if b"_Pragma" in ctx.data or pragma_macros(env):
        for region in _operator_regions(ctx, env):
            regions.setdefault(_line_start(ctx, region.span.start_byte), region)
    return _one_per_statement(ctx, env, [regions[k] for k in sorted(regions)])


def _pragma_regions(ctx: ExtractionContext, env: ConstEnv) -> dict[int, OmpRegion]:
    regions: dict[int, OmpRegion] = {}
    for groups in ctx.matches["pragma"]:
        directive = groups["directive"][0]
        if "".join(ctx.text(directive).split()) != "#pragma":
            continue
        pragma = groups["pragma"][0]
        argument_node = groups["argument"][0]
        region = _region(ctx, env, pragma.start_byte, pragma.end_byte, ctx.text(argument_node), pragma)
        if region is not None:
            regions[_line_start(ctx, pragma.start_byte)] = region
    # Pragmas the tree lost inside ERROR regions: scan lines directly (when some may be missing).
    if len(PRAGMA_LINE.findall(ctx.data)) <= len(regions):
        return regions
    for m in PRAGMA_LINE.finditer(ctx.blanked):
        start = m.start() + (len(m.group()) - len(m.group().lstrip()))
        if _line_start(ctx, start) in regions:
            continue
        end = _directive_end(ctx.data, start)
        text = ctx.text_bytes(start, end)
        argument = re.sub(r"^\s*#\s*pragma\s+", "", text)
        region = _region(ctx, env, start, end, argument, None)
        if region is not None:
            regions[_line_start(ctx, start)] = region
    return regions


def _one_per_statement(ctx: ExtractionContext, env: ConstEnv, regions: list[OmpRegion]) -> list[OmpRegion]:
    """`#ifdef A #pragma omp target ... #else #pragma omp target ... #endif` before one loop: the
    compiler sees one directive. Keep the one in the branch the macros select (the first when
    neither or both are)."""
    by_body: dict[int, list[OmpRegion]] = {}
    for region in regions:
        if region.body_span is not None:
            by_body.setdefault(region.body_span.start_byte, []).append(region)
    if all(len(group) == 1 for group in by_body.values()):
        return regions
    inactive = inactive_lines(ctx.data, env)
    dropped: set[int] = set()
    for group in by_body.values():
        if len(group) > 1:
            keep = next((r for r in group if ctx.lines.line_of(r.span.start_byte) not in inactive), group[0])
            dropped.update(id(r) for r in group if r is not keep)
    return [r for r in regions if id(r) not in dropped]


def _line_start(ctx: ExtractionContext, byte: int) -> int:
    return ctx.lines.line_of(byte)


def _directive_end(data: bytes, start: int) -> int:
    pos = start
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return len(data)
        if data[max(start, nl - 2) : nl].rstrip(b"\r").endswith(b"\\"):
            pos = nl + 1
            continue
        return nl if data[nl - 1 : nl] != b"\r" else nl - 1


def _region(ctx: ExtractionContext, env: ConstEnv, start: int, end: int, argument: str, pragma: Node | None) -> OmpRegion | None:
    words, clause_text = split_directive(argument)
    if not is_kernel_directive(words):
        return None
    end = min(end, _directive_end(ctx.data, start))
    anchor = pragma or ctx.tree.root_node.descendant_for_byte_range(start, start)
    function = enclosing_function(anchor) if anchor is not None else None
    local = function_env(ctx, function, start, env) if function is not None else env
    clauses = parse_clauses(clause_text, local)
    body, nested = _associated_statement(ctx, pragma, end)
    if nested and not set(words) & _WORKSHARING:
        # `#pragma omp target map(...)` + `#pragma omp teams distribute parallel for` on the next
        # line: one combined construct over the loop that follows
        words, clauses = _combined(words, clauses, nested, local)
    loops = _loop_nest(ctx, body) if body is not None else ()
    hash_end = body.end_byte if body is not None else end
    return OmpRegion(
        directive=" ".join(words),
        clauses=clauses,
        pragma_text=" ".join(_CONTINUATION.sub(" ", ctx.text_bytes(start, end)).split()),
        span=ctx.span_bytes(start, end),
        body_span=ctx.span(body) if body is not None else None,
        loops=loops,
        function=function_name(ctx, function) if function is not None else None,
        function_span=ctx.span(function) if function is not None else None,
        body_hash=text_hash(ctx.data[start:hash_end]),
        recovered=pragma is None,
    )


_WORKSHARING = frozenset({"distribute", "for", "do", "loop", "simd"})
_CONDITIONAL = ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef")
_BRANCH_ENDS = ("preproc_else", "preproc_elif", "preproc_elifdef")


def _associated_statement(ctx: ExtractionContext, pragma: Node | None, end: int) -> tuple[Node | None, list[str]]:
    """The statement a directive applies to, and the arguments of the `#pragma omp ...` lines
    between them (a nested `teams distribute parallel for` applies to the same statement)."""
    nested: list[str] = []
    node = _skip_directives(ctx, pragma.next_named_sibling if pragma is not None else None, nested)
    if (node is None or node.type in _BRANCH_ENDS) and pragma is not None and pragma.parent is not None \
            and pragma.parent.type in _CONDITIONAL:
        # `#ifdef A  #pragma omp target ...  #else ...  #endif` followed by the loop: the tree
        # puts the pragma in the conditional's branch and the loop after the conditional
        top = pragma.parent
        while top.parent is not None and top.type in _BRANCH_ENDS:
            top = top.parent
        node = _skip_directives(ctx, top.next_named_sibling, nested)
    elif node is not None and node.type in _BRANCH_ENDS:
        node = None
    if node is None and (pragma is None or pragma.next_named_sibling is None):
        # The first statement that starts after the directive.
        probe = ctx.tree.root_node.named_descendant_for_byte_range(end + 1, end + 1)
        while probe is not None and probe.parent is not None and probe.parent.start_byte > end:
            probe = probe.parent
        node = probe if probe is not None and probe.start_byte > end else None
        node = _skip_directives(ctx, node, nested)
    return node, nested


def _skip_directives(ctx: ExtractionContext, node: Node | None, nested: list[str]) -> Node | None:
    while node is not None and node.type in ("comment", "preproc_call"):
        if node.type == "preproc_call":
            argument = node.child_by_field_name("argument")
            directive = node.child_by_field_name("directive")
            if argument is not None and directive is not None and ctx.text(directive).strip() == "#pragma":
                nested.append(ctx.text(argument))
        node = node.next_named_sibling
    return node


def _combined(words: list[str], clauses: tuple[OmpClause, ...], nested: list[str], env: ConstEnv
              ) -> tuple[list[str], tuple[OmpClause, ...]]:
    merged = list(words)
    all_clauses = list(clauses)
    for argument in nested:
        if not argument.lstrip().startswith("omp"):
            continue
        inner_words, inner_clauses = split_directive(argument)
        if not inner_words or inner_words[0] in ("target", "declare", "end") or inner_words[0] in DATA_ONLY:
            break
        merged.extend(w for w in inner_words if w not in merged)
        all_clauses.extend(parse_clauses(inner_clauses, env))
    return merged, tuple(all_clauses)


_LOOP_TYPES = ("for_statement", "for_range_loop")


def _loop_nest(ctx: ExtractionContext, body: Node) -> tuple[LoopHeader, ...]:
    """The perfectly nested `for` chain starting at the region's statement (or, for a block,
    at its first loop, possibly under nested pragmas)."""
    node: Node | None = _first_loop(body) if body.type == "compound_statement" else body
    loops: list[LoopHeader] = []
    while node is not None and node.type in _LOOP_TYPES and len(loops) < 8:
        loops.append(_loop_header(ctx, node))
        inner = node.child_by_field_name("body")
        node = _single_statement(inner)
    return tuple(loops)


def _first_loop(block: Node) -> Node | None:
    stack = list(reversed(block.named_children))
    while stack:
        n = stack.pop()
        if n.type in _LOOP_TYPES:
            return n
        if n.type in ("compound_statement",):
            stack.extend(reversed(n.named_children))
    return None


def _single_statement(node: Node | None) -> Node | None:
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type not in ("comment", "preproc_call")]
        if len(statements) != 1:
            return None
        node = statements[0]
    return node


def _loop_header(ctx: ExtractionContext, loop: Node) -> LoopHeader:
    if loop.type == "for_range_loop":
        decl = loop.child_by_field_name("declarator")
        right = loop.child_by_field_name("right")
        return LoopHeader(ctx.text(decl) or None, None, ctx.text(right) or None, "in", None, ctx.span(loop))
    init = loop.child_by_field_name("initializer")
    cond = loop.child_by_field_name("condition")
    update = loop.child_by_field_name("update")
    variable: str | None = None
    lower: str | None = None
    upper: str | None = None
    op: str | None = None
    step: str | None = None
    if init is not None:
        if init.type == "declaration":
            decl = init.child_by_field_name("declarator")
            if decl is not None and decl.type == "init_declarator":
                variable = ctx.text(decl.child_by_field_name("declarator")) or None
                lower = ctx.text(decl.child_by_field_name("value")) or None
        elif init.type == "assignment_expression":
            variable = ctx.text(init.child_by_field_name("left")) or None
            lower = ctx.text(init.child_by_field_name("right")) or None
    if cond is not None and cond.type == "binary_expression":
        left_text = ctx.text(cond.child_by_field_name("left"))
        right_text = ctx.text(cond.child_by_field_name("right"))
        op_text = ctx.text(cond.child_by_field_name("operator"))
        if variable is not None and right_text == variable:
            # `n > i` reads as `i < n`
            left_text, right_text = right_text, left_text
            op_text = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op_text, op_text)
        op = op_text
        if variable is None or left_text == variable:
            upper = right_text
            variable = variable or left_text
    if update is not None:
        step = _step_text(ctx, update, variable)
    return LoopHeader(variable, lower, upper, op, step, ctx.span(loop))


def _step_text(ctx: ExtractionContext, update: Node, variable: str | None) -> str:
    text = "".join(ctx.text(update).split())
    if update.type == "update_expression":
        return "+1" if "++" in text else "-1"
    if update.type == "assignment_expression":
        op = ctx.text(update.child_by_field_name("operator"))
        right = "".join(ctx.text(update.child_by_field_name("right")).split())
        if op in ("+=", "-="):
            return f"{op}{right}"
        if op in ("*=", "<<=", ">>=", "/="):
            return f"{op}{right}"
        if op == "=" and variable and right.startswith(variable):
            return f"={right}"
    return text


# --------------------------------------------------------------------------------------------
# `_Pragma("omp target ...")` and macros that expand to it


def pragma_macros(env: ConstEnv) -> dict[str, bool]:
    """Macros whose expansion holds a `_Pragma` operator: name -> whether function-like
    (`#define OMP_TARGET _Pragma("omp target ...")`, `#define PRAGMA(x) _Pragma(#x)`)."""
    if env.pragma_macros is not None:
        return env.pragma_macros
    objects = env.all_macros()
    functions = env.all_function_macros()
    found: dict[str, bool] = {}
    for _ in range(4):  # macros that expand to other pragma macros
        before = len(found)
        pattern = re.compile(r"\b(_Pragma" + "".join("|" + re.escape(n) for n in found) + r")\b")
        for name, body in objects.items():
            if name not in found and pattern.search(body):
                found[name] = False
        for name, (_, body) in functions.items():
            if name not in found and pattern.search(body):
                found[name] = True
        if len(found) == before:
            break
    env.pragma_macros = found
    return found


def _operator_uses(ctx: ExtractionContext, env: ConstEnv) -> list[tuple[int, int, str, bool]]:
    """(start, end, pragma argument, whether the expansion goes on after the directive) of each
    `_Pragma(...)` or pragma macro use outside directive lines, in source order."""
    from perflsp.kernels.preprocess import expand_macros
    from perflsp.kernels.text import line_is_directive, match_close

    macros = pragma_macros(env)
    names = ["_Pragma", *macros]
    pattern = re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b")
    blanked = ctx.blanked
    uses: list[tuple[int, int, str, bool]] = []
    for m in pattern.finditer(blanked):
        start = m.start()
        if line_is_directive(ctx.data, start):
            continue
        name = m.group(1).decode()
        end = m.end()
        if name == "_Pragma" or macros.get(name):
            k = _next_token(blanked, end)
            if k >= len(blanked) or blanked[k : k + 1] != b"(":
                continue
            close = match_close(blanked, k)
            if close is None:
                continue
            end = close
        expanded = expand_macros(ctx.text_bytes(start, end), env)
        directive = re.search(r"^[ \t]*#[ \t]*pragma[ \t]+(.*)$", expanded, re.MULTILINE)
        if directive is None:
            continue
        rest = expanded[directive.end():]
        uses.append((start, end, directive.group(1).strip(), bool(re.search(r"[^\s;]", rest))))
    return uses


def _operator_regions(ctx: ExtractionContext, env: ConstEnv) -> list[OmpRegion]:
    uses = _operator_uses(ctx, env)
    regions: list[OmpRegion] = []
    for index, (start, end, argument, goes_on) in enumerate(uses):
        words, clause_text = split_directive(argument)
        if not is_kernel_directive(words):
            continue
        anchor = ctx.tree.root_node.descendant_for_byte_range(start, start)
        function = enclosing_function(anchor) if anchor is not None else None
        local = function_env(ctx, function, start, env) if function is not None else env
        clauses = parse_clauses(clause_text, local)
        # directives that follow (`_Pragma("omp teams distribute parallel for")`, `#pragma ...`)
        nested: list[str] = []
        pos = end
        following = {s: (e, a) for s, e, a, _ in uses[index + 1 :]}
        while not goes_on:
            nxt = _next_token(ctx.blanked, pos)
            if nxt in following:
                pos, argument_next = following[nxt]
                nested.append(argument_next)
            elif nxt < len(ctx.data) and ctx.data[nxt : nxt + 1] == b"#":
                line_end = _directive_end(ctx.data, nxt)
                nested.append(re.sub(r"^\s*#\s*pragma\s+", "", ctx.text_bytes(nxt, line_end)))
                pos = line_end
            else:
                break
        if nested and not set(words) & _WORKSHARING:
            words, clauses = _combined(words, clauses, nested, local)
        statement_start = _next_token(ctx.blanked, pos)
        if goes_on:
            # the macro holds the loop header too (`OMP_FOR(i, n) { ... }`): the statement is
            # the macro use and the block after it, read through the macros by the engine
            statement_end = _statement_end(ctx.blanked, statement_start)
            body_ctx, body = ctx, None
            body_span = ctx.span_bytes(start, statement_end) if statement_end is not None else None
        else:
            found = _statement_at(ctx, statement_start)
            body_ctx, body = found if found is not None else (ctx, None)
            body_span = ctx.span(body) if body is not None else None
        loops = _loop_nest(body_ctx, body) if body is not None else ()
        hash_end = body_span.end_byte if body_span is not None else end
        regions.append(OmpRegion(
            directive=" ".join(words),
            clauses=clauses,
            pragma_text=" ".join(ctx.text_bytes(start, end).split()),
            span=ctx.span_bytes(start, end),
            body_span=body_span,
            loops=loops,
            function=function_name(ctx, function) if function is not None else None,
            function_span=ctx.span(function) if function is not None else None,
            body_hash=text_hash(ctx.data[start:hash_end]),
            recovered=True,
        ))
    return regions


def _next_token(blanked: bytes, pos: int) -> int:
    while pos < len(blanked) and blanked[pos : pos + 1] in (b" ", b"\t", b"\r", b"\n"):
        pos += 1
    return pos


def _statement_end(blanked: bytes, pos: int, depth: int = 0) -> int | None:
    """End of the statement starting at `pos`, read from the text (the tree around a `_Pragma`
    use is often broken): a `for (...)` header and its body, a `{...}` block, or up to `;`."""
    from perflsp.kernels.text import match_close

    if depth > 8 or pos >= len(blanked):
        return None
    if blanked[pos : pos + 1] == b"{":
        return match_close(blanked, pos)
    m = re.compile(rb"(for|while)\s*\(").match(blanked, pos)
    if m:
        close = match_close(blanked, m.end() - 1)
        return _statement_end(blanked, _next_token(blanked, close), depth + 1) if close else None
    semicolon = blanked.find(b";", pos)
    return semicolon + 1 if semicolon >= 0 else None


def _statement_at(ctx: ExtractionContext, pos: int) -> tuple[ExtractionContext, Node] | None:
    """The statement starting at `pos`, parsed on its own (every byte outside it blanked, so
    offsets and lines stay those of the file)."""
    from perflsp.source.parser import parse

    end = _statement_end(ctx.blanked, pos)
    if end is None:
        return None
    masked = (ctx.data[:pos].translate(_BLANK_ALL) + ctx.data[pos:end]
              + ctx.data[end:].translate(_BLANK_ALL))
    tree = parse(masked)
    node = tree.root_node.named_descendant_for_byte_range(pos, pos)
    while node is not None and node.parent is not None and node.parent.start_byte == pos \
            and node.parent.end_byte <= end:
        node = node.parent
    if node is None or node.start_byte != pos:
        return None
    return ExtractionContext(masked, tree, ctx.lines, ctx.path), node


_BLANK_ALL = bytes(b if b == 10 else 32 for b in range(256))
