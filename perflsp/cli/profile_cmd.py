"""`perflsp profile`: measure kernels with Nsight Compute, or import results someone has.

    perflsp profile FILE|EXECUTABLE [--gpu NAME] [-- PROGRAM ARGS...]
    perflsp profile import REPORT [--gpu NAME] [--workspace DIR] [--json]
    perflsp profile verify EXECUTABLE --kernel NAME --current 128 --proposed 256

Commands (build, run, launcher, ncu path) come from the user config file
($PERFLSP_CONFIG or <user config dir>/perflsp/config.toml, table [profiling]), from the flags
here, or from the workspace's .perflsp.toml only with --trust-workspace. Running this command
is the consent that `perflsp.profiling.enabled` gives the editor.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from perflsp.analysis.roofline import Precision
from perflsp.cli._gpu_options import gpus_file_option, load_db_or_fail
from perflsp.kernels.models import FileKernels
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import MeasuredGpu, database_resolver
from perflsp.profiling.runner import (
    ProfileOutcome,
    import_and_store,
    is_source_file,
    profile_target,
    verify_launch_params,
)
from perflsp.profiling.settings import (
    ResolvedProfilingSettings,
    SettingsLayer,
    SettingsOrigin,
    layer_from_toml,
    resolve_profiling_settings,
)
from perflsp.resources import user_config_path

WORKSPACE_FILE = ".perflsp.toml"


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"perflsp profile: error: {message}", err=True)
    sys.exit(code)


def _resolve_settings(
    workspace: Path, *, trust_workspace: bool, config: Path | None, flags: dict[str, Any]
) -> ResolvedProfilingSettings:
    layers: list[SettingsLayer] = []
    user = layer_from_toml(config or user_config_path(), SettingsOrigin.USER)
    if user:
        layers.append(user)
    workspace_layer = layer_from_toml(workspace / WORKSPACE_FILE, SettingsOrigin.WORKSPACE_FILE)
    if workspace_layer:
        layers.append(workspace_layer)
    layers.append(SettingsLayer(SettingsOrigin.USER, {k: v for k, v in flags.items() if v is not None}, "command line"))
    resolved = resolve_profiling_settings(layers, workspace_trusted=trust_workspace)
    for ignored in resolved.ignored:
        hint = (
            " (pass --trust-workspace to use it)"
            if ignored.origin is not SettingsOrigin.USER and "trusted" in ignored.reason
            else ""
        )
        click.echo(f"perflsp profile: warning: {ignored.describe()}{hint}", err=True)
    return resolved


def _split(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    try:
        return shlex.split(text)
    except ValueError as exc:
        _fail(f"{option}: {exc}", 2)


def _gpus(name: str | None, gpus_files: Sequence[str]) -> tuple[MeasuredGpu | None, Any]:
    """(the GPU `--gpu` names, or None; a resolver for the GPU a report names): the built-in
    figures, the GPU database and the `--gpus-file` definitions."""
    from perflsp.hardware import UnknownGpuError

    database = load_db_or_fail(gpus_files)
    resolve = database_resolver(database)
    if not name:
        return None, resolve
    gpu = resolve(name)
    if gpu is None:
        try:
            database.get(name)  # raises with the "did you mean" suggestions
        except UnknownGpuError as exc:
            _fail(str(exc), 2)
    return gpu, resolve


def _extract(path: Path) -> FileKernels | None:
    """The file's kernels, read as `perflsp check` reads it, for mapping results to sources."""
    from perflsp.analysis.reader import ReadContext, read_kernels
    from perflsp.kernels.compile_db import DiscoveredDatabases
    from perflsp.kernels.includes import IncludeResolver
    from perflsp.source.files import SkippedFile

    result = read_kernels(path, ReadContext.of(path, IncludeResolver(), DiscoveredDatabases()))
    return None if isinstance(result, SkippedFile) else result


