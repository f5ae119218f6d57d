"""Device code compiled without the host code around it, when the unit does not compile whole.

nvcc's front end reads a CUDA unit's host code with its device code, so an error on the host
side stops the device compile that the counts need: an API the toolkit has removed
(`cudaThreadSynchronize`, gone in CUDA 13), a member a runtime struct no longer has, a library
header this machine lacks (`cublas_v2.h`, `mpi.h`). The unit is then compiled again from a copy
whose host-only function bodies are blanked and whose `#include`s the compiler could not find
are blanked too. Blanking keeps every newline, so each line stays where it was and the line
info still points into the file. A kernel template that only a blanked body launched
(`scale<float><<<g, b>>>(x, n)`) would be compiled by no one: its instantiations are named in a
line added at the end (`(void *)&scale<float>`, which makes nvcc compile them), where their
template arguments are words the file's own scope knows. A definition that says `__global__` or `__device__`, is
`constexpr` (device code may call it), or carries a macro (which may expand to either) keeps
its text. Where that still does not compile (a host function whose signature spells its
arrays with macros, `void run(DATA_TYPE POLYBENCH_2D(A, NX, NY, nx, ny))`), the macros the
unit's own text and local headers define are looked at: a definition keeps its text only
when it names one whose body says `__global__`, `__device__` or `__host__`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tree_sitter import Node

from perflsp.kernels.definitions import definition_nodes
from perflsp.source.parser import parse

# what keeps a definition's body: device code, or (first try) a word that may expand to it
_DEVICE = re.compile(rb"__global__|__device__|\bconstexpr\b")
_KEEPS = re.compile(_DEVICE.pattern + rb"|\b[A-Z_][A-Z0-9_]+\b")


def host_code_aside(text: bytes, missing_headers: frozenset[str] = frozenset(),
                    device_macros: frozenset[str] | None = None, host_classes: bool = False,
                    instantiate: bool = True, error_lines: frozenset[int] = frozenset(),
                    classes_elsewhere: frozenset[bytes] = frozenset()) -> bytes | None:
    """`text` with its host-only function bodies and its `#include`s of `missing_headers`
    blanked (newlines kept), or None when there is nothing to blank. With `device_macros` (the
    macros known to expand to a device qualifier), a definition's other macros do not keep it.
    With `host_classes`, a class no device code names and that declares no device code goes
    too, with the definitions of its members outside it (a timer class whose member's type a
    missing header declared) and the host functions whose signatures name it; so do the members
    defined here of `classes_elsewhere` (host-only classes a header's copy sets aside). With
    `instantiate`, the kernel templates the blanked bodies launched are instantiated at the end
    (`instantiated_launches`). A host-only declaration or
    definition at file or namespace scope that spans one of `error_lines` (1-based lines the
    compiler rejected) goes whole: a signature or a variable of a missing header's type
    (`void check(cublasStatus_t s)`, `MPI_Comm comm;`)."""
    out = bytearray(text)
    changed = False
    root = parse(text).root_node
    blanked: list[bytes] = []
    for body in _host_bodies(root, text, device_macros):
        # (the braces stay: `{ }` is a body for any function, a value-returning one included)
        blanked.append(text[body.start_byte:body.end_byte])
        _blank(out, body.start_byte + 1, body.end_byte - 1)
        changed = True
    if host_classes:
        for start, end in _host_classes(root, text, device_macros or frozenset(), classes_elsewhere):
            _blank(out, start, end)
            changed = True
    for start, end in _host_declarations_at(root, text, error_lines, device_macros or frozenset()):
        _blank(out, start, end)
        changed = True
    changed |= _blank_includes(out, text, missing_headers)
    if instantiate and blanked and (line := instantiated_launches(blanked, _file_scope_words(root, text))):
        out += (b"" if out.endswith(b"\n") else b"\n") + line
    return bytes(out) if changed else None


def offload_host_aside(text: bytes, missing_headers: frozenset[str] = frozenset(),
                       error_lines: frozenset[int] = frozenset()) -> bytes | None:
    """An OpenMP unit's copy for host code that does not compile here (its target regions live
    in host functions, so no body goes whole): the `#include`s of `missing_headers` blanked, and
    each statement or file-scope declaration that spans one of `error_lines` (1-based lines the
    compiler rejected: an MPI call, a library's type) unless it holds a directive that makes
    device code (a target region, a `declare`), is a directive's statement or lies in a `declare
    target` block. None when nothing is blanked."""
    out = bytearray(text)
    changed = _blank_includes(out, text, missing_headers)
    if error_lines:
        root = parse(text).root_node
        guarded = _declare_target_lines(text)
        for line in sorted(error_lines):
            found = _statement_at(root, line - 1)
            if found is None or line in guarded:
                continue
            # (every statement on the line: `hipMalloc(&a, n); hipMalloc(&b, n);`)
            siblings = found.parent.named_children if found.parent is not None else [found]
            for node in [s for s in siblings if s.start_point[0] <= line - 1 <= s.end_point[0]] or [found]:
                if node.type == "comment" or node.type.startswith("preproc_") or _in_directive(node, text):
                    continue
                _blank(out, node.start_byte, node.end_byte)
                changed = True
    return bytes(out) if changed else None


# (a class's members too: `MPI_Comm comm;` in a host class)
_STATEMENT_PARENTS = frozenset({"compound_statement", "translation_unit", "declaration_list", "field_declaration_list"})
_OMP_PRAGMA = re.compile(rb"^\s*#\s*pragma\s+omp\b")
# a directive that makes device code: a target region, a `declare` (target, variant, reduction);
# not a host construct nor a data movement (`target data`, `update`, `enter`/`exit data`), which
# go whole with the statement holding them
_DEVICE_DIRECTIVE = re.compile(rb"#\s*pragma\s+omp\s+(?:target\b(?!\s+(?:data|update|enter|exit)\b)|declare\b|begin\b)")
# directives that apply to no statement after them
_STANDALONE = frozenset({b"declare", b"end", b"begin", b"requires", b"threadprivate", b"barrier", b"flush",
                         b"taskwait", b"taskyield", b"update", b"enter", b"exit"})


def _statement_at(root: Node, row: int) -> Node | None:
    """The innermost statement or declaration (a child of a block, namespace or the file) on
    0-based `row`."""
    found: Node | None = None
    node: Node | None = root
    while node is not None:
        # (a directive's node ends at column 0 of the next line: it does not hold that line)
        inner = next((c for c in node.named_children if c.start_point[0] <= row and
                      (row < c.end_point[0] or (row == c.end_point[0] and c.end_point[1] > 0))), None)
        if inner is not None and inner.type != "comment" and not inner.type.startswith("preproc_") and \
                (node.type in _STATEMENT_PARENTS or (node.type == "ERROR" and _is_statement(inner))):
            found = inner  # (an ERROR node: a macro call the parser took for code, `OMP_REQUIRES(x)` with no `;`)
        node = inner
    return found


def _is_statement(node: Node) -> bool:
    return node.type.endswith("_statement") or node.type in ("declaration", "field_declaration")


def _in_directive(node: Node, text: bytes) -> bool:
    """Whether the statement holds a directive that makes device code, or it or a statement
    around it is the one a directive applies to."""
    if _DEVICE_DIRECTIVE.search(text[node.start_byte:node.end_byte]):
        return True
    current: Node | None = node
    while current is not None:
        before = current.prev_named_sibling
        while before is not None and before.type == "comment":
            before = before.prev_named_sibling
        spelled = text[before.start_byte:before.end_byte] if before is not None and before.type == "preproc_call" else b""
        if _OMP_PRAGMA.match(spelled) and not _STANDALONE & set(re.findall(rb"[a-z_]+", spelled)[2:4]):
            return True
        current = current.parent
    return False


def _declare_target_lines(text: bytes) -> frozenset[int]:
    """The 1-based lines inside `#pragma omp [begin] declare target` ... `end declare target`."""
    lines: set[int] = set()
    start: int | None = None
    for number, line in enumerate(text.split(b"\n"), 1):
        words = line.split()
        if _OMP_PRAGMA.match(line) and b"declare" in words and b"target" in words:
            if b"end" in words:
                if start is not None:
                    lines.update(range(start, number + 1))
                start = None
            elif len(words) <= 5 and not any(w.startswith((b"to(", b"link(", b"enter(")) for w in words):
                start = number  # (`declare target(f)` and `declare target to(x)` name, they open no block)
    return frozenset(lines)


def _blank_includes(out: bytearray, text: bytes, names: frozenset[str]) -> bool:
    changed = False
    for name in names:
        for match in re.finditer(rb"^[ \t]*#[ \t]*include[ \t]*[<\"]" + re.escape(name.encode()) + rb"[>\"][^\n]*",
                                 text, re.MULTILINE):
            _blank(out, match.start(), match.end())
            changed = True
    return changed


# `name<args><<<`: a kernel template's launch with its arguments written out (one level of
# nested angle brackets: `k<Vec<float>, 4>`)
_TEMPLATE_LAUNCH = re.compile(rb"(?<![\w:])((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*<((?:[^<>;{}()]|<[^<>;{}()]*>)+)>\s*<<<")
_BUILTIN_WORDS = frozenset(
    b"float double int unsigned signed long short char bool void const half __half __nv_bfloat16 "
    b"size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t true false std".split())


def instantiated_launches(bodies: Iterable[bytes], known: frozenset[bytes]) -> bytes:
    """A line that takes the address of each kernel template instantiation the `bodies` launch
    (`(void *)&scale<float, 4>`), so that nvcc compiles it though no code left calls it; empty
    when there is none. Arguments must be built-in types, numbers and words in `known` (the
    file's scope: a host function's own template parameters or locals would not compile there)."""
    seen: dict[bytes, None] = {}
    for body in bodies:
        for match in _TEMPLATE_LAUNCH.finditer(body):
            name, args = match.group(1), b" ".join(match.group(2).split())
            words = set(re.findall(rb"[A-Za-z_]\w*", args))
            if words <= (_BUILTIN_WORDS | known) and (name.split(b"::")[0] in known):
                seen.setdefault(b"(void *)&" + name + b"<" + args + b">")
    if not seen:
        return b""
    return (b"static void *const perflsp_instantiated_kernels[] __attribute__((unused)) = {"
            + b", ".join(seen) + b"};\n")


_KERNEL_TEMPLATE = re.compile(
    rb"template\s*<[^{};]*?>\s*(?:(?:static|inline|__host__)\s+)*__global__\s+(?:[\w:<>]+\s+)*?(\w+)\s*\(")


def launches_kernel_templates(text: bytes, headers: Iterable[bytes] = ()) -> bool:
    """Whether the unit launches a kernel template that it or one of its `headers` (their texts)
    defines, without template arguments (`scale<<<g, b>>>(x)`, deduced from a host template's
    types) or with arguments its host code spells (`sgemm<BM, BN><<<g, b>>>(...)` after `const
    uint BM = 64;`): host code that instantiates it, which a copy with the host bodies blanked
    loses."""
    names = {m.group(1) for each in (text, *headers) for m in _KERNEL_TEMPLATE.finditer(each)}
    return any(re.search(rb"\b" + re.escape(name) + rb"\s*(?:<(?:[^<>;{}]|<[^<>;{}]*>)*>\s*)?<<<", text)
               # (HIP's launch: `hipLaunchKernelGGL(HIP_KERNEL_NAME(scale<T>), grid, block, ...)`)
               or re.search(rb"\bhipLaunchKernelGGL\s*\(\s*(?:HIP_KERNEL_NAME\s*\(\s*)?" + re.escape(name) + rb"\b", text)
               for name in names)


def _file_scope_words(root: Node, text: bytes) -> frozenset[bytes]:
    """The words the file spells outside function bodies and template parameter lists (its
    macros, types, constants, the kernels' names and namespaces)."""
    outside = bytearray(text)
    for definition, _member in definition_nodes(root):
        body = definition.child_by_field_name("body")
        if body is not None:
            _blank(outside, body.start_byte, body.end_byte)
    parameters: set[bytes] = set()  # (a template's parameters are no names of the file's scope)
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "template_parameter_list":
            parameters.update(re.findall(rb"[A-Za-z_]\w*", text[node.start_byte:node.end_byte]))
        else:
            stack.extend(node.named_children)
    return frozenset(re.findall(rb"[A-Za-z_]\w*", bytes(outside))) - (parameters - _BUILTIN_WORDS)


def device_qualifier_macros(texts: Iterable[bytes]) -> frozenset[str]:
    """The object-like and function-like macros these texts define whose body names a device
    qualifier (`#define HD __host__ __device__`), and those defined through them."""
    bodies: dict[str, bytes] = {}
    for text in texts:
        for match in _DEFINE.finditer(text):
            bodies.setdefault(match.group(1).decode(), match.group(2))
    found: set[str] = set()
    while True:
        more = {name for name, body in bodies.items() if name not in found
                and (_QUALIFIER.search(body) or any(w.decode() in found for w in _WORD.findall(body)))}
        if not more:
            return frozenset(found)
        found |= more


_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:\([^)\n]*\))?([^\n]*)", re.MULTILINE)
_QUALIFIER = re.compile(rb"__global__|__device__|__host__")
_WORD = re.compile(rb"[A-Za-z_]\w*")


