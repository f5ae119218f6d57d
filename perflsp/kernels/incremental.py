"""Incremental extraction: after an edit, re-extract only the top-level definition it touched.

A full extraction of a 10,000-line file costs ~100 ms, too slow to run on every keystroke. When
every change (the edited bytes and tree-sitter's `changed_ranges`) lies inside one function
definition that is the same node before and after, nothing outside it can change: the file's
constants are collected from top-level declarations only, and the rest of the file parses the
same. So the kernels, regions and launch sites inside that definition are extracted again with
the kernels layer's own routines restricted to its byte range, the others are kept (their spans
moved by the edit's length), and launch sites elsewhere that name a kernel of the definition are
resolved again. Anything else (an edit between definitions, a changed `#define`, ...) falls back
to a full extraction. `tests/server/test_incremental_extraction.py` checks, over random edits,
that the result always equals a full extraction.

A half-typed statement (`float t = ` before the rest of a loop) does not parse, and tree-sitter's
error recovery can then stretch the definition over the rest of the file, which would make every
keystroke a full extraction and a re-analysis of the whole file. So an edit strictly inside one
definition, after which that definition does not parse, *holds* it: the previous extraction is
kept (the definition's items keep what they were, their spans stretched over the edit; everything
after it moved), which is the extraction of the file as if the definition still had its last
text. The text outside it is unchanged, so nothing else can differ. The hold ends when the
definition parses again (it is then extracted again as one edit of its held text), when an edit
lands outside it (a full extraction), or when the server settles a paused text (a fresh parse and
a full extraction: `perflsp.server.text.TextState.settle`).

This is the program model's incremental build: the server only decides when to run it (its
documents and scheduling); everything that knows how kernels are extracted lives here, in the
kernels layer, next to the routines it restricts.
"""

from __future__ import annotations

import dataclasses
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, count
from typing import Any

from tree_sitter import Node, Parser, QueryCursor, Tree

from perflsp.kernels import cuda
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.context import LAUNCH_TOKENS, ExtractionContext, has_launch_syntax
from perflsp.kernels.includes import scan_directives
from perflsp.kernels.launches import extract_launches
from perflsp.kernels.models import (
    ConstValue,
    CudaFunction,
    FileKernels,
    LaunchSite,
    OmpRegion,
    Span,
)
from perflsp.kernels.omp import PRAGMA_LINE, extract_regions, pragma_macros
from perflsp.kernels.symbols import TopLevelFacts, file_env
from perflsp.kernels.text import COMMENT_OR_STRING, DIGIT_SEPARATOR, function_space_mentions
from perflsp.source.parser import has_syntax_errors, query
from perflsp.source.positions import LineIndex, Position

RECOVERED_NOTE = "some kernels were recovered from tokens: the tree has syntax errors around them"

# Nodes whose children are top-level declarations (file_env walks exactly these).
_CONTAINERS = {
    "translation_unit", "declaration_list", "preproc_if", "preproc_ifdef", "preproc_else",
    "preproc_elif", "preproc_elifdef", "linkage_specification", "namespace_definition",
}


@dataclass(frozen=True, slots=True)
class Occurrences:
    """Where a token first and last occurs in a text (None: nowhere). Whether the text holds it
    is kept over edits without a search of the whole text (~0.25 ms per token on a 300 KB
    file, several per keystroke): only around the edit, or up to the nearest occurrence."""

    first: int | None = None
    last: int | None = None

    @staticmethod
    def of(token: bytes, data: bytes) -> Occurrences:
        first = data.find(token)
        return Occurrences() if first < 0 else Occurrences(first, data.rfind(token))

    @property
    def present(self) -> bool:
        return self.first is not None

    def edited(self, token: bytes, new_data: bytes, region: tuple[int, int, int]) -> Occurrences:
        """The occurrences in `new_data`: this text with [start, old_end) replaced by [start, new_end)."""
        start, old_end, new_end = region
        reach = len(token) - 1  # (an occurrence may begin that far before the edit)
        window_start = max(0, start - reach)
        if self.first is None or self.last is None:  # none before: only around the edit now
            found = new_data.find(token, window_start, new_end + reach)
            return Occurrences() if found < 0 else Occurrences(found, new_data.rfind(token, window_start, new_end + reach))
        first = self.first if self.first + len(token) <= start else new_data.find(token, window_start)
        last = self.last + new_end - old_end if self.last >= old_end else new_data.rfind(token, 0, new_end + reach)
        return Occurrences() if first < 0 else Occurrences(first, last)


_TRACKED = (b"omp", *LAUNCH_TOKENS, b"_Pragma")  # tokens that switch whole passes of an extraction on or off


