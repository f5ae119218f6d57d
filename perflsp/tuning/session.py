"""One tuning run from a file, for the CLI and the language server alike: the space from the code,
a strategy by name, replay (an imported cache) or measurement (the profiling runner), the result
stored in the workspace's `.perflsp/tuning/`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tree_sitter import Tree

from perflsp.hardware.database import GpuDatabase
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, FileKernels
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.source.positions import LineIndex
from perflsp.tuning.cache import TuningRecord, TuningStore, new_record, read_cache
from perflsp.tuning.problem import ProblemError, problem_for
from perflsp.tuning.results import short_device
from perflsp.tuning.search import (
    Evaluation,
    Measurement,
    SearchResult,
    ToolFailure,
    TuningUnavailable,
    run_search,
)
from perflsp.tuning.space import Config, TuningSpace
from perflsp.tuning.strategies import LlmStrategy, PriorStrategy, Proposer

PERFLSP_STRATEGIES = ("prior", "llm")


@dataclass
class FileContext:
    path: Path | None
    data: bytes
    tree: Tree
    kernels: FileKernels
    read: ProgramModel | None = None  # the reader's model of the file (None: a text given without one)

    @cached_property
    def model(self) -> ProgramModel:
        """The file's program model (its macros and constants: what the tuning problem reads):
        the reader's, else one over the text alone."""
        if self.read is not None:
            return self.read
        return program_model(SourceFile(self.data, self.tree, LineIndex(self.data), self.kernels, None))

    def kernel(self, name: str) -> CudaFunction:
        for kernel in self.kernels.kernels:
            if name in (kernel.name, kernel.qualified_name):
                return kernel
        known = ", ".join(k.name for k in self.kernels.kernels) or "none"
        raise ProblemError(f"no kernel `{name}` in {self.path or 'the document'} (kernels: {known})")


def load_file(path: Path) -> FileContext:
    """The file read as `perflsp check` reads it (`analysis.reader`: its local headers, the
    flags of the compile database its folders lead to, an includer's context)."""
    from perflsp.analysis.reader import ReadContext, read_file
    from perflsp.kernels.compile_db import DiscoveredDatabases
    from perflsp.kernels.includes import IncludeResolver
    from perflsp.source.files import SkippedFile

    program = read_file(path, ReadContext.of(path, IncludeResolver(), DiscoveredDatabases()),
                        includer_launch_sites=False)
    if isinstance(program, SkippedFile):
        raise ProblemError(f"cannot read {path}: {program.reason}")
    return FileContext(path, program.data, program.tree, program.kernels, program.model)


def gpu_for_device(db: GpuDatabase, device_name: str) -> Gpu | None:
    """The database's GPU for a device name as Kernel Tuner records it (None when unknown)."""
    for candidate in (device_name, short_device(device_name), short_device(device_name).split("-")[0]):
        gpu = db.find(candidate)
        if gpu is not None:
            return gpu
    return None


def prior_note(device: str, gpu: Gpu | None, prior_gpu: str | None = None) -> str | None:
    """What to tell the user about the figures perflsp's prior ranked configurations with: none
    when they are the tuned device's own."""
    if gpu is None:
        return (f"the prior ranked configurations without GPU figures: {device} is not in the GPU database "
                "(add it with perflsp.userGpus or --gpus-file), so occupancy and the GPU's limits were not used")
    if prior_gpu:
        return (f"the prior ranked configurations with the figures of {prior_gpu}: {device} is not in the GPU "
                "database (add it with perflsp.userGpus or --gpus-file)")
    return None


def make_strategy(name: str, space: TuningSpace, gpu: Gpu | None, proposer: Proposer | None) -> Any:
    if name == "prior":
        return PriorStrategy(space, gpu)
    if name == "llm":
        if proposer is None:
            raise TuningUnavailable("the llm strategy needs the LLM: turn on perflsp.llm (or pass --llm-url)")
        return LlmStrategy(space, gpu, proposer)
    return name


