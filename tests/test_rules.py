"""The rule registry: codes, documentation pages and links, `[rules]` levels."""

from pathlib import Path

import pytest

from perflsp.analysis.lints import LINT_CODES
from perflsp.analysis.models import Finding
from perflsp.analysis.rules import (
    DOCS_BASE_URL,
    RULES,
    RuleConfigError,
    apply_rule_levels,
    enabled_codes,
    parse_rule_levels,
    rule_doc_url,
)
from perflsp.kernels.models import Span

ROOT = Path(__file__).resolve().parents[1]


def test_registry_covers_lints_and_roofline_verdicts_with_existing_docs():
    assert set(LINT_CODES) | {"roofline/compute-bound", "roofline/bandwidth-bound", "roofline/uncertain"} == set(RULES)
    index = (ROOT / "docs" / "rules" / "index.md").read_text()
    for code, info in RULES.items():
        page = ROOT / info.doc_path
        assert page.is_file(), code
        assert code in page.read_text(), f"{page} does not name {code}"
        assert f"`{code}`" in index
        if info.kind == "lint":
            assert info.doc_file == code.replace("/", "-") + ".md"


def test_doc_urls_use_one_configurable_base():
    assert rule_doc_url("occupancy/low") == DOCS_BASE_URL + "occupancy-low.md"
    assert rule_doc_url("roofline/uncertain").endswith("/docs/rules/roofline.md")
    assert rule_doc_url("occupancy/low", "https://example.org/rules") == "https://example.org/rules/occupancy-low.md"
    assert rule_doc_url("no/such-rule") is None


def test_rule_levels_are_validated_with_suggestions():
    assert parse_rule_levels({"occupancy/low": "OFF", "precision/double-promotion": "error"}) == {
        "occupancy/low": "off", "precision/double-promotion": "error"}
    with pytest.raises(RuleConfigError) as info:
        parse_rule_levels({"occupancy/lo": "off", "memory/uncoalesced-access": "loud", "roofline/uncertain": 3})
    message = str(info.value)
    assert "did you mean `occupancy/low`" in message
    assert "got 'loud'" in message and "got 3" in message


def test_levels_drop_and_relevel_findings():
    span = Span(0, 1)
    findings = [Finding("occupancy/low", "a", span, "information"),
                Finding("precision/double-promotion", "b", span, "warning"),
                Finding("memory/uncoalesced-access", "c", span, "warning")]
    levels = {"occupancy/low": "off", "precision/double-promotion": "error"}
    out = apply_rule_levels(findings, levels)
    assert [(f.code, f.severity) for f in out] == [("precision/double-promotion", "error"),
                                                   ("memory/uncoalesced-access", "warning")]
    assert "occupancy/low" not in enabled_codes(levels) and "roofline/uncertain" in enabled_codes(levels)
