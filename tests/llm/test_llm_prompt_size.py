"""benchmarks/prompt_size.py on a synthetic file of several kernels (the lead wires real ones)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from conftest import KERNEL, make_question

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "prompt_size.py"


def _module():
    spec = importlib.util.spec_from_file_location("prompt_size", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["prompt_size"] = module
    spec.loader.exec_module(module)
    return module


def _file_with(count: int) -> tuple[str, list]:
    kernels = [KERNEL.replace("axpy_like", f"k{i}") for i in range(count)]
    host = "int main() {\n" + "".join(f"  k{i}<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);\n" for i in range(count))
    text = "#include <cstdio>\n\n" + "\n\n".join(kernels) + "\n\n" + host + "  return 0;\n}\n"
    return text, [make_question(f"k{i}", k) for i, k in enumerate(kernels)]


def test_measure_ratios_and_budget():
    text, questions = _file_with(30)
    report = _module().measure([(q, text) for q in questions])
    assert len(report.rows) == 30 and report.fit_budget_pct == 100.0
    assert all(r.ours_tokens < r.whole_file_tokens for r in report.rows)
    assert all(r.ours_user_tokens < r.whole_file_user_tokens for r in report.rows)
    medians = [report.median_ratio(m) for m in ("code", "user", "full")]
    assert 0 < medians[0] < medians[1] < medians[2] < 1.0  # the fixed parts weigh on every prompt

    tiny = _module().measure([(q, text) for q in questions[:1]], budget_tokens=200)
    assert tiny.rows[0].ours_tokens is None and tiny.fit_budget_pct == 0.0 and not tiny.meets_targets


def test_command_line(tmp_path: Path):
    text, questions = _file_with(3)
    source = tmp_path / "demo.cu"
    source.write_text(text)
    lines = [json.dumps({"question": q.model_dump(mode="json"), "file": str(source)}) for q in questions]
    (tmp_path / "q.jsonl").write_text("\n".join(lines))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "q.jsonl"), "--json"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(report["rows"]) == 3 and report["fit_budget_pct"] == 100.0
    assert set(report["median_ratio"]) == {"full", "user", "code"}


def test_labeled_kernels(tmp_path: Path):
    """The benchmark's labeled mode on the tiny synthetic set: one question per located kernel,
    the whole file against our prompt with the same estimate, the unlocatable row skipped."""
    data = ROOT / "tests" / "data" / "llm_eval"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--labels", str(data / "labels.csv"), "--src",
                           str(data / "src"), "--tokenizer", "estimate", "--json", "--rows"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kernels"] == 3 and report["skipped"] == 1 and report["tokenizer"].startswith("estimate")
    assert report["fit_budget_pct"] == 100.0 and report["whole_file_fit_budget_pct"] == 100.0
    assert all(r["code_tokens"] < r["file_tokens"] for r in report["rows"])
    assert 0 < report["median_ratio"]["code"] < report["median_ratio"]["full"] < 1
    assert report["p90_ratio"]["full"] >= report["median_ratio"]["full"]


def test_whole_file_prompt_quotes_the_file_unnumbered():
    text, questions = _file_with(2)
    module = _module()
    seen: list[str] = []

    def count(message: str) -> int:
        seen.append(message)
        return len(message)

    module.measure([(questions[0], text)], count=count)
    assert any(text.rstrip("\n") in m for m in seen)  # the study's prompt: the file as it is
