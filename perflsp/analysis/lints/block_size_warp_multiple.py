"""`launch/block-size-not-warp-multiple`: thread blocks whose size is not a multiple of the warp size (32 threads).

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

from perflsp.analysis.fixes import block_size_assumed
from perflsp.analysis.lints.context import LintContext
from perflsp.analysis.models import Finding, FixAction, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo
from perflsp.kernels.models import Span

_DOC = """\
## What it reports

A block size that folds to a constant which is not a multiple of the warp size (32 threads):

```cuda
#define ODD_BLOCK 100
scale<<<(n + ODD_BLOCK - 1) / ODD_BLOCK, ODD_BLOCK>>>(n, 2.0f, x);   // 100 threads
```

For `dim3` blocks the product counts: `dim3(16, 16)` (256) is fine, `dim3(10, 10)` is not.
A `__launch_bounds__` with an odd size is reported only when no launch of that kernel already
is, and an OpenMP `thread_limit(100)` is reported the same way.

A launch whose block size is part of what the kernel computes is not reported, because another
size would change the result or repeat the work rather than use the idle lanes: a single thread
(`step<<<1, 1>>>()`: serial by design); a kernel (defined in the file) that never reads
`threadIdx` and runs a fixed grid, indexes with `blockIdx.x` but never reads `blockDim.x`, uses
the block's number in its code or gets it as a template argument; or a fixed grid that does not
follow the block size (`print_ids<<<2, 2>>>()`) for a kernel that is not a grid-stride loop.
`k<<<n, 1>>>` (one block per item, a grid that follows the data) is reported.

## Why it matters on GPUs

Blocks are scheduled as whole warps: 100 threads occupy 4 warps (128 lanes), and the last warp
runs 4 useful lanes and 28 idle ones in every block. The idle lanes still hold warp slots and
registers and cost issue cycles, so 22% of this launch's capacity is wasted.

## Fix

Two fixes, the nearest first: `Launch scale with 96 threads per block` and `... 128 ...`.
The builder edits the `#define`/constant the size comes from when every use of it belongs to
this kernel and its launches (here `ODD_BLOCK`, which also sizes the kernel's
`__launch_bounds__`); otherwise it edits the launch itself. A grid written as a ceiling
division by the old size (`(n + B - 1) / B`, `(n + 99) / 100`, `ceil(n / (float)B)`,
`div_up(n, B)`) is rewritten for the new size, and a `__launch_bounds__` smaller than the new
size is raised; a dynamic shared-memory size written in terms of the block follows too.

No fix is offered when the change could alter what the kernel computes: the kernel is not
defined in the file, never reads `threadIdx.x` (written for one thread per block), indexes with
`blockIdx.x` without `blockDim.x`, mentions the old size in its code (`__shared__ float s[256]`)
or through a template argument; the block is 2-D; or the grid does not follow the block size
(a grid divided without rounding up, or a fixed grid for a kernel that is not a grid-stride loop).
"""

_BAD = """\
__global__ void scale(int n, float a, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

void run(int n, float *x)
{
    scale<<<(n + 99) / 100, 100>>>(n, 2.0f, x);   // 4 warps, the last with 28 idle lanes
}
"""

_GOOD = """\
__global__ void scale(int n, float a, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

void run(int n, float *x)
{
    scale<<<(n + 127) / 128, 128>>>(n, 2.0f, x);
}
"""

RULE = RuleInfo(
    code="launch/block-size-not-warp-multiple",
    name="block-size-not-warp-multiple",
    default_severity="warning",
    has_fix=True,
    summary="a block size that is not a multiple of the 32-thread warp leaves lanes idle",
    fix_note="nearest multiple of 32",
    applies_to="CUDA launch sites, `__launch_bounds__`, OpenMP `thread_limit`",
    doc=_DOC,
    example=Example(bad=_BAD, good=_GOOD),
)
CODE = RULE.code
NAME = RULE.name
DEFAULT_SEVERITY = RULE.default_severity


def check(ctx: LintContext) -> list[Finding]:
    warp = ctx.options.warp_size
    findings: list[Finding] = []
    flagged_kernels: set[str] = set()
    for site in ctx.kernels.launches:
        threads = _threads(site.block.value)
        if threads is None or threads % warp == 0 or site.block.span is None:
            continue
        if block_size_assumed(ctx.launch_document, site) is not None:
            continue  # the kernel is written for this block size: another size changes what it computes
        findings.append(Finding(
            code=CODE, message=_message(threads, warp, "block"), span=site.block.span, severity=DEFAULT_SEVERITY,
            kernel=site.kernel, fix_requests=_requests("block-size", site.span, _candidates(threads, warp), warp)))
        if site.kernel:
            flagged_kernels.add(site.kernel)
    for kernel in ctx.kernels.kernels:
        bounds = kernel.launch_bounds
        if bounds is None or kernel.qualified_name in flagged_kernels or bounds.span is None:
            continue
        bound = bounds.max_threads.value
        if not isinstance(bound, int) or bound <= 0 or bound % warp == 0:
            continue
        rounded = min(1024, -(-bound // warp) * warp)
        findings.append(Finding(
            code=CODE, message=_message(bound, warp, "__launch_bounds__ size"), span=bounds.span,
            severity=DEFAULT_SEVERITY, kernel=kernel.qualified_name,
            fix_requests=_requests("launch-bounds", kernel.name_span, [rounded], warp)))
    for region in ctx.kernels.omp_regions:
        clause = region.clause("thread_limit")
        value = clause.value.value if clause is not None and clause.value is not None else None
        if not isinstance(value, int) or value <= 0 or value % warp == 0:
            continue
        findings.append(Finding(
            code=CODE, message=_message(value, warp, "thread_limit"), span=region.span, severity=DEFAULT_SEVERITY,
            kernel=region.name, fix_requests=_requests("thread-limit", region.span, _candidates(value, warp), warp)))
    return findings


def _threads(value: object) -> int | None:
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


def _requests(action: FixAction, span: Span, sizes: list[int], warp: int) -> tuple[FixRequest, ...]:
    """One request per candidate size, the nearest preferred (or the next one that builds)."""
    return tuple(FixRequest(action, span, size, preferred=i == 0, warp_size=warp) for i, size in enumerate(sizes))
