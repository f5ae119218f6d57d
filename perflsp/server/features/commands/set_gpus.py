"""perflsp.setGpus {gpus: [names]} -> {gpus: [ids]}: the session's GPUs (over the settings'); every
open document is analysed again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp.server.features.commands.common import CommandError
from perflsp.server.json_types import CommandArgument, JsonObject

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


async def set_gpus(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    names = arg.get("gpus")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise CommandError("`gpus` must be a non-empty list of GPU names")
    config = ls.config_for(ls.initialized_workspace.folders[0].uri)
    problems = []
    for name in names:
        if config.database.find(name) is None:
            suggestions = config.database.suggestions(name)
            problems.append(f"unknown GPU '{name}'" + (f"; did you mean {', '.join(suggestions)}?" if suggestions else ""))
    if problems:
        raise CommandError("; ".join(problems))
    from perflsp.server.lifecycle import refresh_all

    ls.initialized_workspace.session = {"gpus": names}
    await refresh_all(ls)
    return {"gpus": list(ls.config_for(ls.initialized_workspace.folders[0].uri).gpu_ids)}



__all__ = ["set_gpus"]
