"""Launches a function-like macro makes where it is used.

`#define bench(kernel, grid) for (...) { kernel<<<dim3(grid), dim3(block)>>>(in, out, n); }`
then `bench(reduce_v2, blocks / 2);` launches `reduce_v2` there, with `blocks / 2`, `block` and
`n` read where the use stands. The file's tree holds no launch there (a macro's body is a
directive's text): each use of a macro whose body holds `<<<` is expanded, the expansion parsed
on its own, and its launches read as written ones, their texts folded in the environment of the
use (a driver of benchmark variants is often written so; every kernel it launched had no launch
site, its sizes assumed).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.launches import LocalEnv, enclosing_function, fold_text, site_of
from perflsp.kernels.models import ConstValue, CudaFunction, LaunchSite
from perflsp.kernels.preprocess import expand_macros
from perflsp.source.parser import parse
from perflsp.source.positions import LineIndex

_WRAPPER = ("void __perflsp_macro_use() {\n", ";\n}\n")
_DIRECTIVES = ("preproc_function_def", "preproc_def")


def launching_macros(env: ConstEnv) -> tuple[str, ...]:
    """The function-like macros whose body launches a kernel (`<<<`), or uses one that does
    (`#define launch(k, b, t) launch_with_shared(k, b, t, 0)` over the macro that launches)."""
    bodies = {name: body for name, (_, body) in env.all_function_macros().items()}
    launching = {name for name, body in bodies.items() if "<<<" in body}
    grown = True
    while grown:
        found = {name for name, body in bodies.items() if name not in launching
                 and any(re.search(rf"\b{re.escape(other)}\s*\(", body) for other in launching)}
        launching |= found
        grown = bool(found)
    return tuple(sorted(launching))


def macro_launch_sites(ctx: ExtractionContext, env: ConstEnv, by_name: dict[str, list[CudaFunction]],
                       macros: tuple[str, ...]) -> list[LaunchSite]:
    """The launches the uses of `macros` in `ctx` (in its byte range) expand to, each spanning
    its use."""
    sites: list[LaunchSite] = []
    lo, hi = ctx.byte_range or (0, len(ctx.data))
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in macros) + rb")\s*\(")
    for m in pattern.finditer(ctx.blanked, lo, hi):
        use = _use_at(ctx, m.start())
        if use is None:
            continue
        text = ctx.text(use)
        expanded = expand_macros(text, env)
        if expanded == text or "<<<" not in expanded:
            continue
        data = (_WRAPPER[0] + expanded + _WRAPPER[1]).encode("utf-8", errors="replace")
        written = ExtractionContext(data, parse(data), LineIndex(data))
        function = enclosing_function(use)
        local = LocalEnv(ctx, function, use.start_byte, env)
        span = ctx.span(use)
        for groups in written.matches["launch"]:
            if "config" not in groups:
                continue
            config = [c for c in groups["config"][0].named_children if c.type != "comment"]
            values = [fold_text(written.text(c), span, local, dim3=i < 2) for i, c in enumerate(config)]
            if len(values) < 2:
                values += [ConstValue("", None, None, "missing launch argument")] * (2 - len(values))
            call_args = tuple(fold_text(written.text(a), span, local, dim3=False)
                              for a in groups["args"][0].named_children if a.type != "comment")
            sites.append(site_of(ctx, by_name, written, groups["callee"][0], function, values, call_args,
                                 (span, span, span)))
    return sites


def _use_at(ctx: ExtractionContext, start: int) -> Node | None:
    """The macro use (a call in the tree) whose name starts at `start`; None inside a directive
    (the macro's own definition, another macro's body)."""
    node = ctx.tree.root_node.named_descendant_for_byte_range(start, start + 1)
    call = node.parent if node is not None else None
    if node is None or node.type != "identifier" or call is None or call.type != "call_expression" \
            or call.child_by_field_name("function") != node:
        return None
    outer = call.parent
    while outer is not None:
        if outer.type in _DIRECTIVES:
            return None
        outer = outer.parent
    return call
