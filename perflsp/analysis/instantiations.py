"""Kernel templates judged per instantiation.

A kernel template (`template <typename T> __global__ void scale(...)`, or an OpenMP region in a
function template) is compiled once per set of template arguments the program instantiates it
with, and each instantiation is a kernel of its own: `scale<double>` moves twice the bytes of
`scale<float>` and does its arithmetic in the other precision. A kernel's report judges one
instantiation (the one its first launch or call names). Where the file's compiled code holds
several, each is judged as well, the analysis named with its arguments as an evaluation names the
instantiation it measured, so that the diagnostic, the hover and `check --json` say which verdict
belongs to which. Without compiled code (no toolchain, a failed compile) the instantiations are
those the source spells out (`source_instantiations`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from tree_sitter import Node

from perflsp.analysis.host_types import template_types
from perflsp.analysis.models import Estimate, InstantiationReport, Kernel, KernelReport
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.unit import AnalysisUnit
from perflsp.compiled.model import CompiledSource
from perflsp.compiled.names import kernel_instantiations, region_instantiations
from perflsp.kernels.definitions import defined_name, template_arguments, template_type_names, template_value_names
from perflsp.kernels.models import CudaFunction

log = logging.getLogger(__name__)

# instantiations judged per kernel at most: each is a walk of the kernel (a template instantiated
# for every numeric type is still judged in a few walks)
MAX_INSTANTIATIONS = 8


def compiled_instantiations(compiled: CompiledSource | None, kernel: Kernel, path: str | None) -> list[tuple[str, ...]]:
    """The template arguments of each instantiation of `kernel` in the compiled code (of the
    first architecture that holds any), in the compiler's order; empty for a kernel that is no
    template, or a file not compiled."""
    if compiled is None:
        return []
    for arch in sorted(compiled.units):
        unit = compiled.units[arch]
        if isinstance(kernel, CudaFunction):
            if not kernel.template_params:
                return []
            found = kernel_instantiations(unit, kernel.qualified_name, len(kernel.params))
        else:
            found = region_instantiations(unit, path, kernel.span.start.line + 1)
        if found:
            return found
    return []


def source_instantiations(unit: AnalysisUnit, kernel: Kernel) -> list[tuple[str, ...]]:
    """Without compiled code: the template arguments of the instantiations the file's text
    spells out. A kernel template's launches with every argument written (`k<double, 256><<<...>>>`),
    or naming the launching function template's own parameters where that function's calls
    write them (`k<T><<<...>>>` in `run<T>`, called as `run<float>` and `run<double>`); an OpenMP
    region in a function template of one type parameter, the types its calls pass or write
    (`scale(n, xf, ...)` with `float *xf`, `scale<double>(...)`)."""
    found: list[tuple[str, ...]] = []

    def add(arguments: tuple[str, ...]) -> None:
        if arguments and all(arguments) and not any(same_arguments(arguments, f) for f in found):
            found.append(arguments)

    model = unit.model
    if isinstance(kernel, CudaFunction):
        if not kernel.template_params or kernel.specialization_args is not None:
            return []
        for site in unit.kernels.launches_of(kernel):
            written = tuple(" ".join(model.expand(arg).split()) or arg for arg in site.template_args)
            if len(written) != len(kernel.template_params):
                continue
            launcher = model.enclosing_function(site.span.start_byte)
            own = set(model.template_type_parameters(site.span.start_byte)) if launcher is not None else set()
            if not own & set(written):
                add(written)
                continue
            for binding in _call_bindings(unit, launcher) if launcher is not None else []:
                add(tuple(binding.get(arg, arg) for arg in written))
        return [f for f in found if not set(f) & set(model.template_type_parameters(kernel.span.start_byte))]
    function = model.enclosing_function(kernel.span.start_byte)
    types = template_type_names(function) if function is not None else ()
    if len(types) != 1 or types[0] is None:
        return []  # (of several parameters, the calls' combinations are not read)
    for text, _ctype in template_types(unit, function).get(types[0], []):
        add((" ".join(text.split()),))
    return found


def _call_bindings(unit: AnalysisUnit, function: Node) -> list[dict[str, str]]:
    """For each call of the function template `function` that writes all its template
    arguments (`run<double>(n)`), its parameters' names bound to them."""
    types, values = template_type_names(function), template_value_names(function)
    names = [t or v for t, v in zip(types, values)]
    simple = defined_name(function, unit.data)
    if not names or None in names or simple is None:
        return []
    bindings: list[dict[str, str]] = []
    for call in unit.model.calls_to(simple):
        if function.start_byte <= call.start_byte < function.end_byte:
            continue  # (a recursive call)
        listed = template_arguments(call.child_by_field_name("function"))
        if listed and len(listed) == len(names):
            bindings.append({str(n): " ".join(unit.model.expand(unit.ctx.text(a)).split()) or unit.ctx.text(a)
                             for n, a in zip(names, listed)})
    return bindings