def _source_files(paths: Sequence[Path]) -> tuple[list[FileKernels], list[str]]:
    files, notes = [], []
    for path in paths:
        if not path.is_file():
            _fail(f"no such source file: {path}", 2)
        extracted = _extract(path)
        if extracted is None:
            notes.append("kernel extraction is not available in this build: kernels are shown unmapped")
            break
        files.append(extracted)
    return files, notes


# ---------------------------------------------------------------------------------------------
# Output


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _print_outcome(outcome: ProfileOutcome, notes: Sequence[str], as_json: bool, *, mapped: bool) -> None:
    if as_json:
        data = outcome.to_json()
        data["notes"] = [*data["notes"], *notes]
        click.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    # Piped output is not cut to 80 columns: tables are read in logs too.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    record = outcome.record
    gpu = outcome.gpu
    head = [f"GPU: {gpu.name} (peaks at {gpu.clock_mhz:.0f} MHz)" if gpu else f"GPU: {record.device_name or 'unknown'}"]
    if record.clock_mhz:
        head.append(f"measured SM clock {record.clock_mhz:.0f} MHz")
    if record.clock_control:
        head.append(f"clock control {record.clock_control}")
    if record.ncu_version:
        head.append(f"ncu {record.ncu_version}")
    console.print(" · ".join(head))
    precisions = [Precision.FP64, Precision.FP32, Precision.INT32]
    if any(r.measured.counters.ops.get(Precision.FP16) for r in outcome.results):
        precisions.insert(2, Precision.FP16)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    columns = [
        "kernel",
        "launches",
        "time µs",
        *(f"{p.value} op/B" for p in precisions),
        "GB/s",
        "%BW",
        "%ops",
        "verdict",
    ] + (["source"] if mapped else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("kernel", "verdict", "source", "%ops") else "right")
    for result in outcome.results:
        evidence = result.evidence
        counters = result.measured.counters
        ops_pct, verdict, intensities, rate, bw_pct = "-", "-", ["-"] * len(precisions), "-", "-"
        if evidence:
            intensities = [_num(evidence.intensity.get(p)) for p in precisions]
            pct = evidence.pct_of_peak_ops
            top = evidence.deciding_precision or max(pct, key=lambda p: pct[p], default=None)
            if top is not None and top in pct:
                ops_pct = f"{_num(pct[top])} {top.value}"
            verdict = evidence.verdict or "-"
            if evidence.deciding_precision:
                verdict += f" ({evidence.deciding_precision.value})"
            rate = _num(evidence.achieved_bytes_per_s / 1e9) if evidence.achieved_bytes_per_s is not None else "-"
            bw_pct = _num(evidence.pct_of_peak_bandwidth)
        row = [
            result.name,
            str(result.measured.launches),
            _num(counters.duration_ns / 1e3),
            *intensities,
            rate,
            bw_pct,
            ops_pct,
            verdict,
        ]
        if mapped:
            match = result.match
            source = "not found"
            if match and match.ref:
                source = f"{Path(match.ref.file).name if match.ref.file else '?'}:{match.ref.line}"
                if match.status == "ambiguous":
                    source += " (ambiguous)"
            row.append(source)
        table.add_row(*row)
    console.print(table)
    for result in outcome.results:
        for note in result.evidence.notes if result.evidence else ():
            console.print(f"note: {result.name}: {note}")
    for note in (*outcome.notes, *notes):
        console.print(f"note: {note}")
    if outcome.stored_at:
        console.print(f"stored: {outcome.stored_at}")


# ---------------------------------------------------------------------------------------------
# Commands


