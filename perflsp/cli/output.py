"""Terminal output shared by the subcommands: results on stdout, messages on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)

# Exit codes shared by every subcommand (documented in docs/cli.md).
EXIT_OK = 0
EXIT_FINDINGS = 1  # findings at or above --fail-on (check)
EXIT_USAGE = 2  # bad arguments or configuration (click uses 2 as well)
EXIT_UNREADABLE = 3  # some inputs could not be read; results cover the rest


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str))
    sys.stdout.write("\n")


def warn(message: str) -> None:
    stderr.print(f"[yellow]perflsp:[/] {escape(message)}", markup=True, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    import click

    stderr.print(f"[red]perflsp: error:[/] {escape(message)}", markup=True, highlight=False)
    raise click.exceptions.Exit(code)
