"""`workspace/executeCommand` handlers. Every command takes one JSON object argument (shapes in
docs/server.md) and returns JSON.

- perflsp.explainKernel {uri, kernel, quiet?}   -> {uri, kernel, markdown, headline, llm, llmMessage, source}
- perflsp.profileKernel {uri, kernel, quiet?}   -> {uri, kernel, status, message}
- perflsp.askLaunchParameters {uri, kernel}     -> {uri, kernel, launches, suggestions}
- perflsp.listGpus {}                           -> {gpus: [...], selected: [ids]}
- perflsp.setGpus {gpus: [names]}               -> {gpus: [ids]}
- perflsp.rooflineData {scope?: open|workspace, uri?} -> {gpus, kernels, skipped}
- perflsp.status {}                             -> the perflsp/status payload
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from perflsp.analysis.models import Estimate, KernelReport
from perflsp.hardware.models import Gpu
from perflsp.kernels.models import CudaFunction, FileKernels
from perflsp.server import engine_adapter as engine
from perflsp.server.features import status
from perflsp.server.features.common import anchor_span, closest_precision, kernel_name, short_verdict
from perflsp.server.features.hover import kernel_markdown
from perflsp.server.progress import progress
from perflsp.server.text import path_of

log = logging.getLogger(__name__)


class CommandError(JsonRpcInvalidParams):
    pass


def _argument(args: list[Any]) -> dict[str, Any]:
    if not args:
        return {}
    if isinstance(args[0], dict):
        return args[0]
    if len(args) >= 2 and all(isinstance(a, str) for a in args[:2]):  # [uri, kernel]
        return {"uri": args[0], "kernel": args[1]}
    raise CommandError("expected one JSON object argument")


async def run(ls: Any, command: str, args: list[Any]) -> Any:
    arg = _argument(args)
    handler = _HANDLERS[command]
    return await handler(ls, arg)


# --------------------------------------------------------------------------- kernels


async def _report(ls: Any, arg: dict[str, Any]) -> tuple[Any, KernelReport]:
    uri, name = arg.get("uri"), arg.get("kernel")
    if not isinstance(uri, str) or not isinstance(name, str):
        raise CommandError("`uri` and `kernel` (strings) are required")
    snap = await ls.snapshot(uri)
    if snap is None:
        raise CommandError(f"{uri} is not open, or perflsp does not analyse it (perflsp.enable / include / exclude)")
    item = snap.kernel_named(name)
    report = snap.report_for(item) if item is not None else None
    if report is None:
        raise CommandError(f"no kernel `{name}` in {uri}")
    return snap, report


async def explain_kernel(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    snap, report = await _report(ls, arg)
    llm_state, reason = status.llm_status(snap.config)
    headline = " | ".join(e.headline() for e in report.estimates)
    markdown = kernel_markdown(report) + "\n\n---\n\n" + (
        f"*LLM advisor: off — {reason}. This explanation is the static engine's.*")
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(
            type=lsp.MessageType.Info,
            message=f"{kernel_name(report.kernel)}: {headline}. (LLM advisor off: {reason})"))
    return {"uri": snap.uri, "kernel": kernel_name(report.kernel), "markdown": markdown, "headline": headline,
            "llm": llm_state, "llmMessage": reason, "source": "static"}


async def profile_kernel(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    snap, report = await _report(ls, arg)
    state, reason = status.profiling_status(snap.config)
    name = kernel_name(report.kernel)
    if state == "off":
        message = (f"Profiling is not enabled ({reason}). To enable it, set perflsp.profiling.enabled = true and "
                   "perflsp.profiling.buildCommand / runCommand in your user settings (or in a trusted workspace); "
                   "see docs/profiling.md.")
        result = {"status": "disabled", "message": message}
    else:
        path = path_of(snap.uri)
        message = (f"Profiling from the editor is not wired in this build; run "
                   f"`perflsp profile run {path or '<file>'} --kernel {name}` in a terminal (it uses the same settings).")
        result = {"status": "unavailable", "message": message}
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=message))
    return {"uri": snap.uri, "kernel": name, **result}


async def ask_launch_parameters(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    snap, report = await _report(ls, arg)
    kernel = report.kernel
    launches = [{"range": site.span.to_json(), "grid": site.grid.text, "block": site.block.text,
                 "gridValue": _json_value(site.grid.value), "blockValue": _json_value(site.block.value)}
                for site in report.launches]
    suggestions = []
    for gpu in snap.config.gpus:
        block = engine.best_block_for(kernel if isinstance(kernel, CudaFunction) else None, gpu, None)
        suggestions.append({"gpu": gpu.id, "gpuName": gpu.name, "blockSize": block,
                            "basis": "occupancy with 32 registers per thread assumed (no ptxas figures)"})
    return {"uri": snap.uri, "kernel": kernel_name(kernel), "launches": launches, "suggestions": suggestions,
            "source": "static"}


# --------------------------------------------------------------------------- GPUs


async def list_gpus(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    config = ls.config_for(arg.get("uri") or ls.workspace_state.folders[0].uri)
    selected = list(config.gpu_ids)
    gpus = [{**g.summary_json(), "selected": g.id in selected} for g in config.database.all()]
    return {"gpus": gpus, "selected": selected}


async def set_gpus(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    names = arg.get("gpus")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise CommandError("`gpus` must be a non-empty list of GPU names")
    config = ls.config_for(ls.workspace_state.folders[0].uri)
    problems = []
    for name in names:
        if config.database.find(name) is None:
            suggestions = config.database.suggestions(name)
            problems.append(f"unknown GPU '{name}'" + (f"; did you mean {', '.join(suggestions)}?" if suggestions else ""))
    if problems:
        raise CommandError("; ".join(problems))
    from perflsp.server.lifecycle import refresh_all

    ls.workspace_state.session = {"gpus": names}
    await refresh_all(ls)
    return {"gpus": list(ls.config_for(ls.workspace_state.folders[0].uri).gpu_ids)}


# --------------------------------------------------------------------------- roofline data


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _gpu_json(gpu: Gpu) -> dict[str, Any]:
    return {"id": gpu.id, "name": gpu.name, "bandwidthGbs": gpu.memory_bandwidth_gbs,
            "ridges": {p.value: r for p, r in gpu.ridges().items()},
            "peaksTflops": {p.value: peak.tflops for p, peak in gpu.peaks.items()}}


def _estimate_json(estimate: Estimate, gpus: dict[str, Gpu]) -> dict[str, Any]:
    gpu = gpus.get(estimate.gpu)
    deciding = closest_precision(estimate)
    occupancy = estimate.occupancy
    return {
        "gpu": gpu.id if gpu else estimate.gpu,
        "gpuName": estimate.gpu,
        "verdict": estimate.verdict,
        "label": short_verdict(estimate),
        "deciding": deciding.value if deciding else None,
        "intensity": {p.value: v for p, v in estimate.intensity.items()},
        "ridge": {p.value: v for p, v in estimate.ridge.items()},
        "confidence": estimate.confidence,
        "occupancy": occupancy.occupancy if occupancy else None,
        "limiter": occupancy.limiter.value if occupancy else None,
        "source": estimate.source,
        "measured": None,  # filled once Nsight Compute results are imported into the editor
    }


def report_json(uri: str, report: KernelReport, gpus: dict[str, Gpu]) -> dict[str, Any]:
    kernel = report.kernel
    facts = report.facts
    return {
        "uri": uri,
        "name": kernel_name(kernel),
        "kind": kernel.kind,
        "range": anchor_span(kernel).to_json(),
        "line": anchor_span(kernel).line,
        "launches": [{"range": s.span.to_json(), "grid": s.grid.text, "block": s.block.text} for s in report.launches],
        "workItems": facts.work_items,
        "dramBytes": facts.dram_bytes,
        "ops": {p: getattr(facts.total, p) for p in ("fp64", "fp32", "fp16", "int32")},
        "uncertain": facts.uncertain,
        "estimates": [_estimate_json(e, gpus) for e in report.estimates],
    }


async def roofline_data(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    scope = arg.get("scope", "open")
    if scope not in ("open", "workspace"):
        raise CommandError("`scope` must be \"open\" or \"workspace\"")
    only = arg.get("uri")
    state = ls.workspace_state
    config = ls.config_for(only or state.folders[0].uri)
    gpus = {g.name: g for g in config.gpus}
    kernels: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    open_uris = [u for u in ls.workers if only is None or u == only]
    for uri in open_uris:
        snap = await ls.snapshot(uri)
        if snap is None:
            continue
        kernels += [report_json(uri, r, gpus) for r in snap.reports()]
    if scope == "workspace":
        files = []
        for folder in state.folders:
            folder_config = ls.config_for(folder.uri) if folder.uri else config
            files += [(p, folder_config) for p in await asyncio.to_thread(state.source_files, folder, folder_config)]
        files = [(p, c) for p, c in files if p.as_uri() not in ls.workers]
        async with progress(ls, "perflsp: scanning the workspace", arg.get("workDoneToken")) as bar:
            for index, (path, folder_config) in enumerate(files):
                bar.report(path.name, int(100 * index / max(1, len(files))))
                try:
                    found = await asyncio.to_thread(_analyse_file, ls, path, folder_config, gpus)
                except OSError as exc:
                    skipped.append({"path": str(path), "reason": str(exc)})
                    continue
                if isinstance(found, str):
                    skipped.append({"path": str(path), "reason": found})
                    continue
                kernels += found
    return {"gpus": [_gpu_json(g) for g in config.gpus], "kernels": kernels, "skipped": skipped}


def _analyse_file(ls: Any, path: Path, config: Any, gpus: dict[str, Gpu]) -> list[dict[str, Any]] | str:
    """Extract and analyse a file that is not open (cached by mtime, size and configuration)."""
    from perflsp.kernels.extract import extract
    from perflsp.source.files import LoadedFile, load_file
    from perflsp.source.parser import parse
    from perflsp.source.positions import LineIndex

    stat = os.stat(path)
    key = (str(path), stat.st_mtime_ns, stat.st_size, config.generation)
    cached = ls.scan_cache.get(key)
    if cached is not None:
        return cached
    loaded = load_file(path)
    if not isinstance(loaded, LoadedFile):
        return loaded.reason
    data = loaded.data
    tree = parse(data)
    lines = LineIndex(data)
    resolver = ls.resolver_for(path.as_uri())
    preprocessed = resolver.env_for(path, data)
    fk: FileKernels = extract(data, tree=tree, path=str(path), lines=lines, env=preprocessed)
    opts = engine.options(preprocessed)
    unit = engine.new_unit(data, tree, fk, opts, lines)
    uri = path.as_uri()
    found = [report_json(uri, engine.analyze(unit, k, config.gpus), gpus) for k in (*fk.kernels, *fk.omp_regions)]
    ls.scan_cache[key] = found
    return found


async def status_command(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    return status.payload(ls)


_HANDLERS = {
    "perflsp.explainKernel": explain_kernel,
    "perflsp.profileKernel": profile_kernel,
    "perflsp.askLaunchParameters": ask_launch_parameters,
    "perflsp.listGpus": list_gpus,
    "perflsp.setGpus": set_gpus,
    "perflsp.rooflineData": roofline_data,
    "perflsp.status": status_command,
}

__all__ = ["run", "report_json"]
