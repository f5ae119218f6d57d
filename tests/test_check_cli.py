"""`perflsp check`: text, JSON and SARIF on the examples, exit codes, configuration, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from perflsp.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
LINTS = EXAMPLES / "lints"
SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
EXPECTED = tomllib.loads((EXAMPLES / "expected.toml").read_text())


def run(*args: str, cwd: Path = ROOT):
    old = Path.cwd()
    os.chdir(cwd)  # check reads .perflsp.toml from the current directory
    try:
        return CliRunner().invoke(cli, ["check", *args])
    finally:
        os.chdir(old)


def check_json(*args: str, cwd: Path = ROOT) -> dict:
    result = run("--json", *args, cwd=cwd)
    assert result.exit_code in (0, 1, 3), result.output
    return json.loads(result.stdout)


def lint_findings(report: dict) -> set[tuple[str, int, str]]:
    return {(Path(f["path"]).relative_to(ROOT).as_posix() if Path(f["path"]).is_absolute() else f["path"],
             finding["line"], finding["code"])
            for f in report["files"] for finding in f["findings"] if not finding["code"].startswith("roofline/")}


def test_lint_examples_raise_exactly_the_expected_codes():
    report = check_json("examples/lints")
    found = lint_findings(report)
    required = {(e["file"], e["line"], e["rule"]) for e in EXPECTED["lint"] if not e["optional"]}
    optional = {(e["file"], e["line"], e["rule"]) for e in EXPECTED["lint"] if e["optional"]}
    assert required <= found, f"missing: {required - found}"
    assert found <= required | optional, f"unexpected: {found - required - optional}"


def test_clean_examples_raise_only_verdicts():
    report = check_json(*EXPECTED["clean"]["files"])
    assert report["summary"]["files"] == len(EXPECTED["clean"]["files"])
    assert lint_findings(report) == set()
    codes = {f["code"] for file in report["files"] for f in file["findings"]}
    assert codes and codes <= {"roofline/compute-bound", "roofline/bandwidth-bound", "roofline/uncertain"}


def test_json_shape_per_kernel_and_gpu():
    report = check_json("examples/cuda/saxpy.cu", "examples/openmp/dot_omp.cpp", "--gpu", "h100,a100-sxm4-40gb")
    assert [g["id"] for g in report["gpus"]] == ["h100-sxm5-80gb", "a100-sxm4-40gb"]
    assert set(report) >= {"version", "engine", "gpus", "fail_on", "files", "skipped", "summary"}
    kernels = [k for f in report["files"] for k in f["kernels"]]
    assert {k["name"] for k in kernels} == {"saxpy", "dot@l12"}
    for kernel in kernels:
        assert set(kernel) >= {"name", "kind", "line", "range", "launch_lines", "facts", "estimates"}
        assert [e["gpu"] for e in kernel["estimates"]] == ["h100-sxm5-80gb", "a100-sxm4-40gb"]
        for estimate in kernel["estimates"]:
            assert estimate["verdict"] in ("compute", "bandwidth", "uncertain")
            assert estimate["ridge"]["fp32"] > 0 and "fp32" in estimate["intensity"]
            assert estimate["summary"].startswith(f"{estimate['verdict']}-bound on {estimate['gpu_name']}")
    verdict_findings = [f for file in report["files"] for f in file["findings"] if f["code"].startswith("roofline/")]
    assert len(verdict_findings) == 4  # 2 kernels x 2 GPUs
    assert all(f["severity"] == "information" and f["doc_url"].endswith("roofline.md") for f in verdict_findings)
    assert report["summary"]["kernels"] == 2
    assert sum(report["summary"]["verdicts"].values()) == 4


def test_text_output_lines():
    result = run("examples/lints/precision_slips.cu")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    verdict = next(line for line in lines if " halve — " in line)
    assert verdict.startswith("examples/lints/precision_slips.cu:15 halve — ")
    assert "-bound on H100 SXM5 80GB · " in verdict and " < ridge " in verdict
    assert "examples/lints/precision_slips.cu:19:23: warning precision/double-promotion: " in result.stdout
    assert "\x1b[" not in result.stdout  # no colour codes when stdout is not a terminal
    assert lines[-1].startswith("1 file, 3 kernels; 3 verdicts (1 compute-bound, 2 bandwidth-bound, 0 uncertain); ")


def test_summary_counts_kernels_and_verdicts_apart_in_the_right_number(monkeypatch):
    monkeypatch.chdir(ROOT)
    # a kernel has one verdict per GPU: 1 kernel, 2 verdicts; singular nouns for 1
    result = run("--no-compile", "--gpu", "h100,rtx3080", "examples/cuda/saxpy.cu")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith(
        "1 file, 1 kernel; 2 verdicts on 2 GPUs (0 compute-bound, 2 bandwidth-bound, 0 uncertain); 2 information; ")
    explained = CliRunner().invoke(cli, ["explain", "--static", "--no-compile", "--gpu", "h100", "examples/cuda/saxpy.cu"])
    assert "- per work item: 2 loads (8 B) + 1 store (4 B), 2 FP32 FLOP" in explained.stdout


def test_fail_on_levels():
    assert run("examples/lints", "--fail-on", "warning").exit_code == 1
    assert run("examples/lints").exit_code == 0  # default: error
    assert run("examples/lints", "--fail-on", "none").exit_code == 0
    # verdicts are informational: a clean file fails only from `information` down
    assert run("examples/cuda/saxpy.cu", "--fail-on", "warning").exit_code == 0
    assert run("examples/cuda/saxpy.cu", "--fail-on", "information").exit_code == 1


def test_rules_from_config_and_command_line(tmp_path):
    (tmp_path / ".perflsp.toml").write_text(
        'gpus = ["a100-sxm4-40gb"]\n[rules]\n"precision/double-promotion" = "error"\n"roofline/bandwidth-bound" = "off"\n')
    target = str(LINTS / "precision_slips.cu")
    report = check_json(target, cwd=tmp_path)
    assert [g["id"] for g in report["gpus"]] == ["a100-sxm4-40gb"]
    codes = {(f["code"], f["severity"]) for f in report["files"][0]["findings"]}
    assert ("precision/double-promotion", "error") in codes
    assert not any(code == "roofline/bandwidth-bound" for code, _ in codes)
    assert run(target, cwd=tmp_path).exit_code == 1  # an error now, at the default --fail-on error
    overridden = check_json(target, "--rule", "precision/double-promotion=off", "--gpu", "h100", cwd=tmp_path)
    assert not any(f["code"] == "precision/double-promotion" for f in overridden["files"][0]["findings"])
    assert [g["id"] for g in overridden["gpus"]] == ["h100-sxm5-80gb"]


def test_bad_configuration_is_one_line(tmp_path):
    (tmp_path / ".perflsp.toml").write_text('[rules]\n"occupancy/lo" = "off"\n')
    result = run(str(LINTS / "launch_slips.cu"), cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "did you mean `occupancy/low`" in result.stderr
    bad_rule = run(str(LINTS / "launch_slips.cu"), "--rule", "occupancy/low=loud")
    assert bad_rule.exit_code == 2 and "level must be one of" in bad_rule.stderr


@pytest.mark.parametrize(("config", "message"), [
    ('# targets\ngpus = ["h100",\n', ":2: invalid TOML: Invalid value (at the end of the file)"),
    ('[rules]\n"occupancy/low" = "off"\n"occupancy/lo" = "off"\n', ":3: [rules]: unknown rule `occupancy/lo`"),
    ('# targets\ngpus = ["h1000"]\n', ":2: gpus: unknown GPU 'h1000'; did you mean"),
    ('[profiling]\nenabled = true\nargs = "400"\n', ":3: [profiling] `args` must be a list of strings"),
    ('gpus = ["mine"]\n[[gpu]]\nid = "mine"\nvendor = "NVIDIA"\nsm_count = 10\nmemory_bandwidth_gbs = -5\n',
     ":6: [[gpu]] #1 'mine': memory_bandwidth_gbs: must be > 0 (got -5)"),
    ('x = 1\nx = 2\n', ":2:6: invalid TOML: Cannot overwrite a value"),
])
def test_configuration_errors_name_the_file_and_the_line(tmp_path, config, message):
    path = tmp_path / ".perflsp.toml"
    path.write_text(config)
    result = run(str(EXAMPLES / "cuda" / "saxpy.cu"), cwd=tmp_path)
    assert result.exit_code == 2 and f"{path}{message}" in result.stderr, result.stderr
    assert "Traceback" not in result.output


def test_unknown_gpu_suggests_and_exits_2():
    result = run("examples/cuda/saxpy.cu", "--gpu", "h1000")
    assert result.exit_code == 2
    assert result.stderr.startswith("perflsp: error: unknown GPU 'h1000'; did you mean ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_user_gpus_file():
    report = check_json("examples/cuda/saxpy.cu", "--gpus-file", "examples/gpus/rtx3080-study.toml",
                        "--gpu", "rtx3080-study")
    estimate = report["files"][0]["kernels"][0]["estimates"][0]
    assert estimate["gpu"] == "rtx3080-study" and round(estimate["ridge"]["fp32"], 4) == 32.9706


def test_broken_files_are_reported_and_skipped(tmp_path):
    binary = tmp_path / "blob.cu"
    binary.write_bytes(b"\x7fELF\x00\x00\x01" * 20)
    broken = tmp_path / "broken.cu"
    broken.write_text("__global__ void half_written(float *x, int n) {\n  int i = threadIdx.x\n  if (i < n) x[i] = 2.0f * x[i]\n"
                      "}\n}}}\n#if\n__global__ void after(float *y) { y[threadIdx.x] = 1.0f; }\n")
    clean = EXAMPLES / "cuda" / "saxpy.cu"
    result = run(str(binary), str(broken), str(clean), str(tmp_path / "missing.cu"), "--json")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    report = json.loads(result.stdout)
    skipped = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert skipped == {"blob.cu": "binary file (NUL bytes)", "missing.cu": "no such file or directory"}
    assert f"skipped {binary}: binary file (NUL bytes)" in result.stderr
    files = {Path(f["path"]).name: f for f in report["files"]}
    assert set(files) == {"broken.cu", "saxpy.cu"}
    assert any("syntax errors" in note for note in files["broken.cu"]["notes"])
    assert files["saxpy.cu"]["kernels"][0]["name"] == "saxpy"
    # findings still decide the exit code when some inputs are unreadable
    assert run(str(binary), str(LINTS), "--fail-on", "warning").exit_code == 1


def test_sarif_is_valid_and_complete(tmp_path):
    result = run("examples/lints", "examples/openmp/dot_omp.cpp", "--sarif", "--gpu", "h100,rtx3080")
    assert result.exit_code == 0, result.output
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)
    run_ = log["runs"][0]
    assert log["version"] == "2.1.0" and run_["columnKind"] == "utf16CodeUnits"
    rules = {r["id"]: r for r in run_["tool"]["driver"]["rules"]}
    assert rules["precision/double-promotion"]["helpUri"].endswith("precision-double-promotion.md")
    assert rules["precision/double-promotion"]["defaultConfiguration"]["level"] == "warning"
    assert rules["roofline/compute-bound"]["defaultConfiguration"]["level"] == "note"
    results = run_["results"]
    for r in results:
        assert run_["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        location = r["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "SRCROOT"
        assert not location["artifactLocation"]["uri"].startswith(("/", "file:"))
    promotion = next(r for r in results if r["ruleId"] == "precision/double-promotion")
    assert promotion["level"] == "warning"
    region = promotion["locations"][0]["physicalLocation"]["region"]
    assert (promotion["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], region["startLine"],
            region["startColumn"]) == ("examples/lints/precision_slips.cu", 19, 23)
    verdicts = [r for r in results if r["ruleId"].startswith("roofline/")]
    assert len(verdicts) == 2 * 8  # 8 kernels and regions x 2 GPUs
    assert {v["properties"]["gpu"] for v in verdicts} == {"h100-sxm5-80gb", "rtx-3080-10gb"}
    assert all(v["level"] == "note" and v["properties"]["intensity"]["fp32"] is not None for v in verdicts)
    assert len({r["partialFingerprints"]["perflspFinding/v1"] for r in results}) == len(results)


def test_sarif_columns_count_utf16_units(tmp_path):
    source = tmp_path / "wide.cu"
    prefix = "    y[i] = /* ü😀 */ x[i] * "
    source.write_text("__global__ void wide(const float *x, float *y)\n{\n    int i = threadIdx.x;\n"
                      f"{prefix}0.5;\n}}\n", encoding="utf-8")
    result = run(str(source), "--sarif", "--sarif-root", str(tmp_path), "--rule", "roofline/bandwidth-bound=off",
                 "--rule", "roofline/compute-bound=off")
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)
    promotion = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "precision/double-promotion")
    location = promotion["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "wide.cu"
    assert location["region"]["startLine"] == 4
    assert location["region"]["startColumn"] == len(prefix.encode("utf-16-le")) // 2 + 1
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["roofline/compute-bound"]["defaultConfiguration"]["enabled"] is False


def test_sarif_outside_root_uses_absolute_uri_and_output_file(tmp_path):
    out = tmp_path / "report.sarif"
    result = run(str(EXAMPLES / "cuda" / "saxpy.cu"), "--sarif", "--sarif-root", str(tmp_path), "-o", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    log = json.loads(out.read_text())
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == (EXAMPLES / "cuda" / "saxpy.cu").resolve().as_uri()
    assert "1 file, 1 kernel; 1 verdict " in result.stderr


def test_json_and_sarif_are_exclusive():
    result = run("examples/cuda/saxpy.cu", "--json", "--sarif")
    assert result.exit_code == 2 and "exclusive" in result.stderr


def test_real_subprocess_exit_code_and_clean_streams(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "perflsp", "check", "--json", "--fail-on", "warning", "examples/lints"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["failing"] == report["summary"]["findings"]["warning"] > 0
    assert "Traceback" not in proc.stderr


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    import perflsp.cli.check_cmd as check_cmd

    for i in range(check_cmd.PROGRESS_MIN_FILES):
        (tmp_path / f"k{i}.cu").write_text(f"__global__ void k{i}(float *x) {{ x[threadIdx.x] *= 2.0f; }}\n")
    terminal = io.StringIO()
    monkeypatch.setattr(check_cmd, "stderr", Console(file=terminal, force_terminal=True, width=100))
    assert run(str(tmp_path), "--json").exit_code == 0
    assert "checking" in terminal.getvalue() and f"{check_cmd.PROGRESS_MIN_FILES}/{check_cmd.PROGRESS_MIN_FILES}" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    assert run(str(tmp_path), "--json", "--no-progress").exit_code == 0
    assert "checking" not in terminal.getvalue()


def test_a_run_freezes_its_results_between_files_and_gives_the_same_results(monkeypatch):
    # a corpus run keeps every file's results until it ends: they are frozen out of the garbage
    # collector's full passes every few files; the results are those of a run without it, and
    # the collector is as it was afterwards
    import gc

    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import run as check_cmd
    from perflsp.hardware import load_database

    files, _ = check_cmd.source_paths([Path(__file__).resolve().parents[1] / "examples"])
    gpus = [load_database().get("h100")]

    def digest(run: check_cmd.CheckRun) -> list[tuple[str, list[tuple[str, str, float]]]]:
        return [(str(path), [(r.name, e.verdict, e.confidence) for r in check.kernels for e in r.estimates])
                for path, check in run.files]

    monkeypatch.setattr(check_cmd, "_FREEZE_EVERY", 10**9)
    plain = digest(check_cmd.check_paths(files, gpus, CheckSettings()))
    monkeypatch.setattr(check_cmd, "_FREEZE_EVERY", 2)
    frozen_during: list[int] = []
    frozen = check_cmd.check_paths(files, gpus, CheckSettings(), progress=lambda _: frozen_during.append(gc.get_freeze_count()))
    assert digest(frozen) == plain and len(plain) >= 10
    assert max(frozen_during) > frozen_during[0]  # frozen as the run went on
    assert gc.get_freeze_count() == 0
