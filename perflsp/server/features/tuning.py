"""Tuned launch parameters in the editor (perflsp.tuning over Kernel Tuner).

- code actions on a kernel (or its launch): *Tune `k` on <GPU>* — measuring, only where profiling
  may run (user settings or a trusted workspace), or replaying a Kernel Tuner cache imported into
  `.perflsp/tuning/` (labelled as recorded on that device) — and one validated edit per device,
  *Apply the A100-PCIE-40GB-tuned configuration: 1.34x faster than current, recorded on ...*;
- `perflsp.tuneKernel {uri, kernel, device?, strategy?, maxFevals?, timeLimitS?, quiet?}`: the search,
  with `$/progress` per evaluation (best so far) that the user can cancel (or `perflsp.cancelTuning`);
- `perflsp.importTuningCache {path, uri?, kernel?}`: a Kernel Tuner cache into the folder's store;
- hover: the top configurations per device and the portability view.

Kernel Tuner is optional: without it the actions are shown disabled, saying how to install it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.fixes import EditError
from perflsp.analysis.models import Fix
from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import document_model
from perflsp.server.json_types import CommandArgument, JsonObject, JsonValue, lsp_json
from perflsp.server.text import path_of
from perflsp.server.tuning_state import TuningRun, TuningState
from perflsp.tuning.cache import CacheError, TuningRecord, TuningStore, read_cache
from perflsp.tuning.problem import ProblemError, problem_for
from perflsp.tuning.results import Offer, hover_markdown, offers, short_device
from perflsp.tuning.space import Config, TuningSpace

if TYPE_CHECKING:
    from perflsp.hardware.models import Gpu
    from perflsp.server.context import ServerContext
    from perflsp.tuning.search import Evaluation, Measurement

log = logging.getLogger(__name__)
DEFAULT_FEVALS = 50
# a replay of a recorded cache takes no time: its evaluations are reported at most 50 per second,
# so that the per-evaluation progress shows (an instant run showed none, or only a flash)
REPLAY_STEP_S = 0.02


_FILES: dict[Path, tuple[float, TuningRecord]] = {}  # stored caches, read again only when they change


def _root(snap: Snapshot) -> Path | None:
    root = snap.config.root
    if root is not None:
        return Path(root)
    path = path_of(snap.uri)
    return path.parent if path is not None else None


def records(snap: Snapshot, name: str) -> list[TuningRecord]:
    """The stored Kernel Tuner caches of kernel `name` (read again only when a file changes)."""
    root = _root(snap)
    if root is None:
        return []
    folder = TuningStore(root).root / name
    out = []
    cache = _FILES
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            mtime = path.stat().st_mtime
            hit = cache.get(path)
            if hit is None or hit[0] != mtime:
                hit = (mtime, read_cache(path))
                cache[path] = hit
            out.append(hit[1])
        except (OSError, CacheError) as exc:
            log.info("skipping %s: %s", path, exc)
    return out


def _space(snap: Snapshot, kernel: CudaFunction) -> TuningSpace | None:
    gpu = snap.config.gpus[0] if snap.config.gpus else None
    try:
        return problem_for(document_model(snap), kernel, gpu)
    except ProblemError:
        return None


def _profiling_ready(snap: Snapshot) -> bool:
    from perflsp.server.features.status import profiling_status

    return profiling_status(snap.config)[0] == "ready"


def _run_offers(ls: ServerContext, snap: Snapshot, kernel: CudaFunction, space: TuningSpace, recs: list[TuningRecord]) -> list[Offer]:
    found = {o.record.device_name: o for o in offers(recs, space)}
    for (uri, name, device), run in ls.tuning.runs.items():
        if uri != snap.uri or name != kernel.name or run.body_hash != kernel.body_hash:
            continue
        record = next((r for r in recs if r.device_name == device), None)
        if record is None or not space.valid(run.config):
            continue
        known = found.get(device)
        if known is None or run.best_ms < known.best_ms:  # the better of the cache's best and the search's
            found[device] = Offer(record, run.config, run.best_ms, run.current_ms)
    current = space.code_values or {}
    return [o for o in found.values() if any(current.get(k) != v for k, v in o.config.items())]


def code_actions(ls: ServerContext, snap: Snapshot, kernels: list[CudaFunction]) -> list[lsp.CodeAction]:
    from perflsp.server.features.code_actions import _action
    from perflsp.tuning.edits import tuned_fix
    from perflsp.tuning.search import kernel_tuner_available

    out: list[lsp.CodeAction] = []
    for kernel in kernels:
        space = _space(snap, kernel)
        if space is None:
            continue
        recs = [r for r in records(snap, kernel.name) if r.matches(space)]
        for offer in _run_offers(ls, snap, kernel, space, recs):
            try:
                fix = tuned_fix(document_model(snap), kernel, space, offer.config, offer.title())
            except EditError as exc:
                log.info("no tuned edit for %s on %s: %s", kernel.name, offer.record.device_name, exc)
                continue
            out.append(_action(snap, Fix(fix.title, fix.edits, "refactor", preferred=True), []))
        missing = kernel_tuner_available()
        targets: list[tuple[str, dict[str, str]]] = []  # (title, arguments beside uri and kernel)
        if _profiling_ready(snap) and snap.config.gpus:
            gpu = snap.config.gpus[0]
            targets.append((f"Tune `{kernel.name}` on {gpu.name} (Kernel Tuner, measured)", {}))
        for record in recs:
            title = f"Tune `{kernel.name}` on {short_device(record.device_name)} (Kernel Tuner, replaying the recorded cache)"
            targets.append((title, {"device": record.device_name}))
        for title, extra in targets:
            action = lsp.CodeAction(title=title, kind=lsp.CodeActionKind.Empty,
                                    command=lsp.Command(title=f"Tune {kernel.name}", command="perflsp.tuneKernel",
                                                        arguments=[{"uri": snap.uri, "kernel": kernel.name, **extra}]))
            if missing:
                action.disabled = lsp.CodeActionDisabled(reason=missing)
            out.append(action)
    return out


def hover_lines(snap: Snapshot, kernel: CudaFunction | OmpRegion) -> list[str]:
    if not isinstance(kernel, CudaFunction):
        return []
    space = _space(snap, kernel)
    recs = [r for r in records(snap, kernel.name) if space is None or r.matches(space)]
    text = hover_markdown(recs, space)
    return ["", text] if text else []


# ------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class _Timing:
    """How a tuning run times each configuration: replaying a recorded cache, or measuring the program."""

    gpu: Gpu | None
    replay: TuningRecord | None = None
    evaluate: Callable[[Config], Measurement] | None = None
    prior_gpu: str | None = None  # whose figures `gpu` are, when not the replayed device's (a note)


@dataclass(frozen=True)
class _Refusal:
    """Why a tuning run cannot start (the command's `status` and `message`)."""

    status: str  # "failed" | "disabled"
    message: str


def _limits(arg: CommandArgument, error: type[Exception]) -> tuple[int, float | None]:
    """`maxFevals` and `timeLimitS` of the command's argument, checked."""
    max_fevals = arg.get("maxFevals", DEFAULT_FEVALS)
    time_limit = arg.get("timeLimitS")
    if not isinstance(max_fevals, int) or isinstance(max_fevals, bool) or max_fevals < 1:
        raise error("`maxFevals` must be a positive integer")
    if time_limit is not None and (not isinstance(time_limit, (int, float)) or time_limit <= 0):
        raise error("`timeLimitS` must be a positive number of seconds")
    return max_fevals, time_limit


def _replaying(snap: Snapshot, replay: TuningRecord, gpu: Gpu | None) -> _Timing:
    """Replay `replay`, the prior judging with its device's figures, else the configured GPU's (noted)."""
    from perflsp.tuning.session import gpu_for_device

    own = gpu_for_device(snap.config.database, replay.device_name)
    if own is not None:
        return _Timing(own, replay=replay)
    return _Timing(gpu, replay=replay, prior_gpu=gpu.name if gpu is not None else None)


def _timing(snap: Snapshot, kernel: CudaFunction, space: TuningSpace, gpu: Gpu | None, root: Path,
            device: object) -> _Timing | _Refusal:
    """The recorded cache of `device` when one is named; else the program measured where profiling
    may run; else the first recorded cache that fits."""
    name = kernel.name
    recs = [r for r in records(snap, name) if r.matches(space)]
    if isinstance(device, str) and device:
        replay = next((r for r in recs if r.device_name == device), None)
        if replay is None:
            return _Refusal("failed", f"no Kernel Tuner cache of `{name}` recorded on {device} fits its tuning space")
        return _replaying(snap, replay, gpu)
    if _profiling_ready(snap):
        from perflsp.profiling.errors import ProfilingError
        from perflsp.server.features.commands.common import profiling_settings
        from perflsp.tuning.measure import program_evaluator

        path = path_of(snap.uri)
        if path is None or not path.is_file():
            return _Refusal("failed", f"save `{snap.uri}` to a file first: tuning builds and runs the saved file's "
                            "directory")
        try:
            return _Timing(gpu, evaluate=program_evaluator(profiling_settings(snap.config), path, document_model(snap),
                                                           kernel, space, root))
        except ProfilingError as exc:  # (profiling off: disabled; a build command without {file}: refused)
            return _Refusal("disabled" if exc.code == "not-enabled" else "failed", exc.message)
    if recs:
        return _replaying(snap, recs[0], gpu)
    from perflsp.server.features.status import profiling_status

    return _Refusal("disabled", f"cannot tune `{name}`: {profiling_status(snap.config)[1]}, and no Kernel Tuner "
                    "cache was imported (perflsp.importTuningCache)")


async def tune_kernel(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    from perflsp.server.features.commands.common import CommandError, kernel_report, progress_token
    from perflsp.tuning.search import TuningUnavailable, kernel_tuner_available
    from perflsp.tuning.session import FileContext, prior_note, tune

    snap, report = await kernel_report(ls, arg)
    kernel = report.kernel
    name = kernel.name

    def answer(status_: str, message: str, kind: lsp.MessageType, **extra: JsonValue) -> JsonObject:
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"perflsp: {message}"))
        return {"uri": snap.uri, "kernel": name, "status": status_, "message": message, **extra}

    if not isinstance(kernel, CudaFunction):
        return answer("failed", f"`{name}` is an OpenMP region: tuning covers CUDA kernels", lsp.MessageType.Warning)
    if (missing := kernel_tuner_available()) is not None:
        return answer("disabled", missing, lsp.MessageType.Warning)
    max_fevals, time_limit = _limits(arg, CommandError)
    gpu = snap.config.gpus[0] if snap.config.gpus else None
    try:
        space = problem_for(document_model(snap), kernel, gpu)
    except ProblemError as exc:
        return answer("failed", str(exc), lsp.MessageType.Warning)
    root = _root(snap) or Path.cwd()
    timing = _timing(snap, kernel, space, gpu, root, arg.get("device"))
    if isinstance(timing, _Refusal):
        return answer(timing.status, timing.message, lsp.MessageType.Warning)
    replay, evaluate, gpu = timing.replay, timing.evaluate, timing.gpu
    strategy = arg.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        raise CommandError("`strategy` must be a string")
    tuning = ls.tuning
    if not tuning.lock.acquire(blocking=False):
        return answer("busy", "a tuning run is under way; cancel it or try again when it has finished",
                      lsp.MessageType.Info)
    proposer = None
    advisor = ls.advice.advisor_for(snap.config)
    if strategy is None:
        strategy = "llm" if advisor is not None and advisor.provider is not None else "prior"
    if strategy == "llm":
        if advisor is None or advisor.provider is None:
            tuning.lock.release()
            return answer("failed", "the llm strategy needs the LLM advisor on (perflsp.llm.enabled)",
                          lsp.MessageType.Warning)
        from perflsp.tuning.llm_proposer import LlmProposer

        provider = advisor.provider
        # the advisor's provider already passed the endpoint/key policy; the proposer talks to the same endpoint
        proposer = LlmProposer(provider.config, provider._api_key, source=snap.data.decode("utf-8", "replace"), gpu=gpu)
    cancel = threading.Event()
    tuning.cancel = cancel
    loop = asyncio.get_running_loop()
    target = short_device(replay.device_name) if replay is not None else (gpu.name if gpu else "the GPU")
    how = "replaying the recorded cache" if replay is not None else "measuring"
    bar = await _begin_progress(ls, progress_token(arg), f"perflsp: tuning {name} on {target} ({how}, {strategy})", cancel)

    def on_evaluation(evaluation: Evaluation) -> None:
        shown = f"{evaluation.time_ms:.4g} ms" if evaluation.time_ms is not None else "failed"
        best = f"best {evaluation.best_ms:.4g} ms" if evaluation.best_ms is not None else "no time yet"
        message = f"{evaluation.index}/{max_fevals}: {shown}; {best}"
        percentage = min(100, int(100 * evaluation.index / max_fevals))
        loop.call_soon_threadsafe(_report_progress, ls, bar, message, percentage)
        if replay is not None:  # (the tuning thread) a replay is instant: paced, its progress can be followed
            time.sleep(REPLAY_STEP_S)

    ctx = FileContext(path_of(snap.uri), snap.data, snap.tree, snap.kernels, snap.model)
    try:
        result, space, stored = await asyncio.to_thread(
            tune, ctx, kernel, gpu, root, strategy=strategy, max_fevals=max_fevals, time_limit_s=time_limit,
            replay=replay, evaluate=evaluate, on_evaluation=on_evaluation, cancel=cancel, proposer=proposer,
            prior_gpu=timing.prior_gpu)
    except asyncio.CancelledError:
        cancel.set()
        raise
    except (TuningUnavailable, ProblemError) as exc:
        return answer("failed", f"tuning `{name}` failed: {exc}", lsp.MessageType.Error)
    finally:
        tuning.lock.release()
        tuning.cancel = None
        if proposer is not None:
            await asyncio.to_thread(proposer.close)
        _end_progress(ls, bar)
    best = result.best
    evaluations = len(result.evaluations)
    status_ = "cancelled" if result.cancelled else "ok"
    figures = prior_note(result.device_name, gpu, timing.prior_gpu) if result.strategy in ("prior", "llm") else None
    if best is None:
        return answer("failed" if not result.cancelled else "cancelled",
                      f"`{name}`: no configuration ran successfully in {evaluations} evaluations "
                      f"({result.provenance()})", lsp.MessageType.Warning,
                      evaluations=evaluations, device=result.device_name, notes=result.notes)
    current = space.code_values or {}
    current_ms = result.record.time_of(current) if current else None
    tuning.runs[(snap.uri, name, result.device_name)] = TuningRun(kernel.body_hash, result.device_name, best[0], best[1],
                                                              current_ms, evaluations, result.record.recorded)
    gain = f", {current_ms / best[1]:.2f}x faster than current" if current_ms else ""
    config_text = ", ".join(f"{k}={v}" for k, v in best[0].items() if len(space.tune_params[k]) > 1)
    message = (f"{name}: best {config_text} at {best[1]:.4g} ms{gain} after {evaluations} evaluations "
               f"({result.strategy}, {result.provenance()})" + (" — cancelled" if result.cancelled else "")
               + (f"; note: {figures}" if figures else ""))
    actions = []
    latest = await ls.snapshot(snap.uri)
    if latest is not None:
        item = latest.kernel_named(name)
        if isinstance(item, CudaFunction):
            actions = [lsp_json(a) for a in code_actions(ls, latest, [item]) if a.edit is not None]
    return answer(status_, message, lsp.MessageType.Info, best=best[0], bestMs=best[1], currentMs=current_ms,
                  evaluations=evaluations, device=result.device_name, recorded=result.record.recorded,
                  strategy=result.strategy, stored=str(stored) if stored else None, notes=result.notes,
                  actions=actions)


