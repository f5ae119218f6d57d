"""`perflsp kernels PATH...`: list kernels, OpenMP target regions and launch sites."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from perflsp.cli.output import EXIT_OK, EXIT_UNREADABLE, print_json, stdout, warn

if TYPE_CHECKING:
    from perflsp.kernels.models import LaunchSite


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--device", "with_device", is_flag=True, help="Also list __device__ functions.")
def kernels(paths: tuple[Path, ...], as_json: bool, with_device: bool) -> None:
    """List the GPU kernels, OpenMP target regions and launch sites in files or folders.

    Folders are searched recursively for C, C++ and CUDA sources. Exit code 0 when every input
    was read, 3 when some could not be (they are named on stderr; the rest is still listed).
    """
    from perflsp.analysis.reader import ReadContext, read_kernels
    from perflsp.kernels.compile_db import DiscoveredDatabases
    from perflsp.kernels.includes import IncludeResolver
    from perflsp.kernels.serialize import function_json, launch_json, region_json
    from perflsp.source.files import SkippedFile, iter_source_paths

    entries: list[dict] = []
    skipped = 0
    resolver, compile_db = IncludeResolver(), DiscoveredDatabases()  # as `perflsp check` reads each file
    for item in iter_source_paths(paths):
        result = item if isinstance(item, SkippedFile) else read_kernels(item, ReadContext.of(item, resolver, compile_db))
        if isinstance(result, SkippedFile):
            warn(f"skipped {result.path}: {result.reason}")
            skipped += 1
            continue
        file = result.path
        for note in result.notes:
            warn(f"{file}: {note}")
        functions = result.kernels + (result.device_functions if with_device else [])
        sites_of: dict[str, list[LaunchSite]] = {}  # one pass: launches_of per kernel is O(kernels x launches)
        for site in result.launches:
            if site.kernel is not None:
                sites_of.setdefault(site.kernel, []).append(site)
        for fn in sorted(functions, key=lambda f: f.name_span.start_byte):
            entries.append(function_json(fn, file, sites_of.get(fn.qualified_name, []) if fn.is_kernel else []))
        for region in result.omp_regions:
            entries.append(region_json(region, file))
        for site in result.launches:
            if site.kernel is None:
                entries.append(launch_json(site, file))
    if as_json:
        print_json(entries)
    else:
        _print_table(entries)
    raise click.exceptions.Exit(EXIT_UNREADABLE if skipped else EXIT_OK)


def _launch_shape(site: dict) -> str:
    def dim(value: dict | None) -> str:
        if value is None:
            return "?"
        v = value["value"]
        if v is None:
            return value["expression"]
        return "×".join(str(x) for x in (v if isinstance(v, list) else [v]) if x != 1) or "1"

    return f"<<<{dim(site['grid'])}, {dim(site['block'])}>>>"


TABLE_MAX_ROWS = 300  # above this, plain aligned columns: rich's table layout costs ~10 ms a row


def _rows(entries: list[dict]) -> list[tuple[str, str, str, str]]:
    rows = []
    for e in entries:
        location = f"{e['file']}:{e['line']}"
        if e["entry"] == "launch":
            rows.append((location, "launch", e["callee"], f"{_launch_shape(e)} kernel not in this file"))
        elif e["kind"] == "omp":
            clauses = " ".join(c["name"] for c in e["clauses"])
            rows.append((location, "omp", e["name"], f"{e['directive']} [{clauses}]" if clauses else e["directive"]))
        else:
            launches = ", ".join(f"l{s['line']} {_launch_shape(s)}" for s in e["launch_sites"])
            details = e["space"] if e["space"] != "global" else (f"launched {launches}" if launches else "no launch in file")
            rows.append((location, "cuda", e["qualified_name"], details))
    return rows


def _print_table(entries: list[dict]) -> None:
    from rich.table import Table

    rows = _rows(entries)
    kernel_count = sum(e["entry"] == "kernel" for e in entries)
    if len(rows) > TABLE_MAX_ROWS:
        _print_plain(rows)
        stdout.print(f"{kernel_count} kernels")
        return
    table = Table(show_lines=False, header_style="bold")
    for column in ("location", "kind", "name", "details"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    stdout.print(table)
    stdout.print(f"{kernel_count} kernels")


def _print_plain(rows: list[tuple[str, str, str, str]]) -> None:
    """Left-aligned columns (the last one unpadded), written in one piece: linear in the rows."""
    header = ("location", "kind", "name", "details")
    widths = [min(80, max(len(row[i]) for row in [header, *rows])) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row[:3], widths)), row[3]]).rstrip()
             for row in [header, *rows]]
    stdout.file.write("\n".join(lines) + "\n")
    stdout.file.flush()
