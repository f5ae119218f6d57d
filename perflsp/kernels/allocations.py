"""The host code's allocations, indexed in one pass over the text: for each name, the first
`malloc`/`calloc`/`aligned_alloc`, `new T[n]`, `std::vector<T> v(n)` or array declaration
`T a[n][m]` that allocates it, as written (the program model folds its size where it is used)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HostAllocation:
    """The first host-side allocation of a variable in the file, as written.

    `kind` is `malloc`, `calloc`, `aligned_alloc`, `new[]`, `std::vector` or `array`; `offset`
    is where the statement starts (its constants are folded there); `groups` are the pieces of
    the statement the size is computed from: the allocator's arguments (`malloc` family), the
    element type and the one or two bracketed counts (`new[]`), the element type and the
    constructor's arguments (`std::vector`), the element type and the bracketed dimensions
    (`array`)."""

    kind: str
    offset: int
    groups: tuple[str | None, ...]


# The forms as a search for one name would match them at the name's position; the index runs
# each only where it can match (after a word followed by `=`, at `vector`, before `[`), and a
# name is found where that search would first find it (`data = malloc(...)` also allocates
# `ata`, as the suffix of `data`).
_MALLOC = re.compile(r"(\w++)\s*=\s*(?:\([^()]*\)\s*)?(?:std::)?(malloc|calloc|aligned_alloc)\s*\(([^;]*)\)\s*;")
_NEW = re.compile(r"(\w++)\s*=\s*new\s+([\w:<> ]+?)\s*\[([^;]+)\]\s*(?:\[([^;\]]+)\])?\s*;")
_VECTOR = re.compile(r"vector\s*<\s*([\w:<> ]+?)\s*>\s*(\w++)\s*[({]([^;]*?)[)}]\s*;")
_ARRAY = re.compile(r"\b([A-Za-z_][\w:]*+)\s+(\w++)\s*((?:\[[^\]]+\]\s*)+)\s*[;={]")
_TYPE_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"  # what `\w` matches in a str pattern


def _word_before(text: str, end: int) -> tuple[int, int] | None:
    """The word that ends where whitespace before `end` begins, as (start, end), or None."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    word_end = i
    while i > 0 and _is_word(text[i - 1]):
        i -= 1
    return (i, word_end) if i < word_end else None


def index_allocations(text: str) -> list[dict[str, HostAllocation]]:
    """Per allocation form (in the order they are consulted), the first allocation of each name."""
    malloc: dict[str, HostAllocation] = {}
    new: dict[str, HostAllocation] = {}
    if "alloc" in text or "new" in text:
        at = text.find("=")
        while at >= 0:
            word = _word_before(text, at)
            if word is not None:
                start, end = word
                m = _MALLOC.match(text, start)
                if m is not None and m.end(1) == end:
                    for p in range(start, end):  # each suffix of the word is a name the form allocates
                        malloc.setdefault(text[p:end], HostAllocation(m.group(2), p, (m.group(3),)))
                m = _NEW.match(text, start)
                if m is not None and m.end(1) == end:
                    for p in range(start, end):
                        new.setdefault(text[p:end], HostAllocation("new[]", p, (m.group(2), m.group(3), m.group(4))))
            at = text.find("=", at + 1)
    vector: dict[str, HostAllocation] = {}
    at = text.find("vector")
    while at >= 0:
        m = _VECTOR.match(text, at)
        if m is not None:
            vector.setdefault(m.group(2), HostAllocation("std::vector", at, (m.group(1), m.group(3))))
        at = text.find("vector", at + 1)
    array: dict[str, HostAllocation] = {}
    at = text.find("[")
    fields = _class_bodies(text) if "[" in text else []
    while at >= 0:
        found = _array_before(text, at)
        if found is not None and not any(a < at < b for a, b in fields):
            start, m = found
            array.setdefault(m.group(2), HostAllocation("array", start, (m.group(1), m.group(3))))
        at = text.find("[", at + 1)
    return [malloc, new, vector, array]


_BRACE = re.compile(r"[{}]")
_CLASS_HEAD = re.compile(r"\b(?:struct|class|union)\s+(?:\w+\s*)?(?::[^{};()]*)?\{")


def _class_bodies(text: str) -> list[tuple[int, int]]:
    """The `{...}` bodies of struct, class and union definitions: an array declared there is a
    member each object holds (`struct Tree { int apples[N]; };`), no allocation of that name."""
    bodies: list[tuple[int, int]] = []
    for m in _CLASS_HEAD.finditer(text):
        open_at = m.end() - 1
        if bodies and bodies[-1][0] < open_at < bodies[-1][1]:
            continue  # (a nested class: inside the body found already)
        depth, close_at = 0, len(text)
        for brace in _BRACE.finditer(text, open_at):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                close_at = brace.start()
                break
        bodies.append((open_at, close_at))
    return bodies


def _array_before(text: str, bracket: int) -> tuple[int, re.Match[str]] | None:
    """`T name[...]` whose first `[` is at `bracket`: where the declaration starts (the first
    position of the type word that begins a word) and its match."""
    name = _word_before(text, bracket)
    if name is None or name[0] == 0 or not text[name[0] - 1].isspace():
        return None
    i = name[0]
    while i > 0 and text[i - 1].isspace():
        i -= 1
    run_end = i
    while i > 0 and (_is_word(text[i - 1]) or text[i - 1] == ":"):
        i -= 1
    for p in range(i, run_end):
        if text[p] in _TYPE_START and (p == 0 or not _is_word(text[p - 1])):
            m = _ARRAY.match(text, p)
            return (p, m) if m is not None and m.start(2) == name[0] else None
    return None
