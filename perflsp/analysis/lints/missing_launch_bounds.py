"""`launch/missing-launch-bounds`: kernels always launched with a constant block size but without `__launch_bounds__`.

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

import math

from perflsp.analysis.lints.context import LintContext
from perflsp.analysis.models import Finding, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo

_DOC = """\
## What it reports

A kernel that declares no `__launch_bounds__` although every launch of it in the file uses a
block size that folds to a constant:

```cuda
__global__ void negate(int n, float *x) { ... }   // reported here
...
negate<<<(n + 255) / 256, 256>>>(n, x);            // the only launch: 256 threads
```

Kernels with no launch in the file (launched from another file) or with any run-time block size
(`cudaOccupancyMaxPotentialBlockSize`, a parameter) are not reported.

## Why it matters on GPUs

Without a bound the compiler must assume 1024 threads per block and caps registers accordingly
(64 per thread). With `__launch_bounds__(256)` it knows a block is at most 256 threads: it can
use more registers where that avoids spills, or (with the second argument, minimum blocks per SM)
fewer to fit more blocks. A launch that exceeds the bound fails with an error instead of
running with a register allocation that does not fit.

## Fix

`Add __launch_bounds__(256) to negate` inserts the largest launched size before the kernel's
name, where CUDA requires it: `__global__ void __launch_bounds__(256) negate(...)`. The builder
refuses a bound below any block size the file launches the kernel with.
"""

_BAD = """\
__global__ void negate(int n, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = -x[i];
}

void run(int n, float *x)
{
    negate<<<(n + 255) / 256, 256>>>(n, x);   // always 256 threads per block
}
"""

_GOOD = """\
__global__ void __launch_bounds__(256) negate(int n, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = -x[i];
}

void run(int n, float *x)
{
    negate<<<(n + 255) / 256, 256>>>(n, x);
}
"""

RULE = RuleInfo(
    code="launch/missing-launch-bounds",
    name="missing-launch-bounds",
    default_severity="information",
    has_fix=True,
    summary="a kernel launched only with constant block sizes declares no `__launch_bounds__`",
    fix_note="insert `__launch_bounds__(N)`",
    applies_to="`__global__` kernels",
    doc=_DOC,
    example=Example(bad=_BAD, good=_GOOD),
)
CODE = RULE.code
NAME = RULE.name
DEFAULT_SEVERITY = RULE.default_severity


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
            request = FixRequest("launch-bounds", kernel.name_span, largest, preferred=True)
            findings.append(Finding(code=CODE, message=message, span=kernel.name_span, severity=DEFAULT_SEVERITY,
                                    kernel=kernel.qualified_name, fix_requests=(request,)))
    return findings