# `struct __align__(8) SumMax { float maxval, sum; };`, which the parser reads as a function
# `__align__` whose declarator is `(8) SumMax`
_ATTRIBUTED_TYPE = re.compile(rb"\s*(?:typedef\s+)?(?:struct|class|union)\s+(?:__align__|__attribute__|alignas|__declspec)\s*\(")


def _host_bodies(root: Node, text: bytes, device_macros: frozenset[str] | None) -> Iterator[Node]:
    for definition, _member in definition_nodes(root):
        body = definition.child_by_field_name("body")
        if body is None or body.type != "compound_statement":
            continue
        head = text[definition.start_byte:body.start_byte]
        if _ATTRIBUTED_TYPE.match(head):
            continue  # (a type, not a function: its members stay)
        if device_macros is None:
            keeps = _KEEPS.search(head) is not None
        else:
            keeps = _DEVICE.search(head) is not None or any(w.decode() in device_macros for w in _WORD.findall(head))
        if not keeps:
            yield body



_CLASSES = frozenset({"class_specifier", "struct_specifier"})
# what file-scope code lies in: namespaces, `extern "C"`, and conditional blocks (a header's
# include guard, `#ifdef USE_MPI`)
_SCOPES = frozenset({"namespace_definition", "declaration_list", "linkage_specification", "preproc_ifdef", "preproc_if",
                     "preproc_else", "preproc_elif", "preproc_elifdef"})


