"""Smoke tests of the latency and size benchmarks: the generated file has the promised shape, and
each benchmark runs end to end on a small one (the figures themselves are not asserted)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from benchmarks import big_file, lsp_latency
from benchmarks.generated_cuda import generate, unlaunched_kernel
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]


def test_the_hard_case_file_has_many_kernels_and_one_launch():
    generated = generate(lines=10_000, min_kernels=500)
    data = generated.text.encode()
    assert len(generated.kernels) >= 500
    assert 10_000 <= generated.text.count("\n") < 10_200
    found = extract(data, parse(data))
    assert [k.name for k in found.kernels] == generated.kernels
    assert [site.kernel for site in found.launches] == [generated.launched]
    assert unlaunched_kernel(generated) in generated.kernels
    assert unlaunched_kernel(generated) != generated.launched
    lines = generated.text.splitlines()
    assert lines[generated.body_line(generated.launched) - 1] == "{"
    assert "int main(" in lines[generated.host_line - 3]


def test_host_helpers_launch_every_nth_kernel():
    generated = generate(size_bytes=20_000, launch_every=5)
    data = generated.text.encode()
    found = extract(data, parse(data))
    assert sorted(site.kernel for site in found.launches) == sorted([*generated.launched_by_helpers,
                                                                    generated.launched])
    assert len(generated.launched_by_helpers) == len(generated.kernels) // 5
    assert len(data) >= 20_000
    assert generate(size_bytes=20_000, launch_every=5).text == generated.text  # deterministic


def test_lsp_latency_hard_case_runs_on_a_small_file(tmp_path):
    result = asyncio.run(lsp_latency.hard_case(tmp_path, lines=150, kernels=12, edits=2, opens=1))
    assert result.kernels >= 12
    assert len(result.first_s) == 1
    assert set(result.latencies_s) == set(lsp_latency.HARD_TARGETS_MS)
    assert all(len(values) == 2 and min(values) > 0 for values in result.latencies_s.values())
    assert result.rss_mib is not None and result.rss_mib > 10
    report = "\n".join(result.report())
    assert "launched kernel" in report and "p95" in report


def test_the_independent_probe_runs_on_a_small_file(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "lsp_probe.py"), "--lines", "150",
                           "--kernels", "12", "--edits", "2", "--opens", "1"],
                          capture_output=True, text=True, timeout=300, env={"TMPDIR": str(tmp_path), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert "first diagnostics after didOpen" in done.stdout
    for case in ("launched kernel", "unlaunched kernel", "host code (main)"):
        assert f"{case}" in done.stdout
    assert "server RSS:" in done.stdout


def test_big_file_measures_a_child_process():
    wall_s, peak_mib, code, output = big_file.run_command([sys.executable, "-c", "print('x' * 1000)"], 60)
    assert code == 0 and output == 1001
    assert wall_s > 0 and peak_mib > 1
    _, _, killed, _ = big_file.run_command([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert killed is None


def test_the_loop_idioms_benchmark_reports_each_count_over_the_exact_one():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "loop_idioms.py"), "--only", "step of 2", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["ratio_to_exact"]["step of 2"]
    assert row["source"] == 1.0
    # a compiled column is the ratio, or says why there is none
    assert all(isinstance(row[b], float) and abs(row[b] - 1.0) < 0.05 or isinstance(row[b], str) for b in ("nvcc", "clang"))


def test_a_nest_clang_unrolls_whole_for_sm_90_is_read_from_its_loads_not_its_index_step():
    # clang's sm_90 code steps the `a * 7` index by 140 a trip of 20 iterations: read as bytes
    # against the 28 bytes between iterations it said 5; the trip's loads with the nest's say 20
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "loop_idioms.py"), "--only", "nest unrolled whole",
                           "--gpu", "h100-sxm5-80gb", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["ratio_to_exact"]["nest unrolled whole"]
    assert row["source"] == 1.0
    assert isinstance(row["clang"], str) or abs(row["clang"] - 1.0) < 0.05
