"""`perflsp check --args` and `[profiling] args` of .perflsp.toml: the program's arguments are
folded where `main` parses argv, as `perflsp eval` folds a labels row's `exe_args`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflsp.cli import cli
from perflsp.cli.project_config import ProjectConfigError, load_project_config

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples" / "gpus" / "rtx3080-study.toml"

# a polynomial of argv[1]'s degree per element: degree 4 streams, degree 400 computes
POLY = """__global__ void poly(const float *x, float *y, int n, int degree)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    float acc = 0.0f;
    for (int d = 0; d < degree; ++d)
        acc = acc * v + 1.0f;
    y[i] = acc;
}

int main(int argc, char **argv)
{
    int n = 1 << 22;
    int degree = argc > 1 ? atoi(argv[1]) : 4;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    poly<<<n / 128, 128>>>(x, y, n, degree);
    return 0;
}
"""


def check(folder: Path, *args: str):
    old = Path.cwd()
    os.chdir(folder)  # .perflsp.toml is read from the current directory
    try:
        return CliRunner().invoke(cli, ["check", "poly.cu", "--gpus-file", str(STUDY), "--gpu", "rtx3080-study",
                                        "--json", *args])
    finally:
        os.chdir(old)


def poly_of(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["files"][0]["kernels"][0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "poly.cu").write_text(POLY)
    return tmp_path


def loop_trip(kernel: dict) -> float:
    return next(loop["trip_count"] for loop in kernel["facts"]["loops"] if loop["variable"] == "d")


def test_args_fold_into_the_trip_count_and_the_verdict(folder):
    light = poly_of(check(folder, "--args", "4"))
    heavy = poly_of(check(folder, "--args", "400"))
    assert loop_trip(light) == 4 and loop_trip(heavy) == 400
    assert light["estimates"][0]["verdict"] == "bandwidth"
    assert heavy["estimates"][0]["verdict"] == "compute"
    assert heavy["facts"]["total"]["fp32"] == pytest.approx(100 * light["facts"]["total"]["fp32"], rel=0.01)


def test_args_are_shell_split(folder):
    # argv[1] is the first word: quoting keeps "400 x" one argument, which atoi reads as 400
    assert loop_trip(poly_of(check(folder, "--args", "'400 x' 7"))) == 400
    result = check(folder, "--args", "'unterminated")
    assert result.exit_code == 2 and "--args" in result.stderr and "Traceback" not in result.output


def test_without_args_argv_stays_unknown(folder):
    kernel = poly_of(check(folder))
    assert loop_trip(kernel) != 400


def test_profiling_args_of_the_project_configuration(folder):
    (folder / ".perflsp.toml").write_text('[profiling]\nargs = ["400"]\n')
    assert loop_trip(poly_of(check(folder))) == 400
    # --args wins over the configuration
    assert loop_trip(poly_of(check(folder, "--args", "4"))) == 4


def test_bad_profiling_args_are_one_line_errors(folder):
    (folder / ".perflsp.toml").write_text('[profiling]\nargs = "400"\n')
    result = check(folder)
    assert result.exit_code == 2
    assert "[profiling] `args` must be a list of strings" in result.stderr and result.stderr.count("\n") == 1


def test_project_config_reads_args_and_ignores_other_profiling_keys(tmp_path):
    path = tmp_path / ".perflsp.toml"
    path.write_text('[profiling]\nargs = ["-n", "4096"]\nrun_command = ["{exe}", "{args}"]\n')
    assert load_project_config(path).args == ("-n", "4096")
    path.write_text('gpus = ["h100"]\n')
    assert load_project_config(path).args is None
    path.write_text('profiling = 3\n')
    with pytest.raises(ProjectConfigError, match="must be a table"):
        load_project_config(path)
