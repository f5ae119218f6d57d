"""Exact mapping between UTF-8 byte offsets (tree-sitter) and LSP positions (UTF-16 columns).

Lines end at LF, CRLF or a lone CR, as LSP and clang count them (tree-sitter's own rows count
only LF, so rows are never used for anything shown to a user).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Position:
    """A 0-based LSP position: `character` counts UTF-16 code units."""

    line: int
    character: int


class LineIndex:
    """Line starts of one immutable byte string, with byte <-> UTF-16 conversion."""

    __slots__ = ("_line_starts", "_shift", "data")

    def __init__(self, data: bytes):
        self.data = data
        self._line_starts: list[int] | None = None  # computed on first use
        # (first line, delta): the starts of that line and of every later one are `delta` bytes
        # more than `_line_starts` holds. An edit inside one line moves every later line start:
        # `edited` records that instead of rewriting the ~10,000 starts of a large file per
        # keystroke (typing on in the same line adds to it); `line_starts` applies it.
        self._shift: tuple[int, int] | None = None

    def _raw(self) -> list[int]:
        """The line starts before the pending shift."""
        starts = self._line_starts
        if starts is None:
            data = self.data
            if b"\r" in data:
                starts = [0]
                starts.extend(m.end() for m in _LINE_BREAK.finditer(data))
            else:
                starts = [0, *accumulate(len(line) + 1 for line in data.split(b"\n")[:-1])]
            self._line_starts = starts
        return starts

    @property
    def line_starts(self) -> list[int]:
        starts = self._raw()
        if self._shift is not None:
            first, delta = self._shift
            starts = self._line_starts = starts[:first] + list(map(delta.__add__, starts[first:]))  # (a new list: shared ones stay)
            self._shift = None
        return starts

    @property
    def line_count(self) -> int:
        return len(self._raw())

    def line_start(self, line: int) -> int:
        """Byte offset of the start of `line`."""
        start = self._raw()[line]
        shift = self._shift
        return start + shift[1] if shift is not None and line >= shift[0] else start

    def line_of(self, byte_offset: int) -> int:
        """0-based line containing `byte_offset`."""
        starts, shift = self._raw(), self._shift
        if shift is None:
            return bisect_right(starts, byte_offset) - 1
        first, delta = shift
        if first < len(starts) and byte_offset >= starts[first] + delta:
            return bisect_right(starts, byte_offset - delta, first) - 1
        return bisect_right(starts, byte_offset, 0, first) - 1

    def line_end(self, line: int) -> int:
        """Byte offset of the end of `line`'s content (before its line break)."""
        if line + 1 < self.line_count:
            end = self.line_start(line + 1)
            if self.data[end - 2 : end] == b"\r\n":
                return end - 2
            return end - 1
        return len(self.data)

    def edited(self, new_data: bytes, start: int, old_end: int, inserted: bytes) -> LineIndex:
        """The index of `new_data`: this text with bytes [start, old_end) replaced by `inserted`,
        LF line breaks only (no CR in either), built from this one instead of from the text."""
        fresh = LineIndex(new_data)
        first = self.line_of(start) + 1  # lines starting at or before `start` stay
        last = self.line_of(old_end) + 1  # those starting inside the replaced bytes go
        delta = len(inserted) - (old_end - start)
        if first == last and b"\n" not in inserted:  # (typing inside a line: no start added or removed)
            if not delta:
                fresh._line_starts, fresh._shift = self._raw(), self._shift
            elif self._shift is None or self._shift[0] == last:  # (lists of starts are shared, never changed)
                total = delta + (self._shift[1] if self._shift is not None else 0)
                fresh._line_starts, fresh._shift = self._raw(), ((last, total) if total else None)
            else:  # a pending shift from another line: applied once, then this one is pending
                fresh._line_starts, fresh._shift = self.line_starts, (last, delta)
            return fresh
        starts = self.line_starts
        breaks = [start + i + 1 for i, byte in enumerate(inserted) if byte == 10]
        fresh._line_starts = starts[:first] + breaks + (list(map(delta.__add__, starts[last:])) if delta else starts[last:])
        return fresh

    def adopt(self, other: LineIndex) -> None:
        """Take `other`'s text and line starts (an index that spans point at follows the text)."""
        self.data, self._line_starts, self._shift = other.data, other._line_starts, other._shift

    def position(self, byte_offset: int) -> Position:
        byte_offset = max(0, min(byte_offset, len(self.data)))
        starts = self._line_starts
        if starts is not None and self._shift is None:  # (the common case, inline: `check` asks this per span)
            line = bisect_right(starts, byte_offset) - 1
            start = starts[line]
        else:
            line = self.line_of(byte_offset)
            start = self.line_start(line)
        prefix = self.data[start:byte_offset]
        if prefix.isascii():
            return Position(line, len(prefix))
        text = prefix.decode("utf-8", errors="replace")  # a cut inside a character counts as one unit
        return Position(line, _utf16_len(text))

    def offset(self, position: Position | tuple[int, int]) -> int:
        """Byte offset of an LSP position; columns past the line end clamp to it."""
        line, character = position if isinstance(position, tuple) else (position.line, position.character)
        if line < 0:
            return 0
        if line >= self.line_count:
            return len(self.data)
        start = self.line_start(line)
        end = self.line_end(line)
        content = self.data[start:end]
        if content.isascii():
            return start + min(character, len(content))
        units = 0
        consumed = 0
        for ch in content.decode("utf-8"):
            if units >= character:
                return start + consumed
            units += 2 if ord(ch) > 0xFFFF else 1
            consumed += len(ch.encode("utf-8"))
        return end


def _utf16_len(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
