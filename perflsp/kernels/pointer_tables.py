"""Calls through a table of function pointers: `coding_func table[] = {w1, w2, ...};`, a
pointer taken from it (`ptrs[i] = table[k];`) and called (`ptrs[j](k, index[j], ...)`). Such a
call passes its arguments to each function the table lists (that takes as many parameters):
where a wrapper that launches a kernel is never called by name, this is its caller."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node

from perflsp.source.files import SkippedFile, load_file

_POINTER_WRAPPERS = ("parenthesized_expression", "pointer_expression")  # `(*p)(...)`
_MAX_TABLES = 8  # (a name listed in more tables than this is not a callee read this way)


def tables_listing(data: bytes, root: Node, name: str) -> tuple[str, ...]:
    """The arrays whose initialiser lists the function `name` (`f[] = {name, ...}`)."""
    found: dict[str, None] = {}
    for at in _word_offsets(data, name):
        node = root.descendant_for_byte_range(at, at + len(name))
        if node is None or node.type != "identifier" or node.parent is None or node.parent.type != "initializer_list":
            continue
        declarator = node.parent.parent
        if declarator is None or declarator.type != "init_declarator":
            continue
        table = _declared_array(declarator.child_by_field_name("declarator"))
        if table is not None:
            found.setdefault(data[table.start_byte:table.end_byte].decode("utf-8", errors="replace"))
    return tuple(found)[:_MAX_TABLES]


def calls_through(data: bytes, root: Node, tables: tuple[str, ...]) -> list[Node]:
    """Calls, in the text, of an element of one of `tables` or of a pointer taken from one
    (`p[i] = table[k]; p[j](...)`, `fn q = table[k]; q(...)`), in text order."""
    pointers = dict.fromkeys(tables)
    text = data.decode("utf-8", errors="replace")
    for table in tables:
        taken = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]=;]*\])?\s*=\s*(?:\([\w\s*]+\)\s*)?&?\s*"
                           + re.escape(table) + r"\s*\[")
        pointers.update(dict.fromkeys(m.group(1) for m in taken.finditer(text)))
    found: dict[int, Node] = {}
    for pointer in pointers:
        for at in _word_offsets(data, pointer):
            node = root.descendant_for_byte_range(at, at + len(pointer))
            if node is None or node.type != "identifier":
                continue
            callee = node.parent if node.parent is not None and node.parent.type == "subscript_expression" else node
            while callee.parent is not None and callee.parent.type in _POINTER_WRAPPERS:
                callee = callee.parent
            call = callee.parent
            if call is not None and call.type == "call_expression" and call.child_by_field_name("function") == callee:
                found.setdefault(call.start_byte, call)
    return [found[k] for k in sorted(found)]


@lru_cache(maxsize=1024)
def mentions_any(path: Path, mtime_ns: int, size: int, words: tuple[str, ...]) -> bool:
    """Whether the file (this version of it) names one of `words` (a table, where its pointers are taken)."""
    loaded = load_file(path)
    return not isinstance(loaded, SkippedFile) and any(_word_offsets(loaded.data, w) for w in words)


def _declared_array(declarator: Node | None) -> Node | None:
    """The name an array declarator declares, through `(*name[])(...)` and `*name[]`."""
    array = False
    while declarator is not None and declarator.type != "identifier":
        array = array or declarator.type == "array_declarator"
        inner = declarator.child_by_field_name("declarator")
        if inner is None and declarator.type == "parenthesized_declarator":
            inner = declarator.named_children[0] if declarator.named_children else None
        declarator = inner
    return declarator if array else None


def _word_offsets(data: bytes, word: str) -> list[int]:
    """Offsets of `word` as a whole word in `data` (`bytes.find`: a regex tries every position)."""
    raw, out = word.encode(), []
    at = data.find(raw)
    while at >= 0:
        end = at + len(raw)
        if not _word_byte(data[at - 1:at]) and not _word_byte(data[end:end + 1]):
            out.append(at)
        at = data.find(raw, end)
    return out


def _word_byte(byte: bytes) -> bool:
    return byte.isalnum() or byte == b"_"
