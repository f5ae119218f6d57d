"""The roofline verdicts as diagnostic codes: `roofline/compute-bound`, `roofline/bandwidth-bound`,
`roofline/uncertain`, declared once (the registry, docs/rules/roofline.md and the settings derive
from here).

They are not lints: they are the static engine's verdict on each kernel or OpenMP target region,
one per configured GPU, shown as a diagnostic on the kernel's name.
"""

from __future__ import annotations

from perflsp.analysis.models import VerdictKind
from perflsp.analysis.ruledef import RuleInfo

_DOC = """\
These are not lints: they are the static roofline engine's verdict on each kernel or OpenMP
target region, one per configured GPU, shown as a diagnostic on the kernel's name.

## The verdict

For every kernel the engine estimates, per work item and per launch:

- operations by precision (FP64, FP32, FP16 FLOP; INT32 operations), an FMA counting 2;
- the DRAM bytes the launch moves (compulsory traffic, adjusted for reuse and caching).

Their ratio is the **arithmetic intensity** of each precision (operations per DRAM byte). Each
GPU has a **ridge point** per precision: its peak rate divided by its memory bandwidth
(`perflsp gpus show NAME` prints them). Then, per GPU:

- **compute-bound** when *any* precision's intensity reaches that precision's ridge: that unit
  saturates before memory does. The message names the deciding precision;
- **bandwidth-bound** when every precision stays below its ridge: memory bandwidth limits the
  kernel, and extra arithmetic is nearly free;
- **uncertain** when the engine could not understand enough of the kernel (unknown trip counts it
  cannot bound, calls it cannot see, data-dependent control flow) to place it with confidence.

The same kernel can be compute-bound on a GeForce card (FP64 ridge below 1 FLOP/B) and
bandwidth-bound on an H100 (FP64 ridge about 10 FLOP/B), so the verdict always names the GPU:
`compute-bound on RTX 3080 · FP64 intensity 2.0 ≥ ridge 0.94 FLOP/B · 100% occupancy`.

## Evidence and assumptions

Every verdict carries its evidence (counts, trip counts and where each came from) and the
assumptions it made ("trip count of `k` loop unknown: assumed 64"); hover shows them. A verdict
is marked `static`, `llm` (refined by the configured LLM) or `measured` (Nsight Compute), never
presenting an estimate as a measurement.
"""

_PAGE = "roofline.md"
_FIX_NOTE = "code actions suggest launch changes separately"

COMPUTE_BOUND = RuleInfo(
    code="roofline/compute-bound", name="compute-bound", default_severity="information", has_fix=False,
    summary="the kernel's arithmetic intensity reaches the GPU's ridge point", doc=_DOC, fix_note=_FIX_NOTE,
    kind="roofline", page=_PAGE)
BANDWIDTH_BOUND = RuleInfo(
    code="roofline/bandwidth-bound", name="bandwidth-bound", default_severity="information", has_fix=False,
    summary="the kernel's arithmetic intensity stays below the GPU's ridge point", doc=_DOC, fix_note=_FIX_NOTE,
    kind="roofline", page=_PAGE)
UNCERTAIN = RuleInfo(
    code="roofline/uncertain", name="uncertain", default_severity="hint", has_fix=False,
    summary="the static engine could not classify the kernel with confidence", doc=_DOC, fix_note=_FIX_NOTE,
    kind="roofline", page=_PAGE)

ROOFLINE_RULES: tuple[RuleInfo, ...] = (COMPUTE_BOUND, BANDWIDTH_BOUND, UNCERTAIN)
ROOFLINE_CODES: tuple[str, ...] = tuple(rule.code for rule in ROOFLINE_RULES)
_BY_VERDICT: dict[VerdictKind, RuleInfo] = {"compute": COMPUTE_BOUND, "bandwidth": BANDWIDTH_BOUND,
                                             "uncertain": UNCERTAIN}


def verdict_rule(verdict: VerdictKind) -> RuleInfo:
    """The code a verdict is published under (`"compute"` -> `roofline/compute-bound`)."""
    return _BY_VERDICT[verdict]
