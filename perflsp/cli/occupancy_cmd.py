"""`perflsp occupancy`: resident blocks and warps per SM for one kernel configuration."""

from __future__ import annotations

import json

import click
from rich.table import Table

from perflsp.cli._gpu_options import SizeType, console, gpus_file_option, load_db_or_fail
from perflsp.hardware import (
    Gpu,
    OccupancyInputError,
    UnknownGpuError,
    best_block_size,
    what_would_it_take,
)
from perflsp.hardware import (
    occupancy as compute_occupancy,
)
from perflsp.hardware.units import format_bytes, parse_size_bytes

# What the vendors call an SM, a warp and a block.
_WORDS = {"NVIDIA": ("SM", "warps", "blocks"), "AMD": ("CU", "waves", "workgroups"),
          "Intel": ("Xe-core", "sub-groups", "work-groups")}


class CarveoutType(click.ParamType):
    """A percentage (50, 50%) or a size with a unit (64KiB)."""

    name = "carveout"

    def convert(self, value, param, ctx) -> tuple[str, int]:
        text = str(value).strip()
        try:
            if text.endswith("%") or text.isdigit():
                return ("percent", int(text.rstrip("%")))
            return ("bytes", parse_size_bytes(text))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.command("occupancy")
@click.option("--gpu", "gpu_name", required=True, help="GPU name or alias (see `perflsp gpus`).")
@click.option("--threads", type=int, required=True, help="Threads per block.")
@click.option("--regs", type=int, required=True, help="Registers per thread (AMD: VGPRs).")
@click.option("--smem", type=SizeType(), default="0", show_default=True,
              help="Static shared memory per block (16384, 16KiB).")
@click.option("--dynamic-smem", type=SizeType(), default="0", show_default=True,
              help="Dynamic shared memory per block.")
@click.option("--carveout", type=CarveoutType(), default=None,
              help="NVIDIA preferred shared-memory carveout: percent (50) or size (64KiB).")
@click.option("--barriers", type=int, default=1, show_default=True, help="NVIDIA block barriers used.")
@click.option("--sgprs", type=int, default=None, help="AMD: SGPRs per wave.")
@click.option("--subgroup-size", type=int, default=None, help="Intel: sub-group size (16 or 32).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@gpus_file_option
def occupancy_cmd(gpu_name, threads, regs, smem, dynamic_smem, carveout, barriers, sgprs,
                  subgroup_size, as_json, gpus_files) -> None:
    """Active blocks and warps per SM, the limiting factor, the best block size, and what the
    next occupancy step would take."""
    db = load_db_or_fail(gpus_files)
    try:
        gpu = db.get(gpu_name)
    except UnknownGpuError as exc:
        raise click.ClickException(str(exc)) from None
    kwargs = _vendor_kwargs(gpu, carveout, barriers, sgprs, subgroup_size)
    try:
        result = compute_occupancy(gpu.limits, threads, regs, smem, dynamic_smem, **kwargs)
        best = best_block_size(gpu.limits, regs, smem, dynamic_smem, sm_count=gpu.sm_count, **kwargs)
        step = what_would_it_take(gpu.limits, threads, regs, smem, dynamic_smem, **kwargs)
    except OccupancyInputError as exc:
        raise click.ClickException(str(exc)) from None

    if as_json:
        data = {"gpu": gpu.id, "arch": gpu.arch_key,
                "inputs": {"threads_per_block": threads, "registers_per_thread": regs,
                           "static_smem_bytes": smem, "dynamic_smem_bytes": dynamic_smem, **kwargs},
                **result.to_json(), "best_block_size": best.to_json(), "next_step": step.to_json()}
        click.echo(json.dumps(data, indent=2))
        return

    sm, warps, blocks = _WORDS[gpu.vendor]
    out = console()
    out.print(
        f"{gpu.name} ({gpu.arch_key}): {threads} threads, {regs} registers, "
        f"{format_bytes(smem)} static + {format_bytes(dynamic_smem)} dynamic shared memory per block"
    )
    out.print(
        f"[bold]{result.active_blocks_per_sm} {_plural(blocks, result.active_blocks_per_sm)} per {sm}, "
        f"{result.active_warps_per_sm}/"
        f"{result.max_warps_per_sm} {warps}, occupancy {result.occupancy:.1%}[/bold] "
        f"(limited by {', '.join(lim.value.replace('_', ' ') for lim in result.limiters)})"
    )
    table = Table(show_header=True)
    table.add_column("limit")
    table.add_column(f"{blocks} per {sm}", justify="right")
    for limiter, n in result.block_limits.items():
        table.add_row(limiter.value.replace("_", " "), "no limit" if n is None else str(n))
    out.print(table)
    for note in result.notes:
        out.print(f"note: {note}")
    out.print(
        f"best block size: {best.block_size} ({best.active_blocks_per_sm} "
        f"{_plural(blocks, best.active_blocks_per_sm)} per {sm}, "
        f"occupancy {best.occupancy:.1%}; {best.min_grid_size} {blocks} fill the GPU once)"
    )
    for line in step.explanation:
        out.print(f"next step: {line}" if line is step.explanation[0] else f"  {line}")



def _plural(word: str, n: int) -> str:
    return word[:-1] if n == 1 else word


def _vendor_kwargs(gpu: Gpu, carveout, barriers: int, sgprs, subgroup_size) -> dict:
    if gpu.vendor == "NVIDIA":
        kwargs = {"block_barriers": barriers}
        if carveout is not None:
            kind, value = carveout
            kwargs["carveout_percent" if kind == "percent" else "carveout_bytes"] = value
        return kwargs
    if carveout is not None:
        raise click.ClickException(f"--carveout applies to NVIDIA GPUs only ({gpu.id} is {gpu.vendor})")
    if gpu.vendor == "AMD":
        return {"sgprs_per_wave": sgprs} if sgprs is not None else {}
    return {"subgroup_size": subgroup_size} if subgroup_size is not None else {}
