"""perflsp.listGpus {uri?} -> {gpus: [...], selected: [ids]}: the GPU database, the configured GPUs marked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


async def list_gpus(ls: ServerContext, arg: dict[str, Any]) -> dict[str, Any]:
    config = ls.config_for(arg.get("uri") or ls.initialized_workspace.folders[0].uri)
    selected = list(config.gpu_ids)
    gpus = [{**g.summary_json(), "selected": g.id in selected} for g in config.database.all()]
    return {"gpus": gpus, "selected": selected}



__all__ = ["list_gpus"]