@dataclass
class Extracted:
    """Extraction result plus what an incremental update reuses."""

    kernels: FileKernels
    env: ConstEnv  # the file's constants (parent: the preprocessor's macros and header constants)
    aliases: dict[str, str]  # macros that expand to __global__/__device__
    token_scan: bool  # whether the token-level fallback for CUDA functions ran
    token_found: frozenset[int]  # name offsets of functions found only by that fallback
    omp_line_scan: bool  # whether the line-level fallback for pragmas ran
    pragma_lines: int  # `#pragma omp target` lines (the fallback's trigger counts them)
    mentions: int  # `__global__`/`__device__` tokens outside comments (the CUDA fallback's trigger)
    spans: dict[int, list[Span]] = dataclasses.field(default_factory=dict)  # id(item) -> its spans
    incremental: bool = False  # how this result was produced (for logs and tests)
    # What the last update changed: "none", "comment" (only a comment), "kernel" (only the body
    # of __global__ kernels, no device function or OpenMP region), "host" (one function that
    # holds no CUDA function or OpenMP region), "device" (`__device__` functions, no region),
    # "other" (one definition), "held" (an edit inside a definition that no longer parses:
    # nothing was extracted again, see the module's doc), "full".
    change: str = "full"
    edit_start: int | None = None  # first changed byte of the last update (positions after it moved)
    edited: tuple[int, int] | None = None  # the edited definition's bytes in the new text
    edited_before: bytes = b""  # its text before the edit
    edited_functions: frozenset[str] = frozenset()  # names of the CUDA functions it held or holds
    # the last update's changed bytes: (start, end before, end after) (a held extraction's
    # findings move with them: see `move_spans`, with `region_lines`, what `edit_lines` gave)
    region: tuple[int, int, int] | None = None
    region_lines: tuple[int | None, int] = (None, 0)
    held: tuple[int, int] | None = None  # the definition that does not parse (its bytes now), kept as it was
    held_before: bytes = b""  # its text when it last parsed
    # `env` and what the analysis read from the same top-level declarations: passed on by every
    # incremental update (they leave the top level as it was), new with each full extraction
    top: TopLevelFacts | None = None
    tokens: dict[bytes, Occurrences] = dataclasses.field(default_factory=dict)  # `_TRACKED` in the text

    def has(self, token: bytes) -> bool:
        """Whether the text holds `token` (one of `_TRACKED`)."""
        return self.tokens[token].present

    def __post_init__(self) -> None:
        if self.top is None or self.top.env is not self.env:
            self.top = TopLevelFacts(self.env)


def _tree_functions(ctx: ExtractionContext, env: ConstEnv, aliases: dict[str, str], nodes: list[Node]) -> list[CudaFunction]:
    found: list[CudaFunction] = []
    seen: set[int] = set()
    for node in nodes:
        fn = cuda.from_definition(ctx, node, env, aliases)
        if fn is not None and fn.name_span.start_byte not in seen:
            found.append(fn)
            seen.add(fn.name_span.start_byte)
    return found


def _needs_token_scan(aliases: dict[str, str], tree: Tree, mentions: int, tree_found: int) -> bool:
    # the condition of `perflsp.kernels.cuda.extract_functions`
    return bool(aliases) or tree.root_node.has_error or mentions > tree_found


def extract_full(data: bytes, tree: Tree, lines: LineIndex, path: str | None, preprocessed: ConstEnv) -> Extracted:
    """Exactly `perflsp.kernels.extract(data, tree, path, lines, env=preprocessed)`, keeping what
    an incremental update needs. `preprocessed` is `IncludeResolver.env_for(...)` of the text."""
    ctx = ExtractionContext(data=data, tree=tree, lines=lines, path=path)
    env = file_env(ctx, preprocessed)
    aliases = cuda.macro_aliases(env)
    found = _tree_functions(ctx, env, aliases, list(cuda.function_definitions(ctx, aliases)))
    mentions = function_space_mentions(data)  # exact, so that edits can update it
    token_scan = _needs_token_scan(aliases, tree, mentions, len(found))
    token_found: set[int] = set()
    if token_scan:
        seen = {f.name_span.start_byte for f in found}
        for fn in cuda.token_fallback(ctx, env, aliases, seen):
            found.append(fn)
            token_found.add(fn.name_span.start_byte)
    found.sort(key=lambda f: f.name_span.start_byte)
    kernels = [f for f in found if f.space == "global"]
    regions = extract_regions(ctx, env) if b"omp" in data else []
    result = FileKernels(
        path=path,
        kernels=kernels,
        device_functions=[f for f in found if f.space == "device"],
        omp_regions=regions,
        launches=extract_launches(ctx, env, kernels) if has_launch_syntax(data) else [],
        has_errors=has_syntax_errors(tree),
        notes=ctx.notes,
    )
    if any(k.recovered for k in kernels):
        result.notes.append(RECOVERED_NOTE)
    pragma_lines = len(PRAGMA_LINE.findall(data)) if b"omp" in data else 0
    line_scan = b"omp" in data and pragma_lines > sum(1 for r in regions if not r.recovered)
    spans = {id(item): spans_of(item) for item in (*found, *regions, *result.launches)}
    return Extracted(result, env, aliases, token_scan, frozenset(token_found), line_scan, pragma_lines, mentions,
                     spans, tokens={token: Occurrences.of(token, data) for token in _TRACKED})


# --------------------------------------------------------------------------- changed region


def changed_region(old: bytes, new: bytes, edit: tuple[int, int, int] | None = None) -> tuple[int, int, int] | None:
    """(start, old_end, new_end) of the smallest byte range that differs; None if equal.

    `edit`: the (start, old_end, new_end) of the one edit that made `new` from `old` (the bytes
    around it are equal): the range is then narrowed from it, without comparing whole texts."""
    if edit is not None:
        return _narrowed(old, new, edit)
    if old == new:
        return None
    n = min(len(old), len(new))
    lo, hi = 0, n
    while lo < hi:  # longest common prefix (bytes comparisons run at memcmp speed)
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, n - prefix
    while lo < hi:  # longest common suffix not overlapping the prefix
        mid = (lo + hi + 1) // 2
        if old.endswith(new[len(new) - mid:]):
            lo = mid
        else:
            hi = mid - 1
    return prefix, len(old) - lo, len(new) - lo