async def cancel_tuning(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    cancel = ls.tuning.cancel
    if cancel is None:
        return {"cancelled": False, "message": "no tuning run is under way"}
    cancel.set()
    return {"cancelled": True, "message": "the tuning run stops after the evaluation in flight"}


async def import_tuning_cache(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    from perflsp.server.features.commands.common import CommandError, folder_root, text_argument
    from perflsp.tuning.session import import_cache

    raw = arg.get("path")
    if not isinstance(raw, str) or not raw:
        raise CommandError("`path` (the Kernel Tuner cache file) is required")
    root = folder_root(ls, text_argument(arg, "uri"))
    if root is None:
        raise CommandError("open a workspace folder: imported caches are stored under its .perflsp/ folder")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = root / path
    kernel = text_argument(arg, "kernel")
    try:
        record, stored = await asyncio.to_thread(import_cache, path, root, kernel)
    except CacheError as exc:
        raise CommandError(str(exc)) from None
    best = record.best()
    message = (f"imported {len(record.entries)} configurations of {kernel or record.kernel_name} recorded on "
               f"{record.device_name}")
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"perflsp: {message}"))
    return {"path": str(path), "storedAt": str(stored), "device": record.device_name,
            "kernel": kernel or record.kernel_name, "configurations": len(record.entries),
            "best": best[0] if best else None, "bestMs": best[1] if best else None, "message": message}


