"""The `perflsp` command.

Subcommands live in their own modules and are imported only when invoked, so `perflsp serve`
starts without loading the analysis stack it does not need yet.
"""

from __future__ import annotations

import importlib

import click

from perflsp import __version__

# name -> "module:attribute" of a click.Command
SUBCOMMANDS: dict[str, str] = {
    "cache": "perflsp.cli.cache_cmd:cache",
    "check": "perflsp.cli.check_cmd:check",
    "eval": "perflsp.cli.eval_cmd:eval_cmd",
    "explain": "perflsp.cli.explain_cmd:explain",
    "gpus": "perflsp.cli.gpus_cmd:gpus",
    "kernels": "perflsp.cli.kernels_cmd:kernels",
    "occupancy": "perflsp.cli.occupancy_cmd:occupancy_cmd",
    "profile": "perflsp.cli.profile_cmd:profile",
    "serve": "perflsp.cli.serve_cmd:serve",
    "tune": "perflsp.cli.tune_cmd:tune",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflsp")
def cli() -> None:
    """Roofline verdicts, lints and launch tuning for CUDA and OpenMP offload code."""


def main() -> None:
    cli(prog_name="perflsp")