def _narrowed(old: bytes, new: bytes, edit: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """`changed_region` from a known edit: its common prefix and suffix grown outwards from the
    edit in doubling steps (an edit that types what follows it shares more than its own bytes)."""
    start, old_end, _ = edit
    n = min(len(old), len(new))
    prefix, step = start, 16
    while prefix < n:
        stop = min(n, prefix + step)
        if old[prefix:stop] != new[prefix:stop]:
            while old[prefix] == new[prefix]:
                prefix += 1
            break
        prefix, step = stop, step * 2
    if prefix == n and len(old) == len(new):
        return None
    cap = n - prefix  # the suffix does not overlap the prefix
    suffix, step = min(len(old) - old_end, cap), 16
    while suffix < cap:
        stop = min(cap, suffix + step)
        if old[len(old) - stop:len(old) - suffix] != new[len(new) - stop:len(new) - suffix]:
            while old[len(old) - suffix - 1] == new[len(new) - suffix - 1]:
                suffix += 1
            break
        suffix, step = stop, step * 2
    return prefix, len(old) - suffix, len(new) - suffix


def _unit(root: Node, lo: int, hi: int) -> Node | None:
    """The top-level function definition (or comment) containing [lo, hi], or None."""
    node = root
    while True:
        # the last child starting at or before `lo`, or the one before it (which may end at `lo`
        # exactly): a binary search, not a walk over the thousands of children of a large file
        # (`first_named_child_for_byte` crashes py-tree-sitter 0.26 on some trees with errors)
        lo_index, hi_index = 0, node.named_child_count
        while lo_index < hi_index:
            mid = (lo_index + hi_index) // 2
            candidate = node.named_child(mid)
            if candidate is not None and candidate.start_byte <= lo:
                lo_index = mid + 1
            else:
                hi_index = mid
        found = [node.named_child(i) for i in range(max(0, lo_index - 3), lo_index)]
        child = next((c for c in found if c is not None and c.start_byte <= lo and hi <= c.end_byte), None)
        if child is None:
            return None
        if child.type in _CONTAINERS:
            node = child
            continue
        if child.type == "function_definition" or child.type == "comment":
            return child
        if child.type == "template_declaration" and any(c.type == "function_definition" for c in child.named_children):
            return child
        return None


# --------------------------------------------------------------------------- restricted extraction


def _range_context(data: bytes, tree: Tree, lines: LineIndex, path: str | None, lo: int, hi: int) -> ExtractionContext:
    """An extraction context whose queries and token scans see only bytes [lo, hi)."""
    return ExtractionContext(data=data, tree=tree, lines=lines, path=path, byte_range=(lo, hi))


def _unit_function_nodes(ctx: ExtractionContext, aliases: dict[str, str]) -> list[Node]:
    """`cuda.function_definitions` restricted to the context's range."""
    nodes = {g["function"][0].start_byte: g["function"][0] for g in ctx.matches["function"]}
    if aliases:
        cursor = QueryCursor(query("function_definitions"))
        lo, hi = ctx.byte_range or (0, len(ctx.data))
        cursor.set_byte_range(lo, hi)
        for n in cursor.captures(ctx.tree.root_node).get("function", []):
            if lo <= n.start_byte and n.end_byte <= hi:
                nodes.setdefault(n.start_byte, n)
    return [nodes[k] for k in sorted(nodes)]


# --------------------------------------------------------------------------- moving spans


_SPAN_CARRIERS = ("Span", "ConstValue", "LaunchBounds", "LoopHeader", "OmpClause")
_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def _span_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if any(t in str(f.type) for t in _SPAN_CARRIERS))
        _FIELDS_CACHE[cls] = names
    return names


def spans_of(value: Any, out: list[Span] | None = None) -> list[Span]:
    """Every Span object reachable from an extraction item."""
    out = [] if out is None else out
    if isinstance(value, Span):
        out.append(value)
    elif isinstance(value, ConstValue):  # not a dataclass: its folding is deferred
        if value.span is not None:
            out.append(value.span)
    elif isinstance(value, tuple):
        for v in value:
            spans_of(v, out)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for name in _span_fields(type(value)):
            spans_of(getattr(value, name), out)
    return out


def _shift_in_place(spans: Iterable[Span], delta: int, lines_after: int | None = None, line_delta: int = 0) -> None:
    """Move spans after an edit. Extraction items are shared by consecutive versions and only the
    newest is ever read, so moving the spans in place is safe and much cheaper than rebuilding
    hundreds of frozen dataclasses per keystroke. A span that starts after `lines_after` (the end
    of the edit's last line, in the new text) keeps its column and moves by `line_delta` lines:
    its position is moved too instead of being computed again (on the next diagnostics build)."""
    move_spans(spans, (-1, -1, delta - 1), lines_after, line_delta)  # (every span lies after that edit)


_MOVES = count(1)


def move_spans(spans: Iterable[Span], region: tuple[int, int, int], lines_after: int | None = None,
               line_delta: int = 0) -> None:
    """Move spans over an edit (start, old end, new end) in place: spans after it move by its
    length (keeping their positions, moved by `line_delta` lines, when they start after
    `lines_after`, the end of the edit's last line in the new text), spans around it stretch,
    spans inside a deleted range shrink to its start; the positions of those are computed again.
    A span listed twice (two items reach it) moves once: each call marks what it moved."""
    start, old_end, new_end = region
    delta = new_end - old_end
    mark = next(_MOVES)
    for span in spans:
        if span.moved_by == mark:
            continue
        span.moved_by = mark
        s, e = span.start_byte, span.end_byte
        if e < start:
            continue
        if s >= old_end:
            span.start_byte, span.end_byte = s + delta, e + delta
            if lines_after is None or span.start_byte <= lines_after:
                span._start = span._end = None
            elif line_delta:
                first, last = span._start, span._end
                span._start = None if first is None else Position(first.line + line_delta, first.character)
                span._end = None if last is None else Position(last.line + line_delta, last.character)
            continue
        span.start_byte = min(s, new_end) if s > start else s
        span.end_byte = e + delta if e >= old_end else max(span.start_byte, min(e, new_end))
        span._start = span._end = None


