"""`occupancy/low`: launch shapes that cap occupancy: blocks too small to fill an SM, grids smaller than the GPU.

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from tree_sitter import Node

from perflsp.analysis.exprtypes import type_of
from perflsp.analysis.fixes import block_size_assumed, grid_strided, preferred_block_size
from perflsp.analysis.lints.context import LintContext, walk
from perflsp.analysis.models import Finding, FixRequest
from perflsp.analysis.ruledef import Example, RuleInfo
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import Limiter, OccupancyInputError, OccupancyResult, occupancy
from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.models import CudaFunction, LaunchSite, Span

_DOC = """\
## What it reports

A launch shape that caps occupancy on a configured GPU, whatever the kernel's resources:

- **tiny blocks**: the SM's limit on resident blocks (16 on sm_86/sm_89, 32 on sm_80/sm_90) is
  reached before its warp slots are filled, and occupancy stays at or below 50%:

  ```cuda
  add_one<<<(n + 31) / 32, 32>>>(n, x);   // 16 x 1 warp = 33% on an RTX 3080, 50% on an H100
  ```

- **small grids**: a constant grid (or `num_teams`) with fewer blocks than three quarters of the
  GPU's SMs leaves SMs with nothing to run (`k<<<8, 256>>>` uses 8 of an H100's 132 SMs), when
  the kernel is a grid-stride loop (it reads `gridDim`), so that more blocks share its work. A
  kernel that does not stride by the grid does a fixed amount of work per block: more blocks would
  repeat it or do nothing, so such a grid is not reported (a grid sized to the problem). Nor is a
  single block: a kernel launched with one block combines its work in that block (a final
  reduction), which more blocks would break.

A tiny block is not reported when the kernel is written for that block size (another size would
change what it computes, not only its occupancy): the cases listed in
[block-size-not-warp-multiple](launch-block-size-not-warp-multiple.md), such as a
`<<<1, 1>>>` launch of a kernel that never reads `threadIdx`. Nor is it reported when the grid is
a constant too small to reach the cap (fewer blocks than the SMs hold at that occupancy): there
the grid, not the block, decides how many warps run. Launches from device code (dynamic
parallelism) are not judged: a child grid shares the GPU with its siblings.

