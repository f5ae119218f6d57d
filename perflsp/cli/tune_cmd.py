"""`perflsp tune`: search a kernel's launch parameters with Kernel Tuner, import Kernel Tuner
caches, show stored results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from perflsp.cli._gpu_options import gpus_file_option, load_db_or_fail

if TYPE_CHECKING:
    from perflsp.tuning.session import FileContext


def _fail(message: str) -> None:
    raise click.ClickException(message)


@click.group()
def tune() -> None:
    """Tuned launch parameters (Kernel Tuner): run a search, import caches, show results."""


def _load_or_fail(file: Path) -> FileContext:
    """The file read as `perflsp check` reads it, or exit saying why it cannot be."""
    from perflsp.tuning.problem import ProblemError
    from perflsp.tuning.session import load_file

    try:
        return load_file(file.resolve())
    except ProblemError as exc:
        raise click.ClickException(str(exc)) from None


@tune.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kernel", "-k", required=True, help="the kernel to tune")
@click.option("--gpu", help="the GPU to tune for (measuring) or to judge with (default: the replayed cache's device)")
@gpus_file_option
@click.option("--strategy", "-s", default="prior", show_default=True,
              help="prior, llm, or a Kernel Tuner strategy (random_sample, genetic_algorithm, bayes_opt, ...)")
@click.option("--max-fevals", type=click.IntRange(1), default=50, show_default=True, help="evaluation budget")
@click.option("--time-limit", type=click.FloatRange(min=0.001), help="budget in seconds (measured or recorded time)")
@click.option("--replay", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="replay a Kernel Tuner cache in simulation mode instead of measuring")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), help="where .perflsp/ lives (default: cwd)")
@click.option("--trust-workspace", is_flag=True, help="let the workspace's .perflsp.toml supply profiling commands")
@click.option("--seed", type=int, help="random seed for Kernel Tuner's stochastic strategies")
@click.option("--llm-url", help="OpenAI-compatible endpoint for --strategy llm")
@click.option("--llm-model", default="default", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def run_cmd(file: Path, kernel: str, gpu: str | None, gpus_files: tuple[str, ...], strategy: str, max_fevals: int,
            time_limit: float | None, replay: Path | None, workspace: Path | None, trust_workspace: bool,
            seed: int | None, llm_url: str | None, llm_model: str, as_json: bool) -> None:
    """Search KERNEL's tuning space in FILE (block dimensions, `perflsp:tune` knobs)."""
    from perflsp.tuning.cache import CacheError, read_cache
    from perflsp.tuning.problem import ProblemError
    from perflsp.tuning.search import TuningUnavailable, kernel_tuner_available
    from perflsp.tuning.session import gpu_for_device
    from perflsp.tuning.session import tune as run_tune

    if (missing := kernel_tuner_available()) is not None:
        _fail(missing)
    workspace = (workspace or Path.cwd()).resolve()
    db = load_db_or_fail(gpus_files)
    ctx = _load_or_fail(file)
    record = None
    if replay is not None:
        try:
            record = read_cache(replay, source=replay.name)
        except CacheError as exc:
            _fail(str(exc))
    target = None
    if gpu:
        target = db.find(gpu)
        if target is None:
            _fail(f"unknown GPU {gpu!r}; did you mean {', '.join(db.suggestions(gpu))}?")
    elif record is not None:
        target = gpu_for_device(db, record.device_name)
    evaluate = None
    if record is None:
        evaluate = _evaluator(ctx, kernel, target, workspace, trust_workspace)
    proposer = None
    if strategy == "llm":
        if not llm_url:
            _fail("--strategy llm needs --llm-url (an OpenAI-compatible endpoint; the key from OPENAI_API_KEY)")
        from perflsp.llm.providers import ProviderConfig
        from perflsp.tuning.llm_proposer import LlmProposer

        proposer = LlmProposer(ProviderConfig(kind="openai", base_url=llm_url, model=llm_model),
                               source=ctx.data.decode("utf-8", "replace"), gpu=target)

    def progress(evaluation) -> None:
        if not as_json:
            shown = f"{evaluation.time_ms:.4g} ms" if evaluation.time_ms is not None else f"failed ({evaluation.error})"
            best = f"{evaluation.best_ms:.4g} ms" if evaluation.best_ms is not None else "none"
            click.echo(f"[{evaluation.index}/{max_fevals}] {_config(evaluation.config)}: {shown}; best {best}",
                       err=True)

    try:
        result, space, stored = run_tune(ctx, ctx.kernel(kernel), target, workspace, strategy=strategy,
                                         max_fevals=max_fevals, time_limit_s=time_limit, replay=record,
                                         evaluate=evaluate, on_evaluation=progress, proposer=proposer, seed=seed)
    except (ProblemError, TuningUnavailable) as exc:
        _fail(str(exc))
    finally:
        if proposer is not None:
            proposer.close()
    best = result.best
    current = space.code_values or {}
    current_ms = result.record.time_of(current) if current else None
    payload = {"kernel": kernel, "device": result.device_name, "strategy": result.strategy,
               "evaluations": len(result.evaluations), "best": best[0] if best else None,
               "bestMs": best[1] if best else None, "current": current, "currentMs": current_ms,
               "recorded": result.record.recorded, "stored": str(stored) if stored else None,
               "stopped": result.stopped, "notes": result.notes, "space": space.to_json()}
    if as_json:
        click.echo(json.dumps(payload, indent=1, default=str))
        return
    how = result.provenance()
    if best is None:
        click.echo(f"{kernel}: no configuration ran successfully in {len(result.evaluations)} evaluations ({how})")
        for note in result.notes:
            click.echo(f"note: {note}")
        sys.exit(1)
    gain = f", {current_ms / best[1]:.2f}x faster than the current {_config(current)}" if current_ms else ""
    click.echo(f"{kernel}: best {_config(best[0])}: {best[1]:.4g} ms after {len(result.evaluations)} evaluations "
               f"({result.strategy}, {how}){gain}")
    for note in result.notes:
        click.echo(f"note: {note}")
    if stored and result.record.recorded:
        click.echo(f"replayed: {stored}")
    elif stored:
        click.echo(f"stored: {stored}")