def host_class_names(text: bytes, device_macros: frozenset[str] | None = None) -> frozenset[bytes]:
    """The names of the host-only classes `host_code_aside` sets aside in `text` (a header's,
    whose members the unit may define)."""
    return frozenset(_host_class_specifiers(parse(text).root_node, text, device_macros or frozenset())[1])


def _host_classes(root: Node, text: bytes, device_macros: frozenset[str],
                  elsewhere: frozenset[bytes] = frozenset()) -> list[tuple[int, int]]:
    """The byte ranges of the host-only classes (their specifier, `class T { ... }`) and of the
    definitions of their members outside them (`void T::start() { ... }`) and of host functions
    naming them, with those of the classes `elsewhere` that no device code here names."""
    ranges, names, device_words = _host_class_specifiers(root, text, device_macros)
    names |= elsewhere - device_words
    if not names:
        return []
    for definition, member in definition_nodes(root):
        if member:
            continue
        head = text[definition.start_byte:definition.end_byte].split(b"(", 1)[0]
        body = definition.child_by_field_name("body")
        signature = text[definition.start_byte:body.start_byte if body is not None else definition.end_byte]
        # (a member defined outside its class, or a host function whose signature names one:
        # `void gpt2_forward(GPT2 *model, ...)`, which no device code can be)
        if any(re.search(rb"\b" + re.escape(n) + rb"\s*::", head) for n in names) or \
                (not _QUALIFIER.search(signature) and any(re.search(rb"\b" + re.escape(n) + rb"\b", signature)
                                                          for n in names)):
            ranges.append((definition.start_byte, definition.end_byte))
    return ranges


