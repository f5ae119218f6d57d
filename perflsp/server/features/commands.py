"""`workspace/executeCommand` handlers. Every command takes one JSON object argument (shapes in
docs/server.md) and returns JSON.

- perflsp.explainKernel {uri, kernel, gpu?, quiet?, streamId?} -> {uri, kernel, gpu, markdown, headline, llm, llmMessage, source}
- perflsp.profileKernel {uri, kernel, quiet?}   -> {uri, kernel, status, message, kernels?}
- perflsp.askLaunchParameters {uri, kernel, gpu?} -> {uri, kernel, launches, suggestions, source, llm, actions, rejected}
- perflsp.importProfile {path, uri?, gpu?}      -> {path, storedAt, gpu, kernels, notes, message}
- perflsp.verifyLaunchParameters {uri, kernel, current, proposed} -> {status, message, verification}
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
from perflsp.server.features.common import (
    anchor_span,
    closest_precision,
    kernel_name,
    short_verdict,
)
from perflsp.server.features.hover import kernel_markdown
from perflsp.server.measured import evidence_for_reports, measured_json
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


def _estimate_gpu(snap: Any, report: KernelReport, wanted: Any) -> tuple[Estimate, Gpu]:
    """The estimate and GPU a command is about: `gpu` (id, alias or name) or the first GPU."""
    gpus = {g.name: g for g in snap.config.gpus}
    if isinstance(wanted, str) and wanted:
        gpu = snap.config.database.find(wanted)
        if gpu is None or gpu.name not in gpus:
            raise CommandError(f"`gpu`: '{wanted}' is not among the configured GPUs ({', '.join(gpus)})")
        return next(e for e in report.estimates if e.gpu == gpu.name), gpu
    estimate = next((e for e in report.estimates if e.gpu in gpus), None)
    if estimate is None:
        raise CommandError(f"no estimate of `{kernel_name(report.kernel)}` on a configured GPU")
    return estimate, gpus[estimate.gpu]


async def _question(ls: Any, uri: str, name: str, gpu: Gpu, task: str) -> Any:
    """The LLM question about `name`, built while no edit moves the document's text."""
    worker = ls.workers.get(uri)
    if worker is None:
        raise CommandError(f"{uri} is not open")

    def build(snap: Any) -> Any:
        item = snap.kernel_named(name)
        report = snap.report_for(item) if item is not None else None
        if report is None:
            raise CommandError(f"no kernel `{name}` in {uri}")
        return ls.advice.question(snap, report, gpu, task)

    question = await worker.exclusive(build)
    if question is None:
        raise CommandError(f"{uri} is not analysed")
    return question


STREAM_INTERVAL_S = 0.2  # at most this often a streamed explanation is sent to the client


