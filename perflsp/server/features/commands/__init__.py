"""`workspace/executeCommand` handlers, one module per command. Every command takes one JSON object
argument (shapes in docs/server.md) and returns JSON.

- perflsp.explainKernel {uri, kernel, gpu?, quiet?, streamId?} -> {uri, kernel, gpu, markdown, headline, llm, llmMessage, source}
- perflsp.profileKernel {uri, kernel, quiet?}   -> {uri, kernel, status, message, kernels?}
- perflsp.askLaunchParameters {uri, kernel, gpu?} -> {uri, kernel, launches, suggestions, source, llm, actions, rejected}
- perflsp.importProfile {path, uri?, gpu?}      -> {path, storedAt, gpu, kernels, notes, message}
- perflsp.verifyLaunchParameters {uri, kernel, current, proposed} -> {status, message, verification}
- perflsp.listGpus {}                           -> {gpus: [...], selected: [ids]}
- perflsp.setGpus {gpus: [names]}               -> {gpus: [ids]}
- perflsp.rooflineData {scope?: open|workspace, uri?} -> {gpus, kernels, skipped}
- perflsp.status {}                             -> the perflsp/status payload
- perflsp.tuneKernel, perflsp.importTuningCache, perflsp.cancelTuning: Kernel Tuner runs (features/tuning.py)

`COMMANDS` is the registry: each command's name and the function that answers it, imported when
the command is first run (so registering the commands imports none of them). The shared helpers
are in `common.py`, the JSON of the answers in `serialize.py`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from perflsp.server.json_types import CommandArgument, JsonObject

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext

Handler = Callable[["ServerContext", CommandArgument], Awaitable[JsonObject]]

_HERE = __name__
COMMANDS: dict[str, str] = {  # command -> "module:function" answering it
    "perflsp.explainKernel": f"{_HERE}.explain:explain_kernel",
    "perflsp.profileKernel": f"{_HERE}.profile:profile_kernel",
    "perflsp.askLaunchParameters": f"{_HERE}.launch_parameters:ask_launch_parameters",
    "perflsp.listGpus": f"{_HERE}.list_gpus:list_gpus",
    "perflsp.setGpus": f"{_HERE}.set_gpus:set_gpus",
    "perflsp.rooflineData": f"{_HERE}.roofline:roofline_data",
    "perflsp.status": f"{_HERE}.status:status_command",
    "perflsp.importProfile": f"{_HERE}.import_profile:import_profile",
    "perflsp.verifyLaunchParameters": f"{_HERE}.verify:verify_launch_parameters",
    "perflsp.tuneKernel": "perflsp.server.features.tuning:tune_kernel",
    "perflsp.importTuningCache": "perflsp.server.features.tuning:import_tuning_cache",
    "perflsp.cancelTuning": "perflsp.server.features.tuning:cancel_tuning",
}


def handler(command: str) -> Handler:
    """The function answering `command` (KeyError for a command not in `COMMANDS`)."""
    module, _, name = COMMANDS[command].partition(":")
    found: Handler = getattr(importlib.import_module(module), name)
    return found


async def run(ls: ServerContext, command: str, args: list[object]) -> JsonObject:
    """Answer `command` with its arguments as the client sent them."""
    from perflsp.server.features.commands.common import argument

    arg = argument(args)
    return await handler(command)(ls, arg)


__all__ = ["COMMANDS", "Handler", "handler", "run"]
