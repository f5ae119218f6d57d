"""TOML files as a user wrote them: where a syntax error is and on which line a key was set, so
that a message about a configuration or GPU file names the file and the line
(`path:LINE: what is wrong`), as a compiler's does.

`tomllib` gives values without positions; `key_line` finds a key's line from the text itself
(table headers, `[[array]]` tables by index, bare, quoted and dotted keys). It is a locator for
messages, not a parser: a key it cannot place (inside a multi-line string, say) gives no line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

Key = str | int  # a table key, or the index of an [[array]] table

_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_END = re.compile(r"\s*\(at end of document\)\s*$")
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def syntax_error(path: str | Path, text: str, exc: tomllib.TOMLDecodeError) -> str:
    """`path:LINE:COLUMN: invalid TOML: what` for a TOMLDecodeError of `text`."""
    message = str(exc)
    if (match := _POSITION.search(message)) is not None:
        return f"{path}:{match.group(1)}:{match.group(2)}: invalid TOML: {message[:match.start()]}"
    if (match := _END.search(message)) is not None:
        last = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        return f"{path}:{max(1, last)}: invalid TOML: {message[:match.start()]} (at the end of the file)"
    return f"{path}: invalid TOML: {message}"


def where(path: str | Path, text: str | None, *keys: Key) -> str:
    """`path:LINE` of the deepest of `keys` that the text sets (`path` alone when none is found)."""
    line = key_line(text, *keys) if text is not None else None
    return f"{path}:{line}" if line is not None else str(path)


def key_line(text: str, *keys: Key) -> int | None:
    """The 1-based line where `keys` (a path: `"rules", "occupancy/low"`; `"gpu", 0, "sm_count"`
    for the first `[[gpu]]` table) is set, else where its deepest enclosing table or key is."""
    lines = _defined(text)
    for depth in range(len(keys), 0, -1):
        line = lines.get(tuple(keys[:depth]))
        if line is not None:
            return line
    return None


def _defined(text: str) -> dict[tuple[Key, ...], int]:
    """The line of every table header and key path the text defines (the first one wins)."""
    found: dict[tuple[Key, ...], int] = {}
    arrays: dict[tuple[Key, ...], int] = {}
    table: tuple[Key, ...] = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[["):
            parsed = _keys(line[2:], "]]")
            if parsed is None:
                continue
            name = tuple(parsed[0])
            index = arrays.get(name, -1) + 1
            arrays[name] = index
            table = (*name, index)
            found.setdefault(name, number)
            found.setdefault(table, number)
        elif line.startswith("["):
            parsed = _keys(line[1:], "]")
            if parsed is None:
                continue
            table = tuple(parsed[0])
            found.setdefault(table, number)
        else:
            parsed = _keys(line, "=")
            if parsed is None:
                continue
            for depth in range(1, len(parsed[0]) + 1):
                found.setdefault((*table, *parsed[0][:depth]), number)
    return found


def _keys(text: str, end: str) -> tuple[list[str], str] | None:
    """A dotted key at the start of `text` followed by `end`: (its parts, the rest), or None."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] in "\"'":
            quote = text[i]
            close = i + 1
            while close < n and text[close] != quote:
                close += 2 if quote == '"' and text[close] == "\\" else 1
            if close >= n:
                return None
            parts.append(text[i + 1:close])
            i = close + 1
        else:
            match = _BARE.match(text, i)
            if match is None:
                return None
            parts.append(match.group())
            i = match.end()
        while i < n and text[i] in " \t":
            i += 1
        if text.startswith(end, i):
            return parts, text[i + len(end):]
        if i < n and text[i] == ".":
            i += 1
            continue
        return None
