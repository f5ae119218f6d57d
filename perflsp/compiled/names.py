"""Which compiled function a source kernel or OpenMP region is.

CUDA kernels are entry functions whose demangled name ends in the kernel's name (several for a
template: its instantiations; the one whose template arguments match the launch is chosen).
OpenMP regions are entries named `__omp_offloading_<device>_<inode>_<function>_l<line>`, the
line of their `#pragma omp target` directive and the device and inode of its file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache

from perflsp.compiled.model import CompiledFunction, CompiledUnit
from perflsp.source.demangling import demangle_many

_OFFLOAD = re.compile(r"^__omp_offloading_([0-9a-f]+)_([0-9a-f]+)_(.+)_l(\d+)$")


@lru_cache(maxsize=4096)
def demangled(symbol: str) -> str:
    """The demangled signature (`void ns::k<float, 256>(float*, int)`), or the symbol itself."""
    try:
        import itanium_demangler

        node = itanium_demangler.parse(symbol)
    except Exception:  # noqa: BLE001 - an unusual mangling is read as written
        return symbol
    if node is None:
        return symbol
    text = str(node)
    return re.sub(r"\((?:int|unsigned int|long|unsigned long|bool|char)\)(-?\d+)", r"\1", text)


def _split(signature: str) -> tuple[str, str, int | None]:
    """(qualified name without template arguments, template arguments, parameter count)."""
    text = signature
    params: int | None = None
    if text.endswith(")"):
        text, inner = _trailing_group(text, "(", ")")
        inner = inner.strip()
        params = 0 if not inner or inner == "void" else _count_top_level(inner)
    templates = ""
    if text.endswith(">"):
        text, templates = _trailing_group(text, "<", ">")
    # (a type's words stay apart: `unsigned char` is no `unsignedchar`)
    return text.rsplit(" ", 1)[-1].strip(), " ".join(templates.split()), params


def _trailing_group(text: str, opening: str, closing: str) -> tuple[str, str]:
    """`text` ending in `closing` split into what precedes its matching `opening` and what the
    pair encloses."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += text[i] == closing
        depth -= text[i] == opening
        if depth == 0:
            return text[:i], text[i + 1:-1]
    return text, ""


def instantiation_arguments(name: str) -> tuple[str, ...] | None:
    """The template arguments a demangled signature or name gives its function
    (`void k<float, 256>(T1 *, int)` -> ("float", "256"); `add<double>@l104` -> ("double",));
    None when the function itself is no template instantiation (`Stream<double>::add` is a
    method of one: its class's arguments are not the function's)."""
    text = (name.rsplit("@l", 1)[0] if re.search(r"@l\d+$", name) else name).strip()
    if text.endswith(")"):
        text = _trailing_group(text, "(", ")")[0].rstrip()
    if not text.endswith(">"):
        return None
    templates = _trailing_group(text, "<", ">")[1]
    args = (" ".join(arg.split()) for arg in template_arguments(templates))
    # a demangler writes a value of a non-int parameter with its type: `(char)1`
    return tuple(re.sub(r"^\((?:unsigned |signed )?(?:char|short|int|long|long long|bool)\)\s*(-?\d+)$", r"\1", a)
                 for a in args) or None


def argument_value(arg: str) -> float | None:
    """The number a demangled value argument spells (`3`, `256u`, `(char)1`, `true`); None for a
    type or anything else."""
    text = re.sub(r"^\((?:unsigned |signed )?(?:char|short|int|long|long long|bool)\)\s*", "", arg.strip())
    if text in ("true", "false"):
        return float(text == "true")
    try:
        return float(text.rstrip("uUlL"))
    except ValueError:
        return None


def _count_top_level(params: str) -> int:
    depth = 0
    count = 1
    for ch in params:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            count += 1
    return count


def template_arguments(text: str) -> list[str]:
    """`float, 256, Op<int, 2>` -> ["float", "256", "Op<int, 2>"]."""
    out: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return [arg.strip() for arg in out]


def cuda_kernel(unit: CompiledUnit, name: str, params: int | None = None,
                prefer: Callable[[list[str]], float] | None = None) -> CompiledFunction | None:
    """The entry function of the kernel `name` (simple or qualified), preferring the parameter
    count `params`, then the instantiation whose template arguments `prefer` scores highest."""
    candidates = _kernel_entries(unit, name, params)
    if not candidates:
        return None
    if prefer is not None and len(candidates) > 1:
        return max(candidates, key=lambda c: prefer(template_arguments(c[1])))[0]
    return candidates[0][0]