def _host_class_specifiers(root: Node, text: bytes,
                           device_macros: frozenset[str]) -> tuple[list[tuple[int, int]], set[bytes], set[bytes]]:
    """The host-only classes' specifiers (`class T { ... }`: a body and a name that no device
    definition names, and no device qualifier in their text): (their byte ranges, their names,
    the words device definitions spell)."""
    device_words: set[bytes] = set()
    for definition, _member in definition_nodes(root):
        body = definition.child_by_field_name("body")
        head = text[definition.start_byte:body.start_byte if body is not None else definition.end_byte]
        if _DEVICE.search(head) or any(w.decode() in device_macros for w in _WORD.findall(head)):
            device_words.update(_WORD.findall(text[definition.start_byte:definition.end_byte]))
    ranges: list[tuple[int, int]] = []
    names: set[bytes] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _SCOPES or child.type == "declaration":
                stack.append(child)
            elif child.type in _CLASSES:
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                spelled = text[child.start_byte:child.end_byte]
                if name is None or body is None or node.type == "type_definition" or _QUALIFIER.search(spelled) \
                        or any(w.decode() in device_macros for w in _WORD.findall(spelled)):
                    continue
                word = text[name.start_byte:name.end_byte]
                if word in device_words:
                    continue
                names.add(word)
                ranges.append((child.start_byte, child.end_byte))
    return ranges, names, device_words


