"""Number macros of the file a callee is defined in: a `__device__` function of another source of
the program (`cosine.cu` beside the kernel's `main.cu`) is read with the kernel file's macros, so
its own `#define NUM_TERMS 35` above it is not among them. Its file's object-like macros whose
body is a number (`35`, `(64)`, `1.0e-3f`) are read once per version of that file."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from perflsp.kernels.file_trees import file_version, parsed_source

_NUMBER_MACRO = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?[ \t]*(-?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?))"
    rb"([uUlLfF]*)[ \t]*\)?[ \t]*(?://[^\n]*|/\*[^\n]*\*/)?[ \t]*$", re.MULTILINE)


def file_number_macro(path: str, name: str) -> tuple[float, str] | None:
    """(value, "int" | "f32" | "f64") of the number macro `name` of the source at `path`; None
    when it defines none of that name (or two different ones: which applies is not read here)."""
    version = file_version(Path(path))
    if version is None:
        return None
    return _number_macros(*version).get(name)


@lru_cache(maxsize=64)
def _number_macros(path: Path, mtime_ns: int, size: int) -> dict[str, tuple[float, str] | None]:
    parsed = parsed_source(path, mtime_ns, size)
    if parsed is None:
        return {}
    found: dict[str, tuple[float, str] | None] = {}
    for match in _NUMBER_MACRO.finditer(parsed[0]):
        name, digits, suffix = (g.decode("ascii", errors="replace") for g in match.groups())
        is_float = not digits.lower().startswith(("0x", "-0x")) and any(c in digits for c in ".eE")
        value = float(digits) if is_float else float(int(digits, 0))
        kind = ("f32" if "f" in suffix.lower() else "f64") if is_float else "int"
        previous = found.get(name, (value, kind))
        found[name] = (value, kind) if previous == (value, kind) else None
    return found
