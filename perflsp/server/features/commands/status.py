"""perflsp.status {} -> the perflsp/status payload."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perflsp.server.features import status

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


async def status_command(ls: ServerContext, arg: dict[str, Any]) -> dict[str, Any]:
    return status.payload(ls)



__all__ = ["status_command"]