def edit_lines(old_data: bytes, new_data: bytes, region: tuple[int, int, int]) -> tuple[int | None, int]:
    """For `move_spans`: the end of the edit's last line in the new text (None: positions must
    all be computed again, a lone CR moved) and the change in the number of lines."""
    start, old_end, new_end = region
    line_end = new_data.find(b"\n", new_end)
    if b"\r" in new_data[start:new_end] or b"\r" in old_data[start:old_end]:
        line_end = -1  # a lone CR breaks lines too: positions are computed again
    line_delta = new_data.count(b"\n", start, new_end) - old_data.count(b"\n", start, old_end)
    return (None if line_end < 0 else line_end), line_delta


def _open_ended(segment: bytes) -> bool:
    """Whether a comment or string (as the token and line fallbacks blank them) starts in
    `segment` and is not closed in it: then it blanks text beyond the segment too."""
    if not (b"/*" in segment or b'"' in segment or b"'" in segment):
        return False
    for m in COMMENT_OR_STRING.finditer(DIGIT_SEPARATOR.sub(b"0", segment)):
        if m.end() < len(segment):
            continue
        text = m.group()
        return not (text.startswith(b"/*") and len(text) >= 4 and text.endswith(b"*/"))
    return False


def _directives(segment: bytes) -> list[tuple[str, str]]:
    """Preprocessor directives other than `#pragma` (which the preprocessor pass ignores)."""
    if b"#" not in segment:
        return []
    return [(d.name, d.argument) for d in scan_directives(segment) if d.name != "pragma"]


def _extent(item: CudaFunction | OmpRegion | LaunchSite) -> tuple[int, int]:
    if isinstance(item, OmpRegion):
        end = max(item.span.end_byte, item.body_span.end_byte if item.body_span else 0)
        return item.span.start_byte, end
    return item.span.start_byte, item.span.end_byte


def _signature(fn: CudaFunction) -> tuple[Any, ...]:
    return (fn.name, fn.qualified_name, fn.specialization_args, tuple(p.type for p in fn.params), fn.space)


# --------------------------------------------------------------------------- the update


@dataclass(frozen=True, slots=True)
class _Edit:
    """An edit confined to one top-level definition: `start` is its first changed byte,
    `delta` the change in length; the definition spans [a, b) now and [a, old_b) before."""

    start: int
    delta: int
    a: int
    b: int
    old_b: int
    unit: Node


def _confined_edit(previous: Extracted, old_data: bytes, old_tree: Tree, new_data: bytes, new_tree: Tree,
                   edited_old_tree: Tree, region: tuple[int, int, int]) -> _Edit | None:
    """The definition an edit is confined to, or None when nothing outside it is sure to stay."""
    start, old_end, new_end = region
    delta = new_end - old_end
    lo, hi = start, new_end
    if old_tree.root_node.has_error or new_tree.root_node.has_error:
        # (error recovery may restructure text far from the edit; two trees without an error
        # differ only in the definition around it, checked below: the comparison of the
        # trees, ~0.6 ms on a 10,000-line file, is skipped while typing in a clean one)
        for r in new_tree.changed_ranges(edited_old_tree):
            lo, hi = min(lo, r.start_byte), max(hi, r.end_byte)
    unit = _unit(new_tree.root_node, lo, hi)
    if unit is None:
        return None
    a, b = unit.start_byte, unit.end_byte
    old_b = b - delta
    old_unit = _unit(old_tree.root_node, min(start, old_b), min(max(start, old_end), old_b))
    if old_unit is None or (old_unit.type, old_unit.start_byte, old_unit.end_byte) != (unit.type, a, old_b):
        return None
    # (the text outside [a, b) is unchanged: the whole text is searched only when a token is in the definition)
    if any(_presence_changes(token, previous, new_data, a, old_b, b) for token in (b"omp", *LAUNCH_TOKENS)):
        return None  # extract() skips whole passes on these tokens
    if b"_Pragma" in new_data[a:b] or previous.has(b"_Pragma") or pragma_macros(previous.env):
        return None  # directives written as `_Pragma` (or macros of it) are found by a text scan of the file
    if _directives(old_data[a:old_b]) != _directives(new_data[a:b]):
        return None  # the preprocessor's view of the file (its macros) may have changed
    if _open_ended(old_data[a:old_b]) or _open_ended(new_data[a:b]):
        return None  # the fallbacks' comment/string blanking would run past the definition
    return _Edit(start, delta, a, b, old_b, unit)


_START = operator.attrgetter("span.start_byte")
_END = operator.attrgetter("span.end_byte")
_KINDS = ("kernels", "device", "regions", "launches")
_NAME_START = operator.attrgetter("name_span.start_byte")


