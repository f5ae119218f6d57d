"""The *Tune* code action without Kernel Tuner installed: shown, disabled, saying how to install it
(perflsp.server.features.tuning)."""

from pathlib import Path

from perflsp.server.app import server
from perflsp.server.config import Layer, Origin, resolve
from perflsp.server.features import tuning
from perflsp.server.oneshot import analyse_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tuning"


def test_without_kernel_tuner_the_tune_action_is_disabled_with_the_reason(tmp_path, monkeypatch):
    import perflsp.tuning.search as search

    monkeypatch.setattr(search, "kernel_tuner_available", lambda: "Kernel Tuner is not installed: pip install kernel_tuner")
    settings = {"gpus": ["a100-sxm4-40gb"], "profiling": {"enabled": True, "buildCommand": ["make"]}}
    config = resolve([Layer(Origin.INIT_OPTIONS, "test", settings)], root=tmp_path)
    path = tmp_path / "convolution.cu"
    path.write_text((FIXTURES / "convolution.cu").read_text())
    snap = analyse_text(path.read_text(), path.as_uri(), config, str(path))
    kernels = list(snap.kernels.kernels)
    assert kernels

    actions = tuning.code_actions(server, snap, kernels)

    tune = [a for a in actions if a.title.startswith("Tune `")]
    assert tune, [a.title for a in actions]
    assert all(a.disabled is not None and "pip install kernel_tuner" in a.disabled.reason for a in tune)
    assert all(a.command is not None and a.command.command == "perflsp.tuneKernel" for a in tune)
