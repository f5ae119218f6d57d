"""What the compiler says it missed: the header a failed compile names (found around the file
by kernels/project_headers.py, and the compile tried again with its folder as `-I`)."""

from __future__ import annotations

import os
import re

from perflsp.kernels.project_headers import find_header_folder

__all__ = ["MAX_FOUND", "find_header_folder", "missing_header"]

MAX_FOUND = 6  # headers found for one unit (each costs a compile)

# gcc/nvcc: `fatal error: helper_cuda.h: No such file or directory`; clang: `fatal error: 'x.h' file not found`
_MISSING = re.compile(r"fatal error: (?:'([^'\n]+)' file not found|([^:\n]+): No such file or directory)")


def missing_header(message: str) -> str | None:
    """The header a compiler's error says it could not find (None: another error)."""
    match = _MISSING.search(message)
    if match is None:
        return None
    name = (match.group(1) or match.group(2) or "").strip()
    return name if name and not os.path.isabs(name) else None
