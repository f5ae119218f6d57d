"""Headers the build does not name: where a project keeps an `#include`d file.

Without a compile database (a file checked on its own, an editor on a folder), a project's
`-I` folders are unknown: `#include "helper_cuda.h"` of a sample three folders below the
project's `Common/`, or `#include <polybench.h>` of a benchmark whose Makefile adds
`-I../../../utilities`, is not beside the file. It is looked for in the folders around the
file, as a developer would find it: the file's folder and each ancestor up to the project's
root (a folder holding `.git`, at most `ANCESTORS` levels up), a few levels below each, the
nearest first (fewest levels up, then fewest down). The filesystem's root is never searched
(its `/proc` and `/sys` are not a project's), and a folder that cannot be read is passed over.

The preprocessor (includes.py) keeps one `HeaderIndex` per project root, so a file's missing
headers cost one walk of its project, not one per header (an index the folder budget cut short
is walked again from the file that misses a header in it); the compiler's retry
(compiled/build.py) asks `find_header_folder` for the header the compiler names.
"""

from __future__ import annotations

import os
from pathlib import Path

ANCESTORS = 4  # the file's folder and this many above it (stopping at a repository's root)
DEPTH = 3  # folders below each ancestor searched
MAX_FOLDERS = 4000  # folders visited per project (a home directory is not walked)
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".tcc")
_SKIPPED = {"node_modules", "build", "__pycache__"}


def search_root(start: Path) -> Path | None:
    """The top folder searched for `start`'s headers: the nearest ancestor that holds `.git`,
    else `ANCESTORS` levels up; never the filesystem's root (None: `start` is the root)."""
    if start.parent == start:
        return None
    folder = start
    for _ in range(ANCESTORS):
        if (folder / ".git").exists() or folder.parent.parent == folder.parent:
            return folder
        folder = folder.parent
    return folder


class HeaderIndex:
    """The header files around `start` up to `root`, by name: the folders `DEPTH` levels below
    `start`, then below each ancestor up to `root`, nearest first, at most `MAX_FOLDERS` of them
    (`complete` says whether the walk ended before that)."""

    def __init__(self, root: Path, start: Path):
        self.complete = True
        self._folders: dict[str, list[Path]] = {}
        searched: set[Path] = set()
        folder = start
        while True:
            if not self._walk(folder, searched):
                self.complete = False
                return
            if folder == root or folder.parent == folder:
                return
            folder = folder.parent

    def _walk(self, top: Path, searched: set[Path]) -> bool:
        """Index the folders `DEPTH` levels below `top` not searched yet; False when the budget ran out."""
        level = [top]
        for _depth in range(DEPTH + 1):
            following: list[Path] = []
            for folder in level:
                if folder in searched:
                    continue
                searched.add(folder)
                if len(searched) > MAX_FOLDERS:
                    return False
                try:
                    with os.scandir(folder) as entries:
                        for entry in entries:
                            if entry.name.startswith("."):
                                continue
                            if entry.is_dir(follow_symlinks=False):
                                if entry.name not in _SKIPPED:
                                    following.append(Path(entry.path))
                            elif entry.name.endswith(HEADER_SUFFIXES):
                                self._folders.setdefault(entry.name, []).append(folder)
                except OSError:
                    continue
            level = sorted(following)
        return True

    def folder_for(self, name: str, start: Path) -> Path | None:
        """The folder F, nearest to `start`, such that F/`name` exists (`name` may hold folders:
        `cub/cub.cuh`), or None."""
        parts = Path(name).parts
        if not parts or ".." in parts:
            return None
        best: tuple[int, int, str] | None = None
        found = None
        for folder in self._folders.get(parts[-1], ()):
            base = folder
            if len(parts) > 1:
                if folder.parts[-(len(parts) - 1):] != parts[:-1]:
                    continue
                base = Path(*folder.parts[:-(len(parts) - 1)])
            common = _common_length(base.parts, start.parts)
            up, down = len(start.parts) - common, len(base.parts) - common
            if up > ANCESTORS or down > DEPTH:
                continue
            key = (up, down, str(base))
            if best is None or key < best:
                best, found = key, base
        return found


def _common_length(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def find_header_folder(name: str, start: Path) -> Path | None:
    """The folder F such that F/`name` exists, nearest to `start` (its folder first, then each
    ancestor's subfolders), or None."""
    start = start.absolute()
    root = search_root(start)
    return HeaderIndex(root, start).folder_for(name, start) if root is not None else None