async def explain_kernel(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    """The static explanation, and the LLM's streamed one when the advisor is on.

    With `streamId`, partial Markdown goes to the client as `perflsp/explanation` notifications
    `{id, uri, kernel, markdown, done}` while the model writes; the result is the whole text.
    """
    snap, report = await _report(ls, arg)
    name = kernel_name(report.kernel)
    _estimate, gpu = _estimate_gpu(snap, report, arg.get("gpu"))
    static_md = kernel_markdown(report, snap)
    headline = " | ".join(e.headline() for e in report.estimates)
    llm_state, reason, label = ls.advice.status(snap.config)
    advisor = ls.advice.advisor_for(snap.config)
    stream_id = arg.get("streamId")

    def send(markdown: str, done: bool) -> None:
        if stream_id is not None:
            ls.notify("perflsp/explanation", {"id": stream_id, "uri": snap.uri, "kernel": name,
                                                        "markdown": markdown, "done": done})

    if advisor is None:
        markdown = static_md + "\n\n---\n\n" + f"*LLM advisor: {llm_state} — {reason}. This explanation is the static engine's.*"
        send(markdown, True)
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Info, message=f"{name}: {headline}. (LLM advisor {llm_state}: {reason})"))
        return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
                "llm": llm_state, "llmMessage": reason, "source": "static"}

    from perflsp.llm.advisor import AdvisorUnavailable
    from perflsp.llm.sanitize import InertMarkdown, inert_markdown, inert_text

    question = await _question(ls, snap.uri, name, gpu, "explain")
    head = (f"## {label} on {gpu.name}\n\n")
    foot = (f"\n\n*{label}'s explanation; its line numbers count from the kernel's first line "
            f"(line {question.first_line} of the file).*\n\n---\n\n## Static estimate\n\n{static_md}")
    # the model's Markdown is shown inert: no image, HTML or link (perflsp.llm.sanitize)
    inert = InertMarkdown()
    shown: list[str] = []  # the inert Markdown of the model's complete lines so far
    failure: str | None = None
    loop = asyncio.get_running_loop()
    last_sent = 0.0
    async with progress(ls, f"perflsp: {label} explains {name}", arg.get("workDoneToken")) as bar:
        send(head + "*waiting for the model…*", False)
        try:
            async for chunk in advisor.explain_stream(question):
                shown.append(inert.feed(chunk))
                now = loop.time()
                if now - last_sent >= STREAM_INTERVAL_S:
                    last_sent = now
                    so_far = "".join(shown) + inert.preview()
                    bar.report(f"{len(so_far)} characters")
                    send(head + so_far, False)
        except AdvisorUnavailable as exc:
            failure = str(exc)
    shown.append(inert.flush())
    text = "".join(shown).strip()
    if failure is not None or not text:
        failure = failure or "the model's answer was empty"
        markdown = (static_md + "\n\n---\n\n" + (f"*{label} gave no explanation: {inert_markdown(failure)}. "
                                                 "This explanation is the static engine's.*"))
        if text:
            markdown = head + text + "\n\n*(cut off: " + inert_markdown(failure) + ")*" + foot
        send(markdown, True)
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=inert_text(f"{name}: {headline}. ({label} gave no explanation: {failure})")))
        return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
                "llm": "failing", "llmMessage": failure, "source": "static", "label": label}
    markdown = head + text + foot
    send(markdown, True)
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info,
                                                     message=inert_text(f"{name}: {headline}. ({label} explained it)")))
    return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
            "llm": ls.advice.status(snap.config)[0], "llmMessage": "", "source": "llm", "label": label}


