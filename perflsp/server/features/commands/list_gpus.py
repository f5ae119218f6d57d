"""perflsp.listGpus {uri?} -> {gpus: [...], selected: [ids]}: the GPU database, the configured GPUs marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp.server.features.commands.common import text_argument
from perflsp.server.json_types import CommandArgument, JsonObject

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


async def list_gpus(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    config = ls.config_for(text_argument(arg, "uri") or ls.initialized_workspace.folders[0].uri)
    selected = list(config.gpu_ids)
    gpus = [{**g.summary_json(), "selected": g.id in selected} for g in config.database.all()]
    return {"gpus": gpus, "selected": selected}



__all__ = ["list_gpus"]