Occupancy comes from `perflsp.hardware.occupancy` (the CUDA occupancy calculator's rules) for
each configured GPU: NVIDIA GPUs for CUDA launches, all of them for OpenMP regions. It assumes
32 registers per thread unless configured otherwise, the kernel's constant-size `__shared__`
arrays and the launch's dynamic shared memory. Limits that come from registers or shared memory
are not reported by this rule: the hover and the roofline estimate show them.

## Why it matters on GPUs

A warp that waits for memory is hidden only if the SM has other warps to run. Bandwidth-bound
kernels in particular need many resident warps to keep enough loads in flight; 33% occupancy
with one-warp blocks typically costs a large share of achievable bandwidth.

## Fix

For small blocks: `Launch add_one with 128 threads per block`, the first of 128, 256, 512, 1024
(then any multiple of 32) that reaches the best occupancy on every configured GPU, with the grid
and `__launch_bounds__` adjusted as described in
[block-size-not-warp-multiple](launch-block-size-not-warp-multiple.md). OpenMP regions get
`thread_limit(128)`. Small grids have no automatic fix (the grid usually follows the problem
size).

## Options

The threshold (50%) and the assumed registers per thread are options of the lint run
(`LintOptions.occupancy_threshold`, `LintOptions.registers_per_thread`).
"""

_BAD = """\
__global__ void add_one(int n, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

void run(int n, float *x)
{
    add_one<<<(n + 31) / 32, 32>>>(n, x);   // one-warp blocks: at most 16 or 32 warps per SM
}
"""

_GOOD = """\
__global__ void add_one(int n, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

void run(int n, float *x)
{
    add_one<<<(n + 255) / 256, 256>>>(n, x);
}
"""

RULE = RuleInfo(
    code="occupancy/low",
    name="occupancy-low",
    default_severity="information",
    has_fix=True,
    summary="the launch shape (tiny blocks, a grid smaller than the GPU) caps occupancy",
    fix_note="for small blocks: a better block size",
    applies_to="CUDA launch sites, OpenMP `thread_limit`/`num_teams`",
    doc=_DOC,
    example=Example(bad=_BAD, good=_GOOD),
)
CODE = RULE.code
NAME = RULE.name
DEFAULT_SEVERITY = RULE.default_severity

_SHAPE_LIMITERS = (Limiter.BLOCKS, Limiter.WARPS)
_SIZED_KINDS = ("int", "bool", "f16", "f32", "f64")  # (a struct's size is not known)
SM_FRACTION = 0.75  # a constant grid filling fewer SMs than this share of the GPU is reported


def check(ctx: LintContext) -> list[Finding]:
    findings: list[Finding] = []
    nvidia = [g for g in ctx.gpus if g.vendor == "NVIDIA"]
    regs = ctx.options.registers_per_thread
    by_name: dict[str, CudaFunction] = {}
    for k in ctx.kernels.kernels:  # the first definition of a name, as a scan per site would find
        by_name.setdefault(k.qualified_name, k)
    device_code = [f.span for f in (*ctx.kernels.kernels, *ctx.kernels.device_functions)]
    for site in ctx.kernels.launches:
        if any(span.contains(site.span.start_byte) for span in device_code):
            continue  # a child grid (dynamic parallelism) shares the GPU with its siblings: its shape alone decides nothing
        kernel = by_name.get(site.kernel) if site.kernel is not None else None
        static_smem = _static_shared_bytes(ctx, kernel) if kernel is not None else 0
        dynamic = site.shared_mem_bytes.value if site.shared_mem_bytes is not None else 0
        dynamic = dynamic if isinstance(dynamic, int) else 0
        threads = _product(site.block.value)
        if threads is not None and 0 < threads <= 1024 and site.block.span is not None and not _fixed_block(ctx, site):
            finding = _block_finding(ctx, nvidia, threads, regs, static_smem, dynamic, site.block.span, site.kernel,
                                     blocks=_product(site.grid.value))
            if finding is not None:
                size = preferred_block_size(nvidia, regs, static_smem, dynamic, ctx.options.warp_size)
                if size is not None and size != threads:
                    finding = replace(finding, fix_requests=(
                        FixRequest("block-size", site.span, size, warp_size=ctx.options.warp_size),))
                findings.append(finding)
        blocks = _product(site.grid.value)
        if blocks is not None and blocks > 1 and site.grid.span is not None \
                and grid_strided(ctx.launch_document, site):
            finding = _grid_finding(nvidia, blocks, site.grid.span, site.kernel, "grid", "blocks")
            if finding is not None:
                findings.append(finding)
    for region in ctx.kernels.omp_regions:
        limit = region.clause("thread_limit")
        team_size = limit.value.value if limit is not None and limit.value is not None else None
        if isinstance(team_size, int) and 0 < team_size <= 1024:
            finding = _block_finding(ctx, list(ctx.gpus), team_size, regs, 0, 0, region.span, region.name,
                                     what="thread_limit")
            if finding is not None:
                size = preferred_block_size(list(ctx.gpus), regs, 0, 0, ctx.options.warp_size)
                if size is not None and size != team_size:
                    finding = replace(finding, fix_requests=(FixRequest("thread-limit", region.span, size),))
                findings.append(finding)
        teams = region.clause("num_teams")
        count = teams.value.value if teams is not None and teams.value is not None else None
        if isinstance(count, int) and count > 0:
            finding = _grid_finding(list(ctx.gpus), count, region.span, region.name, "num_teams", "teams")
            if finding is not None:
                findings.append(finding)
    return findings


def _fixed_block(ctx: LintContext, site: LaunchSite) -> bool:
    """The kernel is written for the block size it is launched with (another changes what it computes)."""
    return block_size_assumed(ctx.launch_document, site) is not None


def _block_finding(ctx: LintContext, gpus: list[Gpu], threads: int, regs: int, static_smem: int, dynamic: int,
                   span: Span, kernel: str | None, what: str = "block", blocks: int | None = None) -> Finding | None:
    """`blocks`: the grid, when it is a constant. A grid with fewer blocks than the SMs can hold at
    the capped occupancy never reaches the cap: its occupancy is the grid's (another block size
    would not raise it), so it is not reported here."""
    capped: list[tuple[Gpu, OccupancyResult]] = []
    for gpu in gpus:
        try:
            result = occupancy(gpu, threads, regs, static_smem, dynamic)
        except OccupancyInputError:
            continue
        if blocks is not None and blocks < gpu.sm_count * result.active_blocks_per_sm:
            continue
        if result.limiter in _SHAPE_LIMITERS and result.occupancy <= ctx.options.occupancy_threshold + 1e-9:
            capped.append((gpu, result))
    if not capped:
        return None
    capped.sort(key=lambda item: item[1].occupancy)
    parts = [f"{r.occupancy:.0%} on {g.name} ({_why(r)})" for g, r in capped[:3]]
    more = f" and {len(capped) - 3} more GPU(s)" if len(capped) > 3 else ""
    message = (f"{threads}-thread {what}s cap occupancy at " + "; ".join(parts) + more
               + ": too few warps per SM to hide memory latency")
    return Finding(code=CODE, message=message, span=span, severity=DEFAULT_SEVERITY, kernel=kernel)


def _why(result: OccupancyResult) -> str:
    if result.limiter == Limiter.BLOCKS:
        warps = "warp" if result.warps_per_block == 1 else "warps"
        return (f"at most {result.active_blocks_per_sm} resident blocks per SM x {result.warps_per_block} "
                f"{warps} = {result.active_warps_per_sm} of {result.max_warps_per_sm} warps")
    return f"{result.active_blocks_per_sm} block(s) of {result.warps_per_block} warps fit in {result.max_warps_per_sm} warp slots"


def _grid_finding(gpus: list[Gpu], blocks: int, span: Span, kernel: str | None, what: str, unit: str) -> Finding | None:
    short = sorted((g for g in gpus if blocks < SM_FRACTION * g.sm_count), key=lambda g: blocks / g.sm_count)
    if not short:
        return None
    parts = [f"{g.sm_count - blocks} of {g.sm_count} SMs idle on {g.name}" for g in short[:3]]
    more = f" and {len(short) - 3} more GPU(s)" if len(short) > 3 else ""
    noun = unit if blocks != 1 else unit.rstrip("s")
    message = f"a {what} of {blocks} {noun} leaves " + "; ".join(parts) + more
    return Finding(code=CODE, message=message, span=span, severity=DEFAULT_SEVERITY, kernel=kernel)


def _product(value: object) -> int | None:
    if isinstance(value, tuple):
        return math.prod(value)
    return value if isinstance(value, int) else None


def _static_shared_bytes(ctx: LintContext, kernel: CudaFunction) -> int:
    """Constant-size `__shared__` arrays declared in the kernel (first instantiation); 0 when
    a size is unknown (the block-shape limit does not depend on it)."""
    node = ctx.function_node(kernel)
    if node is None:
        return 0
    inst = ctx.instantiations(kernel)[0]
    env = ctx.value_env(inst)
    aliases = ctx.instantiation_aliases(inst)
    total = 0
    for decl in walk(node):
        if decl.type != "declaration" or not re.search(rb"(?<!extern\s)\b__shared__\b", decl.text or b""):
            continue
        if b"extern" in (decl.text or b""):
            continue
        type_node = decl.child_by_field_name("type")
        element_type = type_of(ctx.text(type_node), aliases) if type_node is not None else None
        if element_type is None or element_type.pointer or element_type.kind not in _SIZED_KINDS:
            return 0
        element = element_type.size_bytes
        for declarator in decl.children_by_field_name("declarator"):
            size = element
            current: Node | None = declarator
            while current is not None and current.type == "array_declarator":
                dim = current.child_by_field_name("size")
                value, _ = try_evaluate(ctx.text(dim), env) if dim is not None else (None, None)
                if not isinstance(value, int):
                    return 0
                size *= value
                current = current.child_by_field_name("declarator")
            total += size
    return total if total <= 48 * 1024 else 0
