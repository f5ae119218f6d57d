"""The sizes a launch's grid is computed from.

A grid-stride loop over a size the source does not give (`for (j = tid; j < e; j += stride)`)
makes as many passes as the size over the threads launched. When the host computes the grid
from that same size (`nblocks.x = (e + 255) / 256; fill<<<nblocks, 256>>>(e, w)`), the launch
covers it: one pass a thread. A grid capped by a constant (`min((e + 255) / 256, 1024)`) does
not, and is not read so.
"""

from __future__ import annotations

import re

from perflsp.kernels.models import CudaFunction, LaunchSite
from perflsp.kernels.program import ProgramModel

_IDENT = re.compile(r"[A-Za-z_]\w*")
_CAPPED = re.compile(r"\b(?:std::)?(?:min|fmin|MIN)\s*\(")


def grid_sized_parameters(model: ProgramModel, kernel: CudaFunction, site: LaunchSite | None) -> frozenset[str]:
    """The kernel's parameters whose argument at `site` (a plain name) the grid is computed from:
    named in the grid expression, or in what the enclosing function assigns or initialises the
    grid variable with (`dim3 grid((n + 255) / 256)`, `nblocks.x = (e + 255) / 256`). Empty
    where the site is in another file or the grid is capped."""
    if site is None or not any(s is site for s in model.kernels.launches):
        return frozenset()
    grid_text = site.grid.text
    sources = [grid_text]
    function = model.enclosing_function(site.span.start_byte)
    if function is not None:
        body = model.data[function.start_byte:site.span.start_byte].decode("utf-8", "replace")
        for name in set(_IDENT.findall(grid_text)):
            quoted = re.escape(name)
            sources += re.findall(rf"\b{quoted}\s*(?:\.\s*[xyz])?\s*=\s*([^;=][^;]*);", body)
            sources += re.findall(rf"\b{quoted}\s*[({{]([^;]*)[)}}]\s*;", body)
    if any(_CAPPED.search(text) for text in sources):
        return frozenset()
    named = {word for text in sources for word in _IDENT.findall(text)}
    sized = set()
    for param, argument in zip(kernel.params, site.args):
        text = argument.text.strip()
        if param.name is not None and _IDENT.fullmatch(text) and text in named:
            sized.add(param.name)
    return frozenset(sized)
