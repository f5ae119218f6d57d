"""The server's garbage-collection policy (server/memory.py): full collections wait for idle moments."""

import asyncio
import gc
import weakref

import pytest

from perflsp.server import memory

pytestmark = pytest.mark.asyncio


class Cycle:
    def __init__(self) -> None:
        self.me = self  # only the cyclic collector can free it


@pytest.fixture
def unfrozen():
    yield
    gc.unfreeze()  # the test froze the whole process's heap: give it back to the collector
    gc.collect()


async def test_a_publication_freezes_the_heap_and_an_idle_moment_collects_it(unfrozen):
    collector = memory.CycleCollector(idle_s=0.05)
    busy = [True]
    garbage = weakref.ref(Cycle())
    collector.published(lambda: busy[0])
    assert gc.get_freeze_count() > 0 and gc.get_count()[0] < 10  # what existed is frozen
    gc.collect()
    assert garbage() is not None  # frozen: no collection during typing reaches it
    await asyncio.sleep(0.15)
    assert garbage() is not None and collector.collections == 0  # an analysis still ran: not idle
    busy[0] = False
    collector._collected_at = 0  # (the test's heap did not grow by a quarter since start-up)
    collector.published(lambda: busy[0])
    await asyncio.sleep(0.15)
    assert collector.collections == 1 and garbage() is None  # idle: collected in full
    assert gc.get_freeze_count() > 0  # and what lives is frozen again
    collector.close()


async def test_an_idle_moment_skips_the_collection_when_the_heap_did_not_grow(unfrozen):
    collector = memory.CycleCollector(idle_s=0.05)
    collector.published(lambda: False)
    await asyncio.sleep(0.15)
    first = collector.collections
    collector.published(lambda: False)  # nothing new since: the idle moment passes without work
    await asyncio.sleep(0.15)
    assert collector.collections == first
    collector.close()


async def test_give_back_collects_frozen_garbage(unfrozen):
    garbage = weakref.ref(Cycle())
    gc.freeze()
    memory.give_back()
    assert garbage() is None


async def test_memory_is_given_back_after_closes_only_once_publications_stop(monkeypatch):
    """A trim (a full collection, ~0.1 s with a large file analysed) waits while another open
    document is being typed in: it runs once no publication came for `TRIM_DELAY_S`."""
    import time
    from types import SimpleNamespace

    from perflsp.server.app import PerfLanguageServer

    given: list[float] = []
    monkeypatch.setattr(memory, "give_back", lambda: given.append(time.monotonic()))
    monkeypatch.setattr(memory, "TRIM_DELAY_S", 0.2)
    server = SimpleNamespace(pool=SimpleNamespace(busy=False), cycles=SimpleNamespace(last_published=0.0),
                             _trim=None)
    trim = PerfLanguageServer._trim_when_idle.__get__(server)
    server._trim_when_idle = trim
    typing_until = time.monotonic() + 0.6
    server.cycles.last_published = time.monotonic()
    trim(10)
    while time.monotonic() < typing_until:  # publications keep coming (someone types elsewhere)
        server.cycles.last_published = time.monotonic()
        assert not given
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    assert len(given) == 1 and given[0] - server.cycles.last_published >= memory.TRIM_DELAY_S
