"""Calls through a function pointer: through a table of them (`coding_func table[] = {w1, w2,
...};`, a pointer taken from it, `ptrs[i] = table[k];`, and called, `ptrs[j](k, index[j], ...)`),
or through the parameter of a function the wrapper is handed to (`time_it(sgemm_gpu, A, B, C, n)`
calling `run(A, B, C, n)`). Such a call passes its arguments to the function (that takes as many
parameters): where a wrapper that launches a kernel is never called by name, this is its caller."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node

from perflsp.kernels.definitions import parameter_names
from perflsp.source.files import SkippedFile, load_file

_POINTER_WRAPPERS = ("parenthesized_expression", "pointer_expression")  # `(*p)(...)`
_MAX_TABLES = 8  # (a name listed in more tables than this is not a callee read this way)


def tables_listing(data: bytes, root: Node, name: str) -> tuple[str, ...]:
    """The arrays whose initialiser lists the function `name` (`f[] = {name, ...}`)."""
    found: dict[str, None] = {}
    for node in _identifiers(data, root, name):
        if node.parent is None or node.parent.type != "initializer_list":
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
        for node in _identifiers(data, root, pointer):
            callee = node.parent if node.parent is not None and node.parent.type == "subscript_expression" else node
            call = _called(callee)
            if call is not None:
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


def calls_through_callbacks(data: bytes, root: Node, name: str, definitions: dict[str, Node]) -> list[Node]:
    """Calls of the function `name` through a parameter of a function of this text it is passed
    to: for `bench(sgemm_gpu, A, n)`, with `void bench(void (*run)(float *, int), float *A, int n)`
    defined here, the calls `run(...)` in `bench`'s body; in text order."""
    found: dict[int, Node] = {}
    for node in _identifiers(data, root, name):
        if node.parent is None or node.parent.type != "argument_list":
            continue
        call = node.parent.parent
        callee = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
        receiver = definitions.get(_text(data, callee)) if callee is not None and callee.type == "identifier" else None
        if receiver is None:
            continue
        index = [a for a in node.parent.named_children if a.type != "comment"].index(node)
        names = parameter_names(receiver, data)
        parameter = names[index] if index < len(names) else None
        body = receiver.child_by_field_name("body")
        if parameter is None or body is None:
            continue
        for used in _identifiers(data, root, parameter, body):
            inner = _called(used)
            if inner is not None:
                found.setdefault(inner.start_byte, inner)
    return [found[k] for k in sorted(found)]


def _identifiers(data: bytes, root: Node, word: str, within: Node | None = None) -> Iterator[Node]:
    """The identifier nodes spelling `word` in the text (in `within`'s span, if given)."""
    for at in _word_offsets(data, word):
        if within is not None and not within.start_byte <= at < within.end_byte:
            continue
        node = root.descendant_for_byte_range(at, at + len(word))
        if node is not None and node.type == "identifier":
            yield node


def _called(callee: Node) -> Node | None:
    """The call expression `callee` (through `(*p)`) is the function of, or None."""
    while callee.parent is not None and callee.parent.type in _POINTER_WRAPPERS:
        callee = callee.parent
    call = callee.parent
    return call if call is not None and call.type == "call_expression" and call.child_by_field_name("function") == callee \
        else None


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


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
