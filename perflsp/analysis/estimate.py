"""Per-GPU roofline estimate from architecture-independent kernel facts."""

from __future__ import annotations

import math

from perflsp.analysis.costs import CostModel
from perflsp.analysis.models import Estimate, KernelFacts, _fmt
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.roofline import ROOFLINE_PRECISIONS, Precision, classify
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, OccupancyResult, occupancy
from perflsp.hardware.precision import TENSOR_PRECISIONS

UNITS = {Precision.INT32: "op/B"}
LABELS = {Precision.FP64: "FP64", Precision.FP32: "FP32", Precision.FP16: "FP16", Precision.INT32: "INT32",
          Precision.FP64_TENSOR: "FP64 tensor", Precision.TF32_TENSOR: "TF32 tensor",
          Precision.FP16_TENSOR: "FP16 tensor", Precision.FP16_TENSOR_FP16ACC: "FP16 tensor (FP16 accumulate)",
          Precision.BF16_TENSOR: "BF16 tensor", Precision.INT8_TENSOR: "INT8 tensor"}


def estimate_for_gpu(facts: KernelFacts, gpu: Gpu, threads_per_block: int | None,
                     registers_per_thread: int | None, shared_bytes: int, cost: CostModel | None = None) -> Estimate:
    ridges = gpu.ridges()
    precisions = _precisions(facts, gpu, ridges)
    if facts.uncertain is not None:
        return Estimate(gpu.name, "uncertain", None, 0.0, {}, ridges, None, None,
                        [Note(NoteKind.UNCERTAIN, NoteSource.SOURCE, facts.uncertain)],
                        "the engine could not analyse this kernel", "static")
    dram = dram_bytes_on(facts, gpu, cost or CostModel())
    intensity = {p: facts.total.ops(p) / dram for p in precisions}
    verdict, deciding = classify(intensity, ridges)
    occ, occ_note = _occupancy(gpu, threads_per_block, registers_per_thread, shared_bytes)
    evidence = _evidence(facts, intensity, ridges, precisions)
    confidence = _confidence(facts, intensity, ridges)
    return Estimate(
        gpu=gpu.name, verdict=verdict, deciding=deciding, confidence=confidence, intensity=intensity,
        ridge=ridges, occupancy=occ, occupancy_note=occ_note, evidence=evidence,
        to_cross=_to_cross(verdict, deciding, intensity, ridges, facts), source="static",
        dram_bytes_per_item=dram / facts.work_items if facts.work_items else None, dram_bytes=dram,
    )


def dram_bytes_on(facts: KernelFacts, gpu: Gpu, cost: CostModel) -> float:
    """The launch's DRAM traffic (the facts' figure, memory.combine: its compulsory reads, the
    reads repeated on this GPU by blocks too far apart to share them in L2 (`reuse_window`, in
    the GPU's own facts), its writes, at least the per-launch floor): the bytes shown are the
    bytes judged."""
    del gpu, cost
    return max(facts.dram_bytes, 1.0)


def _occupancy(gpu: Gpu, threads: int | None, regs: int | None, shared_bytes: int) -> tuple[OccupancyResult | None, str | None]:
    if threads is None:
        return None, "launch shape unknown: occupancy not computed"
    registers = regs if regs is not None else 32
    try:
        result = occupancy(gpu, threads, registers, shared_bytes)
    except OccupancyInputError as exc:
        return None, str(exc)
    except (ValueError, TypeError) as exc:  # a user GPU without occupancy tables
        return None, f"occupancy not available for {gpu.name}: {exc}"
    source = "from ptxas" if regs is not None else "assumed 32 registers/thread"
    return result, (f"{result.occupancy:.0%} ({result.active_warps_per_sm}/{result.max_warps_per_sm} warps per SM), "
                    f"limited by {result.limiter.value}; {source}")