def same_arguments(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two spellings of template arguments name the same instantiation (`unsigned char,
    8ul` and `unsigned char, 8`; spaces and integer suffixes aside)."""
    def norm(arg: str) -> str:
        text = " ".join(arg.split())
        return text.rstrip("uUlL") if text[:1].isdigit() or text[:1] == "-" else text
    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


def judge_instantiations(report: KernelReport, unit: AnalysisUnit,
                         analyze: Callable[[AnalysisOptions], KernelReport]) -> list[InstantiationReport]:
    """Each instantiation of the report's kernel judged on its own (`analyze` with the options
    naming it), when the compiled code (else the source) shows two or more; none otherwise, or
    when the report already judges a named one."""
    options = unit.options
    if options.instantiation is not None:
        return []
    found = compiled_instantiations(options.compiled, report.kernel, unit.kernels.path)
    if not found and not any(u.functions for u in (options.compiled.units.values() if options.compiled else ())):
        found = source_instantiations(unit, report.kernel)
    if len(found) < 2:
        return []
    judged: list[InstantiationReport] = []
    for arguments in found[:MAX_INSTANTIATIONS]:
        try:
            named = analyze(dataclasses.replace(options, instantiation=arguments))
        except Exception as exc:  # noqa: BLE001 - the template's own report stands without it
            log.warning("the static engine failed on %s<%s>: %s: %s", report.kernel.name, ", ".join(arguments),
                        type(exc).__name__, exc)
            continue
        judged.append(InstantiationReport(instantiation_label(report.kernel.name, arguments), arguments,
                                          named.facts, named.estimates))
    return judged if len(judged) >= 2 else []


def instantiation_label(name: str, arguments: Sequence[str]) -> str:
    """`scale<double>`."""
    return f"{name}<{', '.join(arguments)}>"


def gpu_index(report: KernelReport, estimate: Estimate) -> int | None:
    """Which of the report's GPUs `estimate` (one of its own estimates) judges."""
    return next((i for i, e in enumerate(report.estimates) if e is estimate), None)


def estimates_on(report: KernelReport, estimate: Estimate) -> list[tuple[InstantiationReport, Estimate]]:
    """Each judged instantiation with its estimate on the GPU of `estimate` (one of the report's
    own); empty for a kernel judged once."""
    index = gpu_index(report, estimate)
    if index is None:
        return []
    return [(inst, inst.estimates[index]) for inst in report.instantiations if index < len(inst.estimates)]


def differing_verdicts(report: KernelReport, estimate: Estimate) -> str | None:
    """`per instantiation: scale<float> compute-bound, scale<double> bandwidth-bound` when the
    instantiations' verdicts on this GPU differ (a verdict shown for the template alone would
    hide the other); None when they agree or the kernel is judged once."""
    judged = estimates_on(report, estimate)
    if len({e.verdict for _, e in judged}) < 2:
        return None
    return "per instantiation: " + ", ".join(
        f"`{inst.label}` {e.verdict}-bound" if e.verdict != "uncertain" else f"`{inst.label}` uncertain"
        for inst, e in judged)
