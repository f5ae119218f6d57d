"""Compiled counts under the source engine's facts: the per-item operations of a kernel as the
GPU executes them (SASS classes times how often each block runs), where the file was compiled.

The source walk supplies what the compiled code cannot say (trip counts, guards, the launch);
the compiled code supplies what the source cannot (which instructions index math, loop control,
a macro, a template or an inlined function become; the precision a mixed expression runs in).
"""

from __future__ import annotations

from dataclasses import dataclass

from perflsp.analysis.costs import CostModel
from perflsp.analysis.finish import calibrated
from perflsp.analysis.models import OpCounts
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.compiled.counts import DynamicCounts, dynamic_counts
from perflsp.compiled.model import CompiledFunction, CompiledSource, CompiledUnit
from perflsp.compiled.profile import SourceProfile, same_file
from perflsp.hardware.models import Gpu


def gpu_arch(gpu: Gpu) -> str | None:
    """The SASS architecture a GPU runs ("sm_86"), None for GPUs nvcc does not target."""
    cc = gpu.compute_capability
    if not cc or gpu.vendor != "NVIDIA":
        return None
    major, _, minor = cc.partition(".")
    return f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None


@dataclass(slots=True)
class CompiledCounts:
    function: CompiledFunction
    dynamic: DynamicCounts
    arch: str
    compiler: str


def count_compiled(unit: CompiledUnit, fn: CompiledFunction, profile: SourceProfile,
                   parallel_trips: float | None = None, shift: tuple[str, int] | None = None,
                   continuation_lines: int = 0) -> CompiledCounts:
    dynamic = dynamic_counts(unit, fn, profile, parallel_trips, shift, continuation_lines)
    return CompiledCounts(fn, dynamic, unit.arch, unit.compiler)


def kernel_shift(source: CompiledSource | None, body_hash: str, first_line: int) -> int | None:
    """Lines a kernel moved since its file was compiled; None when its text changed since (or
    nothing was compiled): its compiled code is not what the source now says."""
    if source is None:
        return None
    return source.line_shift(body_hash, first_line)


def compiled_per_item(source: OpCounts, compiled: CompiledCounts, threads: float, work_items: float) -> OpCounts:
    """The per-item counts with every executed-instruction class taken from the compiled code
    (per thread, times the launch's threads, over its work items); what only the source knows
    (shared-memory bytes, loop iterations) is kept."""
    d = compiled.dynamic
    scale = threads / work_items if work_items > 0 else 1.0
    counts = OpCounts(**{k: getattr(source, k) for k in OpCounts.__slots__})
    counts.fp32 = d.get("fp32") * scale
    counts.fp64 = d.get("fp64") * scale
    counts.fp16 = d.get("fp16") * scale
    counts.int32 = d.get("integer") * scale
    counts.special = d.get("special") * scale
    counts.atomics = d.get("atomics") * scale
    counts.global_loads = d.get("loads") * scale
    counts.global_stores = d.get("stores") * scale
    counts.global_load_bytes = d.get("load_bytes") * scale
    counts.global_store_bytes = d.get("store_bytes") * scale
    counts.local_bytes = d.get("local_bytes") * scale
    counts.int_address = counts.int_loop = 0.0
    counts.tensor_fp16 = d.get("tensor_fp16") * scale
    counts.tensor_tf32 = d.get("tensor_tf32") * scale
    counts.tensor_bf16 = d.get("tensor_bf16") * scale
    counts.tensor_fp64 = d.get("tensor_fp64") * scale
    counts.tensor_int8 = d.get("tensor_int8") * scale
    counts.tensor_fp16_fp16acc = 0.0
    return counts


def operations(source: OpCounts, fixed_ints: float, cost: CostModel, compiled: CompiledUnit | None,
               function: CompiledFunction | None, profile: SourceProfile | None, notes: list[Note], *,
               threads: float, work_items: float, parallel_trips: float | None = None,
               shift: tuple[str, int] | None = None, edited_since: bool = False,
               missing: str = "", continuation_lines: int = 0) -> tuple[OpCounts, Note | None]:
    """A kernel's per-item operations: the compiled code's where it has the kernel (and the
    evidence line saying so), else the source walk's (with the reason in `notes`)."""
    if compiled is not None and function is not None and profile is not None:
        counted = count_compiled(compiled, function, profile, parallel_trips, shift, continuation_lines)
        notes.extend(Note(NoteKind.COMPILED_COUNTS, NoteSource.COMPILED, note) for note in counted.dynamic.notes)
        return compiled_per_item(source, counted, threads, work_items), compiled_evidence(counted)
    if edited_since:
        notes.append(Note(NoteKind.SOURCE_COUNTS, NoteSource.SOURCE,
                          "edited since the file was compiled: operations estimated from the source until the next compile"))
    elif compiled is not None:
        notes.append(Note(NoteKind.SOURCE_COUNTS, NoteSource.SOURCE,
                          f"the compiled code has no {missing}: operations estimated from the source"))
    return calibrated(source, cost, fixed_ints), None


def access_widths(function: CompiledFunction | None,
                  shift: tuple[str, int] | None = None) -> dict[tuple[int, bool], tuple[float, float]]:
    """(line, is a store) -> (instructions, bytes) of the global accesses the kernel's compiled
    code issues at that line (`CompiledFunction.global_accesses`), its lines moved by `shift`
    (file, lines) where the source moved since the compile; a line number that code of two
    files shares is left out (the walk's accesses know their line, not their file)."""
    if function is None:
        return {}
    found: dict[tuple[int, bool], tuple[float, float]] = {}
    files: dict[int, str] = {}
    shared: set[int] = set()
    for ((path, line), is_store), (count, nbytes) in function.global_accesses().items():
        if shift is not None and same_file(path, shift[0]):
            line += shift[1]
        if files.setdefault(line, path) != path:
            shared.add(line)
        before = found.get((line, is_store), (0.0, 0.0))
        found[(line, is_store)] = (before[0] + count, before[1] + nbytes)
    return {key: value for key, value in found.items() if key[0] not in shared}


def compiled_evidence(compiled: CompiledCounts) -> Note:
    d = compiled.dynamic
    tied = f", {d.matched} of {d.loops} loops tied to source loops" if d.loops else ""
    return Note(NoteKind.COMPILED_COUNTS, NoteSource.COMPILED,
                f"operations counted in the compiled code ({compiled.compiler}, {compiled.arch}, "
                f"function {compiled.function.name}{tied})", subject=compiled.function.name)
