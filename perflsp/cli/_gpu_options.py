"""Options and helpers shared by the hardware commands (`gpus`, `occupancy`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from rich.console import Console

from perflsp.cli.output import fail
from perflsp.hardware import GpuConfigError, GpuDatabase, load_database
from perflsp.hardware.units import parse_size_bytes

gpus_file_option = click.option(
    "--gpus-file",
    "gpus_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="TOML file with extra or overriding [[gpu]] definitions (repeatable).",
)


def load_db_or_fail(gpus_files: Sequence[str]) -> GpuDatabase:
    """The GPU database with the user's files; a bad file is a usage error (exit 2, `perflsp: error:`)."""
    try:
        return load_database(gpus_files)
    except GpuConfigError as exc:
        lines = exc.problems
        head = "invalid GPU definition" + ("s" if len(lines) > 1 else "")
        fail(f"{head}: " + "\n  ".join(lines))  # exit 2: bad configuration, as every command documents


def console() -> Console:
    """Rich console on stdout; wide enough for tables when output is not a terminal."""
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


class SizeType(click.ParamType):
    """A byte size: 16384, 16KiB, 48K, 1MiB."""

    name = "size"

    def convert(self, value, param, ctx) -> int:
        try:
            return parse_size_bytes(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
