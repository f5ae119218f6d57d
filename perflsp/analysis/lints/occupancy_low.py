"""Launch shapes that cap occupancy: blocks too small to fill an SM, grids smaller than the GPU.

An SM holds at most 16 to 32 resident blocks (by architecture). With 32-thread blocks, 16 blocks
are 16 warps: 33% of an sm_86 SM's 48 warp slots, whatever the kernel's registers and shared
memory. Few resident warps leave the SM little to switch to while loads are in flight, which is
exactly what a bandwidth-bound kernel needs. Likewise a grid with fewer blocks than the GPU has
SMs leaves whole SMs idle.

Checked per configured GPU (NVIDIA GPUs for CUDA launches, every GPU for OpenMP regions), with
`perflsp.hardware.occupancy`, assuming `registers_per_thread` (32 unless configured) and the
kernel's constant `__shared__` arrays plus the launch's dynamic shared memory:
- the block is limited by the launch shape (resident-block or warp-slot limit) and reaches at most
  `occupancy_threshold` (50%) of the SM's warps;
- a constant grid (or `num_teams`) has fewer blocks than three quarters of the GPU's SMs.
Occupancy limited by registers or shared memory is a resource question, not reported here.
Fix: the block size that reaches the best occupancy on every configured GPU (128, 256, 512,
1024 tried first), with the grid and `__launch_bounds__` adjusted.
"""

from __future__ import annotations

import math
import re

from perflsp.analysis.fixes import EditError, preferred_block_size, set_block_size, set_omp_clauses
from perflsp.analysis.lints.context import LintContext, walk
from perflsp.analysis.models import Finding
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import Limiter, OccupancyInputError, OccupancyResult, occupancy
from perflsp.kernels.consteval import TYPE_SIZES_BYTES, try_evaluate
from perflsp.kernels.models import CudaFunction, Span

CODE = "occupancy/low"
NAME = "occupancy-low"
DEFAULT_SEVERITY = "information"

_SHAPE_LIMITERS = (Limiter.BLOCKS, Limiter.WARPS)
SM_FRACTION = 0.75  # a constant grid filling fewer SMs than this share of the GPU is reported


def check(ctx: LintContext) -> list[Finding]:
    findings: list[Finding] = []
    nvidia = [g for g in ctx.gpus if g.vendor == "NVIDIA"]
    regs = ctx.options.registers_per_thread
    for site in ctx.kernels.launches:
        kernel = next((k for k in ctx.kernels.kernels if k.qualified_name == site.kernel), None)
        static_smem = _static_shared_bytes(ctx, kernel) if kernel is not None else 0
        dynamic = site.shared_mem_bytes.value if site.shared_mem_bytes is not None else 0
        dynamic = dynamic if isinstance(dynamic, int) else 0
        threads = _product(site.block.value)
        if threads is not None and 0 < threads <= 1024 and site.block.span is not None:
            finding = _block_finding(ctx, nvidia, threads, regs, static_smem, dynamic, site.block.span, site.kernel)
            if finding is not None:
                fixes = []
                size = preferred_block_size(nvidia, regs, static_smem, dynamic, ctx.options.warp_size)
                if size is not None and size != threads:
                    try:
                        fixes.append(set_block_size(ctx.data, ctx.tree, site, size, warp_size=ctx.options.warp_size,
                                                    file_kernels=ctx.kernels))
                    except EditError:
                        pass
                findings.append(_with_fixes(finding, fixes))
        blocks = _product(site.grid.value)
        if blocks is not None and blocks > 0 and site.grid.span is not None:
            finding = _grid_finding(nvidia, blocks, site.grid.span, site.kernel, "grid", "blocks")
            if finding is not None:
                findings.append(finding)
    for region in ctx.kernels.omp_regions:
        limit = region.clause("thread_limit")
        threads = limit.value.value if limit is not None and limit.value is not None else None
        if isinstance(threads, int) and 0 < threads <= 1024:
            finding = _block_finding(ctx, list(ctx.gpus), threads, regs, 0, 0, region.span, region.name, what="thread_limit")
            if finding is not None:
                fixes = []
                size = preferred_block_size(list(ctx.gpus), regs, 0, 0, ctx.options.warp_size)
                if size is not None and size != threads:
                    try:
                        fixes.append(set_omp_clauses(ctx.data, ctx.tree, region, thread_limit=size,
                                                     file_kernels=ctx.kernels))
                    except EditError:
                        pass
                findings.append(_with_fixes(finding, fixes))
        teams = region.clause("num_teams")
        count = teams.value.value if teams is not None and teams.value is not None else None
        if isinstance(count, int) and count > 0:
            finding = _grid_finding(list(ctx.gpus), count, region.span, region.name, "num_teams", "teams")
            if finding is not None:
                findings.append(finding)
    return findings


def _block_finding(ctx: LintContext, gpus: list[Gpu], threads: int, regs: int, static_smem: int, dynamic: int,
                   span: Span, kernel: str | None, what: str = "block") -> Finding | None:
    capped: list[tuple[Gpu, OccupancyResult]] = []
    for gpu in gpus:
        try:
            result = occupancy(gpu, threads, regs, static_smem, dynamic)
        except OccupancyInputError:
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


def _with_fixes(finding: Finding, fixes: list) -> Finding:
    return Finding(finding.code, finding.message, finding.span, finding.severity, tuple(fixes), finding.related,
                   finding.kernel)


def _product(value) -> int | None:
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
    total = 0
    for decl in walk(node):
        if decl.type != "declaration" or not re.search(rb"(?<!extern\s)\b__shared__\b", decl.text or b""):
            continue
        if b"extern" in (decl.text or b""):
            continue
        type_node = decl.child_by_field_name("type")
        type_text = ctx.text(type_node) if type_node is not None else ""
        type_text = inst.types.get(type_text, ctx.aliases.get(type_text, type_text))
        element = TYPE_SIZES_BYTES.get(" ".join(type_text.split()))
        if element is None:
            return 0
        for declarator in decl.children_by_field_name("declarator"):
            size = element
            current = declarator
            while current is not None and current.type == "array_declarator":
                dim = current.child_by_field_name("size")
                value, _ = try_evaluate(ctx.text(dim), env) if dim is not None else (None, None)
                if not isinstance(value, int):
                    return 0
                size *= value
                current = current.child_by_field_name("declarator")
            total += size
    return total if total <= 48 * 1024 else 0
