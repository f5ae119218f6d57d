"""Kernels in a file that another translation unit `#include`s (`kernels.h` or `kernel.cu`
pulled into `main.cu`): their launch sites, problem sizes and allocations live in the includer.

`includer_launches` finds the sources of the same folder that include the file, extracts
their launch sites of the file's kernels, and folds each site's values in the includer's own
context (its macros, constants and allocations, the program's arguments). The folded sites
carry no spans (those point into the other file); the engine takes them as
`AnalysisOptions.external_launches`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from perflsp.analysis.extents import cuda_extent, leading_name
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.unit import AnalysisUnit
from perflsp.kernels.context import has_launch_syntax
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import ConstValue, FileKernels, LaunchSite
from perflsp.kernels.program import program_model, read_source
from perflsp.source.files import SkippedFile, load_file

MAX_INCLUDERS = 4


def includer_launches(path: Path | None, kernels: FileKernels, resolver: IncludeResolver,
                      argv: Sequence[str] | None = None, defines: dict[str, str] | None = None,
                      include_dirs: tuple[Path, ...] = (), project_search: bool = False) -> tuple[LaunchSite, ...]:
    """Launch sites, in the files that include `path`, of its kernels that it does not launch
    itself (folded in their includer; `project_search`: as in `IncludeResolver.env_for`)."""
    if path is None:
        return ()
    includers = resolver.includers_of(Path(path))[:MAX_INCLUDERS]
    if not includers:  # (most files: known before looking at every kernel)
        return ()
    names = frozenset(k.name for k in kernels.kernels if not kernels.launches_of(k))
    if not names:
        return ()
    sites: list[LaunchSite] = []
    for includer in includers:
        try:
            stat = includer.stat()
        except OSError:
            continue
        sites.extend(_launches_in(includer, stat.st_mtime_ns, stat.st_size, names,
                                  tuple(argv) if argv is not None else None, resolver,
                                  tuple(sorted((defines or {}).items())), include_dirs, project_search))
    return tuple(sites)


@lru_cache(maxsize=64)
def _launches_in(includer: Path, mtime_ns: int, size: int, names: frozenset[str], argv: tuple[str, ...] | None,
                 resolver: IncludeResolver, defines: tuple[tuple[str, str], ...],
                 include_dirs: tuple[Path, ...], project_search: bool) -> tuple[LaunchSite, ...]:
    loaded = load_file(includer)
    if isinstance(loaded, SkippedFile) or not has_launch_syntax(loaded.data):
        return ()
    data = loaded.data
    if not any(name.encode() in data for name in names):
        return ()
    source = read_source(includer, data, resolver, dict(defines) or None, include_dirs, includers=False,
                         project_search=project_search)
    matching = [s for s in source.kernels.launches if s.name in names]
    if not matching:
        return ()
    unit = AnalysisUnit.of(program_model(source, argv), AnalysisOptions(argv=argv, include_env=source.env))
    return tuple(refold_site(unit, site) for site in matching)


def refold_site(unit: AnalysisUnit, site: LaunchSite) -> LaunchSite:
    """A launch site with its values folded in its own file (`unit`, with the program's
    arguments), its template arguments resolved there, the extents of its array arguments,
    and no spans."""

    def fold(value: ConstValue, dim3: bool) -> ConstValue:
        folded = value.value
        if folded is None and value.span is not None:
            folded = unit.fold_at(value.span.start_byte, value.text)
        if dim3 and isinstance(folded, (int, float)):
            folded = (int(folded), 1, 1)
        return ConstValue(value.text, None, folded, None if folded is not None else value.reason)

    env = unit.env_at(site.span.start_byte)
    template_args = []
    for template_arg in site.template_args:
        value = unit.model.evaluate(template_arg, env)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            template_args.append(str(int(value)) if float(value).is_integer() else repr(float(value)))
        else:
            template_args.append(" ".join(unit.model.expand(template_arg).split()) or template_arg)
    extents = []
    for arg in site.args:
        name = leading_name(arg.text)
        extent = cuda_extent(unit, name) if name else None
        extents.append((extent.bytes, extent.host_memory) if extent is not None else (None, False))
    return dataclasses.replace(site, template_args=tuple(template_args), grid=fold(site.grid, True),
                               block=fold(site.block, True),
                               shared_mem_bytes=fold(site.shared_mem_bytes, False) if site.shared_mem_bytes is not None else None,
                               args=tuple(fold(a, False) for a in site.args), arg_extents=tuple(extents))
