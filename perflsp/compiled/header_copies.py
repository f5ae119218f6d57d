"""A unit compiled with copies of its own headers, where the compiler rejected code in them.

A project's own header may include a library this machine lacks (`mpi.h`, `cublas_v2.h`) and
use its types and calls in host code (`MPI_Comm comm;`, `double wtime() { return MPI_Wtime();
}`). The unit's copy (host_aside.py) cannot change that header's text, so the unit fails there
however much of its own host code is set aside. It is then compiled in a copy of its folder
tree: every local header it reads is copied to the same place relative to the others, the
rejected ones with their host code set aside as the unit's own is, each opening with
`#line 1 "<original path>"`, so that the compiler's errors and the line info name the original
file and line. Quoted includes resolve inside the tree as they did around the originals (the
including file's folder first); include folders inside the tree are read from their copies
first, the originals after (a header no quoted include names, `<config.h>` on an `-I` path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

# an error naming a file and line: nvcc's `path(12): error`, clang's `path:12:5: error` (one error
# a line; a failure's one-line message joins the first few with "; " after "<tool> failed: ")
_ERROR_AT = re.compile(r"(?P<path>.+?)(?:\((?P<a>\d+)\)|:(?P<b>\d+):\d+): (?:fatal )?error")
_TOOL_FAILED = re.compile(r"^[\w+.-]+ failed: ")


def error_positions(errors: Iterable[str]) -> Iterator[tuple[str, int]]:
    """(path as the compiler spelled it, 1-based line) of each error in the compiler's output."""
    for text in errors:
        for piece in _TOOL_FAILED.sub("", text).split("; "):
            if (match := _ERROR_AT.match(piece.strip())) is not None:
                yield match.group("path"), int(match.group("a") or match.group("b"))


def header_error_lines(errors: Iterable[str], headers: Sequence[Path]) -> dict[Path, frozenset[int]]:
    """The 1-based lines of each of `headers` (resolved paths) that the compiler's `errors` point
    at (a path spelled through `..` included)."""
    known = {str(h): h for h in headers}
    found: dict[Path, set[int]] = {}
    for spelled, line in error_positions(errors):
        path = known.get(spelled) or known.get(os.path.realpath(spelled))
        if path is not None:
            found.setdefault(path, set()).add(line)
    return {path: frozenset(lines) for path, lines in found.items()}


def write_tree(source: Path, unit_text: bytes, headers: Sequence[Path], edited: Mapping[Path, bytes],
               include_dirs: Sequence[str], folder: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The unit's copy and its local `headers` (resolved paths) written under `folder`, each at
    its place relative to the others (`edited` headers with their new text): (the unit copy's
    path, the include folders to compile it with). None where a header cannot be placed (it
    lies outside every folder the unit shares with it: another drive)."""
    resolved_source = source.resolve()
    try:
        root = Path(os.path.commonpath([resolved_source.parent, *(h.parent for h in headers)]))
    except ValueError:
        return None

    def place(path: Path) -> Path:
        return folder / path.relative_to(root)

    for header in headers:
        try:
            text = edited[header] if header in edited else header.read_bytes()
        except OSError:
            continue  # (a header that cannot be read fails the compile as it did)
        target = place(header)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b'#line 1 "' + _quoted(header) + b'"\n' + text)
    unit = place(resolved_source)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_bytes(unit_text)
    dirs: list[str] = []
    for each in include_dirs:
        resolved = Path(each).resolve()
        if resolved.is_relative_to(root):
            dirs.append(str(place(resolved)))
    # (the originals after their copies, and the unit's own folder last: a file of the tree that
    # no header list names, an include spelled through a macro, is still found)
    dirs += [*include_dirs, str(resolved_source.parent)]
    return unit, tuple(dict.fromkeys(dirs))


def _quoted(path: Path) -> bytes:
    return str(path).replace("\\", "\\\\").replace('"', '\\"').encode()
