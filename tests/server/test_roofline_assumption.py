"""perflsp.rooflineData names, per estimate, the assumption its verdict rests on (the roofline
view's tooltip shows it)."""

from __future__ import annotations

from types import SimpleNamespace

from perflsp.server.features.commands import deciding_assumption


def test_the_engine_named_assumption_wins():
    estimate = SimpleNamespace(deciding_assumption="problem size unknown: assumed large, data beyond L2")
    facts = SimpleNamespace(assumptions=["block `B` unknown (macro)"])
    assert deciding_assumption(estimate, facts) == "problem size unknown: assumed large, data beyond L2"


def test_else_the_kernels_first_assumption():
    facts = SimpleNamespace(assumptions=["launch shape unknown: assumed 1,048,576 threads", "template value `N` unknown"])
    assert deciding_assumption(SimpleNamespace(), facts) == "launch shape unknown: assumed 1,048,576 threads"


def test_none_when_the_source_says_every_size():
    assert deciding_assumption(SimpleNamespace(), SimpleNamespace(assumptions=[])) is None
    assert deciding_assumption(SimpleNamespace(deciding_assumption=""), None) is None
