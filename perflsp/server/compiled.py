"""Compiled facts in the editor (`perflsp.compile`): a document's device code compiled in the
background, off the keystroke path, after it opens, when it is saved and when typing pauses.

The unsaved text is compiled (beside the file, so its includes resolve) for the architecture of
each configured NVIDIA GPU; when the units arrive the document is analysed again with them. A
kernel keeps its compiled counts until its own text changes (other kernels moving only shift
its lines); an edited kernel is estimated from the source until the next compile. Compilers run
only in a trusted workspace (like profiling); the toolchain paths (`perflsp.nvccPath`,
`perflsp.clangPath`) count only from user settings or a trusted workspace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from perflsp.analysis.compiled_facts import gpu_arch
from perflsp.compiled.build import CompileCache
from perflsp.compiled.model import CompiledSource
from perflsp.compiled.service import Compiler, default_cache_dir
from perflsp.compiled.toolchain import ToolchainSettings, find_toolchain
from perflsp.kernels.compile_db import DiscoveredDatabases
from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.server.text import path_of

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ServerContext
    from perflsp.server.scheduler import DocumentWorker

log = logging.getLogger(__name__)
_SOURCES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx")
_compilers: dict[ToolchainSettings, Compiler] = {}
_told: set[str] = set()  # why compiling is off, said once per reason


def compiler_for(settings: ToolchainSettings) -> Compiler:
    """One compiler (pool and cache) per toolchain setting, found on first use (no program runs
    to find it)."""
    found = _compilers.get(settings)
    if found is None:
        # each file's flags from the compile database its folders lead to (as clangd finds it)
        found = Compiler(find_toolchain(settings), CompileCache(default_cache_dir()), jobs=1,
                         flags=DiscoveredDatabases())
        _compilers[settings] = found
    return found


def toolchain_settings(config: ResolvedConfig) -> ToolchainSettings:
    settings = config.settings
    return ToolchainSettings(nvcc=settings.nvcc_path, clang=settings.clang_path)


def why_not(config: ResolvedConfig, path: Path | None) -> str | None:
    """Why this document is not compiled (None: it is)."""
    if not config.settings.compile:
        return "perflsp.compile is off"
    if not config.workspace_trusted:
        return "the workspace is not trusted: compilers run only in a trusted workspace"
    if path is None:
        return "the document has no file (compiled beside its file only)"
    if path.suffix.lower() not in _SOURCES:
        return f"{path.suffix or 'no suffix'}: not a C, C++ or CUDA source"
    if not any(gpu_arch(g) for g in config.gpus):
        return "no NVIDIA GPU among perflsp.gpus: nothing to compile for"
    return None


def schedule(ls: ServerContext, worker: DocumentWorker, delay_s: float = 0.0) -> None:
    """(Re)start the background compile of `worker`'s text, after `delay_s` of quiet."""
    config = ls.config_for(worker.uri)
    path = path_of(worker.uri)
    reason = why_not(config, path)
    if reason is not None:
        if reason not in _told:
            _told.add(reason)
            log.info("compiled facts off: %s", reason)
        return
    assert path is not None
    previous = worker.compile_task
    if previous is not None and not previous.done():
        previous.cancel()
    worker.compile_task = asyncio.get_running_loop().create_task(_run(ls, worker, path, config, delay_s))


async def _run(ls: ServerContext, worker: DocumentWorker, path: Path, config: ResolvedConfig,
               delay_s: float) -> None:
    if delay_s > 0:
        await asyncio.sleep(delay_s)  # (cancelled by the next edit's schedule)
    snapshot = await asyncio.to_thread(_text_now, worker)
    if snapshot is None:
        return
    data, kernels, omp_regions, cuda_kernels = snapshot
    archs = list(dict.fromkeys(a for a in (gpu_arch(g) for g in config.gpus) if a))
    compiler = compiler_for(toolchain_settings(config))
    try:
        saved = path.read_bytes()
    except OSError:
        saved = None
    text = None if saved == data else data
    try:
        source = await asyncio.to_thread(compiler.compiled, path, archs, text, omp_regions, cuda_kernels)
    except Exception:
        log.exception("compiling %s failed", path.name)
        return
    source = dataclasses.replace(source, kernels=kernels)
    for arch, failure in source.failures.items():
        log.info("compiled facts of %s (%s): %s", path.name, arch, failure)
    if source.units:
        log.info("compiled %s for %s", path.name, ", ".join(source.units))
    worker.set_compiled(source)


def _text_now(worker: DocumentWorker) -> tuple[bytes, dict[str, int], bool, bool] | None:
    """The document's text, its kernels' first lines by their text's hash (while no edit
    moves them), and whether it holds OpenMP target regions and CUDA kernels."""
    with worker.text_lock:
        state = worker.state
        if state is None:
            return None
        fk = state.extracted.kernels
        items: list[CudaFunction | OmpRegion] = [*fk.kernels, *fk.omp_regions]
        kernels = {k.body_hash: k.span.start.line for k in items}
        return (state.data, kernels, bool(fk.omp_regions), bool(fk.kernels)) if kernels else None


def close(worker: DocumentWorker) -> None:
    task = worker.compile_task
    if task is not None and not task.done():
        task.cancel()


__all__ = ["CompiledSource", "close", "compiler_for", "schedule", "why_not"]