def _partition(old_fk: FileKernels, a: int, old_b: int, tree_functions: bool
               ) -> tuple[dict[str, list[Any]], dict[str, list[Any]], dict[str, list[Any]]] | None:
    """The previous items before, inside and after the definition [a, old_b), by kind
    (`_KINDS`); None when an item straddles its boundary. `tree_functions`: every function is
    a definition of the tree (none found by the token fallback)."""
    before: dict[str, list[Any]] = {}
    inside: dict[str, list[Any]] = {}
    after: dict[str, list[Any]] = {}
    groups: tuple[list[Any], ...] = (old_fk.kernels, old_fk.device_functions, old_fk.omp_regions, old_fk.launches)
    for name, items in zip(_KINDS, groups):
        if tree_functions and name in ("kernels", "device"):
            split: tuple[list[Any], list[Any], list[Any]] | None = _split_definitions(items, a, old_b)
        else:
            split = _split_sorted(items, a, old_b) if name != "regions" else None
        if split is None:
            split = _split_each(items, a, old_b)
            if split is None:
                return None
        before[name], inside[name], after[name] = split
    return before, inside, after


def _split_each(items: list[Any], a: int, old_b: int) -> tuple[list[Any], list[Any], list[Any]] | None:
    """(before, inside, after) the definition [a, old_b) (an item that ends at `old_b` and is
    empty is inside), item by item; None when one straddles a boundary."""
    before, inside, after = [], [], []
    for item in items:
        s, e = _extent(item)
        if e <= a and s < a:
            before.append(item)
        elif s >= old_b and (s > old_b or e > old_b):
            after.append(item)
        elif s >= a and e <= old_b:
            inside.append(item)
        else:
            return None
    return before, inside, after


def _split_definitions(items: list[Any], a: int, old_b: int) -> tuple[list[Any], list[Any], list[Any]]:
    """`_split_each` of functions that are all definitions of the tree, by bisection alone (a
    keystroke in a file of a thousand kernels reads a few of them, not each): they are in
    document order (the lists are kept sorted by name; a definition's name follows its start,
    one nested in another follows that one's name), and each lies in one top-level definition,
    before, inside or after the edited one, so none straddles it."""
    first = bisect_left(items, a, key=_START)
    last = bisect_left(items, old_b, key=_START)  # (a definition starts after the edited one ends)
    return items[:first], items[first:last], items[last:]


def _split_sorted(items: list[Any], a: int, old_b: int) -> tuple[list[Any], list[Any], list[Any]] | None:
    """`_split_each` of items in document order (functions, launch sites) by bisection: a
    keystroke in a file of a thousand kernels then classifies the few near the definition, not
    each one in Python. None: not in order (then `_split_each` decides), or one straddles."""
    starts = list(map(_START, items))
    if starts != sorted(starts):
        return None
    first, last = bisect_left(starts, a), bisect_right(starts, old_b)
    before, near, after = items[:first], items[first:last], items[last:]
    if before and max(map(_END, before)) > a:
        return None
    split = _split_each(near, a, old_b)  # (every item here starts in [a, old_b]: none is before)
    if split is None:
        return None
    return before, split[1], split[2] + after


def _regions(previous: Extracted, ctx: ExtractionContext, old_data: bytes, new_data: bytes, edit: _Edit,
             before: dict[str, list[Any]], after: dict[str, list[Any]], omp: bool
             ) -> tuple[list[OmpRegion], bool, int] | None:
    """(regions of the definition, whether the line-level fallback runs, `#pragma omp target`
    lines of the file); filters `before`/`after` as a full extraction would. None: extract in full.
    `omp`: whether the new text holds `omp`."""
    if not omp:
        return [], False, 0
    a, b, old_b = edit.a, edit.b, edit.old_b
    # `#pragma` lines are single lines: recount only those of the definition's lines.
    line_start = new_data.rfind(b"\n", 0, a) + 1
    old_stop, new_stop = old_data.find(b"\n", old_b), new_data.find(b"\n", b)
    old_stop = len(old_data) if old_stop < 0 else old_stop
    new_stop = len(new_data) if new_stop < 0 else new_stop
    pragma_lines = (previous.pragma_lines - len(PRAGMA_LINE.findall(old_data, line_start, old_stop))
                    + len(PRAGMA_LINE.findall(new_data, line_start, new_stop)))
    new_regions = extract_regions(ctx, previous.env) if b"pragma" in new_data[a:b] else []
    if any(r.span.start_byte < a or _extent(r)[1] > b for r in new_regions):
        return None
    outside_tree_regions = sum(1 for r in (*before["regions"], *after["regions"]) if not r.recovered)
    line_scan = pragma_lines > outside_tree_regions + sum(1 for r in new_regions if not r.recovered)
    if line_scan and not previous.omp_line_scan:
        return None
    if not line_scan:
        new_regions = [r for r in new_regions if not r.recovered]
        before["regions"] = [r for r in before["regions"] if not r.recovered]
        after["regions"] = [r for r in after["regions"] if not r.recovered]
    return new_regions, line_scan, pragma_lines


def _launches(ctx: ExtractionContext, env: ConstEnv, new_data: bytes, new_tree: Tree, lines: LineIndex,
              path: str | None, kernels: list[CudaFunction], replaced: list[CudaFunction], new: list[CudaFunction],
              before: list[LaunchSite], after: list[LaunchSite], chevrons: bool) -> list[LaunchSite]:
    """Launch sites: the definition's extracted again, the others kept (and resolved again
    when they name a kernel the edit changed). `chevrons`: whether the new text holds `<<<`."""
    if not chevrons:
        return []
    replaced_kernels = [f for f in replaced if f.space == "global"]
    new_kernels = [f for f in new if f.space == "global"]
    changed_names = {f.name for f in replaced_kernels} | {f.name for f in new_kernels}
    if sorted(map(_signature, replaced_kernels)) == sorted(map(_signature, new_kernels)):
        changed_names = set()  # same kernels by resolution rules: other launches resolve as before
    inside = extract_launches(ctx, env, kernels)

    def reresolve(site: LaunchSite) -> LaunchSite:
        if site.name not in changed_names:
            return site
        single = _range_context(new_data, new_tree, lines, path, site.span.start_byte, site.span.end_byte)
        redone = extract_launches(single, env, kernels)
        return redone[0] if redone else site

    return [reresolve(s) for s in before] + inside + [reresolve(s) for s in after]


