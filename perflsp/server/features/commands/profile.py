"""perflsp.profileKernel {uri, kernel, quiet?} -> {uri, kernel, status, message, kernels?}: build the
document's file and run it under Nsight Compute for this kernel."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.kernels.models import CudaFunction
from perflsp.server.features.commands.common import kernel_report, profiling_settings, progress_token
from perflsp.server.features.commands.serialize import matched_ref, profile_result_json
from perflsp.server.features.common import kernel_name
from perflsp.server.json_types import CommandArgument, JsonObject, JsonValue
from perflsp.server.progress import progress
from perflsp.server.text import path_of

if TYPE_CHECKING:
    from perflsp.profiling.runner import ProfileOutcome
    from perflsp.server.context import ServerContext


async def profile_kernel(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    """Build the document's file, run it under Nsight Compute for this kernel, store the result
    under the workspace's `.perflsp/` and republish (`perflsp.profiling.*` settings; only from
    user settings or a trusted workspace)."""
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import profile_target
    from perflsp.server.measured import gpu_resolver

    snap, report = await kernel_report(ls, arg)
    name = kernel_name(report.kernel)
    config = snap.config

    def answer(status_: str, message: str, kind: lsp.MessageType, **extra: JsonValue) -> JsonObject:
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"perflsp: {message}"))
        return {"uri": snap.uri, "kernel": name, "status": status_, "message": message, **extra}

    try:
        settings = profiling_settings(config)
    except ProfilingError as exc:
        return answer("disabled", f"{exc.message}. Set perflsp.profiling.enabled, buildCommand and runCommand in "
                      "your user settings (or in a trusted workspace); see docs/profiling.md.", lsp.MessageType.Warning)
    path = path_of(snap.uri)
    if path is None or not path.is_file():
        return answer("failed", f"save `{snap.uri}` to a file first: the profiler builds and runs the saved file",
                      lsp.MessageType.Warning)
    root = config.root or path.parent
    if ls.measured.running.locked():
        return answer("busy", "a profiler run is under way; try again when it has finished", lsp.MessageType.Info)
    kernel_filter = name if isinstance(report.kernel, CudaFunction) else None
    note = ""
    try:
        if path.read_bytes() != snap.data:
            note = " (the document has unsaved changes: the saved file was profiled)"
    except OSError:
        pass

    def run() -> ProfileOutcome:
        with ls.measured.running:
            return profile_target(settings, path, workspace=root, kernel=kernel_filter, files=[snap.kernels],
                                  gpu_resolver=gpu_resolver(config))

    async with progress(ls, f"perflsp: profiling {name} with Nsight Compute", progress_token(arg), delay=0.0) as bar:
        bar.report(f"building {path.name} and running it under ncu")
        try:
            outcome = await asyncio.to_thread(run)
        except ProfilingError as exc:
            return answer("failed", f"profiling {name} failed: {exc.message}", lsp.MessageType.Error)
    ls.refresh_folder(root)
    kernels = [profile_result_json(r) for r in outcome.results]
    mine = [r.evidence for r in outcome.results if (ref := matched_ref(r)) is not None
            and ref.body_hash == report.kernel.body_hash]
    summary = (mine[0].summary() if mine and mine[0] is not None else None) or \
        f"{len(kernels)} kernel(s) measured, none matched to `{name}` of this file"
    return answer("ok", f"{name}: {summary}{note}", lsp.MessageType.Info, kernels=kernels,
                  storedAt=str(outcome.stored_at) if outcome.stored_at else None, notes=list(outcome.notes))



__all__ = ["profile_kernel"]