async def ask_launch_parameters(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    """Static block-size suggestions per GPU and, with the LLM on, its proposals as validated
    edits (`actions`, each a code action with a WorkspaceEdit) or rejections with the reason."""
    snap, report = await _report(ls, arg)
    kernel = report.kernel
    name = kernel_name(kernel)
    launches = [{"range": site.span.to_json(), "grid": site.grid.text, "block": site.block.text,
                 "gridValue": _json_value(site.grid.value), "blockValue": _json_value(site.block.value)}
                for site in report.launches]
    suggestions = []
    for gpu in snap.config.gpus:
        block = engine.best_block_for(kernel if isinstance(kernel, CudaFunction) else None, gpu, None)
        suggestions.append({"gpu": gpu.id, "gpuName": gpu.name, "blockSize": block,
                            "basis": "occupancy with 32 registers per thread assumed (no ptxas figures)"})
    result: dict[str, Any] = {"uri": snap.uri, "kernel": name, "launches": launches, "suggestions": suggestions,
                              "source": "static", "actions": [], "rejected": []}
    advisor = ls.advice.advisor_for(snap.config)
    llm_state, reason, label = ls.advice.status(snap.config)
    if advisor is None:
        result["llm"] = {"used": False, "state": llm_state, "reason": reason}
        return result
    from perflsp.llm.sanitize import inert_text

    _estimate, gpu = _estimate_gpu(snap, report, arg.get("gpu"))
    question = await _question(ls, snap.uri, name, gpu, "launch_params")
    async with progress(ls, f"perflsp: asking {label} for launch parameters of {name}", arg.get("workDoneToken")):
        answer = await advisor.ask(question)
    if answer.source != "llm":
        result["llm"] = {"used": False, "state": ls.advice.status(snap.config)[0], "label": label,
                         "reason": answer.fallback_reason}
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=inert_text(f"perflsp: {label} proposed nothing for {name}: {answer.fallback_reason}")))
        return result
    from perflsp.server.features.code_actions import code_action_json
    from perflsp.server.features.proposals import describe, proposal_edits

    def build(current: Any) -> tuple[Any, list[dict[str, Any]]]:
        found = proposal_edits(current, name, answer.proposals, gpu, label)
        return found, [code_action_json(current, fix) for fix in found.fixes]

    worker = ls.workers.get(snap.uri)
    built = await worker.exclusive(build) if worker is not None else None
    if built is None:
        raise CommandError(f"{snap.uri} was closed")
    found, actions = built
    ls.advice.proposals[(snap.uri, name)] = (question.kernel_hash, gpu, answer.proposals, label)
    result.update({
        "source": "llm",
        "llm": {"used": True, "label": label, "verdict": answer.verdict, "confidence": answer.confidence,
                "rationale": answer.rationale, "proposals": describe(answer.proposals)},
        "actions": actions,
        "rejected": found.rejected,
        "notes": found.notes,
    })
    if not arg.get("quiet"):
        what = "; ".join(f.title for f in found.fixes) or "no applicable edit"
        rejected = f" Rejected: {'; '.join(r['proposal'] + ' (' + r['reason'] + ')' for r in found.rejected)}." \
            if found.rejected else ""
        ls.window_show_message(lsp.ShowMessageParams(
            type=lsp.MessageType.Info,
            message=inert_text(f"perflsp: {label} for {name} on {gpu.name}: {what}.{rejected} "
                               f"The code actions on `{name}` apply it.")))
    return result


# --------------------------------------------------------------------------- profiling


def _profiling_settings(config: Any) -> Any:
    """The settings a run may use, or ProfilingError saying why profiling is off (untrusted
    workspace settings included: the resolved settings never hold them)."""
    from perflsp.profiling.settings import require_enabled

    return require_enabled(config.profiling)


def _folder_root(ls: Any, uri: str | None) -> Path | None:
    state = ls.workspace_state
    folder = state.folder_for(uri) if uri else next((f for f in state.folders if f.path is not None), state.folders[0])
    return folder.path


def _open_files(ls: Any, root: Path | None) -> dict[str, FileKernels]:
    files: dict[str, FileKernels] = {}
    for uri, worker in ls.workers.items():
        snap = worker.snapshot
        path = path_of(uri)
        if snap is None or path is None:
            continue
        if root is None or path.is_relative_to(root):
            files[str(path)] = snap.kernels
    return files


def _result_json(result: Any) -> dict[str, Any]:
    match = result.match
    ref = match.ref if match is not None and match.status != "not_found" else None
    evidence = result.evidence
    return {"kernel": result.name, "verdict": evidence.verdict if evidence else None,
            "summary": evidence.summary() if evidence else None,
            "source": {"file": ref.file, "line": ref.line, "status": match.status, "bodyHash": ref.body_hash}
            if ref else None}


