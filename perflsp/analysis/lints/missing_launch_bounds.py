"""`launch/missing-launch-bounds`: kernels always launched with a constant block size but without `__launch_bounds__`.

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

import math

from perflsp.analysis.fixes import MAX_THREADS_PER_BLOCK
from perflsp.analysis.lints.context import LintContext
from perflsp.analysis.models import Finding, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo

_DOC = """\
## What it reports

A kernel that declares no `__launch_bounds__` although every launch of it in the file uses a
block size that folds to a constant below 1,024 threads:

```cuda
__global__ void negate(int n, float *x) { ... }   // reported here
...
negate<<<(n + 255) / 256, 256>>>(n, x);            // the only launch: 256 threads
```

Kernels with no launch in the file (launched from another file) or with any run-time block size
(`cudaOccupancyMaxPotentialBlockSize`, a parameter) are not reported, and neither are kernels
launched with 1,024 threads per block (every GPU's largest block, which is what the compiler
plans for without a bound, so `__launch_bounds__(1024)` would change nothing) or only ever as a
single block (`<<<1, 1>>>`: no other block shares its SM, so there are no residency thresholds
for the bound to inform).

## Why it matters on GPUs

Without a bound, ptxas does not know the block size: it allocates registers for any block up to
the 1,024-thread maximum. With `__launch_bounds__(256)` it knows no block is larger than 256
threads and chooses the register count with the thresholds in mind at which one more 256-thread
block fits on an SM (with the second argument, minimum blocks per SM, it caps registers to fit
that many). A launch that exceeds the bound fails with an error instead of running.

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
            if threads is None or not 0 < threads <= MAX_THREADS_PER_BLOCK:
                break
            sizes.append(threads)
        else:
            largest = max(sizes)
            if largest >= MAX_THREADS_PER_BLOCK:
                continue  # the bound would restate the maximum the compiler plans for: nothing changes
            if all(_blocks(site.grid.value) == 1 for site in sites):
                continue  # one block at a time: no residency on an SM to plan registers for
            lines = ", ".join(str(s.line) for s in sites)
            unit = "thread" if largest == 1 else "threads"
            shown = f"{largest} {unit}" if len(set(sizes)) == 1 else f"at most {largest} {unit}"
            message = (f"`{kernel.name}` is always launched with {shown} per block (line{'s' if len(sites) > 1 else ''} "
                       f"{lines}) but has no `__launch_bounds__({largest})`: without it the compiler allocates "
                       f"registers for blocks of up to {MAX_THREADS_PER_BLOCK} threads")
            request = FixRequest("launch-bounds", kernel.name_span, largest, preferred=True)
            findings.append(Finding(code=CODE, message=message, span=kernel.name_span, severity=DEFAULT_SEVERITY,
                                    kernel=kernel.qualified_name, fix_requests=(request,)))
    return findings


def _blocks(value: object) -> int | None:
    if isinstance(value, tuple):
        return math.prod(value)
    return value if isinstance(value, int) else None
