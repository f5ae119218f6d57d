"""The server's only door to the analysis layer: the static engine, the lint rules, the rule
registry and the fix builders. Everything else in the server calls these functions, so a change
of signature in the analysis layer is absorbed here.

The lint rules, the rule registry and the fix builders are optional imports: a build without
them still serves roofline verdicts (and says so in the log).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from tree_sitter import Tree

from perflsp.analysis.engine import ENGINE_VERSION, AnalysisOptions, AnalysisUnit, analysis_key, analyze_kernel
from perflsp.analysis.models import Finding, Fix, KernelReport
from perflsp.hardware.models import Gpu
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion
from perflsp.source.positions import LineIndex

log = logging.getLogger(__name__)

Kernel = CudaFunction | OmpRegion
ROOFLINE_DEFAULTS = {"roofline/compute-bound": "information", "roofline/bandwidth-bound": "information",
                     "roofline/uncertain": "hint"}
DOCS_FALLBACK_URL = "https://github.com/perflsp/perflsp/blob/main/docs/"

__all__ = ["ENGINE_VERSION", "AnalysisOptions", "Kernel", "analysis_key"]


@cache
def _optional(name: str) -> ModuleType | None:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        log.info("%s is not available (%s): its features are off", name, exc)
        return None


def lints_available() -> bool:
    return _optional("perflsp.analysis.lints") is not None


def fixes_available() -> bool:
    return _optional("perflsp.analysis.fixes") is not None


# --------------------------------------------------------------------------- engine


def options(preprocessed: ConstEnv | None, registers: Sequence[tuple[str, int]] = (),
            argv: Sequence[str] | None = None) -> AnalysisOptions:
    """`argv`: the program's arguments (`perflsp.profiling.args`), folded where main() parses argv."""
    return AnalysisOptions(include_env=preprocessed, registers=tuple(registers),
                           argv=tuple(argv) if argv is not None else None)


def with_includer_launches(opts: AnalysisOptions, text: Any, kernels: FileKernels) -> AnalysisOptions:
    """`opts` with the launch sites of this file's kernels in the sources that `#include` it."""
    external = includer_launches(text, kernels)
    return dataclasses.replace(opts, external_launches=external) if external else opts


def includer_launches(text: Any, kernels: FileKernels) -> tuple[LaunchSite, ...]:
    """Launch sites of this file's kernels in the sources that `#include` it (none when the
    file launches them itself or has no path)."""
    path = getattr(text, "path", None)
    resolver = getattr(text, "resolver", None)
    if not path or resolver is None or not kernels.kernels:
        return ()
    try:
        from perflsp.analysis.includers import includer_launches as find

        return find(Path(path), kernels, resolver)
    except Exception:  # noqa: BLE001 - a sibling file perflsp trips on must not take this one down
        log.exception("reading the files that include %s failed", path)
        return ()


class _BrokenUnit:
    """Stands in for an AnalysisUnit the engine could not build (every kernel is uncertain)."""

    def __init__(self, reason: str, kernels: FileKernels):
        self.reason = reason
        self.kernels = kernels


def new_unit(data: bytes, tree: Tree, kernels: FileKernels, opts: AnalysisOptions, lines: LineIndex) -> Any:
    try:
        return AnalysisUnit(data, tree, kernels, opts, lines)
    except Exception as exc:  # noqa: BLE001 - an engine bug must not take the document down
        log.exception("the static engine failed to prepare %s", kernels.path or "a document")
        return _BrokenUnit(f"the static engine failed on this file ({type(exc).__name__}: {exc})", kernels)


def key(kernel: Kernel, launches: Sequence[LaunchSite], gpus: Sequence[Gpu], opts: AnalysisOptions) -> str:
    return analysis_key(kernel, launches, gpus, opts)


def analyze(unit: Any, kernel: Kernel, gpus: Sequence[Gpu]) -> KernelReport:
    """The engine's report, or an `uncertain` one naming the failure when the engine raises."""
    if isinstance(unit, _BrokenUnit):
        return _uncertain_report(kernel, unit.kernels, gpus, unit.reason)
    try:
        return analyze_kernel(unit, kernel, gpus)
    except Exception as exc:  # noqa: BLE001
        log.warning("the static engine failed on %s: %s: %s", getattr(kernel, "name", "?"), type(exc).__name__, exc)
        return _uncertain_report(kernel, unit.kernels, gpus,
                                 f"the static engine failed on this kernel ({type(exc).__name__}: {exc})")


def _uncertain_report(kernel: Kernel, kernels: FileKernels, gpus: Sequence[Gpu], reason: str) -> KernelReport:
    from perflsp.analysis.estimate import estimate_for_gpu
    from perflsp.analysis.models import KernelFacts, OpCounts

    facts = KernelFacts(OpCounts(), None, "unknown", OpCounts(), 0.0, "unknown", uncertain=reason)
    launches = kernels.launches_of(kernel) if isinstance(kernel, CudaFunction) else []
    return KernelReport(kernel=kernel, launches=launches, facts=facts,
                        estimates=[estimate_for_gpu(facts, gpu, None, None, 0) for gpu in gpus])


# --------------------------------------------------------------------------- lints and rules


def lint_codes() -> tuple[str, ...]:
    module = _optional("perflsp.analysis.lints")
    return tuple(getattr(module, "LINT_CODES", ())) if module is not None else ()


