"""Calls a function-like macro makes where it is used.

`#define RUN(T) run<T, 256>(n, d_in, d_out)` then `RUN(64); RUN(128);` calls `run` twice, with
`(n, d_in, d_out)` read where each `RUN(...)` stands; the tree of the file holds no call of `run`
there (a macro's body is a directive's text). The program model (`ProgramModel.arguments_passed`)
reads these calls as it reads written ones, so a launch inside `run` takes its sizes from the
function that uses the macro (a driver of benchmark sizes is often written this way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Node, QueryCursor

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.definitions import template_arguments
from perflsp.kernels.preprocess import expand_macros
from perflsp.source.parser import parse, query

# `name(` or `name<...>(` in a macro's body (as `ProgramModel` finds written calls)
_CALLED = re.compile(r"\b([A-Za-z_]\w*)(?=\s*(?:<[^;{}()]*>\s*)?\()")
_WRAPPER = ("void __perflsp_macro_use() {\n", ";\n}\n")


@dataclass(frozen=True)
class MacroCall:
    """One call of a function that a macro's use makes."""

    site: Node  # the macro's use in the file (`RUN(64)`): where the call's arguments are read
    arguments: tuple[str, ...]  # the arguments the expansion passes, as texts
    template_arguments: tuple[str, ...] | None  # the explicit template arguments (`<T, 256>`), if any


def macros_calling(macros: Mapping[str, tuple[tuple[str, ...], str]]) -> dict[str, tuple[str, ...]]:
    """Callee name -> the function-like macros of `macros` (name -> parameters and body) whose
    body calls it."""
    out: dict[str, list[str]] = {}
    for macro, (_, body) in macros.items():
        for callee in _called(body):
            if callee != macro:
                out.setdefault(callee, []).append(macro)
    return {name: tuple(sorted(found)) for name, found in out.items()}


@lru_cache(maxsize=8192)
def _called(body: str) -> frozenset[str]:
    """The names a macro body calls: the same bodies (a header's) are read by every version of
    every file that includes them."""
    return frozenset(_CALLED.findall(body))


def calls_in_expansion(use: str, env: ConstEnv, name: str) -> list[tuple[tuple[str, ...], tuple[str, ...] | None]]:
    """The calls of `name` the macro use `use` (`RUN(64)`) expands to: for each, its arguments
    and explicit template arguments as texts."""
    expanded = expand_macros(use, env)
    if expanded == use:
        return []
    data = (_WRAPPER[0] + expanded + _WRAPPER[1]).encode("utf-8", errors="replace")
    root = parse(data).root_node
    found: dict[int, tuple[tuple[str, ...], tuple[str, ...] | None]] = {}
    cursor = QueryCursor(query("calls"))
    for _, groups in cursor.matches(root):
        callee, call = groups["callee"][0], groups["call"][0]
        if re.sub(r"<.*", "", _text(data, callee), flags=re.DOTALL).split("::")[-1].strip() != name:
            continue
        arguments = call.child_by_field_name("arguments")
        if arguments is None:
            continue
        listed = template_arguments(callee)
        found[call.start_byte] = (
            tuple(_text(data, a) for a in arguments.named_children if a.type != "comment"),
            tuple(_text(data, a) for a in listed) if listed is not None else None,
        )
    return [found[k] for k in sorted(found)]


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
