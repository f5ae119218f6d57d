"""Importing existing results: ncu CSV exports and .ncu-rep reports."""

from __future__ import annotations

import sys
import types

import pytest
from profiling_helpers import MIXED, NCU_FIXTURES, install_fake_ncu

from perflsp.profiling import metrics as M
from perflsp.profiling import reports
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import RTX_3080
from perflsp.profiling.runner import import_and_store


def test_csv_import(tmp_path):
    imported = reports.import_report(MIXED)
    assert imported.reader == "csv" and len(imported.table.launches) == 5


def test_utf16_and_bom_exports(tmp_path):
    text = MIXED.read_text(encoding="utf-8")
    (tmp_path / "a.csv").write_bytes("\ufeff".encode() + text.encode("utf-8"))
    (tmp_path / "b.csv").write_text(text, encoding="utf-16")
    for name in ("a.csv", "b.csv"):
        assert len(reports.import_report(tmp_path / name).table.launches) == 5


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p, "no such report"),
        (lambda p: (p.mkdir(), p)[1], "is a directory"),
        (lambda p: (p.write_text("hello"), p)[1], "no Nsight Compute CSV table"),
    ],
)
def test_bad_csv_inputs(tmp_path, make, message):
    path = make(tmp_path / "r.csv")
    with pytest.raises(ProfilingError, match=message):
        reports.import_report(path)


class _Metric:
    def __init__(self, value, unit):
        self._value, self._unit = value, unit

    def value(self):
        return self._value

    def unit(self):
        return self._unit


class _Action:
    def __init__(self, name, metrics):
        self._name, self._metrics = name, metrics

    def name(self, base=None):
        assert base == "DEMANGLED"
        return self._name

    def metric_names(self):
        return tuple(self._metrics)

    def metric_by_name(self, name):
        return _Metric(*self._metrics[name])


def _fake_ncu_report(actions):
    """An object with the documented ncu_report API: load_report -> IContext -> IRange -> IAction."""
    module = types.ModuleType("ncu_report")
    module.IAction = types.SimpleNamespace(NameBase_DEMANGLED="DEMANGLED")

    class Range:
        def num_actions(self):
            return len(actions)

        def action_by_idx(self, i):
            return actions[i]

    class Context:
        def num_ranges(self):
            return 1

        def range_by_idx(self, i):
            return Range()

        def get_version(self):
            return "2024.1.0"

    module.load_report = lambda path: Context()
    return module


def test_ncu_rep_through_the_ncu_report_api(tmp_path, monkeypatch):
    action = _Action(
        "void ns::saxpy<float>(const float *, float *, int)",
        {
            M.DRAM_READ: (2.0, "Mbyte"),
            M.DRAM_WRITE: (1_000_000, "byte"),
            M.DURATION: (12.5, "usecond"),
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": (500_000, "inst"),
            M.DEVICE_NAME: ("NVIDIA GeForce RTX 3080", ""),
            "launch__block_dim_x": (256, ""),
            "launch__block_dim_y": (1, ""),
            "launch__block_dim_z": (1, ""),
            "launch__grid_dim_x": (40, ""),
            "launch__grid_dim_y": (1, ""),
            "launch__grid_dim_z": (1, ""),
            "launch__func_cache_config": (None, ""),
        },
    )
    monkeypatch.setitem(sys.modules, "ncu_report", _fake_ncu_report([action]))
    report = tmp_path / "run.ncu-rep"
    report.write_bytes(b"report")
    imported = reports.import_report(report)
    assert imported.reader == "ncu_report" and imported.ncu_version == "2024.1.0"
    (launch,) = imported.table.launches
    assert launch.metrics[M.DRAM_READ] == 2e6 and launch.metrics[M.DURATION] == pytest.approx(12_500)
    assert launch.block == (256, 1, 1) and launch.grid == (40, 1, 1)
    assert launch.text[M.DEVICE_NAME] == "NVIDIA GeForce RTX 3080"
    outcome = import_and_store(report, workspace=tmp_path, store=False)
    assert outcome.gpu is RTX_3080  # recognised from the report's device name
    assert outcome.results[0].evidence.verdict == "bandwidth"


def test_empty_ncu_rep_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ncu_report", _fake_ncu_report([]))
    report = tmp_path / "empty.ncu-rep"
    report.write_bytes(b"x")
    with pytest.raises(ProfilingError) as info:
        reports.import_report(report)
    assert info.value.code == "no-kernels" and "is it an Nsight Compute report" in info.value.message


def test_ncu_rep_without_the_package_uses_ncu_or_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import fails
    report = tmp_path / "run.ncu-rep"
    report.write_bytes(b"x")
    with pytest.raises(ProfilingError) as info:
        reports.import_report(report)
    assert info.value.code == "missing-extra" and "perflsp[ncu]" in info.value.message
    ncu = install_fake_ncu(tmp_path)
    monkeypatch.setenv("FAKE_NCU_FIXTURE", str(NCU_FIXTURES / "synthetic-raw-mixed.csv"))
    imported = reports.import_report(report, ncu_argv=[str(ncu)])
    assert imported.reader == "ncu --import" and len(imported.table.launches) == 5


def test_real_ncu_report_package_rejects_a_non_report(tmp_path):
    pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report package (perflsp[ncu]) is not installed")
    report = tmp_path / "garbage.ncu-rep"
    report.write_bytes(b"this is not a report\n")
    with pytest.raises(ProfilingError) as info:
        reports.import_report(report)
    assert info.value.code in {"no-kernels", "parse"}