async def profile_kernel(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    """Build the document's file, run it under Nsight Compute for this kernel, store the result
    under the workspace's `.perflsp/` and republish (`perflsp.profiling.*` settings; only from
    user settings or a trusted workspace)."""
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import profile_target
    from perflsp.server.measured import gpu_resolver

    snap, report = await _report(ls, arg)
    name = kernel_name(report.kernel)
    config = snap.config

    def answer(status_: str, message: str, kind: lsp.MessageType, **extra: Any) -> dict[str, Any]:
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"perflsp: {message}"))
        return {"uri": snap.uri, "kernel": name, "status": status_, "message": message, **extra}

    try:
        settings = _profiling_settings(config)
    except ProfilingError as exc:
        return answer("disabled", f"{exc.message}. Set perflsp.profiling.enabled, buildCommand and runCommand in "
                      "your user settings (or in a trusted workspace); see docs/profiling.md.", lsp.MessageType.Warning)
    path = path_of(snap.uri)
    if path is None or not path.is_file():
        return answer("failed", f"save `{snap.uri}` to a file first: the profiler builds and runs the saved file",
                      lsp.MessageType.Warning)
    root = config.root or path.parent
    if ls.measured.running.locked():
        return answer("busy", "a profiler run is under way; try again when it has finished", lsp.MessageType.Info)
    kernel_filter = name if isinstance(report.kernel, CudaFunction) else None
    note = ""
    try:
        if path.read_bytes() != snap.data:
            note = " (the document has unsaved changes: the saved file was profiled)"
    except OSError:
        pass

    def run() -> Any:
        with ls.measured.running:
            return profile_target(settings, path, workspace=root, kernel=kernel_filter, files=[snap.kernels],
                                  gpu_resolver=gpu_resolver(config))

    async with progress(ls, f"perflsp: profiling {name} with Nsight Compute", arg.get("workDoneToken"), delay=0.0) as bar:
        bar.report(f"building {path.name} and running it under ncu")
        try:
            outcome = await asyncio.to_thread(run)
        except ProfilingError as exc:
            return answer("failed", f"profiling {name} failed: {exc.message}", lsp.MessageType.Error)
    ls.refresh_folder(root)
    kernels = [_result_json(r) for r in outcome.results]
    mine = [k for k in kernels if k["source"] and k["source"]["bodyHash"] == report.kernel.body_hash]
    summary = mine[0]["summary"] if mine and mine[0]["summary"] else \
        f"{len(kernels)} kernel(s) measured, none matched to `{name}` of this file"
    return answer("ok", f"{name}: {summary}{note}", lsp.MessageType.Info, kernels=kernels,
                  storedAt=str(outcome.stored_at) if outcome.stored_at else None, notes=list(outcome.notes))


async def import_profile(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    """Import an Nsight Compute report (`.ncu-rep` or ncu CSV) into the workspace folder's
    `.perflsp/profiles/`, map its kernels to the workspace's sources, and republish."""
    from perflsp.kernels.extract import extract_path
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import import_and_store
    from perflsp.profiling.settings import require_enabled
    from perflsp.server.measured import gpu_resolver
    from perflsp.source.files import SkippedFile

    raw = arg.get("path")
    if not isinstance(raw, str) or not raw:
        raise CommandError("`path` (the report file) is required")
    folder_uri = arg.get("uri") if isinstance(arg.get("uri"), str) else None
    root = _folder_root(ls, folder_uri)
    report_path = Path(raw).expanduser()
    if not report_path.is_absolute():
        if root is None:
            raise CommandError(f"`path`: '{raw}' is relative and no workspace folder is open")
        report_path = root / report_path
    if root is None:
        raise CommandError("open a workspace folder: imported results are stored under its .perflsp/ folder")
    state = ls.workspace_state
    folder = state.folder_for(root.as_uri())
    config = ls.config_for(folder.uri or root.as_uri())
    gpu = None
    if isinstance(arg.get("gpu"), str) and arg["gpu"]:
        gpu = gpu_resolver(config)(arg["gpu"])
        if gpu is None:
            raise CommandError(f"`gpu`: unknown GPU '{arg['gpu']}'")
    try:  # converting a .ncu-rep may run ncu: only with profiling allowed
        ncu_argv = [require_enabled(config.profiling).ncu_path]
    except ProfilingError:
        ncu_argv = None
    files = _open_files(ls, root)

    def run(bar: Any) -> Any:
        for path in state.source_files(folder, config):
            if str(path) in files:
                continue
            bar.report(f"reading {path.name}")
            extracted = extract_path(path, ls.resolver_for(path.as_uri()))
            if not isinstance(extracted, SkippedFile):
                files[str(path)] = extracted
        return import_and_store(report_path, workspace=root, gpu=gpu, files=list(files.values()), ncu_argv=ncu_argv,
                                gpu_resolver=gpu_resolver(config))

    async with progress(ls, f"perflsp: importing {report_path.name}", arg.get("workDoneToken")) as bar:
        try:
            outcome = await asyncio.to_thread(run, bar)
        except ProfilingError as exc:
            message = f"cannot import {report_path}: {exc.message}"
            if not arg.get("quiet"):
                ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"perflsp: {message}"))
            raise CommandError(message) from None
    ls.refresh_folder(root)
    kernels = [_result_json(r) for r in outcome.results]
    mapped = sum(1 for k in kernels if k["source"])
    gpu_name = outcome.gpu.name if outcome.gpu else outcome.record.device_name or "an unknown GPU"
    message = (f"imported {len(kernels)} kernel(s) measured on {gpu_name} from {report_path.name}; "
               f"{mapped} matched to sources of this workspace")
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"perflsp: {message}"))
    return {"path": str(report_path), "storedAt": str(outcome.stored_at) if outcome.stored_at else None,
            "gpu": outcome.gpu.name if outcome.gpu else None, "deviceName": outcome.record.device_name,
            "kernels": kernels, "notes": list(outcome.notes), "message": message}