_SCOPED = frozenset({"function_definition", "declaration", "template_declaration", "type_definition",
                     "alias_declaration"})


def _host_declarations_at(root: Node, text: bytes, lines: frozenset[int],
                          device_macros: frozenset[str]) -> list[tuple[int, int]]:
    """The byte ranges of the declarations and definitions at file or namespace scope that span
    one of `lines` and say no device qualifier (nor a macro that may expand to one)."""
    if not lines:
        return []
    ranges: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _SCOPES:
                stack.append(child)
            elif child.type in _SCOPED and any(child.start_point[0] + 1 <= line <= child.end_point[0] + 1
                                               for line in lines):
                spelled = text[child.start_byte:child.end_byte]
                # (a `constexpr` one too: rejected, it fails the compile whoever calls it)
                if _QUALIFIER.search(spelled) or any(w.decode() in device_macros for w in _WORD.findall(spelled)):
                    continue
                fields = _fields_at(child, lines)
                ranges.extend(fields if fields is not None else [(child.start_byte, child.end_byte)])
    return ranges


def _fields_at(node: Node, lines: frozenset[int]) -> list[tuple[int, int]] | None:
    """Where every one of `lines` in a struct's or class's definition (`typedef struct { ... }
    GPT2;`) lies on one of its data members: those members' ranges (the type stays, for the
    code naming it), else None."""
    inside = [line for line in lines if node.start_point[0] + 1 <= line <= node.end_point[0] + 1]
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "field_declaration_list":
            fields = [f for f in current.named_children if f.type == "field_declaration"
                      and any(f.start_point[0] + 1 <= line <= f.end_point[0] + 1 for line in inside)]
            covered = all(any(f.start_point[0] + 1 <= line <= f.end_point[0] + 1 for f in fields) for line in inside)
            return [(f.start_byte, f.end_byte) for f in fields] if fields and covered else None
        if current.type in _CLASSES or current is node:
            stack.extend(current.named_children)
    return None


def _blank(out: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if out[i] not in (0x0A, 0x0D):
            out[i] = 0x20
