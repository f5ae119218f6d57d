"""`perflsp gpus` and `perflsp occupancy`, through click's runner and one real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflsp.cli import cli

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples" / "gpus" / "rtx3080-study.toml"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_gpus_table_lists_every_gpu():
    result = run("gpus")
    assert result.exit_code == 0, result.output
    for gpu_id in ("v100-sxm2-32gb", "rtx-3080-10gb", "b200", "mi325x", "max-1550"):
        assert gpu_id in result.stdout


def test_gpus_json_is_a_list_with_the_documented_keys():
    result = run("gpus", "--json")
    assert result.exit_code == 0
    gpus = json.loads(result.stdout)
    assert len(gpus) >= 27
    for gpu in gpus:
        for key in ("name", "aliases", "compute_capability", "sm_count", "memory_bandwidth_gbs", "peaks_tflops"):
            assert key in gpu
    a100 = next(g for g in gpus if g["id"] == "a100-sxm4-40gb")
    assert (a100["compute_capability"], a100["sm_count"], a100["memory_bandwidth_gbs"]) == ("8.0", 108, 1555)
    assert a100["peaks_tflops"]["fp64"] == 9.7


def test_gpus_show_text_and_json():
    result = run("gpus", "show", "H100")
    assert result.exit_code == 0
    assert "H100 SXM5 80GB" in result.stdout and "1830 MHz" in result.stdout
    data = json.loads(run("gpus", "show", "rtx 3080", "--json").stdout)
    assert data["id"] == "rtx-3080-10gb"
    assert data["peaks"]["int32"]["origin"] == "derived"
    assert data["limits"]["max_warps_per_sm"] == 48


def test_gpus_show_unknown_gpu_suggests():
    result = run("gpus", "show", "rtx3008")
    assert result.exit_code != 0
    assert result.stderr.strip() == (
        "Error: unknown GPU 'rtx3008'; did you mean rtx-3090, rtx-3080-10gb, rtx-5090, rtx-4090, rtx-a6000?")
    assert "Traceback" not in result.output


def test_user_gpus_file():
    data = json.loads(run("gpus", "--gpus-file", str(STUDY), "show", "rtx3080-study", "--json").stdout)
    assert round(data["ridge_ops_per_byte"]["fp32"], 4) == 32.9706
    listed = json.loads(run("gpus", "--json", "--gpus-file", str(STUDY)).stdout)
    assert any(g["id"] == "rtx3080-study" for g in listed)


def test_malformed_user_gpus_file(tmp_path):
    bad = tmp_path / "gpus.toml"
    bad.write_text('[[gpu]]\nid = "MyCard"\nvendor = "NVIDIA"\ncompute_capability = "8.6"\n'
                   'sm_count = 4\nboost_clock_mhz = 1000\nmemory_bandwidth_gbs = -5\n')
    result = run("gpus", "--gpus-file", str(bad))
    assert result.exit_code == 2
    assert " ".join(result.stderr.split()) == (
        f"perflsp: error: invalid GPU definition: {bad}:7: [[gpu]] #1 'MyCard': memory_bandwidth_gbs: must be > 0 "
        "(got -5)")


def test_occupancy_json():
    result = run("occupancy", "--gpu", "rtx3080", "--threads", "256", "--regs", "64", "--smem", "16KiB", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["active_blocks_per_sm"], data["active_warps_per_sm"], data["limiter"]) == (4, 32, "registers")
    assert data["occupancy"] == pytest.approx(2 / 3)
    assert data["next_step"]["max_registers_per_thread"] == 48
    assert data["best_block_size"]["min_grid_size"] == 68
    assert data["inputs"]["static_smem_bytes"] == 16384


def test_occupancy_text_and_other_vendors():
    result = run("occupancy", "--gpu", "a100", "--threads", "128", "--regs", "32", "--smem", "8KiB",
                 "--carveout", "20KiB")
    assert result.exit_code == 0
    assert "3 blocks per SM" in result.stdout and "limited by shared memory" in result.stdout
    amd = json.loads(run("occupancy", "--gpu", "mi300x", "--threads", "256", "--regs", "128", "--json").stdout)
    assert (amd["active_blocks_per_sm"], amd["warp_size"]) == (4, 64)
    assert "workgroups per CU" in run("occupancy", "--gpu", "mi300x", "--threads", "256", "--regs", "128").stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--threads", "0", "--regs", "32"], "threads per block must be between 1 and 1024 on compute capability 8.6 (got 0)"),
    (["--threads", "2000", "--regs", "32"], "threads per block must be between 1 and 1024 on compute capability 8.6 (got 2000)"),
    (["--threads", "256", "--regs", "300"], "registers per thread must be between 0 and 255 on compute capability 8.6 (got 300)"),
])
def test_occupancy_absurd_inputs(args, message):
    result = run("occupancy", "--gpu", "rtx3080", *args)
    assert result.exit_code != 0
    assert result.stderr.strip() == f"Error: {message}"


def test_occupancy_bad_size_and_unknown_gpu():
    result = run("occupancy", "--gpu", "rtx3080", "--threads", "256", "--regs", "32", "--smem", "16XB")
    assert result.exit_code == 2 and "'16XB' is not a size" in result.stderr
    result = run("occupancy", "--gpu", "h1000", "--threads", "256", "--regs", "32")
    assert result.exit_code == 1 and "did you mean h100-sxm5-80gb" in result.stderr


def test_real_subprocess_python_m_perflsp():
    done = subprocess.run([sys.executable, "-m", "perflsp", "occupancy", "--gpu", "H100", "--threads", "1024",
                           "--regs", "255", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["active_blocks_per_sm"] == 0 and data["limiter"] == "registers"
