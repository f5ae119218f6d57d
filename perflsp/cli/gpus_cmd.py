"""`perflsp gpus`: list the GPU database; `perflsp gpus show NAME`: one GPU in full."""

from __future__ import annotations

import json

import click
from rich.table import Table

from perflsp.cli._gpu_options import console, gpus_file_option, load_db_or_fail
from perflsp.hardware import Gpu, GpuDatabase, Precision, UnknownGpuError
from perflsp.hardware.models import NvidiaArchLimits
from perflsp.hardware.units import format_bytes

_TABLE_PEAKS = (Precision.FP64, Precision.FP32, Precision.FP16, Precision.INT32, Precision.FP16_TENSOR)


@click.group("gpus", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@gpus_file_option
@click.pass_context
def gpus(ctx: click.Context, as_json: bool, gpus_files: tuple[str, ...]) -> None:
    """List the known GPUs with their peaks (TFLOP/s) and memory bandwidth."""
    db = load_db_or_fail(gpus_files)
    ctx.obj = {"db": db, "json": as_json}
    if ctx.invoked_subcommand is not None:
        return
    if as_json:
        click.echo(json.dumps([gpu.summary_json() for gpu in db.all()], indent=2))
        return
    console().print(_overview(db))


def _overview(db: GpuDatabase) -> Table:
    table = Table(title="GPUs", caption="peaks in TFLOP/s (INT32: TOPS); * computed or derived, not quoted")
    for header in ("id", "name", "arch", "SMs", "boost MHz", "mem GB", "BW GB/s", "L2 MiB"):
        table.add_column(header, justify="right" if header not in ("id", "name", "arch") else "left")
    for p in _TABLE_PEAKS:
        table.add_column(p.value.replace("_tensor", " TC").upper(), justify="right")
    for gpu in db.all():
        table.add_row(
            gpu.id, gpu.name, gpu.arch_key, str(gpu.sm_count), f"{gpu.boost_clock_mhz:g}",
            _opt(gpu.memory_gb), f"{gpu.memory_bandwidth_gbs:g}", _opt(gpu.l2_cache_mib),
            *(_peak_cell(gpu, p) for p in _TABLE_PEAKS),
        )
    return table


def _peak_cell(gpu: Gpu, precision: Precision) -> str:
    peak = gpu.peak(precision)
    if peak is None:
        return "-"
    return f"{peak.tflops:.4g}" + ("*" if peak.origin != "quoted" else "")


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@gpus.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def show(obj: dict, name: str, as_json: bool) -> None:
    """Everything known about one GPU: peaks, ridge points, sources, occupancy limits."""
    db: GpuDatabase = obj["db"]
    try:
        gpu = db.get(name)
    except UnknownGpuError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json or obj["json"]:
        click.echo(json.dumps(gpu.detail_json(), indent=2))
        return
    out = console()
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    arch = f"compute capability {gpu.compute_capability}" if gpu.compute_capability else gpu.gfx_target
    clocks = f"boost {gpu.boost_clock_mhz:g} MHz" + (
        f", base {gpu.base_clock_mhz:g} MHz" if gpu.base_clock_mhz else "")
    for label, value in (
        ("name", f"{gpu.name}  ({gpu.id})"),
        ("aliases", ", ".join(gpu.aliases) or "-"),
        ("vendor / arch", f"{gpu.vendor} {gpu.architecture or ''}, {arch}"),
        ("SMs" if gpu.vendor == "NVIDIA" else "compute units", str(gpu.sm_count)),
        ("clocks", clocks),
        ("memory", f"{_opt(gpu.memory_gb)} GB {gpu.memory_type or ''}, {gpu.memory_bandwidth_gbs:g} GB/s"),
        ("L2", f"{_opt(gpu.l2_cache_mib)} MiB" + (
            f", last level {gpu.last_level_cache_mib:g} MiB" if gpu.last_level_cache_mib else "")),
        ("power", f"{_opt(gpu.tdp_w)} W"),
        ("defined in", gpu.defined_in),
    ):
        facts.add_row(label, value)
    out.print(facts)

    peaks = Table(title="peaks (dense)")
    for header in ("precision", "TFLOP/s", "ridge ops/B", "clock", "origin", "sources"):
        peaks.add_column(header, justify="right" if header in ("TFLOP/s", "ridge ops/B") else "left")
    for precision, peak in gpu.peaks.items():
        peaks.add_row(precision.value, f"{peak.tflops:.4g}", f"{gpu.ridge(precision):.3g}",
                      peak.describe_clock(), peak.origin, ", ".join(peak.sources))
    out.print(peaks)
    if gpu.unsupported:
        out.print(f"unsupported: {', '.join(gpu.unsupported)}")
    if gpu.unknown:
        out.print(f"unknown (no source found): {', '.join(gpu.unknown)}")

    lim = gpu.limits
    if isinstance(lim, NvidiaArchLimits):
        out.print(
            f"occupancy limits (cc {lim.key}): warp {lim.warp_size}, {lim.max_threads_per_sm} threads / "
            f"{lim.max_blocks_per_sm} blocks / {lim.registers_per_sm} registers per SM, "
            f"{format_bytes(lim.shared_memory_per_sm_bytes)} shared memory per SM "
            f"(up to {format_bytes(lim.max_shared_memory_per_block_bytes)} per block)"
        )
    else:
        out.print(
            f"occupancy limits ({lim.key}): warp/wave {lim.warp_size}, {lim.max_warps_per_sm} "
            f"waves per CU, up to {format_bytes(lim.max_shared_memory_per_block_bytes)} LDS/SLM per block"
        )
    if gpu.notes:
        out.print(f"notes: {gpu.notes}")