# ------------------------------------------------------------------------------- progress


@dataclass
class _Bar:
    token: lsp.ProgressToken | None = None
    started: bool = False


async def _begin_progress(ls: ServerContext, token: lsp.ProgressToken | None, title: str,
                          cancel: threading.Event) -> _Bar:
    bar = _Bar(token)
    if bar.token is None:
        if not ls.capability("window.work_done_progress"):
            return bar
        created = str(uuid.uuid4())
        try:
            await asyncio.wait_for(ls.work_done_progress.create_async(created), 5)
        except Exception as exc:  # noqa: BLE001 - no progress bar is not an error
            log.debug("progress not created: %s", exc)
            return bar
        bar.token = created
    ls.work_done_progress.begin(bar.token, lsp.WorkDoneProgressBegin(title=title, cancellable=True,
                                                                     message="starting", percentage=0))
    bar.started = True
    future = ls.work_done_progress.tokens.get(bar.token)
    if future is not None:
        future.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
    return bar


def _report_progress(ls: ServerContext, bar: _Bar, message: str, percentage: int) -> None:
    if bar.started and bar.token is not None:
        ls.work_done_progress.report(bar.token, lsp.WorkDoneProgressReport(message=message, percentage=percentage))


def _end_progress(ls: ServerContext, bar: _Bar) -> None:
    if bar.started and bar.token is not None:
        ls.work_done_progress.end(bar.token, lsp.WorkDoneProgressEnd(message="done"))
        bar.started = False
        ls.work_done_progress.tokens.pop(bar.token, None)


__all__ = ["TuningState", "cancel_tuning", "code_actions", "hover_lines", "import_tuning_cache", "records", "tune_kernel"]
