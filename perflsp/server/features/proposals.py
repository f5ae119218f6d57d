"""LLM launch-parameter proposals turned into edits, only through the validated builders of
`perflsp.analysis.fixes` (via `engine_adapter`): a proposal that does not fit the kernel, the GPU
or the code is rejected with the reason, never applied half-way.

The model's answer has passed `perflsp.llm.schema` validation already (numbers in range); here it
meets the code: a block size needs a CUDA launch in this file and must fit the GPU and the
kernel's `__launch_bounds__`; `num_teams`/`thread_limit` need an OpenMP target region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perflsp.analysis.models import Fix
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.llm.schema import Proposals
from perflsp.server import engine_adapter as engine
from perflsp.server.documents import Snapshot


@dataclass
class ProposalEdits:
    fixes: list[Fix] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)  # {proposal, reason}
    notes: list[str] = field(default_factory=list)  # code changes the model described (never applied)


def proposal_edits(snap: Snapshot, name: str, proposals: Proposals | None, gpu: Gpu, label: str) -> ProposalEdits:
    out = ProposalEdits()
    item = snap.kernel_named(name)
    if item is None:
        out.rejected.append({"proposal": "any", "reason": f"`{name}` is no longer in the document"})
        return out
    if proposals is None or proposals.empty:
        out.rejected.append({"proposal": "none", "reason": f"{label} proposed no change"})
        return out
    suffix = f" (proposed by {label})"
    max_threads = gpu.limits.max_threads_per_block
    warp = gpu.warp_size

    def reject(proposal: str, reason: str) -> None:
        out.rejected.append({"proposal": proposal, "reason": reason})

    def threads_problem(value: int) -> str | None:
        if value % warp:
            return f"{value} is not a multiple of the warp size ({warp}) of {gpu.name}"
        if value > max_threads:
            return f"{value} exceeds the {max_threads} threads per block of {gpu.name}"
        return None

    if proposals.block_size is not None:
        what = f"block_size {proposals.block_size}"
        if not isinstance(item, CudaFunction):
            reject(what, "a block size applies to CUDA launches; this is an OpenMP target region")
        elif (problem := threads_problem(proposals.block_size)) is not None:
            reject(what, problem)
        elif (bound := _bound(item)) is not None and proposals.block_size > bound and proposals.launch_bounds is None:
            reject(what, f"exceeds the kernel's __launch_bounds__({bound})")
        else:
            sites = snap.kernels.launches_of(item)
            if not sites:
                reject(what, f"no launch of `{name}` in this file to change")
            for site in sites:
                try:
                    fix = engine.set_block_size(snap.data, snap.tree, site, proposals.block_size, file_kernels=snap.kernels)
                except engine.FixUnavailable as exc:
                    reject(what, f"launch at line {site.line}: {exc}")
                    continue
                out.fixes.append(Fix(fix.title + suffix, fix.edits, "refactor"))
    if proposals.launch_bounds is not None:
        bounds = proposals.launch_bounds
        what = f"__launch_bounds__({bounds.max_threads}{', ' + str(bounds.min_blocks) if bounds.min_blocks else ''})"
        if not isinstance(item, CudaFunction):
            reject(what, "__launch_bounds__ applies to CUDA kernels; this is an OpenMP target region")
        elif (problem := threads_problem(bounds.max_threads)) is not None:
            reject(what, problem)
        elif proposals.block_size is not None and proposals.block_size > bounds.max_threads:
            reject(what, f"smaller than the proposed block size {proposals.block_size}")
        else:
            try:
                fix = engine.set_launch_bounds(snap.data, snap.tree, item, bounds.max_threads, bounds.min_blocks,
                                               file_kernels=snap.kernels)
                out.fixes.append(Fix(fix.title + suffix, fix.edits, "refactor"))
            except engine.FixUnavailable as exc:
                reject(what, str(exc))
    if proposals.num_teams is not None or proposals.thread_limit is not None:
        what = " ".join(f"{k}({v})" for k, v in (("num_teams", proposals.num_teams),
                                                  ("thread_limit", proposals.thread_limit)) if v is not None)
        if not isinstance(item, OmpRegion):
            reject(what, "num_teams/thread_limit apply to OpenMP target regions; this is a CUDA kernel")
        elif proposals.thread_limit is not None and (problem := threads_problem(proposals.thread_limit)) is not None:
            reject(what, problem)
        else:
            try:
                fix = engine.set_omp_clauses(snap.data, snap.tree, item, thread_limit=proposals.thread_limit,
                                             num_teams=proposals.num_teams)
                out.fixes.append(Fix(fix.title + suffix, fix.edits, "refactor"))
            except engine.FixUnavailable as exc:
                reject(what, str(exc))
    out.notes = list(proposals.code_changes)
    return out


def _bound(kernel: CudaFunction) -> int | None:
    bounds = kernel.launch_bounds
    value = bounds.max_threads.value if bounds is not None else None
    return value if isinstance(value, int) else None


def describe(proposals: Proposals | None) -> dict[str, Any]:
    return proposals.model_dump(mode="json") if proposals is not None else {}


__all__ = ["ProposalEdits", "describe", "proposal_edits"]
