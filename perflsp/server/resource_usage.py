"""Registers and shared memory per kernel from ptxas (`perflsp.resourceUsage`), for occupancy.

On open and on save, a CUDA file is compiled in the background with `nvcc --resource-usage`
(for the first configured NVIDIA GPU's architecture); the registers found replace the assumed
32 per thread in the analysis. It runs a program, so the setting and `perflsp.nvccPath` count
only from user settings or a trusted workspace (the configuration layer drops them otherwise).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from perflsp.server.progress import progress
from perflsp.server.text import path_of
from perflsp.server.workspace import compile_flag_macros

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ServerContext
    from perflsp.server.scheduler import DocumentWorker

log = logging.getLogger(__name__)
_CUDA_SUFFIXES = (".cu", ".cuh")


def schedule(ls: ServerContext, worker: DocumentWorker) -> None:
    """Start (or restart) the background compile of `worker`'s file when the settings ask for it."""
    config = ls.config_for(worker.uri)
    path = path_of(worker.uri)
    if not config.settings.resource_usage or path is None or path.suffix.lower() not in _CUDA_SUFFIXES:
        return
    previous = worker.resource_task
    if previous is not None and not previous.done():
        previous.cancel()
    worker.resource_task = asyncio.get_running_loop().create_task(_run(ls, worker, path, config))


async def _run(ls: ServerContext, worker: DocumentWorker, path: Path, config: ResolvedConfig) -> None:
    from perflsp.hardware.ptxas import ResourceUsageError, arch_flag, locate_nvcc, resource_usage_async

    settings = config.settings
    target = next(((g, cc) for g in config.gpus
                   if str(g.vendor).lower() == "nvidia" and (cc := g.compute_capability)), None)
    if target is None:
        log.info("resource usage: no NVIDIA GPU among perflsp.gpus, nothing to compile for")
        return
    gpu, capability = target
    from_user = config.origin_of("nvcc_path").user_controlled
    location = locate_nvcc(settings.nvcc_path if from_user else None, None if from_user else settings.nvcc_path,
                           workspace_trusted=config.workspace_trusted)
    if location.path is None:
        log.info("resource usage: %s", location.message)
        return
    defines, include_dirs = compile_flag_macros(settings.compile_flags, config.root)
    flags = [f"-D{k}={v}" for k, v in defines.items()] + [f"-I{d}" for d in include_dirs]
    try:
        async with progress(ls, f"perflsp: nvcc --resource-usage {path.name}"):
            usages = await resource_usage_async(path, arch_flag(capability), flags, location.path)
    except ResourceUsageError as exc:
        log.info("resource usage of %s: %s", path.name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return
    by_name: dict[str, int] = {}
    for usage in usages.values():
        by_name.setdefault(usage.kernel_name, usage.registers)
    if worker.state is None:
        return
    registers = tuple(sorted((k.qualified_name, by_name[k.name]) for k in worker.state.extracted.kernels.kernels
                             if k.name in by_name))
    log.info("resource usage of %s on %s: %s", path.name, gpu.name,
             ", ".join(f"{name} {regs} registers" for name, regs in registers) or "no kernels")
    worker.set_registers(registers)
