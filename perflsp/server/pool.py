"""CPU work of all documents through a few slots, most wanted document first.

Python threads share one interpreter lock: twenty analyses in twenty threads each get a
twentieth of a core, and every request waits behind them. So every document's CPU work (applying
edits, analysing, re-parsing) runs through `WorkPool.run`, which admits `slots` jobs at a time
and, when a slot frees, gives it to the waiting job whose `rank()` is lowest. A worker ranks its
own jobs (`DocumentWorker.rank`): applying edits first (requests wait for it), then documents
someone asked about or edited recently (visible in the editor), then the others (opened in the
background, re-analysed after a configuration change). Analyses run in steps of ~0.1 s, so a
background document yields to a visible one within a step.

A job whose awaiting task is cancelled keeps its slot until its thread returns (a thread cannot
be interrupted), so the pool never runs more than `slots` threads.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

Rank = Callable[[], tuple[float, ...]]  # lowest first (DocumentWorker.rank)
_Entry = tuple[Rank, int, asyncio.Future[None]]  # rank, arrival order, granted when done


class WorkPool:
    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self._free = slots
        self._waiting: list[_Entry] = []
        self._order = itertools.count()
        self.granted = 0  # jobs started (tests, logs)

    @property
    def busy(self) -> bool:
        """Some job's thread is running."""
        return self._free < self.slots

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def run(self, rank: Rank, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        await self._acquire(rank)
        future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        future.add_done_callback(lambda _: self._release())  # when the thread returns, not before
        return await asyncio.shield(future)

    async def _acquire(self, rank: Rank) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            self.granted += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (rank, next(self._order), future)
        self._waiting.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if entry in self._waiting:
                self._waiting.remove(entry)
            elif future.done() and not future.cancelled():
                self._release()  # granted just as we were cancelled: pass it on
            raise

    def _release(self) -> None:
        while self._waiting:
            best = min(self._waiting, key=_key)
            self._waiting.remove(best)
            if not best[2].done():
                self.granted += 1
                best[2].set_result(None)
                return
        self._free += 1


def _key(entry: _Entry) -> tuple[float, ...]:
    rank, order, _ = entry
    try:
        return (*rank(), order)
    except Exception:  # noqa: BLE001 - a broken rank must not stall the pool
        return (99, order)

