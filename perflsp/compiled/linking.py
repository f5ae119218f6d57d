"""Device functions of another translation unit (separate compilation: `-rdc=true`, `-fgpu-rdc`,
OpenMP `declare target` functions defined in another source).

A kernel that calls a `__device__` function defined in another source of the build compiles to a
`CALL` of an external symbol: the unit holds no code for it, and its work would count as nothing
(a hash kernel whose rounds all sit in the other unit counted nine integer instructions per
thread where Nsight Compute measured 2 × 10^5). The build links such units from the sources of
one target, which lie beside each other: the sources of the unit's folder that define a function
of that name are compiled as relocatable device code, and their functions are counted where the
calls are (`counts.py`, at the call's weight), the evidence naming the unit each came from.
OpenMP offload is the same: a target region calling a `declare target` function of another source
(`double f(double);` declared in a `declare target` block, defined in `f.cpp`) compiles to a call
of an external symbol, which clang's device pass of `f.cpp` defines.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from perflsp.compiled.model import CompiledFunction, CompiledUnit
from perflsp.compiled.names import demangled

MAX_SIBLINGS = 8  # sources of the folder compiled for the functions a unit calls
MAX_ROUNDS = 3  # levels of calls followed into other units (a kernel -> merge -> field arithmetic)
OMP_DECLARE_TARGET = re.compile(rb"\bomp\s+(?:begin\s+)?declare\s+target\b")
# code a source compiles for the device: CUDA `__device__` functions, OpenMP `declare target` ones
DEVICE_CODE = re.compile(rb"__device__|" + OMP_DECLARE_TARGET.pattern)
# what the CUDA runtime's device library provides (`printf`, `malloc`, `assert`): no source defines it
_RUNTIME = frozenset({"vprintf", "malloc", "free", "__assertfail"})


def external_callees(functions: Iterable[CompiledFunction], defined: Iterable[str]) -> set[str]:
    """The symbols `functions` call directly that none of `defined` is."""
    have = set(defined)
    return {name for fn in functions for block in fn.blocks for name in block.calls
            if name not in have and name not in _RUNTIME and not name.startswith("__")}


def simple_name(symbol: str) -> str:
    """The function's own name (`merge` for `_Z5mergePKmPm`, `mul` for `ff::mul(...)`)."""
    signature = demangled(symbol)
    head = signature.split("(", 1)[0]
    head = re.sub(r"<[^<>]*>", "", head)
    return head.rsplit(" ", 1)[-1].rsplit("::", 1)[-1]


def defining_sources(unit_source: Path, names: set[str], is_unit: Callable[[Path], bool | None],
                     candidates: list[Path]) -> list[Path]:
    """Sources among `candidates` (the unit's folder's) that the build compiles and that define a
    device function named in `names`: device code in the text (`DEVICE_CODE`) and a name followed
    by `(`."""
    if not names:
        return []
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\s*\(")
    found = []
    for path in candidates:
        if path == unit_source or is_unit(path) is False:
            continue
        try:
            text = path.read_bytes()
        except OSError:
            continue
        if DEVICE_CODE.search(text) and pattern.search(text):
            found.append(path)
        if len(found) >= MAX_SIBLINGS:
            break
    return found


def with_linked(unit: CompiledUnit, others: dict[str, tuple[CompiledFunction, str]]) -> CompiledUnit:
    """`unit` with the functions of other units it calls (symbol -> (function, its unit's source)),
    its own functions first."""
    if not others:
        return unit
    functions = {name: fn for name, (fn, _) in others.items() if name not in unit.functions}
    functions.update(unit.functions)
    linked = {**unit.linked, **{name: source for name, (_, source) in others.items() if name not in unit.functions}}
    return dataclasses.replace(unit, functions=functions, linked=linked, entries=None)
