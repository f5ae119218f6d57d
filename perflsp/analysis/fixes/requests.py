"""Building fixes from requests: lints describe their fixes as `FixRequest`s (data only); the
edits are built and validated here when an editor's code action, `perflsp check`'s output or a
test asks for them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from perflsp.analysis.fixes.block_size import set_block_size
from perflsp.analysis.fixes.document import EditError
from perflsp.analysis.fixes.launch_bounds import set_launch_bounds
from perflsp.analysis.fixes.omp_clauses import set_omp_clauses
from perflsp.analysis.fixes.precision import float_function_fix, float_literal_fix, square_fix
from perflsp.analysis.models import Finding, Fix, FixRequest
from perflsp.kernels.models import Span
from perflsp.kernels.program import ProgramModel


def build_fix(request: FixRequest, model: ProgramModel) -> Fix:
    """The validated edit a request describes, on the text it was made for (`model`: that
    file's program model, its whole extraction; EditError when no edit is safe)."""
    data, tree, file_kernels = model.data, model.tree, model.kernels
    span = request.span
    if request.action == "float-literal":
        return float_literal_fix(data, tree, span)
    if request.action == "float-function":
        return float_function_fix(data, tree, span, request.language)
    if request.action == "square":
        return square_fix(data, tree, span)
    value = request.value
    if value is None:
        raise EditError(f"a `{request.action}` fix needs a value")
    if request.action == "block-size":
        site = _find(file_kernels.launches, span, "launch")
        return set_block_size(model, site, value, warp_size=request.warp_size)
    if request.action == "launch-bounds":
        kernel = next((k for k in file_kernels.kernels if _same_span(k.name_span, span)), None)
        if kernel is None:
            raise EditError("the kernel is no longer at the given range")
        return set_launch_bounds(model, kernel, value)
    region = _find(file_kernels.omp_regions, span, "OpenMP region")
    return set_omp_clauses(model, region, thread_limit=value)


def build_fixes(finding: Finding, model: ProgramModel) -> tuple[Fix, ...]:
    """The finding's fixes: those it carries built, then its requests that build. A preferred
    request that cannot be built hands its preference on to the next one that can."""
    built = list(finding.fixes)
    promote = False
    for request in finding.fix_requests:
        try:
            fix = build_fix(request, model)
        except EditError:
            promote = promote or request.preferred
            continue
        if (promote or request.preferred) and not fix.preferred:
            fix = replace(fix, preferred=True)
        promote = False
        built.append(fix)
    return tuple(built)


def with_fixes(findings: Iterable[Finding], model: ProgramModel) -> list[Finding]:
    """Findings with their requested fixes built (for output that shows the edits)."""
    return [replace(f, fixes=build_fixes(f, model), fix_requests=()) if f.fix_requests else f
            for f in findings]


class _Spanned(Protocol):
    @property
    def span(self) -> Span: ...


_S = TypeVar("_S", bound=_Spanned)


def _find(items: Sequence[_S], span: Span, what: str) -> _S:
    for item in items:
        if _same_span(item.span, span):
            return item
    raise EditError(f"no {what} at the given range any more (stale request?)")


def _same_span(a: Span, b: Span) -> bool:
    return (a.start_byte, a.end_byte) == (b.start_byte, b.end_byte)
