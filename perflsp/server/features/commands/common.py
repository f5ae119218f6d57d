"""What the commands share: their error, their argument, the kernel and GPU a command is about,
the LLM question about a kernel, profiling settings and the workspace folder a command acts in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pygls.exceptions import JsonRpcInvalidParams

from perflsp.server.features.common import kernel_name
from perflsp.server.json_types import CommandArgument
from perflsp.server.text import path_of

if TYPE_CHECKING:
    from perflsp.analysis.models import Estimate, KernelReport
    from perflsp.hardware.models import Gpu
    from perflsp.kernels.models import FileKernels
    from perflsp.llm.request import KernelQuestion, Task
    from perflsp.profiling.settings import ProfilingSettings
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ServerContext
    from perflsp.server.documents import Snapshot


class CommandError(JsonRpcInvalidParams):
    pass


def argument(args: list[object]) -> CommandArgument:
    """The command's one argument as the client sent it (the protocol edge: each field is checked
    where a handler reads it)."""
    if not args:
        return {}
    first = args[0]
    if isinstance(first, dict):
        return {str(key): value for key, value in first.items()}
    if len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):  # [uri, kernel]
        return {"uri": args[0], "kernel": args[1]}
    raise CommandError("expected one JSON object argument")


def text_argument(arg: CommandArgument, name: str) -> str | None:
    """`arg[name]` when the client sent a string there, else None."""
    value = arg.get(name)
    return value if isinstance(value, str) else None


def progress_token(arg: CommandArgument) -> int | str | None:
    """The client's `workDoneToken` for the command's progress bar, when it sent one."""
    token = arg.get("workDoneToken")
    return token if isinstance(token, (int, str)) and not isinstance(token, bool) else None


async def kernel_report(ls: ServerContext, arg: CommandArgument) -> tuple[Snapshot, KernelReport]:
    uri, name = arg.get("uri"), arg.get("kernel")
    if not isinstance(uri, str) or not isinstance(name, str):
        raise CommandError("`uri` and `kernel` (strings) are required")
    snap = await ls.snapshot(uri)
    if snap is None:
        raise CommandError(f"{uri} is not open, or perflsp does not analyse it (perflsp.enable / include / exclude)")
    item = snap.kernel_named(name)
    report = snap.report_for(item) if item is not None else None
    if report is None:
        raise CommandError(f"no kernel `{name}` in {uri}")
    return snap, report


def estimate_gpu(snap: Snapshot, report: KernelReport, wanted: object) -> tuple[Estimate, Gpu]:
    """The estimate and GPU a command is about: `gpu` (id, alias or name) or the first GPU."""
    gpus = {g.name: g for g in snap.config.gpus}
    if isinstance(wanted, str) and wanted:
        gpu = snap.config.database.find(wanted)
        if gpu is None or gpu.name not in gpus:
            raise CommandError(f"`gpu`: '{wanted}' is not among the configured GPUs ({', '.join(gpus)})")
        return next(e for e in report.estimates if e.gpu == gpu.name), gpu
    estimate = next((e for e in report.estimates if e.gpu in gpus), None)
    if estimate is None:
        raise CommandError(f"no estimate of `{kernel_name(report.kernel)}` on a configured GPU")
    return estimate, gpus[estimate.gpu]


async def kernel_question(ls: ServerContext, uri: str, name: str, gpu: Gpu, task: Task) -> KernelQuestion:
    """The LLM question about `name`, built while no edit moves the document's text."""
    worker = ls.workers.get(uri)
    if worker is None:
        raise CommandError(f"{uri} is not open")

    def build(snap: Snapshot) -> KernelQuestion:
        item = snap.kernel_named(name)
        report = snap.report_for(item) if item is not None else None
        if report is None:
            raise CommandError(f"no kernel `{name}` in {uri}")
        return ls.advice.question(snap, report, gpu, task)

    question = await worker.exclusive(build)
    if question is None:
        raise CommandError(f"{uri} is not analysed")
    return question


def profiling_settings(config: ResolvedConfig) -> ProfilingSettings:
    """The settings a run may use, or ProfilingError saying why profiling is off (untrusted
    workspace settings included: the resolved settings never hold them)."""
    from perflsp.profiling.settings import require_enabled

    return require_enabled(config.profiling)


def folder_root(ls: ServerContext, uri: str | None) -> Path | None:
    state = ls.initialized_workspace
    folder = state.folder_for(uri) if uri else next((f for f in state.folders if f.path is not None), state.folders[0])
    return folder.path


def open_files(ls: ServerContext, root: Path | None) -> dict[str, FileKernels]:
    files: dict[str, FileKernels] = {}
    for uri, worker in ls.workers.items():
        snap = worker.snapshot
        path = path_of(uri)
        if snap is None or path is None:
            continue
        if root is None or path.is_relative_to(root):
            files[str(path)] = snap.kernels
    return files



__all__ = [
    "CommandError",
    "argument",
    "estimate_gpu",
    "folder_root",
    "kernel_question",
    "kernel_report",
    "open_files",
    "profiling_settings",
    "progress_token",
    "text_argument",
]
