"""Headers the build does not name: where a project keeps an `#include`d file.

Without a compile database (a file checked on its own, an editor on a folder), a project's
`-I` folders are unknown: `#include "helper_cuda.h"` of a sample three folders below the
project's `Common/` fails to compile. The compiler names the header it missed; it is looked
for in the folders around the file (each ancestor up to the project's root, a few levels deep),
as a developer would find it, and the compile is tried again with that folder as `-I`.
The filesystem's root is never searched (its `/proc` and `/sys` are not a project's), and a
folder that cannot be read is passed over.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ANCESTORS = 4  # the file's folder and this many above it (stopping at a repository's root)
DEPTH = 3  # folders below each ancestor searched
MAX_FOLDERS = 4000  # folders visited per search (a home directory is not walked)
MAX_FOUND = 6  # headers found for one unit (each costs a compile)

# gcc/nvcc: `fatal error: helper_cuda.h: No such file or directory`; clang: `fatal error: 'x.h' file not found`
_MISSING = re.compile(r"fatal error: (?:'([^'\n]+)' file not found|([^:\n]+): No such file or directory)")
_SKIPPED = {"node_modules", "build", "__pycache__"}


def missing_header(message: str) -> str | None:
    """The header a compiler's error says it could not find (None: another error)."""
    match = _MISSING.search(message)
    if match is None:
        return None
    name = (match.group(1) or match.group(2) or "").strip()
    return name if name and not os.path.isabs(name) else None


def find_header_folder(name: str, start: Path) -> Path | None:
    """The folder F such that F/`name` exists, nearest to `start` (its folder first, then each
    ancestor's subfolders), or None."""
    visited = 0
    searched: set[Path] = set()
    folder = start
    for _ in range(ANCESTORS + 1):
        if folder.parent == folder:
            break
        level = [folder]
        for _depth in range(DEPTH + 1):
            following = []
            for candidate in level:
                if candidate in searched:
                    continue
                searched.add(candidate)
                visited += 1
                if visited > MAX_FOLDERS:
                    return None
                if _is_file(candidate / name):
                    return candidate
                try:
                    with os.scandir(candidate) as entries:
                        following += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)
                                      and not e.name.startswith(".") and e.name not in _SKIPPED]
                except OSError:
                    continue
            level = sorted(following)
        if (folder / ".git").exists():
            break
        folder = folder.parent
    return None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # (a folder the user may not read: pathlib raises on EACCES)
        return False
