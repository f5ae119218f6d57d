"""One open document's text, tree and extraction, updated in place as edits arrive.

Owned by the document's worker (one thread at a time): `apply` takes LSP content changes, parses
incrementally, and extracts kernels incrementally where the change allows it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Point, Tree

from perflsp.analysis.reader import ReadContext
from perflsp.compiled.model import CompiledSource
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import IncludeResolver, balanced_view
from perflsp.kernels.incremental import (
    Extracted,
    changed_region,
    definition_around,
    extract_full,
    extract_incremental,
    hold_edit,
    parses_alone,
    signature,
)
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.source.document import SourceDocument, TextEdit, _point_after
from perflsp.source.files import decode_source
from perflsp.source.parser import new_parser, parse
from perflsp.source.parser import parse as _parse
from perflsp.source.positions import LineIndex, Position


class DocumentModel:
    """The program model of one version of an open document (one extraction, one preprocessor
    view, one set of program arguments), built on first use by the constructor every reader uses
    (`kernels.program.program_model`) from the version's `SourceFile`: equal to a fresh read of
    the same text. Held by the document's `TextState` and the snapshots of that version."""

    __slots__ = ("_model", "_source", "argv", "extracted", "preprocessed")

    def __init__(self, source: Callable[[], SourceFile], extracted: Extracted, preprocessed: ConstEnv,
                 argv: tuple[str, ...] | None):
        self._source = source
        self.extracted = extracted
        self.preprocessed = preprocessed
        self.argv = argv
        self._model: ProgramModel | None = None

    def serves(self, extracted: Extracted, preprocessed: ConstEnv, argv: tuple[str, ...] | None) -> bool:
        """Whether this is the model of that version (nothing it is built from changed)."""
        return extracted is self.extracted and preprocessed is self.preprocessed and argv == self.argv

    @property
    def model(self) -> ProgramModel:
        if self._model is None:
            self._model = program_model(self._source(), self.argv)
        return self._model

    def forget(self) -> None:
        """Drop the built model (an idle document's memory); the next reader builds it again."""
        self._model = None


@dataclass(frozen=True, slots=True)
class Change:
    """An LSP content change: `text` replaces [start, end), or the whole text when start is None."""

    text: str
    start: Position | None = None
    end: Position | None = None