def space_for(ctx: FileContext, kernel: CudaFunction, gpu: Gpu | None, record: TuningRecord | None) -> TuningSpace:
    space = problem_for(ctx.model, kernel, gpu)
    if record is not None and record.problem_size:
        space.problem_size = tuple(record.problem_size)
    return space


def import_cache(path: Path, workspace: Path, kernel: str | None = None) -> tuple[TuningRecord, Path]:
    """A Kernel Tuner cache file into the workspace's store (labelled as recorded on its device)."""
    record = read_cache(path, source=path.name)
    stored = TuningStore(workspace).save(record, kernel or record.kernel_name)
    return record, stored


def tune(
    ctx: FileContext,
    kernel: CudaFunction,
    gpu: Gpu | None,
    workspace: Path,
    *,
    strategy: str = "prior",
    max_fevals: int | None = 50,
    time_limit_s: float | None = None,
    replay: TuningRecord | None = None,
    evaluate: Callable[[Config], Measurement] | None = None,
    on_evaluation: Callable[[Evaluation], None] | None = None,
    cancel: threading.Event | None = None,
    proposer: Proposer | None = None,
    seed: int | None = None,
    prior_gpu: str | None = None,
) -> tuple[SearchResult, TuningSpace, Path | None]:
    """Search `kernel`'s space. With `replay`, Kernel Tuner replays that record (nothing runs);
    else `evaluate` measures each configuration and the measurements are stored as `gpu`'s cache
    (continuing an earlier run's cache for the same kernel and device). `gpu` gives the prior its
    figures; `prior_gpu` says whose figures they are when they are not the tuned device's (a note).
    A tool failure (`ToolFailure`) stops the run: what was measured before is stored, then it is
    raised."""
    space = space_for(ctx, kernel, gpu, replay)
    store = TuningStore(workspace)
    if replay is not None:
        record = replay
    elif evaluate is not None:
        if gpu is None:
            raise TuningUnavailable("measuring needs a GPU to name the cache after: configure perflsp.gpus")
        existing = [r for r in store.records_for(kernel.name) if r.device_name == gpu.name and r.matches(space)]
        record = existing[0] if existing else new_record(space, gpu.name, {"kind": "measured"})
        record.provenance = {**record.provenance, "kind": "measured"}
        record.drop_tool_failures()  # stored by earlier versions: measured again now
    else:
        raise TuningUnavailable("nothing to tune with: profiling is not allowed here and no cache was imported "
                                "(perflsp tune import CACHE, or the perflsp.importTuningCache command)")
    searcher = make_strategy(strategy, space, gpu, proposer)
    try:
        result = run_search(space, record, strategy=searcher, max_fevals=max_fevals,
                            time_limit_s=time_limit_s, evaluate=evaluate, on_evaluation=on_evaluation, cancel=cancel,
                            seed=seed)
    except ToolFailure as exc:
        if evaluate is not None and exc.record is not None and exc.record.entries:
            store.save(exc.record, kernel.name)
        raise
    stored = None
    if evaluate is not None and result.record.entries:
        stored = store.save(result.record, kernel.name)
    elif replay is not None:
        stored = replay.path
    if strategy in PERFLSP_STRATEGIES:
        note = prior_note(result.device_name, gpu, prior_gpu)
        if note:
            result.notes.append(note)
    if isinstance(searcher, LlmStrategy):
        result.notes.extend(f"rejected {r['proposal']}: {r['reason']}" for r in searcher.rejected())
        result.notes.extend(f"round {i}: the LLM failed ({r.error}); the prior chose"
                            for i, r in enumerate(searcher.rounds, 1) if r.error)
    return result, space, stored


__all__ = [
    "PERFLSP_STRATEGIES",
    "FileContext",
    "gpu_for_device",
    "import_cache",
    "load_file",
    "make_strategy",
    "prior_note",
    "space_for",
    "tune",
]
