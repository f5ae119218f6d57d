"""`perflsp profile`: import, run and verify from the command line (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from profiling_helpers import MIXED, NCU_FIXTURES, install_fake_ncu, install_fake_nvcc

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PERFLSP_CONFIG": str(tmp_path / "no-user-config.toml"),  # never the developer's own config
        "PYTHONPATH": str(REPO),
        "FAKE_NCU_FIXTURE": str(MIXED),
        "FAKE_NCU_LOG": str(tmp_path / "ncu-calls.jsonl"),
        "COLUMNS": "200",
    }


def perflsp(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perflsp", "profile", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def assert_clean_error(result: subprocess.CompletedProcess, text: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and text in errors[0], result.stderr


def test_import_prints_verdicts_and_stores(tmp_path, env):
    result = perflsp(["import", str(MIXED), "--workspace", str(tmp_path)], env, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "NVIDIA GeForce RTX 3080" in lines[0]
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith(("note", "stored"))}
    assert "bandwidth" in rows["ns::saxpy<float>"]
    assert "compute (fp64)" in rows["dgemm_tile"] and "compute (int32)" in rows["smooth@l42"]
    stored = list((tmp_path / ".perflsp" / "profiles").glob("*.json"))
    assert len(stored) == 1 and f"stored: {stored[0]}" in result.stdout
    assert (tmp_path / ".perflsp" / ".gitignore").is_file()


def test_import_json(tmp_path, env):
    result = perflsp(["import", str(MIXED), "--gpu", "RTX 3080", "--json", "--no-store"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpu"]["name"] == "NVIDIA GeForce RTX 3080" and data["stored_at"] is None
    verdicts = {k["kernel"]: k["evidence"]["verdict"] for k in data["kernels"]}
    assert verdicts == {
        "ns::saxpy<float>": "bandwidth",
        "dgemm_tile": "compute",
        "smooth@l42": "compute",
        "histogram8": "compute",
    }
    saxpy = data["kernels"][0]["evidence"]
    assert set(saxpy["intensity"]) == {"fp64", "fp32", "fp16", "int32"}
    assert 0 < saxpy["pct_of_peak_bandwidth"] < 100
    assert not (tmp_path / ".perflsp").exists()


def test_import_without_gpu_figures_still_reports_intensities(tmp_path, env):
    result = perflsp(["import", str(NCU_FIXTURES / "synthetic-raw-scaled-units.csv"), "--no-store"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pass --gpu NAME" in result.stdout
    assert "scale" in result.stdout


def test_import_judges_with_the_gpu_database(tmp_path, env):
    h100 = NCU_FIXTURES / "synthetic-raw-h100-saxpy.csv"
    # the GPU the report names, found in the database (not only the built-in RTX 3080 figures)
    result = perflsp(["import", str(h100), "--no-store", "--json"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["gpu"]["name"] == "H100 SXM5 80GB"
    assert data["kernels"][0]["evidence"]["verdict"] == "bandwidth"
    # --gpu names any database GPU; its figures are those of `perflsp gpus show`
    result = perflsp(["import", str(h100), "--no-store", "--json", "--gpu", "a100"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["gpu"]["name"] == "A100 SXM4 40GB"
    # and --gpus-file adds the user's own
    study = REPO / "examples" / "gpus" / "rtx3080-study.toml"
    result = perflsp(["import", str(h100), "--no-store", "--json", "--gpu", "rtx3080-study", "--gpus-file", str(study)],
                     env, tmp_path)
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["gpu"]
    assert gpu["bandwidth_gbs"] == pytest.approx(760.3) and gpu["ridge"]["fp32"] == pytest.approx(32.97, rel=1e-3)


def test_unknown_gpu_gets_suggestions(tmp_path, env):
    result = perflsp(["import", str(MIXED), "--gpu", "h10"], env, tmp_path)
    assert_clean_error(result, "unknown GPU 'h10'; did you mean")
    assert result.returncode == 2 and "h100-sxm5-80gb" in result.stderr


def test_a_malformed_gpus_file_is_a_clear_error(tmp_path, env):
    bad = tmp_path / "gpus.toml"
    bad.write_text('[[gpu]]\nid = "mine"\nvendor = "NVIDIA"\nmemory_bandwidth_gbs = -5\n', encoding="utf-8")
    result = perflsp(["import", str(MIXED), "--no-store", "--gpus-file", str(bad)], env, tmp_path)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "invalid GPU definition" in result.stderr and "gpus.toml" in result.stderr
    assert "memory_bandwidth_gbs" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "missing.csv"], "no such report"),
        (["import", str(MIXED), "--gpu", "Voodoo2"], "unknown GPU 'Voodoo2'"),
        (["import", str(REPO / "pyproject.toml")], "no Nsight Compute CSV table"),
    ],
)
def test_import_errors(tmp_path, env, args, message):
    assert_clean_error(perflsp(args, env, tmp_path), message)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "k.cu").write_text("__global__ void saxpy(float *x) {}\n", encoding="utf-8")
    return root


def test_run_builds_profiles_and_stores(tmp_path, env, project):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu, nvcc = install_fake_ncu(bin_dir), install_fake_nvcc(bin_dir)
    result = perflsp(
        [
            "k.cu",
            "--gpu",
            "rtx3080",
            "--build",
            f"{nvcc} -O3 -o {{exe}} {{file}}",
            "--ncu",
            str(ncu),
            "--clock-control",
            "none",
            "--",
            "--n",
            "1 000",
        ],
        env,
        project,
    )
    assert result.returncode == 0, result.stderr
    assert "ncu 2024.1.0.0" in result.stdout and "clock control none" in result.stdout
    call = json.loads((tmp_path / "ncu-calls.jsonl").read_text().splitlines()[0])
    assert call["app"] == [str(project / ".perflsp" / "build" / "k"), "--n", "1 000"]
    assert call["options"]["--clock-control"] == "none"
    assert len(list((project / ".perflsp" / "profiles").glob("*.json"))) == 1


def test_run_without_a_build_command(tmp_path, env, project):
    assert_clean_error(perflsp(["k.cu"], env, project), "no build command")


def test_untrusted_workspace_file_cannot_supply_commands(tmp_path, env, project):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu, nvcc = install_fake_ncu(bin_dir), install_fake_nvcc(bin_dir)
    (project / ".perflsp.toml").write_text(
        f'[profiling]\nbuildCommand = ["{nvcc}", "-o", "{{exe}}", "{{file}}"]\nncuPath = "{ncu}"\n', encoding="utf-8"
    )
    result = perflsp(["k.cu", "--gpu", "rtx3080"], env, project)
    assert_clean_error(result, "no build command")
    assert "buildCommand ignored" in result.stderr and "--trust-workspace" in result.stderr
    assert not (tmp_path / "ncu-calls.jsonl").exists()  # nothing ran

    trusted = perflsp(["k.cu", "--gpu", "rtx3080", "--trust-workspace"], env, project)
    assert trusted.returncode == 0, trusted.stderr


def test_user_config_supplies_commands(tmp_path, env, project):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu, nvcc = install_fake_ncu(bin_dir), install_fake_nvcc(bin_dir)
    config = tmp_path / "user.toml"
    config.write_text(
        f'[profiling]\nbuildCommand = ["{nvcc}", "-o", "{{exe}}", "{{file}}"]\nncuPath = "{ncu}"\n', encoding="utf-8"
    )
    result = perflsp(["k.cu", "--json", "--no-store"], {**env, "PERFLSP_CONFIG": str(config)}, project)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["kernels"]) == 4


def test_run_reports_ncu_failures(tmp_path, env, project):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = install_fake_ncu(bin_dir)
    exe = project / "app"
    exe.write_text("#!/bin/sh\n", encoding="utf-8")
    exe.chmod(0o755)
    result = perflsp(["app", "--ncu", str(ncu)], {**env, "FAKE_NCU_MODE": "perm"}, project)
    assert_clean_error(result, "ERR_NVGPUCTRPERM")
    result = perflsp(["app", "--ncu", str(bin_dir / "nope")], env, project)
    assert_clean_error(result, "program not found")


def test_verify(tmp_path, env, project):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = install_fake_ncu(bin_dir)
    exe = project / "app"
    exe.write_text("#!/bin/sh\n", encoding="utf-8")
    exe.chmod(0o755)
    verify_env = {**env, "FAKE_NCU_MODE": "timing", "FAKE_NCU_TIMES": "128:2100,256:1500,512:1800"}
    result = perflsp(
        [
            "verify",
            "app",
            "--kernel",
            "saxpy",
            "--current",
            "128",
            "--proposed",
            "256",
            "--ncu",
            str(ncu),
            "--run",
            "{exe} --block {block}",
        ],
        verify_env,
        project,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "measured 1.40x at block 256 vs 128"
    assert "[current]" in result.stdout and "[proposed]" in result.stdout
