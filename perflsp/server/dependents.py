"""Which kernels an edit outside kernel bodies can change: the analyzer re-analyses only those.
It asks the program model of the edited text what the engine reads (`kernels.program.ProgramModel`).

- An edit confined to one host function F (`Extracted.change == "host"`) changes what the
  engine reads for a launch site in function G only when F is G or one of its callers up to
  `CALLER_LEVELS` levels up (a launch's constants fold with the arguments of the first caller,
  that many levels up: `ProgramModel.env_at`; the callers come from the model's call index,
  `calls_to`, and a call the edit removed counts too), or when F allocates a variable that a
  launch passes (`ProgramModel.host_allocation` finds the first allocation of a name anywhere
  in the file). Kernels nobody launches read no host code at all.
- An edit that may write a variable the file declares at file scope (`size = 8;`, `size++`,
  `&size`; `ProgramModel.file_variables`) can change every launch and region that reads it
  (`ProgramModel.host_globals`: such a variable keeps its initial value only while nothing that
  runs writes it): everything.
- An edit confined to `__device__` functions (`"device"`) changes the kernels that call them,
  directly or through other device functions, and the launches made inside them.

Everything else outside kernel bodies (file-level declarations, macros, OpenMP regions) is an
`"other"` or `"full"` change, after which everything is analysed again. The sets here err on
the side of more: a name that merely occurs in the edited text counts as a call or an allocation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from perflsp.kernels.incremental import Extracted
from perflsp.kernels.models import ConstValue, CudaFunction, FileKernels, OmpRegion
from perflsp.kernels.program import CALLER_LEVELS as _CALLER_LEVELS
from perflsp.kernels.program import ProgramModel

_CALL = re.compile(rb"([A-Za-z_]\w*)\s*(?:<[^<>;{}]*>)?\s*\(")
# what an allocation form can name (`x = ...`, `T x[...]`, `vector<T> x(...)`): the word before
# `=` (not `==`, `<=`, ...), before `[`, or after `vector<...>`
_ASSIGNED = re.compile(rb"([A-Za-z_]\w*)\s*(?:=(?!=)|\[)|vector\s*<[^;{}()]*>\s*([A-Za-z_]\w*)")
_WORD = re.compile(rb"[A-Za-z_]\w*")
# what a statement can write: `x = `, `x += `, `x++`, `++x`, `&x`
_WRITTEN = re.compile(rb"([A-Za-z_]\w*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*([A-Za-z_]\w*)"
                      rb"|([A-Za-z_]\w*)\s*(?:\+\+|--)")


def affected(model: ProgramModel, extracted: Extracted) -> set[int]:
    """ids of the kernels and regions whose analysis the last update (`extracted`, which
    `model` was built from) can have changed, for a `"host"` or `"device"` change (see the
    module docstring)."""
    data, kernels = model.data, model.kernels
    if extracted.edited is None:
        return {id(item) for item in (*kernels.kernels, *kernels.omp_regions)}
    a, b = extracted.edited
    texts = (extracted.edited_before, data[a:b])
    if extracted.change == "device":
        return _callers_of(data, kernels, extracted.edited_functions) | _launched_in(kernels, a, b)
    if _names(_WRITTEN, texts) & model.file_variables.keys():
        return {id(item) for item in (*kernels.kernels, *kernels.omp_regions)}
    removed = _names(_CALL, (extracted.edited_before,))  # calls the edit may have taken out
    assigned = _names(_ASSIGNED, texts)
    by_name = _kernels_by_name(kernels)
    reached: dict[tuple[str, int], bool] = {}
    out: set[int] = set()
    for site in kernels.launches:
        if site.kernel is None or site.kernel not in by_name:
            continue
        caller = (site.function or "").rsplit("::", 1)[-1]
        if a <= site.span.start_byte < b or _called_from_edit(model, caller, (a, b), removed, 1, reached) \
                or _passes(site.args, assigned):
            out.update(id(k) for k in by_name[site.kernel])
    return out


def _called_from_edit(model: ProgramModel, name: str, edited: tuple[int, int], removed: set[str], level: int,
                      reached: dict[tuple[str, int], bool]) -> bool:
    """Whether the arguments function `name` is called with can come from the edited text: a call
    of it lies there (or a call the edit removed named it), or one of its callers is so called,
    up to `CALLER_LEVELS` levels (the model's call index, `calls_to`)."""
    key = (name, level)
    if key in reached:
        return reached[key]
    reached[key] = False  # (a recursive call chain ends here)
    found = name in removed
    if not found and name:
        for call in model.call_sites(name):
            if edited[0] <= call.start_byte < edited[1]:
                found = True
                break
            if level < _CALLER_LEVELS:
                function = model.enclosing_function(call.start_byte)
                outer = model.function_name(function) if function is not None else None
                if outer and outer != name and _called_from_edit(model, outer, edited, removed, level + 1, reached):
                    found = True
                    break
    reached[key] = found
    return found


def _names(pattern: re.Pattern[bytes], texts: Iterable[bytes]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        for m in pattern.finditer(text):
            word = m.group(1) or m.group(m.lastindex or 1)
            if word:
                out.add(word.decode("ascii", "replace"))
    return out


def _passes(args: Iterable[ConstValue], assigned: set[str]) -> bool:
    """Whether a launch argument names a variable the edited text may allocate (a form also
    allocates every suffix of the word it matched: see `perflsp.kernels.program`)."""
    for arg in args:
        for word in _WORD.findall(arg.text.encode("utf-8", "replace")):
            name = word.decode("ascii", "replace")
            if any(w.endswith(name) for w in assigned):
                return True
    return False


def _kernels_by_name(kernels: FileKernels) -> dict[str, list[CudaFunction]]:
    out: dict[str, list[CudaFunction]] = {}
    for kernel in kernels.kernels:
        out.setdefault(kernel.qualified_name, []).append(kernel)
    return out


def _callers_of(data: bytes, kernels: FileKernels, names: frozenset[str]) -> set[int]:
    """Kernels and regions that call a function named in `names`, directly or through device
    functions."""
    wanted = set(names)
    device_calls = {fn.name: _names(_CALL, (data[fn.span.start_byte:fn.span.end_byte],)) for fn in kernels.device_functions}
    grown = True
    while grown:  # device functions that reach a wanted one are wanted too
        grown = False
        for name, calls in device_calls.items():
            if name not in wanted and calls & wanted:
                wanted.add(name)
                grown = True
    items: list[CudaFunction | OmpRegion] = [*kernels.kernels, *kernels.omp_regions]
    out: set[int] = set()
    for item in items:
        end = item.span.end_byte
        if isinstance(item, OmpRegion) and item.body_span is not None:
            end = max(end, item.body_span.end_byte)
        if _names(_CALL, (data[item.span.start_byte:end],)) & wanted:
            out.add(id(item))
    return out


def _launched_in(kernels: FileKernels, a: int, b: int) -> set[int]:
    by_name = _kernels_by_name(kernels)
    return {id(k) for site in kernels.launches if site.kernel is not None and a <= site.span.start_byte < b
            for k in by_name.get(site.kernel, ())}