def extract_incremental(
    previous: Extracted,
    old_data: bytes,
    old_tree: Tree,
    new_data: bytes,
    new_tree: Tree,
    edited_old_tree: Tree,
    lines: LineIndex,
    path: str | None,
    typed: tuple[int, int, int] | None = None,
) -> Extracted | None:
    """Update `previous` (extracted from `old_data`/`old_tree`) for the new text, or None when
    the change is not confined to one definition (the caller then extracts in full). `typed`:
    the one edit that made the new text, when known (`changed_region`)."""
    region = changed_region(old_data, new_data, typed)
    if region is None:
        return dataclasses.replace(previous, incremental=True, change="none")
    if previous.held is not None:
        return _update_held(previous, old_data, new_data, new_tree, lines, path, region)
    edit = _confined_edit(previous, old_data, old_tree, new_data, new_tree, edited_old_tree, region)
    if (edit is None or edit.unit.has_error) and new_tree.root_node.has_error:
        held = _hold(previous, old_data, old_tree, new_data, region)
        if held is not None:
            return held
    if edit is None:
        return None
    return _reextract_definition(previous, old_data, new_data, new_tree, lines, path, region, edit,
                                 old_data[edit.a:edit.old_b])


def _reextract_definition(previous: Extracted, old_data: bytes, new_data: bytes, new_tree: Tree, lines: LineIndex,
                          path: str | None, region: tuple[int, int, int], edit: _Edit,
                          edited_before: bytes) -> Extracted | None:
    """Extract the edited definition again and keep the rest (moved); None: extract in full."""
    old_fk = previous.kernels
    a, b, old_b, delta = edit.a, edit.b, edit.old_b, edit.delta
    partition = _partition(old_fk, a, old_b, not previous.token_found)
    if partition is None:
        return None
    before, inside, after = partition
    replaced_functions: list[CudaFunction] = inside["kernels"] + inside["device"]

    ctx = _range_context(new_data, new_tree, lines, path, a, b)
    env, aliases = previous.env, previous.aliases

    # CUDA functions: the tree's, then the token fallback exactly when a full extraction runs it.
    unit_functions = _tree_functions(ctx, env, aliases, _unit_function_nodes(ctx, aliases))
    function_kinds = ("kernels", "device")
    outside = sum(len(before[kind]) + len(after[kind]) for kind in function_kinds)
    outside_tree = outside if not previous.token_found else sum(
        1 for kind in function_kinds for f in (*before[kind], *after[kind])
        if f.name_span.start_byte not in previous.token_found)
    # The definition cannot start or end inside a comment (`_open_ended`): its mentions add up.
    unit_tokens = function_space_mentions(new_data[a:b])
    mentions = previous.mentions - function_space_mentions(old_data[a:old_b]) + unit_tokens
    token_scan = _needs_token_scan(aliases, new_tree, mentions, outside_tree + len(unit_functions))
    unit_token_found: list[CudaFunction] = []
    # When the last extraction needed no fallback, every mention outside the definition belongs
    # to a function the tree found (each found function holds one): the fallback, if it runs
    # now, can only find something new inside the definition.
    if token_scan and (aliases or unit_tokens > len(unit_functions)):
        # (each function the tree found accounts for one token: only a surplus can be another)
        seen = {f.name_span.start_byte for f in unit_functions}
        unit_token_found = [f for f in cuda.token_fallback(ctx, env, aliases, seen)
                            if a <= f.span.start_byte and f.span.end_byte <= b]
    token_dropped: list[CudaFunction] = []  # functions only the fallback found, now that it does not run
    if not token_scan and previous.token_found:
        for kind in function_kinds:
            for side in (before, after):
                token_dropped += [f for f in side[kind] if f.name_span.start_byte in previous.token_found]
                side[kind] = [f for f in side[kind] if f.name_span.start_byte not in previous.token_found]
    new_functions = sorted(unit_functions + unit_token_found, key=_NAME_START)

    tokens = {token: occurrences.edited(token, new_data, region) for token, occurrences in previous.tokens.items()}
    # OpenMP regions: the line-level fallback likewise.
    found_regions = _regions(previous, ctx, old_data, new_data, edit, before, after, tokens[b"omp"].present)
    if found_regions is None:
        return None
    new_regions, line_scan, pragma_lines = found_regions

    # Token-found functions are remembered by name offset: note them before spans move.
    token_found = {f.name_span.start_byte for f in unit_token_found}
    if previous.token_found:  # (none in a file the tree parses: no walk over every function then)
        token_found |= {f.name_span.start_byte for kind in function_kinds for f in before[kind]
                        if f.name_span.start_byte in previous.token_found}
        token_found |= {f.name_span.start_byte + delta for kind in function_kinds for f in after[kind]
                        if f.name_span.start_byte in previous.token_found}

    # Items after the edit move by `delta` (even with delta 0 a replaced line break moves their
    # positions: the shift also forgets positions computed before).
    span_lists = previous.spans
    after_items = [item for kind in _KINDS for item in after[kind]]
    after_spans = list(map(span_lists.get, map(id, after_items)))
    if None in after_spans:  # (every item has its list: kept as they are made)
        after_spans = [spans or spans_of(item) for item, spans in zip(after_items, after_spans)]
    line_end = new_data.find(b"\n", region[2])
    if b"\r" in new_data[region[0]:region[2]] or b"\r" in old_data[region[0]:region[1]]:
        line_end = -1  # a lone CR breaks lines too: positions are computed again
    line_delta = new_data.count(b"\n", region[0], region[2]) - old_data.count(b"\n", region[0], region[1])
    _shift_in_place(chain.from_iterable(filter(None, after_spans)), delta, None if line_end < 0 else line_end,
                    line_delta)

    # in document order: the items before the definition end where it starts, those after
    # start where it ends, its own lie inside it
    kernels = before["kernels"] + [f for f in new_functions if f.space == "global"] + after["kernels"]
    device = before["device"] + [f for f in new_functions if f.space == "device"] + after["device"]
    launches = _launches(ctx, env, new_data, new_tree, lines, path, kernels, replaced_functions, new_functions,
                         before["launches"], after["launches"],
                         any(tokens[token].present for token in LAUNCH_TOKENS))

    regions = before["regions"] + new_regions + after["regions"]
    result = FileKernels(
        path=path,
        kernels=kernels,
        device_functions=device,
        omp_regions=regions if tokens[b"omp"].present else [],
        launches=launches,
        has_errors=has_syntax_errors(new_tree),
        notes=[RECOVERED_NOTE] if any(k.recovered for k in new_functions) or (
            RECOVERED_NOTE in old_fk.notes and any(k.recovered for k in kernels)) else [],
    )
    # The span lists of the items: the last ones (a copy in C), less those of the items gone, with
    # those of the new ones; rebuilt if the count does not come out right.
    spans = dict(span_lists)
    region_ids, launch_ids = set(map(id, result.omp_regions)), set(map(id, launches))
    for item in (*replaced_functions, *token_dropped, *(r for r in old_fk.omp_regions if id(r) not in region_ids),
                 *(s for s in old_fk.launches if id(s) not in launch_ids)):
        spans.pop(id(item), None)
    for item in (*new_functions, *new_regions, *launches):  # (new items, and launch sites resolved again)
        if id(item) not in spans:
            spans[id(item)] = spans_of(item)
    if len(spans) != len(kernels) + len(device) + len(result.omp_regions) + len(launches):
        spans = {id(item): span_lists.get(id(item)) or spans_of(item)
                 for item in (*kernels, *device, *result.omp_regions, *launches)}
    edited_functions = (*replaced_functions, *new_functions)
    has_regions = bool(new_regions) or any(a <= r.span.start_byte < old_b for r in old_fk.omp_regions)
    if edit.unit.type == "comment":
        change = "comment"
    elif has_regions:
        change = "other"
    elif not edited_functions:
        change = "host"
    elif all(f.space == "global" for f in edited_functions):
        change = "kernel"
    elif all(f.space == "device" for f in edited_functions):
        change = "device"
    else:
        change = "other"
    return Extracted(result, env, aliases, token_scan, frozenset(token_found), line_scan, pragma_lines, mentions,
                     spans, incremental=True, change=change, edit_start=edit.start, edited=(a, b),
                     edited_before=edited_before, edited_functions=frozenset(f.name for f in edited_functions),
                     region=region, top=previous.top, tokens=tokens)


