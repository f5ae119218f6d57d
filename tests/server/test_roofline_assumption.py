"""perflsp.rooflineData names, per estimate, the assumption its verdict rests on and the precision
whose roof judges its point (the roofline view's tooltip and axes show them)."""

from __future__ import annotations

from types import SimpleNamespace

from perflsp.analysis.finish import uncertain_facts
from perflsp.analysis.notes import NoteKind, assumed, problem_size_unknown
from perflsp.hardware.precision import Precision
from perflsp.server.features.commands.serialize import deciding_assumption, judged_precision


def test_the_kernels_first_assumption_as_its_text():
    facts = uncertain_facts("")
    facts.assumptions = [problem_size_unknown("1,048,576 threads, 4,096 blocks × 256", 1048576.0, "threads"),
                         assumed(NoteKind.TEMPLATE_ARGUMENT, "template value `N` unknown", subject="N")]
    assert deciding_assumption(facts) == ("problem size unknown: assumed large (1,048,576 threads, 4,096 blocks × 256), "
                                          "data beyond L2")


def test_none_when_the_source_says_every_size():
    assert deciding_assumption(uncertain_facts("")) is None
    assert deciding_assumption(None) is None


def test_what_l2_does_with_the_bytes_is_not_what_the_verdict_rests_on():
    # the traffic model's own assumptions (said with the DRAM figure) are passed over
    facts = uncertain_facts("")
    facts.assumptions = [assumed(NoteKind.L2_WRITES, "H100: L2 writes back what a launch writes", subject="H100"),
                         assumed(NoteKind.L2_REUSE, "H100: blocks start in launch order", subject="H100")]
    assert deciding_assumption(facts) is None
    facts.assumptions.append(assumed(NoteKind.TEMPLATE_ARGUMENT, "template value `N` unknown", subject="N"))
    assert deciding_assumption(facts) == "template value `N` unknown"


def test_the_point_is_judged_by_the_precision_the_headline_quotes():
    # an engine with main_precision(): its answer (FP32 for a float kernel, not the INT32 nearest roof)
    headline = SimpleNamespace(main_precision=lambda: Precision.FP32, deciding=None,
                               intensity={Precision.FP32: 0.2, Precision.INT32: 1.0},
                               ridge={Precision.FP32: 20.0, Precision.INT32: 10.0})
    assert judged_precision(headline) == Precision.FP32
    # any estimate: the deciding precision, else the floating-point one nearest its roof (the
    # INT32 roof is nearer here, but a float kernel is quoted by its FP32 roof on every surface)
    nearest = SimpleNamespace(deciding=None, intensity={Precision.FP32: 0.2, Precision.INT32: 1.0},
                              ridge={Precision.FP32: 20.0, Precision.INT32: 10.0})
    assert judged_precision(nearest) == Precision.FP32
    integer = SimpleNamespace(deciding=None, intensity={Precision.FP32: 0.0, Precision.INT32: 1.0},
                              ridge={Precision.FP32: 20.0, Precision.INT32: 10.0})
    assert judged_precision(integer) == Precision.INT32
    assert judged_precision(SimpleNamespace(deciding=Precision.FP64, intensity={}, ridge={})) == Precision.FP64
