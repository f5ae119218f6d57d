"""`$/progress` for work that may take a while: the progress bar appears only if the work is
still running after `DELAY_S` (short work shows nothing) and the client supports it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from pygls.progress import Progress as ClientProgress

log = logging.getLogger(__name__)
DELAY_S = 0.5


class ProgressClient(Protocol):
    """What a progress bar uses of the server (`context.ServerContext` has it)."""

    def capability(self, path: str) -> bool: ...

    @property
    def work_done_progress(self) -> ClientProgress: ...


class Progress:
    def __init__(self, ls: ProgressClient, title: str, token: lsp.ProgressToken | None = None):
        self.ls = ls
        self.title = title
        self.token: lsp.ProgressToken | None = token  # a client-provided workDoneToken, if any
        self.started = False
        self.message: str | None = None
        self.percentage: int | None = None

    async def begin(self) -> None:
        """Show the bar (when the client supports it); `progress()` calls this after its delay."""
        if self.token is None:
            if not self.ls.capability("window.work_done_progress"):
                return
            token = str(uuid.uuid4())
            try:
                await asyncio.wait_for(self.ls.work_done_progress.create_async(token), 5)
            except Exception as exc:  # noqa: BLE001 - no progress bar is not an error
                log.debug("progress not created: %s", exc)
                return
            self.token = token
        self.ls.work_done_progress.begin(self.token, lsp.WorkDoneProgressBegin(
            title=self.title, cancellable=False, message=self.message, percentage=self.percentage))
        self.started = True

    def report(self, message: str, percentage: int | None = None) -> None:
        self.message, self.percentage = message, percentage
        if self.started and self.token is not None:
            self.ls.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=message, percentage=percentage))

    def end(self, message: str | None = None) -> None:
        if self.started and self.token is not None:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.started = False


@contextlib.asynccontextmanager
async def progress(ls: ProgressClient, title: str, token: lsp.ProgressToken | None = None,
                   delay: float = DELAY_S) -> AsyncIterator[Progress]:
    """A progress bar for the block's work; `delay` 0 shows it at once (work known to be long)."""
    bar = Progress(ls, title, token)

    async def later() -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        await bar.begin()

    starter = asyncio.get_running_loop().create_task(later())
    try:
        yield bar
    finally:
        starter.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starter
        bar.end("done")
