"""perflsp.importProfile {path, uri?, gpu?} -> {path, storedAt, gpu, kernels, notes, message}: import an
Nsight Compute report into the workspace folder's `.perflsp/profiles/`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.server.features.commands.common import CommandError, folder_root, open_files, progress_token, text_argument
from perflsp.server.features.commands.serialize import profile_result_json
from perflsp.server.json_types import CommandArgument, JsonObject
from perflsp.server.progress import progress

if TYPE_CHECKING:
    from perflsp.profiling.runner import ProfileOutcome
    from perflsp.server.context import ServerContext
    from perflsp.server.progress import Progress


async def import_profile(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    """Import an Nsight Compute report (`.ncu-rep` or ncu CSV) into the workspace folder's
    `.perflsp/profiles/`, map its kernels to the workspace's sources, and republish."""
    from perflsp.analysis.reader import read_kernels
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import import_and_store
    from perflsp.profiling.settings import require_enabled
    from perflsp.server.measured import gpu_resolver
    from perflsp.source.files import SkippedFile

    raw = arg.get("path")
    if not isinstance(raw, str) or not raw:
        raise CommandError("`path` (the report file) is required")
    folder_uri = text_argument(arg, "uri")
    root = folder_root(ls, folder_uri)
    report_path = Path(raw).expanduser()
    if not report_path.is_absolute():
        if root is None:
            raise CommandError(f"`path`: '{raw}' is relative and no workspace folder is open")
        report_path = root / report_path
    if root is None:
        raise CommandError("open a workspace folder: imported results are stored under its .perflsp/ folder")
    state = ls.initialized_workspace
    folder = state.folder_for(root.as_uri())
    config = ls.config_for(folder.uri or root.as_uri())
    gpu = None
    wanted = text_argument(arg, "gpu")
    if wanted:
        gpu = gpu_resolver(config)(wanted)
        if gpu is None:
            raise CommandError(f"`gpu`: unknown GPU '{wanted}'")
    try:  # converting a .ncu-rep may run ncu: only with profiling allowed
        ncu_argv = [require_enabled(config.profiling).ncu_path]
    except ProfilingError:
        ncu_argv = None
    files = open_files(ls, root)

    def run(bar: Progress) -> ProfileOutcome:
        for path in state.source_files(folder, config):
            if str(path) in files:
                continue
            bar.report(f"reading {path.name}")
            extracted = read_kernels(path, ls.reading_for(path.as_uri()))
            if not isinstance(extracted, SkippedFile):
                files[str(path)] = extracted
        return import_and_store(report_path, workspace=root, gpu=gpu, files=list(files.values()), ncu_argv=ncu_argv,
                                gpu_resolver=gpu_resolver(config))

    async with progress(ls, f"perflsp: importing {report_path.name}", progress_token(arg)) as bar:
        try:
            outcome = await asyncio.to_thread(run, bar)
        except ProfilingError as exc:
            message = f"cannot import {report_path}: {exc.message}"
            if not arg.get("quiet"):
                ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"perflsp: {message}"))
            raise CommandError(message) from None
    ls.refresh_folder(root)
    kernels = [profile_result_json(r) for r in outcome.results]
    mapped = sum(1 for k in kernels if k["source"])
    gpu_name = outcome.gpu.name if outcome.gpu else outcome.record.device_name or "an unknown GPU"
    message = (f"imported {len(kernels)} kernel(s) measured on {gpu_name} from {report_path.name}; "
               f"{mapped} matched to sources of this workspace")
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"perflsp: {message}"))
    return {"path": str(report_path), "storedAt": str(outcome.stored_at) if outcome.stored_at else None,
            "gpu": outcome.gpu.name if outcome.gpu else None, "deviceName": outcome.record.device_name,
            "kernels": kernels, "notes": list(outcome.notes), "message": message}



__all__ = ["import_profile"]