async def verify_launch_parameters(ls: Any, arg: dict[str, Any]) -> dict[str, Any]:
    """Time the kernel at the current and the proposed block size (and the proposal halved and
    doubled) under Nsight Compute; the code action of the proposal then says "measured 1.40×"."""
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.runner import prepare_target, verify_launch_params

    snap, report = await _report(ls, arg)
    name = kernel_name(report.kernel)
    try:
        current, proposed = int(arg["current"]), int(arg["proposed"])
    except (KeyError, TypeError, ValueError):
        raise CommandError("`current` and `proposed` (block sizes) are required") from None
    if not isinstance(report.kernel, CudaFunction):
        raise CommandError(f"`{name}` is not a CUDA kernel: block sizes apply to CUDA launches")

    def answer(status_: str, message: str, kind: lsp.MessageType, **extra: Any) -> dict[str, Any]:
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"perflsp: {message}"))
        return {"uri": snap.uri, "kernel": name, "status": status_, "message": message, **extra}

    try:
        settings = _profiling_settings(snap.config)
    except ProfilingError as exc:
        return answer("disabled", exc.message, lsp.MessageType.Warning)
    path = path_of(snap.uri)
    if path is None or not path.is_file():
        return answer("failed", "save the document to a file first: the measurement builds the saved file",
                      lsp.MessageType.Warning)
    root = snap.config.root or path.parent
    if ls.measured.running.locked():
        return answer("busy", "a profiler run is under way; try again when it has finished", lsp.MessageType.Info)

    def run() -> Any:
        with ls.measured.running:
            exe, source = prepare_target(settings, path, root)
            return verify_launch_params(settings, exe=exe, kernel=name, current_block=current, proposed_block=proposed,
                                        source=source)

    async with progress(ls, f"perflsp: timing {name} at {current} and {proposed} threads per block",
                        arg.get("workDoneToken"), delay=0.0):
        try:
            verification = await asyncio.to_thread(run)
        except ProfilingError as exc:
            return answer("failed", f"measuring {name} failed: {exc.message}", lsp.MessageType.Error)
    ls.measured.verified[(snap.uri, name, report.kernel.body_hash, current, proposed)] = verification
    speedup = verification.speedup
    if speedup is None:
        message = f"{name}: could not time both block sizes" + (f" ({'; '.join(verification.notes)})" if verification.notes else "")
    else:
        best = verification.best
        message = f"{name}: measured {speedup:.2f}× at {proposed} threads per block vs {current}"
        if best is not None and best.block_size not in (current, proposed):
            message += f"; fastest measured: {best.block_size}"
    return answer("ok", message, lsp.MessageType.Info, verification=verification.to_json())


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