def _evaluator(ctx, kernel: str, gpu, workspace: Path, trust_workspace: bool):
    from perflsp.cli.profile_cmd import _resolve_settings
    from perflsp.profiling.errors import ProfilingError
    from perflsp.profiling.settings import require_enabled
    from perflsp.tuning.measure import program_evaluator
    from perflsp.tuning.problem import ProblemError, problem_for

    try:
        settings = require_enabled(_resolve_settings(workspace, trust_workspace=trust_workspace, config=None, flags={}))
    except ProfilingError as exc:
        _fail(f"cannot measure: {exc.message} (or replay a recorded cache with --replay)")
    try:
        target = ctx.kernel(kernel)
        space = problem_for(ctx.model, target, gpu)
        return program_evaluator(settings, ctx.path, ctx.model, target, space, workspace)
    except ProfilingError as exc:
        _fail(f"cannot measure: {exc.message} (or replay a recorded cache with --replay)")
    except ProblemError as exc:
        _fail(str(exc))
    return None


@tune.command("import")
@click.argument("cache", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kernel", "-k", help="store under this kernel name (default: the cache's kernel_name)")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def import_cmd(cache: Path, kernel: str | None, workspace: Path | None, as_json: bool) -> None:
    """Store a Kernel Tuner CACHE (.json or .json.gz) in the workspace, labelled as recorded on its device."""
    from perflsp.tuning.cache import CacheError
    from perflsp.tuning.session import import_cache

    try:
        record, stored = import_cache(cache, (workspace or Path.cwd()).resolve(), kernel)
    except CacheError as exc:
        _fail(str(exc))
    best = record.best()
    payload = {"device": record.device_name, "kernel": kernel or record.kernel_name, "stored": str(stored),
               "configurations": len(record.entries), "timed": len(record.timed()),
               "best": best[0] if best else None, "bestMs": best[1] if best else None}
    if as_json:
        click.echo(json.dumps(payload, indent=1, default=str))
    else:
        click.echo(f"imported {len(record.entries)} configurations of {payload['kernel']} recorded on "
                   f"{record.device_name} -> {stored}")


@tune.command("show")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kernel", "-k", required=True)
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path))
@gpus_file_option
def show_cmd(file: Path, kernel: str, workspace: Path | None, gpus_files: tuple[str, ...]) -> None:
    """Stored results for KERNEL: the offer per device, top configurations, portability."""
    from perflsp.tuning.cache import TuningStore
    from perflsp.tuning.problem import ProblemError
    from perflsp.tuning.results import hover_markdown, offers
    from perflsp.tuning.session import space_for

    ctx = _load_or_fail(file)
    records = TuningStore((workspace or Path.cwd()).resolve()).records_for(kernel)
    if not records:
        _fail(f"no tuning results for {kernel}: run `perflsp tune run` or `perflsp tune import`")
    try:
        space = space_for(ctx, ctx.kernel(kernel), None, None)
    except ProblemError as exc:
        _fail(str(exc))
    for offer in offers(records, space):
        click.echo(offer.title() + f"  [{_config(offer.config)}]")
    click.echo(hover_markdown(records, space))


def _config(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