class TextState:
    def __init__(self, text: str, version: int | None, path: str | None, reading: ReadContext | None = None):
        """`reading`: what the text is read with (`analysis.reader.ReadContext`: the include
        resolver, the build's flags), as `perflsp check` reads the file."""
        data, _ = decode_source(text.encode("utf-8", errors="surrogatepass"))
        self.doc = SourceDocument(data, version)
        # One LineIndex object for the document's lifetime: spans of kept kernels point at it, so
        # moving the content in (instead of swapping objects) never keeps old texts alive.
        self.lines: LineIndex = self.doc.lines
        self.path = path
        self.reading = reading or ReadContext(IncludeResolver())
        self.preprocessed: ConstEnv = self._preprocess()
        self.extracted: Extracted = extract_full(self.doc.data, self.doc.tree, self.lines, path, self.preprocessed)
        self.full_extractions = 1
        self.incremental_extractions = 0
        self.span_moves = 0  # updates that moved the spans of kept items in place (incremental, held)
        self.registers: tuple[tuple[str, int], ...] = ()  # per kernel, from ptxas (resource_usage.py)
        self.compiled: CompiledSource | None = None  # the device code compiled (compiled.py)
        self.settled = False  # the tree came from a fresh parse of this text (`settle`)
        self._unparsed = False  # the tree has edits applied that are not parsed yet (`_held_edit`)
        self._alone = new_parser()  # parses a held definition on its own
        self._model: DocumentModel | None = None  # the current version's program model (`model`)
        # the text as `balanced_view` reads it and its tree, where that differs from the text:
        # the next version's view is parsed from this tree, not from scratch (`view_tree`)
        self._view: tuple[bytes, Tree] | None = None

    @property
    def data(self) -> bytes:
        return self.doc.data

    @property
    def tree(self) -> Tree:
        """The syntax tree of the current text (parsed now if edits inside a held definition
        left it unparsed: see `_held_edit`)."""
        if self._unparsed:
            self.doc.tree = parse(self.doc.data, self.doc.tree, self.doc._parser)
            self._unparsed = False
        return self.doc.tree

    @property
    def parsed_tree(self) -> Tree | None:
        """The tree when it is parsed, None while edits inside a held definition wait for a parse."""
        return None if self._unparsed else self.doc.tree

    @property
    def version(self) -> int | None:
        return self.doc.version

    def hibernate(self) -> None:
        """Drop the syntax tree and the program model (the bulk of a document's memory); the next
        edit parses again, the next reader builds the model again."""
        self.doc.tree = None  # type: ignore[assignment]
        self._unparsed = False
        self._view = None
        if self._model is not None:
            self._model.forget()  # (the snapshots of this version share it: they build it again on use)

    def model(self, argv: Sequence[str] | None) -> DocumentModel:
        """The program model of the current version with the program's arguments `argv`: the
        same object until an edit, a re-extraction or other arguments change what it is built
        from. Its tree is this text's (parsed if need be) while the text is still this version,
        else a fresh parse of that version's bytes."""
        wanted = tuple(argv) if argv is not None else None
        held = self._model
        if held is not None and held.serves(self.extracted, self.preprocessed, wanted):
            return held
        data, extracted, preprocessed, lines = self.doc.data, self.extracted, self.preprocessed, self.lines

        owner = weakref.ref(self)  # (no cycle: a closed document's state goes with its last reference)

        def source() -> SourceFile:
            text = owner()
            view = balanced_view(data, preprocessed)
            if view is not data:  # (a conditional splits a brace pair: read as `check` reads it)
                tree = text.view_tree(view) if text is not None else parse(view)
                return SourceFile(view, tree, lines, extracted.kernels, preprocessed, extracted.top)
            if text is not None and text.doc.data is data:
                text.awake()
                return SourceFile(data, text.tree, lines, extracted.kernels, preprocessed, extracted.top)
            return SourceFile(data, parse(data), LineIndex(data), extracted.kernels, preprocessed, extracted.top)

        self._model = DocumentModel(source, extracted, preprocessed, wanted)
        return self._model

    def view_tree(self, view: bytes) -> Tree:
        """The tree of `view` (the text with the conditionals that split braces resolved), parsed
        from the previous view's tree over the bytes between their common start and end: one
        keystroke re-parses what it changed, as the document's own tree does."""
        previous = self._view
        if previous is not None and previous[0] == view:
            return previous[1]
        if previous is None:
            tree = parse(view)
        else:
            old, old_tree = previous
            start, old_end, new_end = changed_region(old, view) or (0, 0, 0)
            tree = old_tree.copy()  # (the previous version's readers keep theirs)
            tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end,
                      start_point=_byte_point(old, start), old_end_point=_byte_point(old, old_end),
                      new_end_point=_byte_point(view, new_end))
            tree = parse(view, tree)
        self._view = (view, tree)
        return tree

    def awake(self) -> None:
        """Parse again if `hibernate` dropped the tree."""
        if self.doc.tree is None:
            self.doc.tree = parse(self.doc.data, parser=self.doc._parser)

    def apply(self, changes: Sequence[Change], version: int | None) -> None:
        self.awake()
        self.settled = False
        old_data, old_tree = self.doc.data, self.doc.tree
        edited_old_tree: Tree | None = None
        edits: list[TextEdit] = []
        whole: str | None = None
        for change in changes:
            if change.start is None:
                whole, edits = change.text, []
            else:
                edits.append(TextEdit(change.start, change.end or change.start, change.text))
        if whole is not None:
            self._unparsed = False
            self.doc.replace_all(decode_source(whole.encode("utf-8", errors="surrogatepass"))[0], version)
            if edits:  # incremental changes after a full replacement
                self._apply_edits(edits, version)
        elif edits:
            held = self._held_edit(edits[0], version) if len(edits) == 1 else None
            if held is not None:
                self.extracted = held
                self.incremental_extractions += 1
                self.span_moves += 1
                return
            edited_old_tree = old_tree.copy()
            self.doc.tree = edited_old_tree  # apply_edits edits this copy in place, then re-parses
            typed = self._apply_edits(edits, version)
            self._unparsed = False
        else:
            self.doc.version = version
        self._adopt_lines()
        updated = None
        if edited_old_tree is not None:
            updated = extract_incremental(self.extracted, old_data, old_tree, self.doc.data, self.doc.tree,
                                          edited_old_tree, self.lines, self.path, typed=typed)
        if updated is None:
            preprocessed = self._preprocess()
            if preprocessed != self.preprocessed:  # the same view keeps its identity (the analyzer's caches stay)
                self.preprocessed = preprocessed
            updated = extract_full(self.doc.data, self.doc.tree, self.lines, self.path, self.preprocessed)
            self.full_extractions += 1
        else:
            self.incremental_extractions += 1
            self.span_moves += 1
        self.extracted = updated

    def _apply_edits(self, edits: list[TextEdit], version: int | None) -> tuple[int, int, int] | None:
        """Apply `edits`; the bytes (start, old end, new end) of the one edit applied, when known."""
        if len(edits) == 1:
            typed = self._apply_one(edits[0], version)
            if typed is not None:
                return typed
        self.doc.apply_edits(edits, version)
        # apply_edits encodes with surrogatepass: lone surrogates would make invalid UTF-8
        data, lossy = decode_source(self.doc.data)
        if lossy:
            self.doc.replace_all(data, version)
        return None

    def _held_edit(self, edit: TextEdit, version: int | None) -> Extracted | None:
        """One edit strictly inside a top-level definition (the held one, if any) after which that
        definition does not parse on its own: hold it (kernels/incremental.py) and leave the
        tree edited but unparsed until something reads it or the definition parses again. The
        parse of a file whose kernel stopped parsing is the costly one (error recovery). None:
        apply the edit as usual."""
        previous, lines, data = self.extracted, self.lines, self.doc.data
        new_bytes = edit.text.encode("utf-8", errors="surrogatepass")
        if b"\r" in new_bytes or b"\r" in data:
            return None
        start = lines.offset(edit.start)
        old_end = max(start, lines.offset(edit.end))
        if previous.held is not None:
            definition: tuple[int, int] | None = previous.held
        elif self._unparsed:
            return None
        else:
            definition = definition_around(self.doc.tree, start, old_end)
        if definition is None:
            return None
        a, old_b = definition
        new_end = start + len(new_bytes)
        new_data = data[:start] + new_bytes + data[old_end:]
        if parses_alone(new_data[a:old_b + new_end - old_end], self._alone):
            return None
        held = hold_edit(previous, data, new_data, (start, old_end, new_end), definition)
        if held is not None:
            self._apply_one(edit, version, parse=False)
            self._unparsed = True
            self._adopt_lines()
        return held

    def _apply_one(self, edit: TextEdit, version: int | None, parse: bool = True) -> tuple[int, int, int] | None:
        """`SourceDocument.apply_edits` for one edit, updating the line index instead of
        rebuilding it (a rebuild costs ~2 ms on a 10,000-line file). Only for LF-only text: its
        bytes (start, old end, new end), or None when not applied."""
        doc, lines = self.doc, self.lines
        new_bytes = edit.text.encode("utf-8", errors="surrogatepass")
        data = doc.data
        if b"\r" in new_bytes or b"\r" in data:
            return None
        start = lines.offset(edit.start)
        old_end = max(start, lines.offset(edit.end))
        new_end = start + len(new_bytes)
        start_point = _lf_point(lines, start)
        old_end_point = _lf_point(lines, old_end)
        new_data = data[:start] + new_bytes + data[old_end:]
        doc.tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end, start_point=start_point,
                      old_end_point=old_end_point, new_end_point=_point_after(start_point, new_bytes))
        doc.data = new_data
        doc.lines = lines.edited(new_data, start, old_end, new_bytes)
        if parse:
            doc.tree = _parse(new_data, doc.tree, doc._parser)
        doc.version = version
        return start, old_end, new_end

    def _adopt_lines(self) -> None:
        fresh = self.doc.lines
        if fresh is not self.lines:
            self.lines.adopt(fresh)
            self.doc.lines = self.lines

    @property
    def resolver(self) -> IncludeResolver:
        return self.reading.resolver

    def _preprocess(self) -> ConstEnv:
        return self.reading.env(Path(self.path) if self.path else None, self.doc.data)

    def settle(self) -> bool:
        """Parse from scratch once the user pauses on a text with syntax errors (tree-sitter's
        error recovery can differ between incremental and fresh parses) and extract in full;
        True when that changed the extraction. This also ends a hold (kernels/incremental.py):
        a paused text is analysed as it reads, so pulled diagnostics equal a fresh analysis."""
        return self.settle_apply(*self.settle_prepare())

    def settle_prepare(self) -> tuple[bytes, Tree, Extracted]:
        """`settle`'s costly half, which changes nothing the live text's readers see: the fresh
        parse and extraction of the current text (a caller may run it without the text lock,
        as long as no edit is applied meanwhile)."""
        self.awake()
        data = self.doc.data
        fresh = parse(data, parser=self.doc._parser)
        return data, fresh, extract_full(data, fresh, self.lines, self.path, self.preprocessed)

    def settle_apply(self, data: bytes, fresh: Tree, full: Extracted) -> bool:
        """`settle`'s second half: adopt a fresh parse of `data` (False when the text moved on
        since, or when nothing changed)."""
        if data is not self.doc.data:
            return False
        self._unparsed = False
        self.settled = True
        if self.extracted.held is None and str(fresh.root_node) == str(self.tree.root_node) \
                and signature(full.kernels) == signature(self.extracted.kernels):
            return False
        self.doc.tree = fresh
        self.extracted = full
        self.full_extractions += 1
        return True

    def reextract(self, reading: ReadContext | None = None, fresh_parse: bool = False) -> None:
        """Full extraction of the current text (new compile flags, changed headers, or a fresh
        parse: tree-sitter's error recovery can differ between incremental and fresh parses)."""
        if reading is not None:
            self.reading = reading
        self.awake()
        if fresh_parse:
            self.doc.tree = parse(self.doc.data, parser=self.doc._parser)
            self._unparsed = False
        self.preprocessed = self._preprocess()
        self.extracted = extract_full(self.doc.data, self.tree, self.lines, self.path, self.preprocessed)
        self.full_extractions += 1


def _lf_point(lines: LineIndex, offset: int) -> Point:
    """The tree-sitter point of `offset` in a text whose line breaks are all LF (rows count LF
    only): from the line index, not by counting the text's line breaks up to it."""
    row = lines.line_of(offset)
    return Point(row, offset - lines.line_start(row))


def path_of(uri: str) -> Path | None:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


def _byte_point(data: bytes, offset: int) -> Point:
    row = data.count(b"\n", 0, offset)
    return Point(row, offset - (data.rfind(b"\n", 0, offset) + 1))
