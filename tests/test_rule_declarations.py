"""Each rule is declared once (its module's `RULE`); the registry, docs/rules/ and the settings
schema derive from the declarations, and each declared example behaves as documented."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest

from perflsp.analysis.fixes import apply_edits, build_fixes, syntax_error_count
from perflsp.analysis.lints import LINT_CODES, RULE_MODULES, run_lints
from perflsp.analysis.models import Finding
from perflsp.analysis.roofline_rules import ROOFLINE_CODES, ROOFLINE_RULES, verdict_rule
from perflsp.analysis.rule_docs import render_pages, stale_pages
from perflsp.analysis.rules import LEVELS, RULES, SEVERITIES
from perflsp.hardware import load_database
from perflsp.kernels import extract
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "rules"


@pytest.fixture(scope="module")
def gpus():
    db = load_database()
    return [db.get("rtx3080"), db.get("h100-sxm5-80gb"), db.get("a100-sxm4-80gb")]


def _lint(src: str, path: str, gpus) -> tuple[bytes, list[Finding]]:
    data = src.encode()
    tree = parse(data)
    notes: list[str] = []
    findings = run_lints(ProgramModel(data, tree, extract(data, tree, path=path)), gpus, notes=notes)
    assert notes == []
    return data, findings


def test_registry_is_derived_from_the_declarations():
    declared = [m.RULE for m in RULE_MODULES] + list(ROOFLINE_RULES)
    assert list(RULES.values()) == declared
    assert list(LINT_CODES) == [m.RULE.code for m in RULE_MODULES]
    for module in RULE_MODULES:
        rule = module.RULE
        assert (rule.code, rule.name, rule.default_severity) == (module.CODE, module.NAME, module.DEFAULT_SEVERITY)
        assert rule.name and " " not in rule.name and rule.kind == "lint"
        assert rule.default_severity in SEVERITIES
        assert len(rule.doc) > 500 and "## " in rule.doc, rule.code
        assert rule.example is not None, rule.code
        assert rule.summary and not rule.summary.endswith("."), rule.code


def test_checked_in_docs_are_what_the_declarations_generate():
    assert stale_pages(RULES.values(), DOCS) == [], \
        "docs/rules is stale: run `python -m perflsp.analysis.rules --write-docs docs/rules`"
    pages = render_pages(RULES.values())
    for rule in RULES.values():
        page = pages[rule.doc_file]
        assert rule.code in page.splitlines()[0]
        assert f"[`{rule.code}`]({rule.doc_file})" in pages["index.md"]
        if rule.example is not None:
            assert rule.example.bad.strip() in page and rule.example.good.strip() in page


def test_a_stale_page_is_named(tmp_path):
    for name, text in render_pages(RULES.values()).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert stale_pages(RULES.values(), tmp_path) == []
    (tmp_path / "occupancy-low.md").write_text("edited by hand\n", encoding="utf-8")
    (tmp_path / "retired-rule.md").write_text("# gone\n", encoding="utf-8")
    assert stale_pages(RULES.values(), tmp_path) == ["occupancy-low.md", "retired-rule.md"]


@pytest.mark.parametrize("module", RULE_MODULES, ids=lambda m: m.RULE.code)
def test_bad_example_is_reported_and_good_example_is_not(module: ModuleType, gpus):
    rule = module.RULE
    example = rule.example
    _, bad = _lint(example.bad, example.path, gpus)
    _, good = _lint(example.good, example.path, gpus)
    assert any(f.code == rule.code for f in bad), f"{rule.code}: its bad example is not reported"
    assert not any(f.code == rule.code for f in good), f"{rule.code}: its good example is reported"


@pytest.mark.parametrize("module", [m for m in RULE_MODULES if m.RULE.has_fix], ids=lambda m: m.RULE.code)
def test_fix_of_bad_example_applies_and_silences_the_rule(module: ModuleType, gpus):
    rule = module.RULE
    data, findings = _lint(rule.example.bad, rule.example.path, gpus)
    finding = next(f for f in findings if f.code == rule.code)
    assert finding.fixes == () and finding.fix_requests  # reported as a request, built below
    tree = parse(data)
    fixes = build_fixes(finding, ProgramModel(data, tree, extract(data, tree, path=rule.example.path)))
    assert fixes
    fixed = apply_edits(data, fixes[0].edits)
    assert syntax_error_count(parse(fixed)) == 0
    _, after = _lint(fixed.decode(), rule.example.path, gpus)
    assert not any(f.code == rule.code for f in after)


def test_roofline_codes_are_declared_once():
    assert ROOFLINE_CODES == ("roofline/compute-bound", "roofline/bandwidth-bound", "roofline/uncertain")
    assert [verdict_rule(v).code for v in ("compute", "bandwidth", "uncertain")] == list(ROOFLINE_CODES)
    assert {RULES[c].doc_file for c in ROOFLINE_CODES} == {"roofline.md"}
    assert RULES["roofline/uncertain"].default_severity == "hint"


def test_other_copies_of_the_roofline_codes_agree_with_the_registry():
    from perflsp.server.features.common import VERDICT_CODES
    from perflsp.server.settings import ROOFLINE_CODES as SETTINGS_CODES

    assert SETTINGS_CODES == ROOFLINE_CODES
    assert {verdict: verdict_rule(verdict).code for verdict in VERDICT_CODES} == VERDICT_CODES


def test_settings_schema_lists_exactly_the_registered_codes():
    from perflsp.server.settings import RuleLevel, vscode_configuration

    assert set(get_args(RuleLevel)) == set(LEVELS)
    rules = vscode_configuration()["properties"]["perflsp.rules"]
    assert rules["propertyNames"]["enum"] == list(RULES)
    assert list(rules["properties"]) == list(RULES)
    for code, prop in rules["properties"].items():
        assert set(prop["enum"]) == set(LEVELS)
        assert RULES[code].summary in prop["markdownDescription"]


def test_settings_schema_rejects_an_unknown_code():
    import jsonschema

    from perflsp.server.settings import vscode_configuration

    rules = dict(vscode_configuration()["properties"]["perflsp.rules"])
    schema = {k: v for k, v in rules.items() if k not in ("scope", "markdownDescription", "order")}
    jsonschema.validate({"occupancy/low": "off"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"occupancy/lo": "off"}, schema)


def test_docs_command_line(tmp_path):
    import subprocess
    import sys

    run = [sys.executable, "-m", "perflsp.analysis.rules"]
    assert subprocess.run([*run, "--check-docs", str(DOCS)], cwd=ROOT, capture_output=True).returncode == 0
    assert subprocess.run([*run, "--write-docs", str(tmp_path)], cwd=ROOT, capture_output=True).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(render_pages(RULES.values()))
    assert subprocess.run([*run, "--nope"], cwd=ROOT, capture_output=True).returncode == 2
