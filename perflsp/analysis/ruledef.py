"""What a rule declares about itself (ruff's layout: one module per rule holds all of it).

Each lint module of `perflsp.analysis.lints` and the roofline module `perflsp.analysis.roofline_rules`
declare one `RuleInfo` per diagnostic code: its name, default severity, summary, whether a fix is
offered, its documentation and a bad/good example. The registry (`perflsp.analysis.rules`), the
pages under docs/rules/ and the settings schema are derived from these declarations.

This module imports only the models, so that rule modules and the registry can both use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from perflsp.analysis.models import Severity

RuleKind = Literal["lint", "roofline"]


@dataclass(frozen=True, slots=True)
class Example:
    """Code the rule reports (`bad`) and the same code written the way the rule asks (`good`).

    Both are whole programs (kernels and the host code that launches them) in a file named
    `path`: tests lint them and check the rule fires on `bad` and stays silent on `good`."""

    bad: str
    good: str
    path: str = "example.cu"  # the suffix selects the language (`.c` is C)

    @property
    def fence(self) -> str:
        """The Markdown code-fence language of the example."""
        return "c" if self.path.endswith(".c") else "cuda"


@dataclass(frozen=True, slots=True)
class RuleInfo:
    code: str  # stable, e.g. "precision/double-promotion"
    name: str  # short name (SARIF `name`), e.g. "double-promotion", "occupancy-low"
    default_severity: Severity
    has_fix: bool
    summary: str  # one line, lower case, no final period
    doc: str = ""  # Markdown sections of the rule's page (after its title and header line)
    example: Example | None = None
    fix_note: str = ""  # shown after "Fix: yes" on the page, e.g. "insert `__launch_bounds__(N)`"
    applies_to: str = ""  # shown on the page's header line, e.g. "`__global__` kernels"
    kind: RuleKind = "lint"
    page: str | None = None  # the page under docs/rules/; default: the code with "/" as "-"

    @property
    def doc_file(self) -> str:
        return self.page or self.code.replace("/", "-") + ".md"

    @property
    def doc_path(self) -> str:
        """The page, relative to the repository root."""
        return "docs/rules/" + self.doc_file
