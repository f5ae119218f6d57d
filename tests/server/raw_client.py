"""A raw JSON-RPC client of `perflsp serve` (no LSP library): frames as bytes, so that tests can send
what a conforming client never would; the server's log (stderr) goes to a file."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.server.lsp_session import ROOT, server_env


def frame(body: bytes, length: bytes | None = None) -> bytes:
    return b"Content-Length: " + (length if length is not None else b"%d" % len(body)) + b"\r\n\r\n" + body


def message(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


class RawServer:
    """`perflsp serve` over pipes, its log (stderr) in a file; responses collected by id."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path):
        self.process, self.log = process, log
        self.responses: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, log: Path, argv: list[str] | None = None, cwd: Path = ROOT) -> RawServer:
        with log.open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                *(argv or [sys.executable, "-m", "perflsp", "serve"]), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=err, env=server_env(), cwd=str(cwd))
        return cls(process, log)

    async def stop(self) -> int | None:
        """`shutdown` and `exit`; the exit code (killed when it does not exit)."""
        try:
            self.write(frame(message(id="stop", method="shutdown")))
            await self.replies({"stop"})
            self.write(frame(message(method="exit")))
            return await asyncio.wait_for(self.process.wait(), 30)
        except (TimeoutError, ConnectionError):
            return None
        finally:
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            self.reader.cancel()

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while True:
                line = await stdout.readline()
                if not line:
                    return
                if not line.strip():
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reply = json.loads(await stdout.readexactly(length))
            if "method" in reply and "id" in reply:  # a request of the server: answer it
                self.write(frame(message(id=reply["id"], result=None)))
            elif "method" not in reply:
                self.responses.append(reply)
                self.arrived.set()

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    async def replies(self, ids: set[Any], nulls: int = 0, timeout: float = 60) -> dict[Any, dict[str, Any]]:
        """Wait until every id in `ids` and `nulls` replies with id null arrived; the replies by id
        (those with id null in a list under None)."""
        async def wait() -> None:
            while not (ids <= {r.get("id") for r in self.responses}
                       and sum(r.get("id") is None for r in self.responses) >= nulls):
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), timeout)
        by_id: dict[Any, Any] = {r["id"]: r for r in self.responses if r.get("id") is not None}
        by_id[None] = [r for r in self.responses if r.get("id") is None]
        return by_id
