"""Line framings of the streaming protocols: Server-Sent Events and newline-delimited JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator


class NotAnEventStream(ValueError):
    """The body has no event at all but other text (a JSON document, an error page)."""


_FIELDS = {"event", "data", "id", "retry"}


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """(event name, data) per event; a final event without its blank line is still delivered.

    Raises NotAnEventStream (quoting the start of the text) at the end of a body that held no
    event but lines that are not Server-Sent Events fields."""
    event: str | None = None
    data: list[str] = []
    delivered = False
    stray: str | None = None
    async for line in lines:
        if line == "":
            if data:
                delivered = True
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        name, _, value = line.partition(":")
        if name not in _FIELDS and stray is None:
            stray = line[:80]
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        delivered = True
        yield event, "\n".join(data)
    if not delivered and stray is not None:
        raise NotAnEventStream(repr(stray))


async def iter_ndjson_lines(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for line in lines:
        if line.strip():
            yield line
