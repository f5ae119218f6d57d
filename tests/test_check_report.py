"""`perflsp.analysis.report`: the per-file check result the CLI (and the server) build on."""

from __future__ import annotations

from pathlib import Path

import perflsp.analysis.pipeline as pipeline
from perflsp.analysis.report import (
    CheckSettings,
    at_or_above,
    check_document,
    file_check_json,
    verdict_summary,
)
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]
DB = load_database()
H100, A100 = DB.get("h100"), DB.get("a100-sxm4-40gb")


def checked(path: Path, settings: CheckSettings | None = None, gpus=(H100,)):
    data = path.read_bytes()
    tree = parse(data)
    return check_document(data, tree, extract(data, tree, path=str(path)), list(gpus), settings or CheckSettings())


def test_one_verdict_per_kernel_and_gpu_with_findings_in_order():
    result = checked(ROOT / "examples" / "lints" / "precision_slips.cu", gpus=(H100, A100))
    assert [k.name for k in result.kernels] == ["halve", "square_pow", "damped_wave"]
    assert [(v.kernel.name, v.gpu.id) for v in result.verdicts][:2] == [("halve", "h100-sxm5-80gb"), ("halve", "a100-sxm4-40gb")]
    starts = [f.span.start_byte for f in result.findings]
    assert starts == sorted(starts)
    verdict = result.verdicts[0]
    assert verdict.finding.code == f"roofline/{verdict.estimate.verdict}-bound"
    assert verdict.finding.message == verdict_summary(verdict.estimate, verdict.kernel.facts)
    assert verdict.finding.span == verdict.kernel.kernel.name_span


def test_rule_levels_relevel_and_silence():
    settings = CheckSettings(rule_levels={"precision/double-promotion": "error", "roofline/compute-bound": "off",
                                          "roofline/bandwidth-bound": "off", "precision/double-math-function": "off"})
    result = checked(ROOT / "examples" / "lints" / "precision_slips.cu", settings)
    codes = {(f.code, f.severity) for f in result.findings}
    assert codes == {("precision/double-promotion", "error")}
    assert all(v.finding is None for v in result.verdicts if v.estimate.verdict != "uncertain")
    assert len(result.kernels) == 3  # kernels are still analysed and reported


def test_engine_failure_becomes_uncertain_with_the_reason(monkeypatch):
    def broken(unit, kernel, gpus):
        raise ValueError("synthetic failure")

    monkeypatch.setattr(pipeline, "analyze_kernel", broken)  # the one pipeline every front end uses
    result = checked(ROOT / "examples" / "cuda" / "saxpy.cu")
    verdict = result.verdicts[0]
    assert verdict.estimate.verdict == "uncertain"
    assert verdict.finding.code == "roofline/uncertain" and verdict.finding.severity == "hint"
    assert "engine error: ValueError: synthetic failure" in verdict.finding.message
    data = file_check_json(result)
    assert data["kernels"][0]["facts"]["uncertain"] == "engine error: ValueError: synthetic failure"
    assert data["kernels"][0]["estimates"][0]["verdict"] == "uncertain"


def test_fail_on_ordering():
    assert at_or_above("error", "warning") and at_or_above("warning", "warning")
    assert not at_or_above("information", "warning") and at_or_above("hint", "hint")
    assert not at_or_above("error", "none")


def test_fix_edits_are_ranges_in_json():
    result = checked(ROOT / "examples" / "lints" / "precision_slips.cu")
    data = file_check_json(result)
    promotion = next(f for f in data["findings"] if f["code"] == "precision/double-promotion")
    assert promotion["line"] == 19 and promotion["column"] == 23
    edit = promotion["fixes"][0]["edits"][0]
    assert edit["range"]["start"]["line"] == 18 and edit["new_text"].endswith("f")
