"""perflsp.verifyLaunchParameters {uri, kernel, current, proposed} -> {status, message, verification}:
time the kernel at the current and the proposed block size under Nsight Compute."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.kernels.models import CudaFunction
from perflsp.server.features.commands.common import CommandError, kernel_report, profiling_settings, progress_token
from perflsp.server.features.common import kernel_name
from perflsp.server.json_types import CommandArgument, JsonObject, JsonValue
from perflsp.server.progress import progress
from perflsp.server.text import path_of

if TYPE_CHECKING:
    from perflsp.profiling.runner import LaunchVerification
    from perflsp.server.context import ServerContext


async def verify_launch_parameters(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    """Time the kernel at the current and the proposed block size (and the proposal halved and
    doubled) under Nsight Compute; the code action of the proposal then says "measured 1.40×"."""
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import prepare_target, verify_launch_params

    snap, report = await kernel_report(ls, arg)
    name = kernel_name(report.kernel)
    current, proposed = _block_size(arg.get("current")), _block_size(arg.get("proposed"))
    if current is None or proposed is None:
        raise CommandError("`current` and `proposed` (block sizes) are required")
    if not isinstance(report.kernel, CudaFunction):
        raise CommandError(f"`{name}` is not a CUDA kernel: block sizes apply to CUDA launches")

    def answer(status_: str, message: str, kind: lsp.MessageType, **extra: JsonValue) -> JsonObject:
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"perflsp: {message}"))
        return {"uri": snap.uri, "kernel": name, "status": status_, "message": message, **extra}

    try:
        settings = profiling_settings(snap.config)
    except ProfilingError as exc:
        return answer("disabled", exc.message, lsp.MessageType.Warning)
    path = path_of(snap.uri)
    if path is None or not path.is_file():
        return answer("failed", "save the document to a file first: the measurement builds the saved file",
                      lsp.MessageType.Warning)
    root = snap.config.root or path.parent
    if ls.measured.running.locked():
        return answer("busy", "a profiler run is under way; try again when it has finished", lsp.MessageType.Info)

    def run() -> LaunchVerification:
        with ls.measured.running:
            exe, source = prepare_target(settings, path, root)
            return verify_launch_params(settings, exe=exe, kernel=name, current_block=current, proposed_block=proposed,
                                        source=source)

    async with progress(ls, f"perflsp: timing {name} at {current} and {proposed} threads per block",
                        progress_token(arg), delay=0.0):
        try:
            verification = await asyncio.to_thread(run)
        except ProfilingError as exc:
            return answer("failed", f"measuring {name} failed: {exc.message}", lsp.MessageType.Error)
    ls.measured.verified[(snap.uri, name, report.kernel.body_hash, current, proposed)] = verification
    speedup = verification.speedup
    if speedup is None:
        message = f"{name}: could not time both block sizes" + (f" ({'; '.join(verification.notes)})" if verification.notes else "")
    else:
        best = verification.best
        message = f"{name}: measured {speedup:.2f}× at {proposed} threads per block vs {current}"
        if best is not None and best.block_size not in (current, proposed):
            message += f"; fastest measured: {best.block_size}"
    return answer("ok", message, lsp.MessageType.Info, verification=verification.to_json())



__all__ = ["verify_launch_parameters"]


def _block_size(value: object) -> int | None:
    """A block size as the client wrote it (a number, or its digits), None when it is not one."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return int(value)
        except ValueError:
            return None
    return None
