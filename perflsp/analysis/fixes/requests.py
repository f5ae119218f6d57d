"""Building fixes from requests: lints describe their fixes as `FixRequest`s (data only); the
edits are built and validated here when an editor's code action, `perflsp check`'s output or a
test asks for them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from tree_sitter import Tree

from perflsp.analysis.fixes.block_size import set_block_size
from perflsp.analysis.fixes.document import EditError
from perflsp.analysis.fixes.launch_bounds import set_launch_bounds
from perflsp.analysis.fixes.omp_clauses import set_omp_clauses
from perflsp.analysis.fixes.precision import float_function_fix, float_literal_fix, square_fix
from perflsp.analysis.models import Finding, Fix, FixRequest
from perflsp.kernels.models import FileKernels, Span


def build_fix(request: FixRequest, data: bytes, tree: Tree, file_kernels: FileKernels) -> Fix:
    """The validated edit a request describes, on the text it was made for (EditError when none
    is safe). `file_kernels` is the whole file's extraction: edits are checked against it."""
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
        return set_block_size(data, tree, site, value, warp_size=request.warp_size, file_kernels=file_kernels)
    if request.action == "launch-bounds":
        kernel = next((k for k in file_kernels.kernels if _same_span(k.name_span, span)), None)
        if kernel is None:
            raise EditError("the kernel is no longer at the given range")
        return set_launch_bounds(data, tree, kernel, value, file_kernels=file_kernels)
    region = _find(file_kernels.omp_regions, span, "OpenMP region")
    return set_omp_clauses(data, tree, region, thread_limit=value, file_kernels=file_kernels)


def build_fixes(finding: Finding, data: bytes, tree: Tree, file_kernels: FileKernels) -> tuple[Fix, ...]:
    """The finding's fixes: those it carries built, then its requests that build. A preferred
    request that cannot be built hands its preference on to the next one that can."""
    built = list(finding.fixes)
    promote = False
    for request in finding.fix_requests:
        try:
            fix = build_fix(request, data, tree, file_kernels)
        except EditError:
            promote = promote or request.preferred
            continue
        if (promote or request.preferred) and not fix.preferred:
            fix = replace(fix, preferred=True)
        promote = False
        built.append(fix)
    return tuple(built)


def with_fixes(findings: Iterable[Finding], data: bytes, tree: Tree, file_kernels: FileKernels) -> list[Finding]:
    """Findings with their requested fixes built (for output that shows the edits)."""
    return [replace(f, fixes=build_fixes(f, data, tree, file_kernels), fix_requests=()) if f.fix_requests else f
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
