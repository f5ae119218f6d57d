"""Performance lint rules: one module per rule (ruff style), each declaring its `RULE`
(`perflsp.analysis.ruledef.RuleInfo`: code, name, default severity, summary, documentation and
example; `CODE`, `NAME`, `DEFAULT_SEVERITY` are read from it) and `check(ctx) -> list[Finding]`.

`run_lints` runs the enabled rules over one parsed document. A rule reports its fixes as
`FixRequest`s (data only); the validated builders of `perflsp.analysis.fixes` turn them into edits
when asked (`build_fixes`), so typing in the editor never pays for re-parsing the file, and the
server and the CLI offer the same edits.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import ModuleType

from perflsp.analysis.fixes import with_fixes
from perflsp.analysis.lints import (
    block_size_warp_multiple,
    double_math_function,
    double_promotion,
    missing_launch_bounds,
    occupancy_low,
    uncoalesced_access,
)
from perflsp.analysis.lints.context import GpuCode, Instantiation, LintContext, LintOptions
from perflsp.analysis.models import Finding
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import FileKernels
from perflsp.kernels.program import ProgramModel

RULE_MODULES: tuple[ModuleType, ...] = (
    double_promotion,
    double_math_function,
    block_size_warp_multiple,
    occupancy_low,
    uncoalesced_access,
    missing_launch_bounds,
)
LINT_CODES: tuple[str, ...] = tuple(m.CODE for m in RULE_MODULES)

__all__ = ["LINT_CODES", "RULE_MODULES", "GpuCode", "Instantiation", "LintContext", "LintOptions", "run_lints", "run_rules"]


def run_lints(model: ProgramModel, gpus: Sequence[Gpu] = (), enabled: Collection[str] | None = None,
              options: LintOptions | None = None, notes: list[str] | None = None, *,
              subject: FileKernels | None = None, build_fixes: bool = False) -> list[Finding]:
    """Findings of the enabled rules (all when `enabled` is None) on the file of `model`, in
    document order; `subject`: the kernels to lint when not all of the file's.

    `gpus` feeds `occupancy/low` (no GPUs: that rule stays silent). A rule that fails on
    unexpected input is skipped with a line in `notes` instead of failing the whole run.
    Findings carry their fixes as requests; `build_fixes` builds and validates the edits too
    (output that shows them), against the model's whole extraction.
    """
    ctx = LintContext(model, gpus=tuple(gpus), options=options or LintOptions(), subject=subject)
    findings = run_rules(ctx, enabled, notes)
    return with_fixes(findings, model) if build_fixes else findings


def run_rules(ctx: LintContext, enabled: Collection[str] | None = None,
              notes: list[str] | None = None) -> list[Finding]:
    """`run_lints` on a context built by the caller (the server reuses file-level facts in it)."""
    findings: list[Finding] = []
    for module in RULE_MODULES:
        if enabled is not None and module.CODE not in enabled:
            continue
        try:
            findings.extend(module.check(ctx))
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the others
            if notes is not None:
                notes.append(f"lint {module.CODE} failed: {type(exc).__name__}: {exc}")
    if notes is not None:
        notes.extend(ctx.notes)
    findings.sort(key=lambda f: (f.span.start_byte, f.span.end_byte, f.code))
    return findings
