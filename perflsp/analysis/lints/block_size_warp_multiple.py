"""Thread blocks whose size is not a multiple of the warp size (32 threads).

The GPU schedules a block as whole warps. A block of 100 threads occupies 4 warps = 128 lanes:
the last warp runs 4 useful lanes and 28 idle ones, in every block, and the idle lanes still take
warp slots, registers and issue cycles. Sizes that are multiples of 32 waste nothing.

Checked: CUDA launch sites whose block folds to a constant (`k<<<g, 100>>>`, `dim3 b(10, 10)`:
the product counts), OpenMP `thread_limit(...)` clauses with a constant, and a
`__launch_bounds__` with an odd size when no launch of that kernel was reported already.
Fix: the nearest multiple of 32 below and above (the grid follows when it is a ceiling division).
"""

from __future__ import annotations

from perflsp.analysis.fixes import EditError, set_block_size, set_launch_bounds, set_omp_clauses
from perflsp.analysis.lints.context import LintContext
from perflsp.analysis.models import Finding, Fix

CODE = "launch/block-size-not-warp-multiple"
NAME = "block-size-not-warp-multiple"
DEFAULT_SEVERITY = "warning"


def check(ctx: LintContext) -> list[Finding]:
    warp = ctx.options.warp_size
    findings: list[Finding] = []
    flagged_kernels: set[str] = set()
    for site in ctx.kernels.launches:
        threads = _threads(site.block.value)
        if threads is None or threads % warp == 0 or site.block.span is None:
            continue
        fixes = []
        for size in _candidates(threads, warp):
            try:
                fixes.append(set_block_size(ctx.data, ctx.tree, site, size, warp_size=warp, file_kernels=ctx.kernels))
            except EditError:
                pass
        _prefer_first(fixes)
        findings.append(Finding(
            code=CODE, message=_message(threads, warp, "block"), span=site.block.span, severity=DEFAULT_SEVERITY,
            fixes=tuple(fixes), kernel=site.kernel))
        if site.kernel:
            flagged_kernels.add(site.kernel)
    for kernel in ctx.kernels.kernels:
        bounds = kernel.launch_bounds
        if bounds is None or kernel.qualified_name in flagged_kernels or bounds.span is None:
            continue
        threads = bounds.max_threads.value
        if not isinstance(threads, int) or threads <= 0 or threads % warp == 0:
            continue
        fixes = []
        try:
            fixes.append(set_launch_bounds(ctx.data, ctx.tree, kernel, min(1024, -(-threads // warp) * warp),
                                           file_kernels=ctx.kernels))
        except EditError:
            pass
        _prefer_first(fixes)
        findings.append(Finding(
            code=CODE, message=_message(threads, warp, "__launch_bounds__ size"), span=bounds.span,
            severity=DEFAULT_SEVERITY, fixes=tuple(fixes), kernel=kernel.qualified_name))
    for region in ctx.kernels.omp_regions:
        clause = region.clause("thread_limit")
        value = clause.value.value if clause is not None and clause.value is not None else None
        if not isinstance(value, int) or value <= 0 or value % warp == 0:
            continue
        fixes = []
        for size in _candidates(value, warp):
            try:
                fixes.append(set_omp_clauses(ctx.data, ctx.tree, region, thread_limit=size, file_kernels=ctx.kernels))
            except EditError:
                pass
        _prefer_first(fixes)
        findings.append(Finding(
            code=CODE, message=_message(value, warp, "thread_limit"), span=region.span, severity=DEFAULT_SEVERITY,
            fixes=tuple(fixes), kernel=region.name))
    return findings


def _threads(value) -> int | None:
    if isinstance(value, tuple):
        x, y, z = value
        total = x * y * z
    elif isinstance(value, int):
        total = value
    else:
        return None
    return total if 0 < total <= 1024 else None


def _candidates(threads: int, warp: int) -> list[int]:
    """The nearest warp multiples, nearest first."""
    below = max(warp, threads - threads % warp)
    above = min(1024, below + warp if below < threads else below)
    ordered = sorted({below, above}, key=lambda size: (abs(size - threads), size))
    return [size for size in ordered if size != threads]


def _message(threads: int, warp: int, what: str) -> str:
    warps = -(-threads // warp)
    idle = warps * warp - threads
    runs = f"runs {warps} warps, and the last has" if warps > 1 else "runs one warp with"
    return (f"{what} of {threads} thread{'s' if threads != 1 else ''} is not a multiple of the warp size {warp}: "
            f"each block {runs} {idle} idle lanes ({idle / (warps * warp):.0%} of the block's lanes)")


def _prefer_first(fixes: list[Fix]) -> None:
    if fixes:
        first = fixes[0]
        fixes[0] = Fix(first.title, first.edits, first.kind, True)