class _ProfileGroup(click.Group):
    """`perflsp profile FILE` runs; `perflsp profile import|verify ...` are subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


_common = [
    click.option(
        "--workspace",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Workspace root: results go to WORKSPACE/.perflsp/profiles (default: current directory).",
    ),
    click.option(
        "--gpu",
        "gpu_name",
        metavar="NAME",
        help="GPU whose figures judge the results (default: the one in the report).",
    ),
    gpus_file_option,
    click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON."),
    click.option("--no-store", is_flag=True, help="Do not write the results under .perflsp/."),
]


def _with_common(fn):
    for decorator in reversed(_common):
        fn = decorator(fn)
    return fn


@click.group(cls=_ProfileGroup, context_settings={"help_option_names": ["-h", "--help"]})
def profile() -> None:
    """Measure kernels with Nsight Compute (ncu), or import existing ncu results.

    `perflsp profile FILE|EXECUTABLE` builds FILE with the configured build command (or takes
    EXECUTABLE as is), runs it under ncu and prints measured intensities, % of peak and the
    verdict per kernel. `perflsp profile import REPORT` reads a .ncu-rep or an ncu CSV.
    """


@profile.command("run")
@click.argument("target", type=click.Path(path_type=Path))
@_with_common
@click.option("--kernel", help="Profile only this kernel (name or qualified name).")
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Source files to map kernels to (default: FILE).",
)
@click.option(
    "--build", "build_command", metavar="COMMAND", help='Build command template, e.g. "nvcc -O3 -o {exe} {file}".'
)
@click.option("--run", "run_command", metavar="COMMAND", help='Run command template (default "{exe} {args}").')
@click.option("--launcher", metavar="PREFIX", help='Launcher prefix for a remote GPU, e.g. "srun -p gpu --gres=gpu:1".')
@click.option("--ncu", "ncu_path", metavar="PATH", help="The ncu executable.")
@click.option(
    "--clock-control", type=click.Choice(["base", "none", "reset"]), help="ncu --clock-control (default base)."
)
@click.option("--timeout", "run_timeout_s", type=float, help="Seconds before the profiled run is stopped.")
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="User config file (default: $PERFLSP_CONFIG or the user config dir).",
)
@click.option("--trust-workspace", is_flag=True, help="Take commands from the workspace's .perflsp.toml.")
@click.argument("program_args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(
    target,
    workspace,
    gpu_name,
    gpus_files,
    as_json,
    no_store,
    kernel,
    sources,
    build_command,
    run_command,
    launcher,
    ncu_path,
    clock_control,
    run_timeout_s,
    config,
    trust_workspace,
    program_args,
) -> None:
    """Build (for a source file) and profile TARGET; arguments after `--` go to the program."""
    workspace = (workspace or Path.cwd()).resolve()
    flags = {
        "enabled": True,
        "build_command": _split(build_command, "--build"),
        "run_command": _split(run_command, "--run"),
        "launcher": _split(launcher, "--launcher"),
        "ncu_path": ncu_path,
        "clock_control": clock_control,
        "run_timeout_s": run_timeout_s,
    }
    try:
        resolved = _resolve_settings(workspace, trust_workspace=trust_workspace, config=config, flags=flags)
        gpu, resolve = _gpus(gpu_name, gpus_files)
        source_paths = list(sources) or ([target] if is_source_file(target) else [])
        files, notes = _source_files(source_paths)
        outcome = profile_target(
            resolved.settings,
            target,
            workspace=workspace,
            gpu=gpu,
            kernel=kernel,
            args=list(program_args) if program_args else None,
            files=files,
            store=not no_store,
            gpu_resolver=resolve,
        )
    except ProfilingError as exc:
        _fail(exc.message)
    _print_outcome(outcome, notes, as_json, mapped=bool(files))


@profile.command("import")
@click.argument("report", type=click.Path(path_type=Path))
@_with_common
@click.option(
    "--source", "sources", multiple=True, type=click.Path(path_type=Path), help="Source files to map kernels to."
)
@click.option(
    "--ncu", "ncu_path", metavar="PATH", help="ncu to convert a .ncu-rep when the ncu-report package is missing."
)
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="User config file.")
def import_cmd(report, workspace, gpu_name, gpus_files, as_json, no_store, sources, ncu_path, config) -> None:
    """Import REPORT (.ncu-rep or `ncu --csv --page raw --print-units base` output)."""
    workspace = (workspace or Path.cwd()).resolve()
    try:
        # Converting a .ncu-rep may run ncu: only user-level settings may say which one.
        resolved = _resolve_settings(workspace, trust_workspace=False, config=config, flags={"ncu_path": ncu_path})
        gpu, resolve = _gpus(gpu_name, gpus_files)
        files, notes = _source_files(list(sources))
        outcome = import_and_store(
            report, workspace=workspace, gpu=gpu, files=files, ncu_argv=[resolved.settings.ncu_path],
            store=not no_store, gpu_resolver=resolve,
        )
    except ProfilingError as exc:
        _fail(exc.message)
    _print_outcome(outcome, notes, as_json, mapped=bool(files))


@profile.command("verify")
@click.argument("executable", type=click.Path(path_type=Path))
@click.option("--kernel", required=True, help="The kernel whose launch is being tuned.")
@click.option("--current", "current_block", type=int, required=True, help="The block size the code uses now.")
@click.option("--proposed", "proposed_block", type=int, required=True, help="The proposed block size.")
@click.option(
    "--sizes", metavar="N,N,...", help="Block sizes to time (default: current, proposed, proposed/2, proposed*2)."
)
@click.option(
    "--run",
    "run_command",
    metavar="COMMAND",
    help='Run template; "{block}" passes the block size (else $PERFLSP_BLOCK_SIZE).',
)
@click.option("--launcher", metavar="PREFIX", help="Launcher prefix for a remote GPU.")
@click.option("--ncu", "ncu_path", metavar="PATH", help="The ncu executable.")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), help="User config file.")
@click.option("--trust-workspace", is_flag=True, help="Take commands from the workspace's .perflsp.toml.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.argument("program_args", nargs=-1, type=click.UNPROCESSED)
def verify_cmd(
    executable,
    kernel,
    current_block,
    proposed_block,
    sizes,
    run_command,
    launcher,
    ncu_path,
    config,
    trust_workspace,
    as_json,
    program_args,
) -> None:
    """Time KERNEL in EXECUTABLE at the current and proposed block sizes (and around them)."""
    try:
        block_sizes = [int(s) for s in sizes.split(",")] if sizes else None
    except ValueError:
        _fail(f"--sizes: expected comma-separated integers, got {sizes!r}", 2)
    if (block_sizes is not None and any(s <= 0 for s in block_sizes)) or current_block <= 0 or proposed_block <= 0:
        _fail("block sizes must be positive", 2)
    flags = {
        "enabled": True,
        "run_command": _split(run_command, "--run"),
        "launcher": _split(launcher, "--launcher"),
        "ncu_path": ncu_path,
    }
    try:
        resolved = _resolve_settings(Path.cwd(), trust_workspace=trust_workspace, config=config, flags=flags)
        exe = executable.resolve()
        if not exe.is_file():
            _fail(f"no such executable: {executable}", 2)
        result = verify_launch_params(
            resolved.settings,
            exe=exe,
            kernel=kernel,
            current_block=current_block,
            proposed_block=proposed_block,
            sizes=block_sizes,
            args=list(program_args) if program_args else None,
        )
    except ProfilingError as exc:
        _fail(exc.message)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    for timing in result.timings:
        marks = []
        if timing.block_size == current_block:
            marks.append("current")
        if timing.block_size == proposed_block:
            marks.append("proposed")
        what = (
            f"{_num(timing.per_launch_ns / 1e3)} µs per launch ({timing.launches} launches)"
            if timing.per_launch_ns
            else f"failed: {timing.error}"
        )
        click.echo(f"block {timing.block_size:>5}: {what}{'  [' + ', '.join(marks) + ']' if marks else ''}")
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(result.summary())