def deciding_assumption(estimate: Any, facts: Any) -> str | None:
    """The assumption a verdict rests on, for the roofline view's tooltip: the estimate's own when
    the engine names one, else the kernel's first (the engine lists the deciding assumption first);
    None when the sizes came from the source."""
    own = getattr(estimate, "deciding_assumption", None)
    if isinstance(own, str) and own:
        return own
    assumptions = getattr(facts, "assumptions", None) or []
    return str(assumptions[0]) if assumptions else None


def judged_precision(estimate: Any) -> Any:
    """The precision whose roof the roofline view judges the kernel's point against: the one its
    headline quotes (the engine's `main_precision()` where it has one), else the deciding or nearest."""
    main = getattr(estimate, "main_precision", None)
    return main() if callable(main) else closest_precision(estimate)


def _estimate_json(estimate: Estimate, gpus: dict[str, Gpu], measured: Any = None, facts: Any = None) -> dict[str, Any]:
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
        "measured": measured_json(measured) if measured is not None else None,
        # the roofline view judges the point against this precision's roof and names what decides it
        "judgedBy": (judged.value if (judged := judged_precision(estimate)) is not None else None),
        "decidingAssumption": deciding_assumption(estimate, facts),
    }


def report_json(uri: str, report: KernelReport, gpus: dict[str, Gpu], measured: Any = None) -> dict[str, Any]:
    """A kernel for the roofline view; `measured` (SnapshotMeasured) adds the stored results."""
    kernel = report.kernel
    facts = report.facts
    name = kernel_name(kernel)
    found = measured.for_estimate if measured is not None else (lambda _name, _gpu: None)
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
        "assumptions": list(facts.assumptions),
        "estimates": [_estimate_json(e, gpus, found(name, e.gpu), facts) for e in report.estimates],
        "measuredElsewhere": [measured_json(m) for m in measured.unmatched(name)] if measured is not None else [],
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
    skipped += [{"path": str(path_of(u) or u), "reason": r} for u, r in getattr(ls, "refused", {}).items()
                if only is None or u == only]
    for uri in open_uris:
        snap = await ls.snapshot(uri)
        if snap is None:
            continue
        kernels += [report_json(uri, r, gpus, snap.measured) for r in snap.reports()]
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
    """Extract and analyse a file that is not open (cached by mtime, size and configuration),
    exactly as `perflsp check` reads it (`perflsp.analysis.pipeline`)."""
    from perflsp.analysis.pipeline import FileAnalysis, prepare_file
    from perflsp.source.files import LoadedFile, load_file

    stat = os.stat(path)
    store = ls.measured.store(config.root) if config.root is not None else None
    try:
        profiles = os.stat(store.directory).st_mtime_ns if store is not None else None
    except OSError:
        profiles = None
    key = (str(path), stat.st_mtime_ns, stat.st_size, config.generation, profiles)
    cached = ls.scan_cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    loaded = load_file(path)
    if not isinstance(loaded, LoadedFile):
        return loaded.reason
    prepared = prepare_file(path, loaded.data, ls.resolver_for(path.as_uri()))
    uri = path.as_uri()
    reports = FileAnalysis.of(prepared).reports(config.gpus)
    measured = evidence_for_reports(store, config, str(path), reports) if store is not None else None
    found = [report_json(uri, r, gpus, measured) for r in reports]
    ls.scan_cache[str(path)] = (key, found)  # (one entry per file: a changed file's old reports go)
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
    "perflsp.importProfile": import_profile,
    "perflsp.verifyLaunchParameters": verify_launch_parameters,
    "perflsp.tuneKernel": lambda ls, arg: _tuning().tune_kernel(ls, arg),
    "perflsp.importTuningCache": lambda ls, arg: _tuning().import_tuning_cache(ls, arg),
    "perflsp.cancelTuning": lambda ls, arg: _tuning().cancel_tuning(ls, arg),
}


def _tuning() -> Any:
    from perflsp.server.features import tuning

    return tuning


__all__ = ["report_json", "run"]
