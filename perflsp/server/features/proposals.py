"""LLM launch-parameter proposals turned into edits, only through the validated builders of
`perflsp.analysis.fixes` (via `engine_adapter`): a proposal that does not fit the kernel, the GPU
or the code is rejected with the reason, never applied half-way.

The model's answer has passed `perflsp.llm.schema` validation already (numbers in range); here it
meets the code: a block size needs a CUDA launch in this file and must fit the GPU and the
kernel's `__launch_bounds__`; `num_teams`/`thread_limit` need an OpenMP target region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perflsp.analysis.models import Fix
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.llm.sanitize import inert_text
from perflsp.llm.schema import LaunchBoundsProposal, Proposals
from perflsp.server import engine_adapter as engine
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import document_model
from perflsp.server.json_types import JsonObject


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
    checker = _Checker(snap, name, gpu, f" (proposed by {inert_text(label)})", out)
    if proposals.block_size is not None:
        checker.block_size(item, proposals.block_size, proposals)
    if proposals.launch_bounds is not None:
        checker.launch_bounds(item, proposals.launch_bounds, proposals)
    if proposals.num_teams is not None or proposals.thread_limit is not None:
        checker.omp_clauses(item, proposals)
    out.notes = list(proposals.code_changes)
    return out


@dataclass(frozen=True)
class _Checker:
    """Each kind of proposal checked against the kernel, the GPU and the code, into `out`."""

    snap: Snapshot
    name: str
    gpu: Gpu
    suffix: str  # " (proposed by <label>)", appended to each fix's title
    out: ProposalEdits

    def reject(self, proposal: str, reason: str) -> None:
        self.out.rejected.append({"proposal": proposal, "reason": reason})

    def accept(self, fix: Fix) -> None:
        self.out.fixes.append(Fix(fix.title + self.suffix, fix.edits, "refactor"))

    def threads_problem(self, value: int) -> str | None:
        gpu = self.gpu
        warp, max_threads = gpu.warp_size, gpu.limits.max_threads_per_block
        if value % warp:
            return f"{value} is not a multiple of the warp size ({warp}) of {gpu.name}"
        if value > max_threads:
            return f"{value} exceeds the {max_threads} threads per block of {gpu.name}"
        return None

    def block_size(self, item: CudaFunction | OmpRegion, block_size: int, proposals: Proposals) -> None:
        what = f"block_size {block_size}"
        if not isinstance(item, CudaFunction):
            self.reject(what, "a block size applies to CUDA launches; this is an OpenMP target region")
            return
        if (problem := self.threads_problem(block_size)) is not None:
            self.reject(what, problem)
            return
        if (bound := _bound(item)) is not None and block_size > bound and proposals.launch_bounds is None:
            self.reject(what, f"exceeds the kernel's __launch_bounds__({bound})")
            return
        snap = self.snap
        sites = snap.kernels.launches_of(item)
        if not sites:
            self.reject(what, f"no launch of `{self.name}` in this file to change")
        for site in sites:
            try:
                fix = engine.set_block_size(document_model(snap), site, block_size)
            except engine.FixUnavailable as exc:
                self.reject(what, f"launch at line {site.line}: {exc}")
                continue
            self.accept(fix)

    def launch_bounds(self, item: CudaFunction | OmpRegion, bounds: LaunchBoundsProposal, proposals: Proposals) -> None:
        what = f"__launch_bounds__({bounds.max_threads}{', ' + str(bounds.min_blocks) if bounds.min_blocks else ''})"
        if not isinstance(item, CudaFunction):
            self.reject(what, "__launch_bounds__ applies to CUDA kernels; this is an OpenMP target region")
        elif (problem := self.threads_problem(bounds.max_threads)) is not None:
            self.reject(what, problem)
        elif proposals.block_size is not None and proposals.block_size > bounds.max_threads:
            self.reject(what, f"smaller than the proposed block size {proposals.block_size}")
        else:
            snap = self.snap
            try:
                self.accept(engine.set_launch_bounds(document_model(snap), item, bounds.max_threads, bounds.min_blocks))
            except engine.FixUnavailable as exc:
                self.reject(what, str(exc))

    def omp_clauses(self, item: CudaFunction | OmpRegion, proposals: Proposals) -> None:
        what = " ".join(f"{k}({v})" for k, v in (("num_teams", proposals.num_teams),
                                                  ("thread_limit", proposals.thread_limit)) if v is not None)
        if not isinstance(item, OmpRegion):
            self.reject(what, "num_teams/thread_limit apply to OpenMP target regions; this is a CUDA kernel")
        elif proposals.thread_limit is not None and (problem := self.threads_problem(proposals.thread_limit)) is not None:
            self.reject(what, problem)
        else:
            snap = self.snap
            try:
                self.accept(engine.set_omp_clauses(document_model(snap), item, thread_limit=proposals.thread_limit,
                                                   num_teams=proposals.num_teams))
            except engine.FixUnavailable as exc:
                self.reject(what, str(exc))


def _bound(kernel: CudaFunction) -> int | None:
    bounds = kernel.launch_bounds
    value = bounds.max_threads.value if bounds is not None else None
    return value if isinstance(value, int) else None


def describe(proposals: Proposals | None) -> JsonObject:
    return proposals.model_dump(mode="json") if proposals is not None else {}


__all__ = ["ProposalEdits", "describe", "proposal_edits"]
