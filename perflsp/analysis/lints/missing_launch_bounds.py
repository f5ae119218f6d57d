"""Kernels always launched with a constant block size but without `__launch_bounds__`.

Without `__launch_bounds__(N)` the compiler must assume the kernel may run with 1024 threads per
block and budgets registers for that (at most 64 per thread). Knowing the real maximum lets it
use more registers where that avoids spills, or fewer where that fits more blocks per SM, and a
launch with a larger block fails loudly instead of silently misbehaving.

Fires when every launch of the kernel in the file has a block that folds to a constant and the
kernel declares no `__launch_bounds__`. Kernels with no launch in the file (launched elsewhere) or
with any run-time block size are left alone.
Fix: insert `__launch_bounds__(N)` (N = the largest block it is launched with) before the kernel's
name: `__global__ void __launch_bounds__(256) negate(...)`.
"""

from __future__ import annotations

import math

from perflsp.analysis.fixes import EditError, set_launch_bounds
from perflsp.analysis.lints.context import LintContext
from perflsp.analysis.models import Finding, Fix

CODE = "launch/missing-launch-bounds"
NAME = "missing-launch-bounds"
DEFAULT_SEVERITY = "information"


def check(ctx: LintContext) -> list[Finding]:
    findings: list[Finding] = []
    for kernel in ctx.kernels.kernels:
        if kernel.launch_bounds is not None:
            continue
        sites = ctx.kernels.launches_of(kernel)
        if not sites:
            continue
        sizes = []
        for site in sites:
            value = site.block.value
            threads = math.prod(value) if isinstance(value, tuple) else value if isinstance(value, int) else None
            if threads is None or not 0 < threads <= 1024:
                break
            sizes.append(threads)
        else:
            largest = max(sizes)
            lines = ", ".join(str(s.line) for s in sites)
            shown = f"{largest} threads" if len(set(sizes)) == 1 else f"at most {largest} threads"
            message = (f"`{kernel.name}` is always launched with {shown} per block (line{'s' if len(sites) > 1 else ''} "
                       f"{lines}) but has no `__launch_bounds__({largest})`: the compiler assumes up to 1024 threads "
                       "when it allocates registers")
            fixes = ()
            try:
                fix = set_launch_bounds(ctx.data, ctx.tree, kernel, largest, file_kernels=ctx.kernels)
                fixes = (Fix(fix.title, fix.edits, fix.kind, True),)
            except EditError:
                pass
            findings.append(Finding(code=CODE, message=message, span=kernel.name_span, severity=DEFAULT_SEVERITY,
                                    fixes=fixes, kernel=kernel.qualified_name))
    return findings
