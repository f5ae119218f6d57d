"""A source text with its tree, re-parsed incrementally as edits arrive."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Parser, Point, Tree

from perflsp.source.parser import new_parser, parse
from perflsp.source.positions import LineIndex, Position


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace the UTF-16 range [start, end) with `text`."""

    start: Position
    end: Position
    text: str


class SourceDocument:
    """Bytes + tree + line index of one document version.

    `apply_edits` mutates the tree with `Tree.edit` and re-parses with the old tree, so a
    one-character change in a 10,000-line file costs a fraction of a full parse.
    """

    def __init__(self, text: str | bytes, version: int | None = None, parser: Parser | None = None):
        self._parser = parser or new_parser()
        self.data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
        self.version = version
        self.lines = LineIndex(self.data)
        self.tree: Tree = parse(self.data, parser=self._parser)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    def replace_all(self, text: str | bytes, version: int | None = None) -> None:
        self.data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
        self.version = version
        self.lines = LineIndex(self.data)
        self.tree = parse(self.data, parser=self._parser)

    def apply_edits(self, edits: list[TextEdit], version: int | None = None) -> None:
        """Apply LSP-style edits in order (each relative to the text left by the previous one)."""
        tree = self.tree
        data = self.data
        lines = self.lines
        for edit in edits:
            start = lines.offset(edit.start)
            old_end = max(start, lines.offset(edit.end))
            new_bytes = edit.text.encode("utf-8", errors="surrogatepass")
            new_end = start + len(new_bytes)
            start_point = _point(data, lines, start)
            old_end_point = _point(data, lines, old_end)
            data = data[:start] + new_bytes + data[old_end:]
            new_end_point = _point_after(start_point, new_bytes)
            tree.edit(
                start_byte=start,
                old_end_byte=old_end,
                new_end_byte=new_end,
                start_point=start_point,
                old_end_point=old_end_point,
                new_end_point=new_end_point,
            )
            lines = LineIndex(data) if len(edits) > 1 else lines
        self.data = data
        self.lines = LineIndex(data) if len(edits) <= 1 else lines
        self.tree = parse(data, tree, self._parser)
        self.version = version


def _point(data: bytes, lines: LineIndex, offset: int) -> Point:
    # tree-sitter points count rows by LF only; derive them from the bytes, not from LineIndex.
    row = data.count(b"\n", 0, offset)
    last_lf = data.rfind(b"\n", 0, offset)
    return Point(row, offset - (last_lf + 1))


def _point_after(start: Point, inserted: bytes) -> Point:
    newlines = inserted.count(b"\n")
    if newlines == 0:
        return Point(start.row, start.column + len(inserted))
    return Point(start.row + newlines, len(inserted) - (inserted.rfind(b"\n") + 1))
