"""The top of a large file read alone: what a document's first diagnostics are computed from.

Parsing and extracting a 300 KB file costs ~250 ms before any kernel is analysed. Its first
definitions, though, are the same text at the top of a shorter one: the file is cut after a
top-level definition (`cut_at`), the prefix is parsed and extracted alone (`read_prefix`), and
the kernels there are analysed while the whole file is parsed.

Only kernels whose analysis cannot depend on the text after the cut are kept (`standalone`).
C declares before use, but the analysis resolves names over the whole file and a kernel's
launch sites and callers decide its verdict, so a kernel (or the function holding an OpenMP
region) is left out when:

- its name appears anywhere else in the file (a launch, a call, a forward declaration), or
- a name it uses, directly or through the prefix's device functions and macros it calls, is
  declared at file level after the cut (a later definition of a function it calls, a later
  global, a redefined macro...).

Both checks are textual and err on the side of leaving a kernel out. A prefix that does not
parse cleanly (the cut was not at file level after all), or a text that includes a local header
after the cut, gives nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache

from tree_sitter import Node, Parser, Query, QueryCursor, Tree

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.incremental import Extracted, extract_full
from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.kernels.text import blank_comments_and_strings
from perflsp.source.parser import language, new_parser
from perflsp.source.positions import LineIndex

Kernel = CudaFunction | OmpRegion

PREFIX_BYTES = 32 * 1024  # the prefix ends at the last top-level definition that ends before this
PREFIX_DEFINITIONS = 48  # or after this many definitions (a first publication analyses a few dozen at most)
MIN_TEXT_BYTES = 64 * 1024  # smaller texts are parsed and extracted whole in well under 100 ms

# Nodes whose children are file-level declarations (as `perflsp.kernels.symbols.file_env` walks them).
_CONTAINERS = frozenset({
    "translation_unit", "declaration_list", "preproc_if", "preproc_ifdef", "preproc_else",
    "preproc_elif", "preproc_elifdef", "linkage_specification", "namespace_definition",
})
_MACROS = frozenset({"preproc_def", "preproc_function_def"})

# Names a definition declares for itself: parameters, locals, template parameters.
_DECLARED = """
(init_declarator declarator: (identifier) @name)
(declaration declarator: (identifier) @name)
(pointer_declarator declarator: (identifier) @name)
(reference_declarator (identifier) @name)
(array_declarator declarator: (identifier) @name)
(parameter_declaration declarator: (identifier) @name)
(optional_parameter_declaration declarator: (identifier) @name)
(for_range_loop declarator: (identifier) @name)
(type_parameter_declaration (type_identifier) @name)
(preproc_params (identifier) @name)
"""

_KEYWORDS = frozenset(b"""
alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast
continue decltype default defined delete do double dynamic_cast else enum explicit extern false float for
friend goto if inline int long mutable namespace new noexcept nullptr operator private protected public
register reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
template this throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while restrict __restrict __restrict__ __global__ __device__ __host__ __shared__ __constant__ __managed__
__forceinline__ __noinline__ __launch_bounds__ __inline__ __attribute__ __align__ __grid_constant__
define undef include ifdef ifndef endif elif pragma
""".split())

_IDENT = re.compile(rb"\b[A-Za-z_]\w*")
# a member access (consumed, not captured) or an identifier (captured)
_USE = re.compile(rb"(?:\.|->)\s*[A-Za-z_]\w*|\b([A-Za-z_]\w*)")
_BEFORE = re.compile(rb"(\w+)[ \t]*\Z")
_AFTER = re.compile(rb"[\s*&]*([A-Za-z_])?")
_BRACES = re.compile(rb"[{}]")
# what precedes a `{` whose contents are still file level: namespaces, `extern "C"`, and
# struct/class/union/enum bodies (their members and enumerators are file-wide names too)
_TRANSPARENT = re.compile(rb"(?:namespace\b[^;{}]*|extern\s*|(?:struct|class|union|enum)\b[^;{}()=]*)\{")
_TRANSPARENT_WORDS = (b"namespace", b"extern", b"struct", b"class", b"union", b"enum")
_CLOSING_LINE = re.compile(rb"\n\};?[ \t]*\r?\n")
_CALLED = re.compile(rb"\b([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\(")  # a name before its parenthesis
_DIRECTIVE_START = re.compile(rb"[ \t]*#[ \t]*")
_QUOTED = re.compile(rb'[ \t]*"')


def cut_at(data: bytes, target: int = PREFIX_BYTES, definitions: int = PREFIX_DEFINITIONS) -> int | None:
    """The offset just after a line holding only `}` (or `};`: the end of a file-level definition
    in the usual layout): the last that ends before `target`, or the `definitions`-th if that
    comes first; else the first one after `target` within twice `target`. None when there is none."""
    found = None
    for count, m in enumerate(_CLOSING_LINE.finditer(data, 0, min(len(data), 2 * target)), 1):
        if m.end() > target and found is not None:
            break
        found = m.end()
        if found > target or count >= definitions:
            break
    return found if found is not None and found < len(data) else None


def read_prefix(data: bytes, path: str | None, preprocessed: ConstEnv, target: int = PREFIX_BYTES,
                parser: Parser | None = None) -> Prefix | None:
    """The prefix of `data`, or None when the text has no cut or the prefix does not parse
    cleanly. `preprocessed`: the whole text's preprocessor view (`IncludeResolver.env_for`), the
    one its full extraction uses. A cut inside namespaces, `extern "C"` blocks or `#if` groups
    (code that is not indented in them) closes them after the prefix."""
    cut = cut_at(data, target)
    if cut is None or _includes_local_header(data, cut):
        return None  # no cut, or a header read after it (its functions are the analysis' callees too)
    if not _may_stand_alone(data, cut):
        return None  # every kernel above the cut is named below it: not worth a parse
    # comments and strings blanked: braces and names in them are not code, and what the analysis
    # never reads cannot make a kernel depend on later text
    blanked = blank_comments_and_strings(data)
    closers = _closers(blanked[:cut])
    if closers is None:
        return None  # cut inside a function or an initialiser after all: nothing early
    head = data[:cut] + b"".join(closers)
    tree = (parser or new_parser()).parse(head)
    if tree.root_node.has_error:
        return None
    lines = LineIndex(head)
    extracted = extract_full(head, tree, lines, path, preprocessed)
    return Prefix(data, blanked, cut, closers.count(_CLOSE_BRACE), head, tree, lines, extracted)


def _may_stand_alone(data: bytes, cut: int) -> bool:
    """False when the text's kernels above the cut (as a pattern finds them) are all named below
    it (launched from `main`, in the usual layout): then none can stand alone."""
    names: set[bytes] = set()
    for at in _words(data, b"__global__", 0, cut):
        stop = min((i for i in (data.find(b"{", at, cut), data.find(b";", at, cut)) if i >= 0), default=cut)
        called = [n for n in _CALLED.findall(data, at, stop) if n not in _KEYWORDS]
        if not called:
            return True  # a kernel the pattern misses (a macro, a declaration): parse and see
        names.add(called[0])
    if not names:
        return True  # no kernel above the cut (OpenMP regions): parse and see
    return any(next(_words(data, name, cut, len(data)), None) is None for name in names)


def _includes_local_header(data: bytes, start: int) -> bool:
    """Whether an `#include "..."` follows `start` (a `find` loop: a multiline regex over the
    text costs ~40 ms)."""
    for at in _words(data, b"include", start, len(data)):
        line = data.rfind(b"\n", 0, at) + 1
        if _DIRECTIVE_START.fullmatch(data, line, at) and _QUOTED.match(data, at + len(b"include")):
            return True
    return False


class Prefix:
    """The text up to the cut (and the closers of what is open there), parsed and extracted
    alone: offsets, lines and columns are those of the whole text. `candidates()` lists its
    kernels in document order; `standalone(item)` says whether one's analysis in the whole text
    equals its analysis here (see the module's docstring). The checks are made on demand: a
    first publication looks at a few kernels only."""

    def __init__(self, whole: bytes, blanked: bytes, cut: int, open_braces: int, data: bytes, tree: Tree,
                 lines: LineIndex, extracted: Extracted):
        self.whole = whole
        self.cut = cut
        self.data = data
        self.tree = tree
        self.lines = lines
        self.extracted = extracted
        self._blanked = blanked
        self._open_braces = open_braces  # namespace and extern "C" bodies open at the cut
        self._definitions: dict[int, tuple[Node, bytes]] = {}  # id(item) -> its definition, its callers' name
        self._checks: _Checks | None = None

    def candidates(self) -> list[Kernel]:
        """Kernels (and OpenMP regions) that may stand alone, in the order the analysis takes them."""
        fk = self.extracted.kernels
        root = self.tree.root_node
        out: list[Kernel] = []
        for kernel in fk.kernels:
            if kernel.recovered or kernel.name_span.start_byte in self.extracted.token_found:
                continue  # the token fallback runs by conditions on the whole file
            node = _definition_at(root, kernel.span.start_byte, kernel.span.end_byte)
            if node is not None:
                self._definitions[id(kernel)] = (node, kernel.name.encode("utf-8"))
                out.append(kernel)
        # Regions are analysed after every kernel, so a file whose kernels spend the analysis
        # budget leaves them out: only a file without kernels shows its regions early.
        if b"__global__" not in self.whole:
            for region in fk.omp_regions:
                holder = region.function_span
                if region.recovered or holder is None or not region.function:
                    continue
                node = _definition_at(root, holder.start_byte, holder.end_byte)
                if node is not None:
                    self._definitions[id(region)] = (node, region.function.rsplit("::", 1)[-1].encode("utf-8"))
                    out.append(region)
        return out

    def standalone(self, item: Kernel) -> bool:
        found = self._definitions.get(id(item))
        if found is None:
            return False
        if self._checks is None:
            fk = self.extracted.kernels
            self._checks = _Checks(self._blanked, self.cut, self._open_braces, self.tree,
                                   [*fk.kernels, *fk.device_functions])
        return self._checks.standalone(*found)


class _Checks:
    """What `Prefix.standalone` reads: the blanked text, the names used by the prefix's
    definitions, the names declared at file level after the cut."""

    def __init__(self, blanked: bytes, cut: int, open_braces: int, tree: Tree, functions: list[CudaFunction]):
        self.head, self.rest = blanked[:cut], blanked[cut:]
        self.uses = _Uses(self.head, tree.root_node, functions)
        self.later = _FileLevelNames(self.rest, open_braces)

    def standalone(self, node: Node, name: bytes) -> bool:
        head, a, b = self.head, node.start_byte, node.end_byte
        if any(True for _ in _words(self.rest, name, 0, len(self.rest))) \
                or any(True for _ in _words(head, name, 0, a)) or any(True for _ in _words(head, name, b, len(head))):
            return False  # launched, called or declared elsewhere
        return not any(self.later.declares(used) for used in self.uses.reached(node))


# --------------------------------------------------------------------------- the prefix's definitions


def _definition_at(root: Node, start: int, end: int) -> Node | None:
    """The file-level function definition (or template of one) holding [start, end)."""
    node = root
    while True:
        child = next((c for c in node.named_children if c.start_byte <= start and end <= c.end_byte), None)
        if child is None:
            return None
        if child.type in _CONTAINERS:
            node = child
            continue
        return child if child.type in ("function_definition", "template_declaration") else None


def _file_level(root: Node) -> Iterable[Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _CONTAINERS:
                stack.append(child)
            else:
                yield child


@cache
def _declared_query() -> Query:
    return Query(language(), _DECLARED)


class _Uses:
    """The names a definition uses but does not declare, and those of the prefix's functions
    and macros it calls, transitively."""

    def __init__(self, head: bytes, root: Node, functions: list[CudaFunction]):
        self._head = head
        self._definers: dict[bytes, list[Node]] = {}
        for fn in functions:
            node = _definition_at(root, fn.span.start_byte, fn.span.end_byte)
            if node is not None:
                self._definers.setdefault(fn.name.encode("utf-8"), []).append(node)
        for node in _file_level(root):
            if node.type in _MACROS and (name := node.child_by_field_name("name")) is not None:
                self._definers.setdefault(head[name.start_byte:name.end_byte], []).append(node)
        self._free: dict[int, frozenset[bytes]] = {}

    def free(self, node: Node) -> frozenset[bytes]:
        """Identifiers in `node` that it does not declare itself (members and keywords aside)."""
        found = self._free.get(node.start_byte)
        if found is None:
            a, b = node.start_byte, node.end_byte
            cursor = QueryCursor(_declared_query())
            cursor.set_byte_range(a, b)
            own = {self._head[n.start_byte:n.end_byte] for n in cursor.captures(node).get("name", [])}
            found = self._free[node.start_byte] = frozenset(set(_USE.findall(self._head, a, b)) - own - _KEYWORDS - {b""})
        return found

    def reached(self, node: Node) -> set[bytes]:
        seen: set[int] = {node.start_byte}
        todo = [node]
        names: set[bytes] = set()
        while todo:
            for name in self.free(todo.pop()):
                names.add(name)
                for definer in self._definers.get(name, ()):
                    if definer.start_byte not in seen:
                        seen.add(definer.start_byte)
                        todo.append(definer)
        return names


def _words(data: bytes, word: bytes, lo: int, hi: int) -> Iterator[int]:
    """Offsets of `word` standing as a whole word in data[lo:hi] (a `find` loop: far faster
    than a regex over the whole text)."""
    at = data.find(word, lo, hi)
    while at >= 0:
        after = at + len(word)
        if (at == 0 or not _is_word_byte(data[at - 1])) and (after >= len(data) or not _is_word_byte(data[after])):
            yield at
        at = data.find(word, after, hi)


def _is_word_byte(byte: int) -> bool:
    return byte == 0x5F or 0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A or byte >= 0x80


# --------------------------------------------------------------------------- after the cut


class _FileLevelNames:
    """The names declared at file level in `rest` (comments and strings blanked), over-approximated:
    every identifier outside function bodies and initialisers (namespace, `extern "C"` and struct
    bodies count as file level), except where it stands as the type of a declaration
    (`const float4 *p`). When the braces do not balance (braces split across `#if` branches),
    every identifier counts."""

    def __init__(self, rest: bytes, open_braces: int = 0):
        spans = _file_level_spans(rest, open_braces)
        self._text = b"\n;\n".join(rest[a:b] for a, b in spans) if spans is not None else rest
        self._candidates = frozenset(_IDENT.findall(self._text))
        self._answers: dict[bytes, bool] = {}

    def declares(self, name: bytes) -> bool:
        if name not in self._candidates:
            return False
        answer = self._answers.get(name)
        if answer is None:
            answer = self._answers[name] = any(self._declared_at(at, len(name))
                                               for at in _words(self._text, name, 0, len(self._text)))
        return answer

    def _declared_at(self, at: int, length: int) -> bool:
        """Whether the word at `at` is declared there: not the type of a declaration (followed by
        a name: `float4 *p`), unless it is a macro's name (`#define BLOCK BS`)."""
        text = self._text
        after = _AFTER.match(text, at + length, at + length + 64)
        if after is None or after.group(1) is None:
            return True
        before = _BEFORE.search(text, max(0, at - 64), at)
        return before is not None and before.group(1) == b"define"


def _file_level_spans(text: bytes, open_braces: int = 0) -> list[tuple[int, int]] | None:
    """The spans of `text` (comments and strings blanked) at file level, or None when its braces
    do not balance. `open_braces`: namespace bodies open where `text` starts."""
    spans: list[tuple[int, int]] = []
    opened: list[bool] = [True] * open_braces  # per open brace: whether its contents are file level
    depth = 0  # open braces whose contents are not
    start = 0
    transparent_at = _transparent_braces(text)
    for m in _BRACES.finditer(text):
        at = m.start()
        if text[at] == 0x7B:  # "{"
            transparent = False
            if depth == 0:
                transparent = at in transparent_at
                if not transparent:
                    spans.append((start, at))
            opened.append(transparent)
            depth += not transparent
        else:
            if not opened:
                return None
            if not opened.pop():
                depth -= 1
                if depth == 0:
                    start = at + 1
    if opened:
        return None
    spans.append((start, len(text)))
    return spans


def _transparent_braces(text: bytes, words: tuple[bytes, ...] = _TRANSPARENT_WORDS) -> set[int]:
    """Offsets of the `{` that open namespace, `extern "C"` and struct bodies (a `find` per
    keyword, then the pattern where one stands: a regex over the whole text is ~10x slower)."""
    found: set[int] = set()
    for word in words:
        for at in _words(text, word, 0, len(text)):
            m = _TRANSPARENT.match(text, at)
            if m is not None:
                found.add(m.end() - 1)
    return found


_CLOSE_BRACE = b"\n}"
_CLOSE_IF = b"\n#endif"
_NESTING = re.compile(rb"[{}]|^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.MULTILINE)


def _closers(head: bytes) -> list[bytes] | None:
    """What closes the namespace and `extern "C"` bodies and the `#if` groups open at the end of
    `head` (blanked), innermost first; None when a function body, an initialiser or a struct is
    open there (or the nesting does not pair up)."""
    closable = _transparent_braces(head, (b"namespace", b"extern"))
    opened: list[bytes] = []
    for m in _NESTING.finditer(head):
        directive = m.group(1)
        if directive is None:
            at = m.start()
            if head[at] == 0x7B:  # "{"
                opened.append(_CLOSE_BRACE if at in closable else b"")
            elif not opened or opened.pop() == _CLOSE_IF:
                return None
        elif directive == b"endif":
            if not opened or opened.pop() != _CLOSE_IF:
                return None
        else:
            opened.append(_CLOSE_IF)
    if any(not closer for closer in opened):
        return None
    return opened[::-1]
