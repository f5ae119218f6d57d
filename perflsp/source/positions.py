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

    __slots__ = ("_line_starts", "data")

    def __init__(self, data: bytes):
        self.data = data
        self._line_starts: list[int] | None = None  # computed on first use

    @property
    def line_starts(self) -> list[int]:
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
    def line_count(self) -> int:
        return len(self.line_starts)

    def line_of(self, byte_offset: int) -> int:
        """0-based line containing `byte_offset`."""
        return bisect_right(self.line_starts, byte_offset) - 1

    def line_end(self, line: int) -> int:
        """Byte offset of the end of `line`'s content (before its line break)."""
        if line + 1 < len(self.line_starts):
            end = self.line_starts[line + 1]
            if self.data[end - 2 : end] == b"\r\n":
                return end - 2
            return end - 1
        return len(self.data)

    def position(self, byte_offset: int) -> Position:
        byte_offset = max(0, min(byte_offset, len(self.data)))
        line = self.line_of(byte_offset)
        start = self.line_starts[line]
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
        if line >= len(self.line_starts):
            return len(self.data)
        start = self.line_starts[line]
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
