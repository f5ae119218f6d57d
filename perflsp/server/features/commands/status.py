"""perflsp.status {} -> the perflsp/status payload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp.server.features import status
from perflsp.server.json_types import CommandArgument, JsonObject

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


async def status_command(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    return status.payload(ls)



__all__ = ["status_command"]
