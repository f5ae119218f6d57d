"""What every fix builder shares: the bounds of the values it writes, `EditError`, applying
edits, validating an edited document (it re-parses with no new syntax errors), and reading the
document's nodes and text. What an edited document now folds to is read back through the
file's program model (`ProgramModel.reread`, `ProgramModel.edited_definition`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tree_sitter import Node, Tree

from perflsp.analysis.models import ByteEdit, Fix
from perflsp.source.parser import parse

MAX_THREADS_PER_BLOCK = 1024  # every CUDA GPU since Fermi, and AMD/Intel work-groups
MAX_MIN_BLOCKS_PER_SM = 32  # the largest resident-blocks limit of any supported architecture
MAX_NUM_TEAMS = 2**31 - 1


class EditError(ValueError):
    """No safe edit exists for the request; the message says why."""


# --------------------------------------------------------------------------- basics


def apply_edits(data: bytes, edits: Iterable[ByteEdit]) -> bytes:
    """Apply non-overlapping edits (identical duplicates are applied once)."""
    unique: list[ByteEdit] = []
    for edit in edits:
        if edit not in unique:
            unique.append(edit)
    ordered = sorted(unique, key=lambda e: (e.start_byte, e.end_byte))
    out: list[bytes] = []
    pos = 0
    for edit in ordered:
        if not 0 <= edit.start_byte <= edit.end_byte <= len(data):
            raise EditError(f"edit [{edit.start_byte}, {edit.end_byte}) lies outside the document ({len(data)} bytes)")
        if edit.start_byte < pos:
            raise EditError(f"edits overlap at byte {edit.start_byte}")
        out.append(data[pos:edit.start_byte])
        out.append(edit.text.encode("utf-8"))
        pos = edit.end_byte
    out.append(data[pos:])
    return b"".join(out)


def syntax_error_count(tree: Tree) -> int:
    """ERROR and MISSING nodes in a tree (descending only where errors are)."""
    count = 0
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        if node.has_error:
            stack.extend(node.children)
    return count


def validated_fix(data: bytes, tree: Tree, title: str, edits: Sequence[ByteEdit], *,
                  kind: str = "quickfix", preferred: bool = False,
                  check: Callable[[bytes, Tree], None] | None = None) -> Fix:
    """A Fix whose edits apply and re-parse with no new syntax errors (and pass `check`)."""
    if not edits:
        raise EditError("nothing to change")
    new_data = apply_edits(data, edits)
    new_tree = _reparse(data, tree, edits, new_data)
    before, after = syntax_error_count(tree), syntax_error_count(new_tree)
    if after > before:
        raise EditError(f"the edited text would not parse cleanly ({after - before} new syntax error(s))")
    if check is not None:
        check(new_data, new_tree)
    return Fix(title=title, edits=tuple(edits), kind=kind, preferred=preferred)  # type: ignore[arg-type]


def _reparse(data: bytes, tree: Tree, edits: Sequence[ByteEdit], new_data: bytes) -> Tree:
    """Parse the edited text incrementally from a copy of the old tree (the caller's tree is
    left untouched)."""
    from tree_sitter import Point

    def point(offset: int) -> Point:
        return Point(data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1))

    old = tree.copy()
    unique = sorted({(e.start_byte, e.end_byte, e.text) for e in edits}, reverse=True)
    for start, end, text in unique:  # last first: earlier offsets stay valid
        inserted = text.encode("utf-8")
        start_point = point(start)
        lines = inserted.count(b"\n")
        if lines:
            new_end_point = Point(start_point.row + lines, len(inserted) - (inserted.rfind(b"\n") + 1))
        else:
            new_end_point = Point(start_point.row, start_point.column + len(inserted))
        old.edit(start_byte=start, old_end_byte=end, new_end_byte=start + len(inserted),
                 start_point=start_point, old_end_point=point(end), new_end_point=new_end_point)
    return parse(new_data, old)


def _check_int(what: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EditError(f"{what} must be a whole number (got {value!r})")
    if not low <= value <= high:
        raise EditError(f"{what} must be between {low} and {high} (got {value})")
    return value


def _text(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", "replace")


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _node_at(tree: Tree, start: int, end: int) -> Node | None:
    node = tree.root_node.named_descendant_for_byte_range(start, end)
    while node is not None and node.parent is not None and (node.start_byte, node.end_byte) == (
            node.parent.start_byte, node.parent.end_byte) and node.parent.type != "translation_unit":
        node = node.parent
    return node


def _unwrap(node: Node) -> Node:
    """Strip parentheses and casts: `((float)B)` -> `B`."""
    while True:
        value = node.child_by_field_name("value") if node.type == "cast_expression" else None
        if node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[-1]
        elif value is not None:
            node = value
        else:
            return node
