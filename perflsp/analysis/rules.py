"""Every diagnostic code perflsp emits: name, default severity, documentation page, fixability.

The registry is derived from the rules' own declarations (`RULE` in each lint module of
`perflsp.analysis.lints`, `perflsp.analysis.roofline_rules` for the verdicts), so the server's
`codeDescription`, `perflsp check`'s output, the `[rules]` table of `.perflsp.toml`, the settings
schema and docs/rules/ agree on what exists. Per-workspace levels
(`"precision/double-promotion" = "off"`) are validated here.

    python -m perflsp.analysis.rules --write-docs docs/rules   # regenerate docs/rules/*.md
    python -m perflsp.analysis.rules --check-docs docs/rules   # exit 1 when they are stale
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Literal

from perflsp.analysis.lints import RULE_MODULES
from perflsp.analysis.models import Finding, Severity
from perflsp.analysis.roofline_rules import ROOFLINE_RULES
from perflsp.analysis.ruledef import Example, RuleInfo, RuleKind

__all__ = ["DOCS_BASE_URL", "LEVELS", "RULES", "SEVERITIES", "Example", "Level", "RuleConfigError", "RuleInfo",
           "RuleKind", "apply_rule_levels", "enabled_codes", "parse_rule_levels", "rule_doc_url", "rule_info"]

# The one place the documentation address is spelled out; a deployment may pass its own base.
DOCS_BASE_URL = "https://github.com/perflsp/perflsp/blob/main/docs/rules/"
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "information", "hint")
Level = Literal["off", "error", "warning", "information", "hint"]
LEVELS: tuple[Level, ...] = ("off", *SEVERITIES)

# Derived: every lint module's `RULE`, then the roofline verdicts.
RULES: dict[str, RuleInfo] = {r.code: r for r in (*(m.RULE for m in RULE_MODULES), *ROOFLINE_RULES)}


class RuleConfigError(ValueError):
    """A `[rules]` table names an unknown code or level."""


def rule_info(code: str) -> RuleInfo | None:
    return RULES.get(code)


def rule_doc_url(code: str, base_url: str = DOCS_BASE_URL) -> str | None:
    """Where a code is documented (for LSP `codeDescription.href`), or None for unknown codes."""
    info = RULES.get(code)
    if info is None:
        return None
    return base_url.rstrip("/") + "/" + info.doc_file


def parse_rule_levels(table: Mapping[str, object]) -> dict[str, Level]:
    """Validate a `[rules]` table: code -> "off" | "error" | "warning" | "information" | "hint".

    Raises RuleConfigError naming every problem (unknown code with a suggestion, bad level)."""
    import difflib

    problems: list[str] = []
    levels: dict[str, Level] = {}
    for code, level in table.items():
        if code not in RULES:
            close = difflib.get_close_matches(str(code), list(RULES), n=1)
            problems.append(f"unknown rule `{code}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
            continue
        if not isinstance(level, str) or level.lower() not in LEVELS:
            problems.append(f"rule `{code}`: level must be one of {', '.join(LEVELS)} (got {level!r})")
            continue
        levels[code] = _level(level.lower())
    if problems:
        raise RuleConfigError("; ".join(problems))
    return levels


def _level(text: str) -> Level:
    return next(level for level in LEVELS if level == text)


def enabled_codes(levels: Mapping[str, str]) -> set[str]:
    """Every known code except those switched off."""
    return {code for code in RULES if levels.get(code) != "off"}


def apply_rule_levels(findings: Iterable[Finding], levels: Mapping[str, str]) -> list[Finding]:
    """Drop findings of rules switched off and re-level the others."""
    out: list[Finding] = []
    for finding in findings:
        level = levels.get(finding.code)
        if level == "off":
            continue
        severity = next((s for s in SEVERITIES if s == level), None)
        out.append(finding if severity is None or severity == finding.severity else replace(finding, severity=severity))
    return out


if __name__ == "__main__":
    from perflsp.analysis.rule_docs import main

    sys.exit(main(RULES, sys.argv[1:]))