_FILE_LEVEL_LINT_FACTS = ("constants", "aliases")  # depend only on file-level declarations and macros


def run_lints(data: bytes, tree: Tree, kernels: FileKernels, gpus: Sequence[Gpu],
              enabled: Collection[str] | None, notes: list[str] | None = None, *,
              lines: LineIndex | None = None, shared: dict[str, Any] | None = None) -> list[Finding]:
    """`perflsp.analysis.lints.run_lints`, optionally reusing what does not change between runs
    on one document: its line index (`lines`, same content as the text) and, in `shared`, the
    file-level facts of the previous run while nothing outside kernel bodies changed. Without
    those it is exactly `run_lints`."""
    module = _optional("perflsp.analysis.lints")
    if module is None:
        return []
    try:
        if lines is None and shared is None:
            return module.run_lints(data, tree, kernels, gpus, enabled=enabled, notes=notes)
        ctx = module.LintContext(data=data, tree=tree, kernels=kernels, gpus=tuple(gpus),
                                 options=module.LintOptions(), path=kernels.path)
        if lines is not None:
            ctx.__dict__["lines"] = lines
        for name in _FILE_LEVEL_LINT_FACTS if shared is not None else ():
            if name in shared:
                ctx.__dict__[name] = shared[name]
        findings = module.run_rules(ctx, enabled, notes)
        if shared is not None:
            for name in _FILE_LEVEL_LINT_FACTS:
                if name in ctx.__dict__:
                    shared[name] = ctx.__dict__[name]
        return findings
    except Exception as exc:  # noqa: BLE001 - the rules guard themselves; this guards their context
        log.warning("the lint rules failed: %s: %s", type(exc).__name__, exc)
        return []


def known_rule_codes() -> set[str] | None:
    rules = _optional("perflsp.analysis.rules")
    if rules is None:
        return None
    return set(rules.RULES)


def rule_doc_url(code: str) -> str | None:
    rules = _optional("perflsp.analysis.rules")
    if rules is None:
        return DOCS_FALLBACK_URL + "rules/roofline.md" if code.startswith("roofline/") else None
    return rules.rule_doc_url(code)


def default_severity(code: str) -> str:
    rules = _optional("perflsp.analysis.rules")
    info = rules.rule_info(code) if rules is not None else None
    if info is not None:
        return info.default_severity
    return ROOFLINE_DEFAULTS.get(code, "warning")


def rule_has_fix(code: str) -> bool:
    rules = _optional("perflsp.analysis.rules")
    info = rules.rule_info(code) if rules is not None else None
    return bool(info is not None and info.has_fix)


def rule_summary(code: str) -> str | None:
    rules = _optional("perflsp.analysis.rules")
    info = rules.rule_info(code) if rules is not None else None
    return info.summary if info is not None else None


# --------------------------------------------------------------------------- fixes


class FixUnavailable(Exception):
    """The fix builders are missing or refused this edit (the reason is the message)."""


def _fixes() -> Any:
    module = _optional("perflsp.analysis.fixes")
    if module is None:
        raise FixUnavailable("the fix builders (perflsp.analysis.fixes) are not installed")
    return module


def _call(name: str, *args: Any, **kwargs: Any) -> Fix:
    import inspect

    module = _fixes()
    function = getattr(module, name)
    if "file_kernels" in kwargs and "file_kernels" not in inspect.signature(function).parameters:
        kwargs.pop("file_kernels")
    try:
        return function(*args, **kwargs)
    except module.EditError as exc:
        raise FixUnavailable(str(exc)) from exc


def set_block_size(data: bytes, tree: Tree, site: LaunchSite, block: int, file_kernels: FileKernels | None = None) -> Fix:
    return _call("set_block_size", data, tree, site, block, file_kernels=file_kernels)


def set_launch_bounds(data: bytes, tree: Tree, kernel: CudaFunction, max_threads: int, min_blocks: int | None = None,
                      file_kernels: FileKernels | None = None) -> Fix:
    return _call("set_launch_bounds", data, tree, kernel, max_threads, min_blocks, file_kernels=file_kernels)


def set_omp_clauses(data: bytes, tree: Tree, region: OmpRegion, thread_limit: int | None = None,
                    num_teams: int | None = None) -> Fix:
    return _call("set_omp_clauses", data, tree, region, thread_limit=thread_limit, num_teams=num_teams)


def best_block_for(kernel: CudaFunction | None, gpu: Gpu, regs_per_thread: int | None = None) -> int | None:
    """The occupancy-best block size (a multiple of the warp) for `kernel` on `gpu`."""
    module = _optional("perflsp.analysis.fixes")
    if module is not None and hasattr(module, "best_block_for"):
        try:
            return int(module.best_block_for(kernel, gpu, regs_per_thread))
        except (ValueError, TypeError):
            return None
    from perflsp.hardware.occupancy import OccupancyInputError, best_block_size

    limit = None
    if kernel is not None and kernel.launch_bounds is not None and isinstance(kernel.launch_bounds.max_threads.value, int):
        limit = kernel.launch_bounds.max_threads.value
    try:
        size = best_block_size(gpu, regs_per_thread or 32, max_threads_per_block=limit).block_size
    except (OccupancyInputError, ValueError, TypeError):
        return None
    return max(gpu.warp_size, size - size % gpu.warp_size)
