"""The runner end to end through real subprocesses: a stand-in `ncu` replays recorded (synthetic)
output, sleeps, fails, or prints garbage; each case must give one clear error and leave nothing
behind."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from profiling_helpers import MIXED, cuda_kernel, file_kernels, install_fake_ncu, install_fake_nvcc, omp_region

from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import RTX_3080
from perflsp.profiling.runner import ncu_version, profile_target, run_ncu, sweep_sizes, verify_launch_params
from perflsp.profiling.settings import ProfilingSettings
from perflsp.profiling.store import ProfileStore


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    return directory


@pytest.fixture
def ncu(bin_dir: Path, tmp_path: Path, monkeypatch) -> Path:
    path = install_fake_ncu(bin_dir)
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu-calls.jsonl"))
    monkeypatch.setenv("FAKE_NCU_FIXTURE", str(MIXED))
    return path


def calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "ncu-calls.jsonl"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def settings(ncu_path: Path, **overrides) -> ProfilingSettings:
    return ProfilingSettings(enabled=True, ncu_path=str(ncu_path), **overrides)


def error_of(fn, *args, **kwargs) -> ProfilingError:
    with pytest.raises(ProfilingError) as info:
        fn(*args, **kwargs)
    assert "Traceback" not in info.value.message
    return info.value


def test_replayed_output_is_parsed(ncu, tmp_path):
    run = run_ncu(settings(ncu), ["/opt/app", "--size", "1 2"])
    assert len(run.table.launches) == 5
    (call,) = calls(tmp_path)
    options = call["options"]
    assert options["--csv"] is True and options["--page"] == "raw" and options["--print-units"] == "base"
    assert options["--clock-control"] == "base"
    assert "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in options["--metrics"].split(",")
    assert "smsp__sass_thread_inst_executed_op_integer_pred_on.sum" in options["--metrics"].split(",")
    assert call["app"] == ["/opt/app", "--size", "1 2"]


def test_clock_control_launch_limits_and_extra_args(ncu, tmp_path):
    run_ncu(
        settings(
            ncu,
            clock_control="none",
            launch_count=3,
            launch_skip=2,
            ncu_args=["--cache-control", "all"],
            kernel_filter="saxpy|dgemm",
        ),
        ["/opt/app"],
    )
    argv = calls(tmp_path)[0]["argv"]
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--launch-count") + 1] == "3" and argv[argv.index("--launch-skip") + 1] == "2"
    assert argv[argv.index("--kernel-name") + 1] == "regex:saxpy|dgemm"
    assert argv[argv.index("--cache-control") + 1] == "all"


def test_missing_ncu(tmp_path):
    error = error_of(run_ncu, settings(tmp_path / "no-such-ncu"), ["/opt/app"])
    assert error.code == "missing-program" and "no-such-ncu" in error.message


def test_ncu_not_executable(ncu):
    ncu.chmod(0o644)
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "permission" and "permission denied" in error.message


def test_counter_permission_error(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "permission"
    assert "ERR_NVGPUCTRPERM" in error.message and "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in error.message


def test_non_zero_exit(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "exit")
    monkeypatch.setenv("FAKE_NCU_EXIT", "7")
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "exit-status"
    assert "status 7" in error.message and "The application returned an error code (3)" in error.message


def test_garbage_output(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "garbage")
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "parse" and "no Nsight Compute CSV table" in error.message


def test_truncated_output(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "truncated")
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "parse" and "truncated" in error.message


def test_no_kernels_profiled(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "no-kernels")
    error = error_of(run_ncu, settings(ncu), ["/opt/app"])
    assert error.code == "no-kernels" and "kernel filter" in error.message


def test_output_cap(ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "flood")
    error = error_of(run_ncu, settings(ncu, output_cap_bytes=1024 * 1024), ["/opt/app"])
    assert error.code == "output-cap" and "1048576 bytes" in error.message


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is not running
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_timeout_stops_ncu_and_its_children_only(ncu, monkeypatch, tmp_path):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("FAKE_NCU_MODE", "sleep")
    monkeypatch.setenv("FAKE_NCU_PID_FILE", str(pid_file))
    bystander = __import__("subprocess").Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        error = error_of(run_ncu, settings(ncu, run_timeout_s=1.5), ["/opt/app"])
        assert error.code == "timeout" and "1.5 s" in error.message
        assert time.monotonic() - started < 15
        ncu_pid, child_pid = (int(p) for p in pid_file.read_text().split())
        deadline = time.monotonic() + 5
        while (_alive(ncu_pid) or _alive(child_pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(ncu_pid) and not _alive(child_pid)
        assert bystander.poll() is None  # nothing else disturbed
    finally:
        bystander.kill()
        bystander.wait()


def test_launcher_prefix_runs_ncu(ncu, bin_dir, tmp_path):
    launcher = bin_dir / "launcher.py"
    launcher.write_text(
        "import os, sys\nopen(os.environ['LAUNCHER_MARK'], 'w').write(' '.join(sys.argv[2:3]))\n"
        "os.execv(sys.argv[2], sys.argv[2:])\n",
        encoding="utf-8",
    )
    mark = tmp_path / "launched"
    run = run_ncu(
        settings(ncu, launcher=[sys.executable, str(launcher), "--partition=gpu"], env={"LAUNCHER_MARK": str(mark)}),
        ["/opt/app"],
    )
    assert len(run.table.launches) == 5
    assert mark.read_text() == str(ncu)
    assert run.argv[:3] == (sys.executable, str(launcher), "--partition=gpu")


def test_ncu_version(ncu, tmp_path):
    assert ncu_version(settings(ncu)) == "2024.1.0.0"
    assert ncu_version(settings(tmp_path / "missing")) is None
    # behind a batch queue the question would wait for a second allocation: not asked
    assert ncu_version(settings(ncu, launcher=["srun", "-p", "gpu"])) is None


# ---------------------------------------------------------------------------------------------
# profile FILE: build, run, map, store


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_profile_source_file_end_to_end(ncu, bin_dir, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_EXEC_APP", "1")  # the app's own output precedes the table
    nvcc = install_fake_nvcc(bin_dir)
    source = workspace / "my kernels.cu"
    source.write_text("__global__ void saxpy() {}\n", encoding="utf-8")
    files = [
        file_kernels(
            source,
            [cuda_kernel("saxpy", qualified="ns::saxpy", params=3, body_hash="b1", template_params=("T",))],
            [omp_region("smooth", 42, "o1")],
        )
    ]
    cfg = settings(
        ncu,
        build_command=[str(nvcc), "-O3", "-o", "{exe}", "{file}"],
        run_command=["{exe}", "{args}"],
        args=["--n", "1024"],
    )
    outcome = profile_target(cfg, source, workspace=workspace, gpu=RTX_3080, files=files)

    exe = workspace / ".perflsp" / "build" / "my kernels"
    assert exe.is_file()
    (call,) = calls(tmp_path)
    assert call["app"] == [str(exe), "--n", "1024"]
    assert call["cwd"] == str(workspace)  # next to the source: programs read inputs relative to it
    assert (workspace / ".perflsp" / ".gitignore").read_text().strip().endswith("*")

    by_name = {r.name: r for r in outcome.results}
    saxpy = by_name["ns::saxpy<float>"]
    assert saxpy.match.status == "exact" and saxpy.evidence.verdict == "bandwidth"
    assert saxpy.evidence.kernel_hash == "b1" and not saxpy.evidence.stale
    assert by_name["smooth@l42"].evidence.verdict == "compute"
    assert outcome.record.ncu_version == "2024.1.0.0"
    assert outcome.record.clock_control == "base" and outcome.record.clock_mhz == pytest.approx(1440)
    assert outcome.record.gpu == RTX_3080.name
    assert outcome.stored_at is not None and outcome.stored_at.parent == workspace / ".perflsp" / "profiles"

    stored = json.loads(outcome.stored_at.read_text(encoding="utf-8"))
    assert stored["origin"] == "run" and stored["ncu_version"] == "2024.1.0.0"
    mapped = {k["display_name"]: k["mapping"] for k in stored["kernels"]}
    assert mapped["ns::saxpy<float>"]["file"] == "my kernels.cu" and mapped["ns::saxpy<float>"]["body_hash"] == "b1"

    # an edit to the kernel makes the stored result stale, not current
    store = ProfileStore(workspace)
    edited = cuda_kernel("saxpy", qualified="ns::saxpy", params=3, body_hash="b2", template_params=("T",))
    (evidence,) = store.evidence_for(edited, file=str(source))
    assert evidence.stale and evidence.kernel_hash == "b1" and evidence.verdict == "bandwidth"
    unchanged = cuda_kernel("saxpy", qualified="ns::saxpy", params=3, body_hash="b1", template_params=("T",))
    (evidence,) = store.evidence_for(unchanged, file=str(source))
    assert not evidence.stale


def test_profile_requires_enabled_and_a_build_command(ncu, workspace):
    source = workspace / "k.cu"
    source.write_text("", encoding="utf-8")
    error = error_of(profile_target, ProfilingSettings(ncu_path=str(ncu)), source, workspace=workspace)
    assert error.code == "not-enabled"
    error = error_of(profile_target, settings(ncu), source, workspace=workspace)
    assert error.code == "not-configured" and "buildCommand" in error.message


def test_build_failure_is_reported(ncu, bin_dir, workspace, tmp_path):
    nvcc = install_fake_nvcc(bin_dir)
    source = workspace / "bad.cu"
    source.write_text("#error nope\n", encoding="utf-8")
    cfg = settings(ncu, build_command=[str(nvcc), "-o", "{exe}", "{file}"])
    error = error_of(profile_target, cfg, source, workspace=workspace)
    assert error.code == "exit-status" and "synthetic compile error" in error.message
    assert calls(tmp_path) == []  # ncu never ran


def test_profile_an_existing_executable(ncu, workspace, tmp_path):
    exe = workspace / "app"
    exe.write_text("#!/bin/sh\n", encoding="utf-8")
    exe.chmod(0o755)
    outcome = profile_target(settings(ncu), exe, workspace=workspace, store=False, kernel="saxpy")
    assert outcome.stored_at is None and len(outcome.results) == 4
    argv = calls(tmp_path)[0]["argv"]
    assert argv[argv.index("--kernel-name") + 1] == "regex:(^|[^A-Za-z0-9_])saxpy([^A-Za-z0-9_]|$)"
    # {file} has no value for a bare executable
    error = error_of(profile_target, settings(ncu, run_command=["{exe}", "{file}"]), exe, workspace=workspace)
    assert error.code == "bad-template" and "{file}" in error.message


def test_kernel_names_cannot_inject(ncu, workspace):
    exe = workspace / "app"
    exe.write_text("", encoding="utf-8")
    exe.chmod(0o755)
    error = error_of(profile_target, settings(ncu), exe, workspace=workspace, kernel="k --launch-count 0")
    assert error.code == "bad-template"


def test_unsupported_target(ncu, workspace):
    text = workspace / "notes.txt"
    text.write_text("", encoding="utf-8")
    assert error_of(profile_target, settings(ncu), text, workspace=workspace).code == "io"
    assert "no such file" in error_of(profile_target, settings(ncu), workspace / "gone", workspace=workspace).message


# ---------------------------------------------------------------------------------------------
# Launch-parameter verification


def test_sweep_sizes():
    assert sweep_sizes(128, 256) == [128, 256, 512]
    assert sweep_sizes(1024, 64) == [32, 64, 128, 1024]
    assert sweep_sizes(96, 1024) == [96, 512, 1024]


def test_verify_with_block_placeholder(ncu, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", "128:2100,256:1500,512:1800")
    cfg = settings(ncu, run_command=["{exe}", "--block", "{block}"])
    result = verify_launch_params(cfg, exe=workspace / "app", kernel="ns::saxpy", current_block=128, proposed_block=256)
    assert [t.block_size for t in result.timings] == [128, 256, 512]
    assert [c["app"][-1] for c in calls(tmp_path)] == ["128", "256", "512"]
    assert result.timing(256).per_launch_ns == 1500 and result.timing(256).launches == 3
    assert result.speedup == pytest.approx(2100 / 1500)
    assert result.best.block_size == 256
    assert result.summary() == "measured 1.40x at block 256 vs 128"
    metrics = calls(tmp_path)[0]["options"]["--metrics"].split(",")
    assert "gpu__time_duration.sum" in metrics and len(metrics) == 3


def test_verify_with_environment_variable(ncu, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", "64:900,128:1000,256:1200")
    result = verify_launch_params(
        settings(ncu), exe=workspace / "app", kernel="saxpy", current_block=256, proposed_block=128
    )
    assert [c["block_env"] for c in calls(tmp_path)] == ["64", "128", "256"]
    assert result.speedup == pytest.approx(1200 / 1000)
    assert result.best.block_size == 64


def test_verify_notices_an_ignored_override(ncu, workspace, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", "128:1000")
    monkeypatch.setenv("FAKE_NCU_IGNORE_BLOCK", "1")
    result = verify_launch_params(
        settings(ncu), exe=workspace / "app", kernel="saxpy", current_block=128, proposed_block=256, sizes=[128, 256]
    )
    assert result.speedup is None
    assert any("ignores the override" in n for n in result.notes)
    assert result.summary().startswith("could not measure")


def test_verify_records_a_failing_size_and_goes_on(ncu, workspace, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", "128:1000")  # 256 has no entry: the stand-in crashes
    result = verify_launch_params(
        settings(ncu), exe=workspace / "app", kernel="saxpy", current_block=128, proposed_block=256, sizes=[128, 256]
    )
    assert result.timing(128).per_launch_ns == 1000
    assert result.timing(256).error and "status 1" in result.timing(256).error
    assert result.speedup is None


def test_verify_over_ssh_needs_the_placeholder(ncu, workspace):
    error = error_of(
        verify_launch_params,
        settings(ncu, launcher=["ssh", "gpu01"]),
        exe=workspace / "app",
        kernel="saxpy",
        current_block=128,
        proposed_block=256,
    )
    assert error.code == "not-configured" and "{block}" in error.message


@pytest.mark.parametrize("mode", ["garbage", "truncated", "exit", "perm", "no-kernels"])
def test_a_failed_run_leaves_stored_results_alone(ncu, workspace, monkeypatch, mode):
    exe = workspace / "app"
    exe.write_text("", encoding="utf-8")
    exe.chmod(0o755)
    first = profile_target(settings(ncu), exe, workspace=workspace)
    before = {p.name: p.read_bytes() for p in first.stored_at.parent.iterdir()}
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    error_of(profile_target, settings(ncu), exe, workspace=workspace)
    after = {p.name: p.read_bytes() for p in first.stored_at.parent.iterdir()}
    assert after == before
    assert len(ProfileStore(workspace).records()) == 1
