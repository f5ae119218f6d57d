"""The JSON of the commands' answers: a kernel, its estimates and its GPUs for the roofline view,
a profiled kernel's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp.analysis.notes import NoteKind, records, texts
from perflsp.server.features.common import anchor_span, closest_precision, kernel_name, short_verdict
from perflsp.server.json_types import JsonObject, JsonValue
from perflsp.server.measured import measured_json

if TYPE_CHECKING:
    from perflsp.analysis.models import Estimate, KernelFacts, KernelReport
    from perflsp.hardware.models import Gpu
    from perflsp.hardware.precision import Precision
    from perflsp.profiling.mapping import KernelRef
    from perflsp.profiling.measured import MeasuredEvidence
    from perflsp.profiling.runner import KernelResult
    from perflsp.server.measured import SnapshotMeasured


def json_value(value: int | float | tuple[int, int, int] | None) -> JsonValue:
    """A folded launch value as JSON (a dim3 as a list)."""
    return list(value) if isinstance(value, tuple) else value


def gpu_json(gpu: Gpu) -> JsonObject:
    return {"id": gpu.id, "name": gpu.name, "bandwidthGbs": gpu.memory_bandwidth_gbs,
            "ridges": {p.value: r for p, r in gpu.ridges().items()},
            "peaksTflops": {p.value: peak.tflops for p, peak in gpu.peaks.items()}}


# the traffic model's own assumptions about the judged GPU, said with the DRAM figure
_TRAFFIC_MODEL = (NoteKind.L2_REUSE, NoteKind.L2_WRITES, NoteKind.LOCAL_MEMORY, NoteKind.OTHER_TRAFFIC)


def deciding_assumption(facts: KernelFacts | None) -> str | None:
    """The assumption a verdict rests on, for the roofline view's tooltip: the kernel's first (the
    engine lists the deciding assumption first); None when the sizes came from the source. What
    the judged GPU's L2 does with the launch's bytes (`l2-reuse`, `l2-writes`) and the traffic of
    its other clients are the traffic model's, said with the DRAM figure, not what the sizes rest on."""
    if facts is None:
        return None
    about_the_code = [a for a in facts.assumptions if a.kind not in _TRAFFIC_MODEL]
    return about_the_code[0].text if about_the_code else None


def judged_precision(estimate: Estimate) -> Precision | None:
    """The precision whose roof the roofline view judges the kernel's point against: the one its
    headline and every other surface quote (`perflsp.analysis.roof.roof_of`)."""
    return closest_precision(estimate)


def estimate_json(estimate: Estimate, gpus: dict[str, Gpu], measured: MeasuredEvidence | None = None,
                  facts: KernelFacts | None = None) -> JsonObject:
    gpu = gpus.get(estimate.gpu)
    deciding = closest_precision(estimate)
    occupancy = estimate.occupancy
    return {
        "gpu": gpu.id if gpu else estimate.gpu,
        "gpuName": estimate.gpu,
        "verdict": estimate.verdict,
        "label": short_verdict(estimate),
        "deciding": deciding.value if deciding else None,
        "roof": deciding.value if deciding else None,  # as `perflsp check --json` names it
        "intensity": {p.value: v for p, v in estimate.intensity.items()},
        "ridge": {p.value: v for p, v in estimate.ridge.items()},
        "confidence": estimate.confidence,
        "occupancy": occupancy.occupancy if occupancy else None,
        "limiter": occupancy.limiter.value if occupancy else None,
        "source": estimate.source,
        "measured": measured_json(measured) if measured is not None else None,
        # the roofline view judges the point against this precision's roof and names what decides it
        "judgedBy": (judged.value if (judged := judged_precision(estimate)) is not None else None),
        "decidingAssumption": deciding_assumption(facts),
    }


def report_json(uri: str, report: KernelReport, gpus: dict[str, Gpu],
                measured: SnapshotMeasured | None = None) -> JsonObject:
    """A kernel for the roofline view; `measured` (SnapshotMeasured) adds the stored results."""
    kernel = report.kernel
    facts = report.facts
    name = kernel_name(kernel)
    found = measured.for_estimate if measured is not None else (lambda _name, _gpu: None)
    return {
        "uri": uri,
        "name": kernel_name(kernel),
        "kind": kernel.kind,
        "range": anchor_span(kernel).to_json(),
        "line": anchor_span(kernel).line,
        "launches": [{"range": s.span.to_json(), "grid": s.grid.text, "block": s.block.text} for s in report.launches],
        "workItems": facts.work_items,
        "dramBytes": facts.dram_bytes,
        "ops": {p: getattr(facts.total, p) for p in ("fp64", "fp32", "fp16", "int32")},
        "uncertain": facts.uncertain,
        "assumptions": texts(facts.assumptions),
        "assumptionRecords": records(facts.assumptions),
        "estimates": [estimate_json(e, gpus, found(name, e.gpu), facts) for e in report.estimates],
        "measuredElsewhere": [measured_json(m) for m in measured.unmatched(name)] if measured is not None else [],
    }


def matched_ref(result: KernelResult) -> KernelRef | None:
    """The source kernel a profiled kernel was matched to, if any."""
    match = result.match
    return match.ref if match is not None and match.status != "not_found" else None


def profile_result_json(result: KernelResult) -> JsonObject:
    match = result.match
    ref = matched_ref(result)
    evidence = result.evidence
    source = None
    if ref is not None and match is not None:  # (a reference comes with its match)
        source = {"file": ref.file, "line": ref.line, "status": match.status, "bodyHash": ref.body_hash}
    return {"kernel": result.name, "verdict": evidence.verdict if evidence else None,
            "summary": evidence.summary() if evidence else None, "source": source}



__all__ = ["deciding_assumption", "estimate_json", "gpu_json", "json_value", "judged_precision", "matched_ref",
           "profile_result_json", "report_json"]