# --------------------------------------------------------------------------- holding a definition


_DEFINITIONS = ("function_definition", "template_declaration")


def _holdable(previous: Extracted, old_data: bytes, new_data: bytes, a: int, old_b: int, b: int,
              before_text: bytes) -> bool:
    """Whether an edit inside the definition [a, old_b) (now [a, b)) can leave everything
    outside it as it was: it changes no directive (the preprocessor's view), opens no comment
    that would run past it, and no token that switches a whole extraction pass on or off."""
    if any(_presence_changes(token, previous, new_data, a, old_b, b) for token in (b"omp", *LAUNCH_TOKENS)):
        return False
    if pragma_macros(previous.env) or b"_Pragma" in new_data[a:b] or b"_Pragma" in before_text:
        return False  # (`_Pragma` elsewhere: the file is not held, see `_hold`)
    segment = new_data[a:b]
    return _directives(before_text) == _directives(segment) and not _open_ended(segment)


def _presence_changes(token: bytes, previous: Extracted, new_data: bytes, a: int, old_b: int, b: int) -> bool:
    """Whether `token` (one of `_TRACKED`) occurs in the previous text and not in the new one, or
    the other way round, when only [a, old_b) changed (to [a, b))."""
    return previous.has(token) != previous.tokens[token].edited(token, new_data, (a, old_b, b)).present


def _hold(previous: Extracted, old_data: bytes, old_tree: Tree, new_data: bytes,
          region: tuple[int, int, int]) -> Extracted | None:
    """Hold the definition the edit lies strictly inside (it does not parse now); None when
    there is no such definition or the edit may reach past it. (It parsed before, unless the
    user paused on the error: then it holds the extraction of the text as it read then.)"""
    start, old_end, new_end = region
    unit = _unit(old_tree.root_node, start, old_end)
    if unit is None or unit.type not in _DEFINITIONS:
        return None
    a, old_b = unit.start_byte, unit.end_byte
    if not (a < start and old_end < old_b) or previous.has(b"_Pragma"):
        return None  # (`_Pragma` directives are found by a text scan of the whole file)
    before_text = old_data[a:old_b]
    if not _holdable(previous, old_data, new_data, a, old_b, old_b + new_end - old_end, before_text):
        return None
    return _moved_held(previous, old_data, new_data, region, a, old_b, before_text)