def kernel_instantiations(unit: CompiledUnit, name: str, params: int | None = None) -> list[tuple[str, ...]]:
    """The template arguments of every instantiation of the kernel `name` the unit holds, in the
    unit's order (`scale<float>` and `scale<double>`: [("float",), ("double",)]); empty for a
    kernel that is no template."""
    found: list[tuple[str, ...]] = []
    for _fn, templates in _kernel_entries(unit, name, params):
        arguments = instantiation_arguments(f"k<{templates}>") if templates else None
        if arguments and arguments not in found:
            found.append(arguments)
    return found


def _kernel_entries(unit: CompiledUnit, name: str, params: int | None) -> list[tuple[CompiledFunction, str]]:
    """(function, template arguments) of the unit's entries for the kernel `name` (simple or
    qualified): those of `params` parameters where any has that many."""
    simple = name.split("::")[-1]
    candidates = [(fn, templates, count) for fn, qualified, templates, count in _entries(unit).get(simple, ())
                  if "::" not in name or qualified.endswith(name)]
    if params is not None and any(c[2] == params for c in candidates):
        candidates = [c for c in candidates if c[2] == params]
    return [(fn, templates) for fn, templates, _ in candidates]


def _entries(unit: CompiledUnit) -> dict[str, list[tuple[CompiledFunction, str, str, int | None]]]:
    """The unit's kernel entries by simple name: (function, qualified name, template arguments,
    parameter count); each symbol demangled once per unit (a file of thousands of kernels looks
    up each of them)."""
    if unit.entries is None:
        index: dict[str, list[tuple[CompiledFunction, str, str, int | None]]] = {}
        entries = [fn for fn in unit.functions.values() if fn.is_entry and not fn.name.startswith("__omp_offloading_")]
        # the Python demangler reads no lambda's closure type (`for_each<...::{lambda(int)#1}>`,
        # a kernel template launched with a lambda): those go to c++filt, in one batch
        unread = [fn.name for fn in entries if fn.name.startswith("_Z") and demangled(fn.name) == fn.name]
        by_cxxfilt = demangle_many(unread) if unread else {}
        for fn in entries:
            qualified, templates, count = _split(by_cxxfilt.get(fn.name) or demangled(fn.name))
            entry = (fn, qualified, templates, count)
            simple = qualified.split("::")[-1]
            index.setdefault(simple, []).append(entry)
            if fn.name != simple:  # (an unmangled `extern "C"` kernel is found by its symbol too)
                index.setdefault(fn.name, []).append(entry)
        unit.entries = index
    return unit.entries


def omp_region(unit: CompiledUnit, path: str | None, line: int,
               prefer: Callable[[list[str]], float] | None = None) -> CompiledFunction | None:
    """The offload entry of the region whose directive is on `line` (1-based) of `path`; of
    several (the instantiations of a template function), the one whose template arguments
    `prefer` scores highest."""
    found = _region_entries(unit, path, line)
    if not found:
        return None
    if prefer is not None and len(found) > 1:
        return max(found, key=lambda fn: prefer(template_arguments(_split(_parent_of(fn))[1])))
    return found[0]


def region_instantiations(unit: CompiledUnit, path: str | None, line: int) -> list[tuple[str, ...]]:
    """The template arguments of the function template around the OpenMP region on `line`
    (1-based) of `path`, one tuple per instantiation the unit holds an offload entry of."""
    found: list[tuple[str, ...]] = []
    for fn in _region_entries(unit, path, line):
        arguments = instantiation_arguments(_parent_of(fn))
        if arguments and arguments not in found:
            found.append(arguments)
    return found


def _region_entries(unit: CompiledUnit, path: str | None, line: int) -> list[CompiledFunction]:
    """The offload entries of the region whose directive is on `line` of `path` (those of any
    file at that line where none is `path`'s: an unsaved buffer is compiled from a copy, whose
    inode differs)."""
    wanted = _file_id(path) if path else None
    exact: list[CompiledFunction] = []
    by_line: list[CompiledFunction] = []
    for fn in unit.functions.values():
        m = _OFFLOAD.match(fn.name)
        if m is None or int(m.group(4)) != line:
            continue
        by_line.append(fn)
        if wanted is not None and (int(m.group(1), 16), int(m.group(2), 16)) == wanted:
            exact.append(fn)
    return exact or by_line


def _parent_of(entry: CompiledFunction) -> str:
    """The demangled function an offload entry was outlined from (`void dot<double>(int, int)`)."""
    m = _OFFLOAD.match(entry.name)
    return demangled(m.group(3)) if m else entry.name


def directive_line(name: str) -> int | None:
    """The line (1-based) of the directive an OpenMP offload entry was outlined from; None for
    any other function."""
    m = _OFFLOAD.match(name)
    return int(m.group(4)) if m else None


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
