"""The static roofline engine: from a parsed file to per-kernel facts and per-GPU verdicts.

    report = analyze(data, tree, file_kernels, gpus)

Each kernel is analysed on its own text, macro-expanded with the file's (and its local
headers') macros and re-parsed, so a syntax error elsewhere in the file does not spoil it.
Its launch site (same file) supplies the launch shape, template arguments and constant
arguments; `AnalysisOptions` can supply them from outside (the program's arguments, a known
launch shape, registers from ptxas).

The work is split by concern: `unit` (the analysis' view of the file's program model),
`cuda_facts` and `omp_facts` (the two front ends), `host_types` (host variables of OpenMP
regions), `extents` (array sizes), `finish` (traffic, evidence, degeneracy). This module keeps
the entry points.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from tree_sitter import Tree

from perflsp import __version__
from perflsp.analysis.compiled_facts import gpu_arch
from perflsp.analysis.costs import CostModel
from perflsp.analysis.cuda_facts import cuda_facts, production_shape
from perflsp.analysis.estimate import estimate_for_gpu
from perflsp.analysis.finish import uncertain_facts
from perflsp.analysis.l2_writes import with_held_writes
from perflsp.analysis.line_walks import with_line_walks
from perflsp.analysis.local_traffic import with_local_traffic
from perflsp.analysis.models import FileReport, KernelFacts, KernelReport
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.omp_facts import omp_facts
from perflsp.analysis.options import DEFAULT_OPTIONS, AnalysisOptions, Dim3
from perflsp.analysis.other_traffic import with_other_traffic
from perflsp.analysis.pass_rereads import with_pass_rereads
from perflsp.analysis.reuse_window import on_gpu
from perflsp.analysis.unit import AnalysisUnit
from perflsp.compiled.model import CompiledUnit
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.source.positions import LineIndex

ENGINE_VERSION = f"{__version__}+engine.1"

__all__ = ["ENGINE_VERSION", "AnalysisOptions", "AnalysisUnit", "Dim3", "analysis_key", "analyze", "analyze_kernel",
           "production_shape", "uncertain_report"]


def analysis_key(kernel: CudaFunction | OmpRegion, launches: Sequence[LaunchSite], gpus: Sequence[Gpu],
                 options: AnalysisOptions) -> str:
    """Cache key: the kernel's normalised text, its launch sites' folded values, the GPUs and
    the options; an edit elsewhere in the file leaves it unchanged."""
    parts = [ENGINE_VERSION, kernel.body_hash, repr(options)]
    for site in launches:
        parts.append(repr((site.template_args, site.grid.value, site.block.value,
                           site.shared_mem_bytes.value if site.shared_mem_bytes else None,
                           tuple(a.value for a in site.args))))
    parts.extend(f"{g.id}:{g.memory_bandwidth_gbs}:{g.l2_cache_mib}:{g.sm_count}:"
                 f"{sorted((p.value, pk.tflops) for p, pk in g.peaks.items())}" for g in gpus)
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).hexdigest()


def analyze(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
            options: AnalysisOptions = DEFAULT_OPTIONS, lines: LineIndex | None = None) -> FileReport:
    unit = AnalysisUnit(data, tree, kernels, options, lines)
    report = FileReport(path=kernels.path)
    for kernel in kernels.kernels:
        report.kernels.append(analyze_kernel(unit, kernel, gpus))
    for region in kernels.omp_regions:
        report.kernels.append(analyze_kernel(unit, region, gpus))
    return report


def analyze_kernel(unit: AnalysisUnit, kernel: CudaFunction | OmpRegion, gpus: Sequence[Gpu]) -> KernelReport:
    """The kernel's facts and a verdict per GPU. Where the file was compiled, each GPU is judged
    on the facts of its own architecture's compiled code (one walk per architecture)."""
    launches = unit.kernels.launches_of(kernel) if isinstance(kernel, CudaFunction) else []
    compiled = unit.options.compiled
    by_arch: dict[str | None, tuple[KernelFacts, int | None, int]] = {}
    chosen: list[tuple[KernelFacts, int | None, int]] = []
    judged: list[Gpu | None] = [*gpus] or [None]
    for gpu in judged:  # (no GPU: the facts alone)
        arch = gpu_arch(gpu) if gpu is not None and compiled is not None else None
        key = arch if compiled is not None and compiled.unit(arch) is not None else None
        if key not in by_arch:
            by_arch[key] = _kernel_facts(unit, kernel, launches, compiled.unit(key) if compiled is not None else None)
            failure = compiled.failure(arch) if compiled is not None and key is None else None
            if failure:
                by_arch[key][0].evidence.append(Note(NoteKind.SOURCE_COUNTS, NoteSource.SOURCE,
                                                     f"not compiled ({failure}): operations estimated from the source"))
        if compiled is not None and gpu is not None and arch is None and compiled.units:
            note = Note(NoteKind.SOURCE_COUNTS, NoteSource.SOURCE,
                        f"{gpu.name}: compiled facts cover NVIDIA architectures; the source engine's estimate judges "
                        "this GPU", subject=gpu.name)
            if note not in by_arch[key][0].evidence:
                by_arch[key][0].evidence.append(note)
        chosen.append(by_arch[key])
    registers = unit.options.registers_for(kernel.qualified_name if isinstance(kernel, CudaFunction) else kernel.name)
    # the DRAM traffic depends on the GPU's L2 and the blocks it holds at once: each GPU's own facts,
    # what its writes leave in that L2, and what its other clients move while the kernel runs
    # (an OpenMP region without `parallel` hands each team's iterations to its main thread, or to
    # threads of parallel regions nested in them: an iteration is no thread)
    per_thread = isinstance(kernel, CudaFunction) or "parallel" in kernel.directive.split()
    chosen = [(_on_gpu_traffic(facts, gpu, threads, registers, shared, unit.options.cost, per_thread), threads, shared)
              if gpu is not None else (facts, threads, shared)
              for gpu, (facts, threads, shared) in zip(judged, chosen)]
    estimates = [estimate_for_gpu(facts, gpu, threads, registers, shared, unit.options.cost)
                 for gpu, (facts, threads, shared) in zip(gpus, chosen)]
    return KernelReport(kernel=kernel, launches=launches, facts=chosen[0][0], estimates=estimates)


