"""Demangling Itanium C++ names (what clang and nvcc emit for kernels and OpenMP parents).

Order of preference: the system `c++filt` (binutils or LLVM), one process for a whole batch of
names fed on stdin (names never become arguments); then the pure-Python `itanium_demangler`
package; then, for names neither can read, the leading (possibly nested) source name only —
enough to map a kernel by name. Results are cached per process.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable

_CACHE: dict[tuple[bool, str], str] = {}  # (c++filt allowed, mangled) -> demangled
_CXXFILT_TIMEOUT_S = 10.0


def is_mangled(name: str) -> bool:
    return name.startswith("_Z")


def demangle_many(names: Iterable[str], *, use_cxxfilt: bool = True) -> dict[str, str]:
    """Map every name to its demangled form; unmangled names map to themselves."""
    result: dict[str, str] = {}
    pending: list[str] = []
    for name in names:
        if not is_mangled(name) or "\n" in name or "\r" in name:
            result[name] = name
        elif (use_cxxfilt, name) in _CACHE:
            result[name] = _CACHE[use_cxxfilt, name]
        else:
            pending.append(name)
    pending = list(dict.fromkeys(pending))
    if pending and use_cxxfilt:
        for name, text in _with_cxxfilt(pending).items():
            if text != name:
                result[name] = _CACHE[True, name] = text
        pending = [n for n in pending if n not in result]
    for name in pending:
        text = _with_library(name) or _leading_name(name) or name
        result[name] = _CACHE[use_cxxfilt, name] = text
    return result


def demangle(name: str, *, use_cxxfilt: bool = True) -> str:
    return demangle_many([name], use_cxxfilt=use_cxxfilt)[name]


def cxxfilt_path() -> str | None:
    return shutil.which("c++filt") or shutil.which("llvm-cxxfilt")


def _with_cxxfilt(names: list[str]) -> dict[str, str]:
    program = cxxfilt_path()
    if program is None:
        return {}
    try:
        done = subprocess.run(
            [program],
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            timeout=_CXXFILT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(names):
        return {}
    return dict(zip(names, lines, strict=True))


# The library writes integer template arguments as casts, `(unsigned long)8`; c++filt writes
# literals with suffixes, `8ul`. Types without a suffix keep the cast, as c++filt does.
_CAST_LITERAL = re.compile(r"\((int|unsigned int|long|unsigned long|long long|unsigned long long|bool)\)(n?)(\d+)")
_SUFFIX = {
    "int": "",
    "unsigned int": "u",
    "long": "l",
    "unsigned long": "ul",
    "long long": "ll",
    "unsigned long long": "ull",
}


def _literal(match: re.Match[str]) -> str:
    kind, negative, digits = match.groups()
    if kind == "bool":
        return "true" if digits != "0" else "false"
    return ("-" if negative else "") + digits + _SUFFIX[kind]


def _with_library(name: str) -> str | None:
    try:
        import itanium_demangler
    except ImportError:
        return None
    try:
        node = itanium_demangler.parse(name)
    except Exception:  # noqa: BLE001 - the library raises NotImplementedError and assorted errors on exotic names
        return None
    if node is None:
        return None
    return _CAST_LITERAL.sub(_literal, str(node))


_SOURCE_NAME = re.compile(r"(\d+)")


def _leading_name(name: str) -> str | None:
    """`_Z3fooPf` -> `foo`, `_ZN2ns3barEv` -> `ns::bar`: the name without template arguments or
    parameters, for names no demangler could read."""
    body = name[2:]
    nested = body.startswith("N")
    pos = 1 if nested else 0
    parts: list[str] = []
    while pos < len(body):
        while nested and pos < len(body) and body[pos] in "KVrL":  # cv-qualifiers of member functions
            pos += 1
        match = _SOURCE_NAME.match(body, pos)
        if not match:
            break
        length = int(match.group(1))
        start = match.end()
        if length == 0 or start + length > len(body):
            return None
        parts.append(body[start : start + length])
        pos = start + length
        if not nested:
            break
        if pos < len(body) and body[pos] == "I":  # template arguments: stop at the name
            break
    return "::".join(parts) or None
