"""Line framings of the streaming protocols: Server-Sent Events and newline-delimited JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """(event name, data) per event; a final event without its blank line is still delivered."""
    event: str | None = None
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue  # comment / keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)


async def iter_ndjson_lines(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for line in lines:
        if line.strip():
            yield line