def definition_around(tree: Tree, start: int, old_end: int) -> tuple[int, int] | None:
    """The bytes of the top-level definition that holds [start, old_end) strictly inside, or None."""
    unit = _unit(tree.root_node, start, old_end)
    if unit is None or unit.type not in _DEFINITIONS or not (unit.start_byte < start and old_end < unit.end_byte):
        return None
    return unit.start_byte, unit.end_byte


def parses_alone(segment: bytes, parser: Parser) -> bool:
    """Whether a definition's text has no syntax error on its own: the grammar is context-free
    at top level, so this says whether it parses in the file, at the cost of a parse of the
    definition rather than of the file (tree-sitter's error recovery over the rest of the file
    can cost 50-150 ms per keystroke). An edit that made it two valid declarations (`float
    f(...)` typed into as `fint N = 4;loat f(...)`) parses too: the file then parses as usual."""
    return not parser.parse(segment).root_node.has_error


def hold_edit(previous: Extracted, old_data: bytes, new_data: bytes, region: tuple[int, int, int],
              definition: tuple[int, int]) -> Extracted | None:
    """Hold `definition` (its bytes before the edit) over an edit inside it, without a parse of
    the new text (the caller knows the definition does not parse: `parses_alone`); None when the
    edit may reach past it."""
    a, old_b = definition
    start, old_end, new_end = region
    if not (a < start and old_end < old_b) or (previous.held is None and previous.has(b"_Pragma")):
        return None
    before_text = previous.held_before if previous.held is not None else old_data[a:old_b]
    if not _holdable(previous, old_data, new_data, a, old_b, old_b + new_end - old_end, before_text):
        return None
    return _moved_held(previous, old_data, new_data, region, a, old_b, before_text)


def _update_held(previous: Extracted, old_data: bytes, new_data: bytes, new_tree: Tree, lines: LineIndex,
                 path: str | None, region: tuple[int, int, int]) -> Extracted | None:
    """An edit while a definition is held: inside it, the definition is extracted again once it
    parses (as one edit of its held text), else it stays held; an edit elsewhere: None."""
    assert previous.held is not None
    a, old_b = previous.held
    start, old_end, new_end = region
    if not (a < start and old_end < old_b):
        return None
    delta = new_end - old_end
    b = old_b + delta
    if not _holdable(previous, old_data, new_data, a, old_b, b, previous.held_before):
        return None
    unit = _unit(new_tree.root_node, a, b)
    if unit is not None and unit.type in _DEFINITIONS and (unit.start_byte, unit.end_byte) == (a, b) \
            and not unit.has_error:
        edit = _Edit(start, delta, a, b, old_b, unit)
        return _reextract_definition(previous, old_data, new_data, new_tree, lines, path, region, edit,
                                     previous.held_before)
    return _moved_held(previous, old_data, new_data, region, a, old_b, previous.held_before)


def _moved_held(previous: Extracted, old_data: bytes, new_data: bytes, region: tuple[int, int, int], a: int,
                old_b: int, before_text: bytes) -> Extracted | None:
    """The previous extraction with the held definition [a, old_b) kept as it was: its items'
    spans stretched over the edit, the items after it moved."""
    old_fk = previous.kernels
    start, old_end, new_end = region
    delta = new_end - old_end
    partition = _partition(old_fk, a, old_b, not previous.token_found)
    if partition is None:
        return None  # an item straddles the definition's boundary
    _, inside, after = partition
    span_lists = previous.spans
    moving = [item for kind in _KINDS for item in (*inside[kind], *after[kind])]
    region_lines = edit_lines(old_data, new_data, region)
    move_spans(chain.from_iterable(span_lists.get(id(item)) or spans_of(item) for item in moving),
               region, *region_lines)
    b = old_b + delta
    old_segment, new_segment = old_data[a:old_b], new_data[a:b]
    mentions = previous.mentions - function_space_mentions(old_segment) + function_space_mentions(new_segment)
    pragma_lines = previous.pragma_lines
    tokens = {token: occurrences.edited(token, new_data, region) for token, occurrences in previous.tokens.items()}
    if tokens[b"omp"].present:  # `#pragma` lines are whole lines: recount the definition's lines
        line_start = new_data.rfind(b"\n", 0, a) + 1
        old_stop, new_stop = old_data.find(b"\n", old_b), new_data.find(b"\n", b)
        old_stop = len(old_data) if old_stop < 0 else old_stop
        new_stop = len(new_data) if new_stop < 0 else new_stop
        pragma_lines += (len(PRAGMA_LINE.findall(new_data, line_start, new_stop))
                         - len(PRAGMA_LINE.findall(old_data, line_start, old_stop)))
    token_found = frozenset(o + delta if o >= old_end else o for o in previous.token_found)
    kernels = dataclasses.replace(old_fk, has_errors=True, notes=list(old_fk.notes))
    return dataclasses.replace(previous, kernels=kernels, token_found=token_found, mentions=mentions,
                               pragma_lines=pragma_lines, incremental=True, change="held", edit_start=start,
                               edited=(a, b), edited_before=before_text, edited_functions=frozenset(),
                               region=region, region_lines=region_lines, held=(a, b), held_before=before_text,
                               tokens=tokens)


def signature(value: Any) -> Any:
    """A comparable form of an extraction result (spans as byte ranges)."""
    if isinstance(value, Span):
        return (value.start_byte, value.end_byte)
    if isinstance(value, (list, tuple)):
        return tuple(signature(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *(signature(getattr(value, f.name)) for f in dataclasses.fields(value)
                                         if f.name != "notes"))
    return value