def _on_gpu_traffic(facts: KernelFacts, gpu: Gpu, threads: int | None, registers: int | None, shared: int,
                    cost: CostModel, per_thread: bool = True) -> KernelFacts:
    """The kernel's DRAM bytes on `gpu`: its L2's reuse window, the reads a loop's passes
    repeat beyond its L1 and L2 and the rows threads walk beyond them, the writes it holds, the stack
    frames its SMs cannot hold, then the traffic of the GPU's other clients over the kernel's run
    time (which the bytes before it set). `per_thread`: a work item is a thread (a CUDA kernel's,
    an iteration of an OpenMP region's `parallel for`)."""
    reread = on_gpu(facts, gpu, threads, registers, shared)
    if per_thread:
        reread = with_pass_rereads(reread, gpu, threads, registers, shared, cost.unroll_limit)
        reread = with_line_walks(reread, gpu, threads, registers, shared)
    held = with_held_writes(reread, gpu, cost)
    return with_other_traffic(with_local_traffic(held, gpu, threads, registers, shared), gpu, threads)


def _kernel_facts(unit: AnalysisUnit, kernel: CudaFunction | OmpRegion, launches: list[LaunchSite],
                  compiled: CompiledUnit | None) -> tuple[KernelFacts, int | None, int]:
    try:
        if isinstance(kernel, CudaFunction):
            return cuda_facts(unit, kernel, launches, compiled)
        return omp_facts(unit, kernel, compiled)
    except RecursionError:
        return uncertain_facts("the kernel is nested too deeply to analyse"), None, 0
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # an engine defect on unusual code must not take the whole file (or the server) down
        return uncertain_facts(f"engine error on this kernel: {type(exc).__name__}: {exc}"), None, 0


def uncertain_report(kernel: CudaFunction | OmpRegion, launches: Sequence[LaunchSite], gpus: Sequence[Gpu],
                     reason: str) -> KernelReport:
    """The report of a kernel the engine could not analyse: `uncertain` on every GPU, naming why."""
    facts: KernelFacts = uncertain_facts(reason)
    return KernelReport(kernel, list(launches), facts, [estimate_for_gpu(facts, gpu, None, None, 0) for gpu in gpus])

