"""Server logging: stderr always (stdout is the protocol channel), and `window/logMessage` to the
editor at the configured level (`perflsp.logLevel`). Records from worker threads are handed to
the event loop, which alone writes to the client."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


class ClientLogHandler(logging.Handler):
    def __init__(self, server: LanguageServer):
        super().__init__(logging.INFO)
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            message = self.format(record)
        except Exception:  # noqa: BLE001 - a log line must never break the server
            return
        level = record.levelno
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # on the loop's thread: send now, in order with other messages
            self._send(level, message)
            return
        try:
            loop.call_soon_threadsafe(self._send, level, message)
        except RuntimeError:  # loop closed while shutting down
            pass

    def _send(self, level: int, message: str) -> None:
        from lsprotocol import types as lsp

        kind = (lsp.MessageType.Error if level >= logging.ERROR else lsp.MessageType.Warning if level >= logging.WARNING
                else lsp.MessageType.Info if level >= logging.INFO else lsp.MessageType.Log)
        try:
            self.server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001 - the client may be gone
            pass


def setup(level: str, server: LanguageServer) -> ClientLogHandler:
    """stderr for everything at `level` (pygls' own chatter from WARNING), the client for perflsp's."""
    root = logging.getLogger()
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [stderr]
    root.setLevel(logging.WARNING)
    ours = logging.getLogger("perflsp")
    ours.setLevel(LEVELS.get(level, logging.INFO))
    client = ClientLogHandler(server)
    client.setLevel(LEVELS.get(level, logging.INFO))
    ours.addHandler(client)
    return client


def set_level(handler: ClientLogHandler | None, level: str) -> None:
    value = LEVELS.get(level, logging.INFO)
    logging.getLogger("perflsp").setLevel(value)
    if handler is not None:
        handler.setLevel(value)