def _precisions(facts: KernelFacts, gpu: Gpu, ridges: dict[Precision, float]) -> tuple[Precision, ...]:
    """The roofline precisions, and the tensor-core ones the kernel uses (their ridges added
    to `ridges` where the GPU has a peak for them)."""
    tensor = tuple(p for p in TENSOR_PRECISIONS if facts.total.ops(p) > 0)
    for p in tensor:
        ridge = gpu.ridge(p)
        if ridge is None and p == Precision.FP16_TENSOR_FP16ACC:
            ridge = gpu.ridge(Precision.FP16_TENSOR)  # FP16 accumulate runs at least the FP32-accumulate rate
        if ridge is not None:
            ridges[p] = ridge
    return ROOFLINE_PRECISIONS + tensor


def _evidence(facts: KernelFacts, intensity: dict[Precision, float], ridges: dict[Precision, float],
              precisions: tuple[Precision, ...] = ROOFLINE_PRECISIONS) -> list[Note]:
    lines = []
    counted = NoteSource.COMPILED if facts.operations == "compiled" else NoteSource.SOURCE
    for p in precisions:
        ops = facts.total.ops(p)
        if ops <= 0 and p != Precision.FP32:
            continue
        ridge = ridges.get(p)
        relation = "≥" if ridge is not None and intensity[p] >= ridge else "<"
        ridge_text = f"ridge {_fmt(ridge)}" if ridge is not None else "no peak known"
        unit = UNITS.get(p, "FLOP/B")
        lines.append(Note(NoteKind.INTENSITY, counted,
                          f"{LABELS[p]}: {_fmt(intensity[p])} {unit} {relation} {ridge_text}",
                          subject=LABELS[p], value=intensity[p], unit=unit))
    return lines


# Observed accuracy against the distance of the deciding intensity from its ridge (|log10|),
# on the study part of the dev labels, editor and launch-given modes alike: about 0.65-0.7
# within 0.25 decades, 0.75-0.8 at 0.25-0.5, 0.85 beyond. The confidence follows that curve,
# so that a 0.85 verdict is right about 85% of the time (`perflsp eval` prints the check).
CONFIDENCE_AT_RIDGE = 0.62
CONFIDENCE_FAR = 0.85
FAR_DECADES = 0.6


def _confidence(facts: KernelFacts, intensity: dict[Precision, float], ridges: dict[Precision, float]) -> float:
    """Calibrated probability that the verdict is right, from the deciding intensity's distance
    to its ridge on a log scale."""
    ratios = [intensity[p] / r for p, r in ridges.items() if r and p in intensity and intensity[p] > 0]
    if not ratios:
        return CONFIDENCE_AT_RIDGE
    distance = abs(math.log10(max(ratios)))
    share = min(distance, FAR_DECADES) / FAR_DECADES
    return round(CONFIDENCE_AT_RIDGE + (CONFIDENCE_FAR - CONFIDENCE_AT_RIDGE) * share, 2)


def _to_cross(verdict: str, deciding: Precision | None, intensity: dict[Precision, float],
              ridges: dict[Precision, float], facts: KernelFacts) -> str:
    if verdict == "compute" and deciding is not None:
        factor = intensity[deciding] / ridges[deciding]
        return (f"{LABELS[deciding]} intensity is {factor:.1f}× its ridge: it would become bandwidth-bound only with "
                f"{factor:.1f}× fewer {LABELS[deciding]} operations per byte (or that much more DRAM traffic)")
    if not ridges:
        return "no peaks known for this GPU"
    closest = max(ridges, key=lambda p: intensity.get(p, 0.0) / ridges[p])
    factor = ridges[closest] / max(intensity.get(closest, 0.0), 1e-12)
    if factor > 1e6:
        return "no arithmetic to speak of: memory traffic dominates"
    return (f"closest to the {LABELS[closest]} ridge: {factor:.1f}× more {LABELS[closest]} work per byte, or "
            f"{factor:.1f}× less DRAM traffic (reuse through shared memory or registers), would make it compute-bound")
