"""Every diagnostic code perflsp emits: name, default severity, documentation page, fixability.

The lint rules and the roofline verdicts share this registry, so the server's
`codeDescription`, `perflsp check`'s output and the `[rules]` table of `.perflsp.toml` agree on
what exists. Per-workspace levels (`"precision/double-promotion" = "off"`) are validated here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from perflsp.analysis.models import Finding, Severity

# The one place the documentation address is spelled out; a deployment may pass its own base.
DOCS_BASE_URL = "https://github.com/perflsp/perflsp/blob/main/docs/rules/"
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "information", "hint")
Level = Literal["off", "error", "warning", "information", "hint"]
LEVELS: tuple[str, ...] = ("off", *SEVERITIES)


@dataclass(frozen=True, slots=True)
class RuleInfo:
    code: str
    name: str
    default_severity: Severity
    doc_path: str  # relative to the repository root
    has_fix: bool
    summary: str
    kind: Literal["lint", "roofline"] = "lint"

    @property
    def doc_file(self) -> str:
        return self.doc_path.rsplit("/", 1)[-1]


def _doc(code: str) -> str:
    return f"docs/rules/{code.replace('/', '-')}.md"


def _rule(code: str, name: str, severity: Severity, has_fix: bool, summary: str,
          kind: Literal["lint", "roofline"] = "lint", doc: str | None = None) -> RuleInfo:
    return RuleInfo(code, name, severity, doc or _doc(code), has_fix, summary, kind)


_ROOFLINE_DOC = "docs/rules/roofline.md"

RULES: dict[str, RuleInfo] = {r.code: r for r in (
    _rule("precision/double-promotion", "double-promotion", "warning", True,
          "an unsuffixed double literal promotes float arithmetic to FP64"),
    _rule("precision/double-math-function", "double-math-function", "warning", True,
          "a double-precision math function (`pow`, `exp`, ...) called from float code"),
    _rule("launch/block-size-not-warp-multiple", "block-size-not-warp-multiple", "warning", True,
          "a block size that is not a multiple of the 32-thread warp leaves lanes idle"),
    _rule("occupancy/low", "occupancy-low", "information", True,
          "the launch shape (tiny blocks, a grid smaller than the GPU) caps occupancy"),
    _rule("memory/uncoalesced-access", "uncoalesced-access", "warning", False,
          "neighbouring threads access global memory far apart (strided by threadIdx.x)"),
    _rule("launch/missing-launch-bounds", "missing-launch-bounds", "information", True,
          "a kernel launched only with constant block sizes declares no __launch_bounds__"),
    _rule("roofline/compute-bound", "compute-bound", "information", False,
          "the kernel's arithmetic intensity reaches the GPU's ridge point", "roofline", _ROOFLINE_DOC),
    _rule("roofline/bandwidth-bound", "bandwidth-bound", "information", False,
          "the kernel's arithmetic intensity stays below the GPU's ridge point", "roofline", _ROOFLINE_DOC),
    _rule("roofline/uncertain", "uncertain", "hint", False,
          "the static engine could not classify the kernel with confidence", "roofline", _ROOFLINE_DOC),
)}


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
        levels[code] = level.lower()  # type: ignore[assignment]
    if problems:
        raise RuleConfigError("; ".join(problems))
    return levels


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
        out.append(finding if level is None or level == finding.severity else replace(finding, severity=level))
    return out
