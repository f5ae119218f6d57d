"""Which kernels an edit outside kernel bodies can change: the analyzer re-analyses only those.

- An edit confined to one host function F (`Extracted.change == "host"`) changes what the
  engine reads for a launch site in function G only when F is G or one of its callers up to
  `CALLER_LEVELS` levels up (a launch's constants fold with the arguments of the first caller,
  that many levels up: `ProgramModel.env_at`), or when F allocates a variable that a launch passes
  (`ProgramModel.host_allocation` finds the first allocation of a name anywhere in the file).
  Kernels nobody launches read no host code at all.
- An edit that may write a variable the file declares at file scope (`size = 8;`, `size++`,
  `&size`) can change every launch and region that reads it (`ProgramModel.host_globals`: such a
  variable keeps its initial value only while nothing that runs writes it): everything.
- An edit confined to `__device__` functions (`"device"`) changes the kernels that call them,
  directly or through other device functions, and the launches made inside them.

Everything else outside kernel bodies (file-level declarations, macros, OpenMP regions) is an
`"other"` or `"full"` change, after which everything is analysed again. The sets here err on
the side of more: a name that merely occurs counts as a call or an allocation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tree_sitter import Node, Tree

from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.incremental import Extracted
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import CALLER_LEVELS as _CALLER_LEVELS
from perflsp.kernels.symbols import mutable_globals
from perflsp.source.positions import LineIndex

_CALL = re.compile(rb"([A-Za-z_]\w*)\s*(?:<[^<>;{}]*>)?\s*\(")
# what an allocation form can name (`x = ...`, `T x[...]`, `vector<T> x(...)`): the word before
# `=` (not `==`, `<=`, ...), before `[`, or after `vector<...>`
_ASSIGNED = re.compile(rb"([A-Za-z_]\w*)\s*(?:=(?!=)|\[)|vector\s*<[^;{}()]*>\s*([A-Za-z_]\w*)")
_WORD = re.compile(rb"[A-Za-z_]\w*")
# what a statement can write: `x = `, `x += `, `x++`, `++x`, `&x`
_WRITTEN = re.compile(rb"([A-Za-z_]\w*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*([A-Za-z_]\w*)"
                      rb"|([A-Za-z_]\w*)\s*(?:\+\+|--)")
_CONTAINERS = {"translation_unit", "declaration_list", "preproc_if", "preproc_ifdef", "preproc_else",
               "preproc_elif", "linkage_specification", "namespace_definition", "template_declaration"}


def affected(data: bytes, tree: Tree, kernels: FileKernels, extracted: Extracted) -> set[int]:
    """ids of the kernels and regions whose analysis the last update (`extracted`) can have
    changed, for a `"host"` or `"device"` change (see the module docstring)."""
    if extracted.edited is None:
        return {id(item) for item in (*kernels.kernels, *kernels.omp_regions)}
    a, b = extracted.edited
    texts = (extracted.edited_before, data[a:b])
    if extracted.change == "device":
        return _callers_of(data, kernels, extracted.edited_functions) | _launched_in(kernels, a, b)
    if _names(_WRITTEN, texts) & _file_variables(data, tree):
        return {id(item) for item in (*kernels.kernels, *kernels.omp_regions)}
    called = _names(_CALL, texts)
    bodies = _function_bodies(tree.root_node, called)
    reach = set(called)
    for _ in range(_CALLER_LEVELS - 1):  # F's callees, theirs, and so on as far as callers are read
        reach |= _names(_CALL, (data[s:e] for s, e in bodies))
        bodies = _function_bodies(tree.root_node, reach)
    assigned = _names(_ASSIGNED, texts)
    by_name = _kernels_by_name(kernels)
    out: set[int] = set()
    for site in kernels.launches:
        if site.kernel is None or site.kernel not in by_name:
            continue
        caller = (site.function or "").rsplit("::", 1)[-1]
        if a <= site.span.start_byte < b or caller in reach or _passes(site, assigned):
            out.update(id(k) for k in by_name[site.kernel])
    return out


def _file_variables(data: bytes, tree: Tree) -> set[str]:
    """The non-const variables the file declares at file scope with an initial value."""
    return set(mutable_globals(ExtractionContext(data, tree, LineIndex(data))))


def _names(pattern: re.Pattern[bytes], texts: Iterable[bytes]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        for m in pattern.finditer(text):
            word = m.group(1) or m.group(m.lastindex or 1)
            if word:
                out.add(word.decode("ascii", "replace"))
    return out


def _passes(site: LaunchSite, assigned: set[str]) -> bool:
    """Whether a launch argument names a variable the edited text may allocate (a form also
    allocates every suffix of the word it matched: see `perflsp.kernels.program`)."""
    for arg in site.args:
        for word in _WORD.findall(arg.text.encode("utf-8", "replace")):
            name = word.decode("ascii", "replace")
            if any(w.endswith(name) for w in assigned):
                return True
    return False


def _function_bodies(root: Node, names: set[str]) -> list[tuple[int, int]]:
    """Byte ranges of the top-level function definitions named in `names`."""
    out: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _CONTAINERS:
                stack.append(child)
            elif child.type == "function_definition":
                declarator = child.child_by_field_name("declarator")
                while declarator is not None and declarator.type != "function_declarator":
                    declarator = declarator.child_by_field_name("declarator")
                name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
                text = name_node.text if name_node is not None else None
                if text is not None and text.decode("utf-8", "replace").rsplit("::", 1)[-1] in names:
                    out.append((child.start_byte, child.end_byte))
    return out


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
