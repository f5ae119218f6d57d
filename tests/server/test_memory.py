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
                             _trim=None, drop_file_caches=lambda: None)
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


HEADER = """#pragma once
#define SCALE 2.0f
__device__ float scaled(float v) { return SCALE * v; }
"""
SIBLING = """__device__ float offset(float v) { return v + 1.0f; }
"""
MAIN = """#include "helpers.cuh"
__device__ float offset(float v);
__global__ void k(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = scaled(x[i]) + offset(x[i]);
}
int main() {
    const int n = 1 << 20;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    k<<<(n + 255) / 256, 256>>>(n, x, y);
    return 0;
}
"""


class Sink:
    def __init__(self):
        self.written = []

    def write(self, data):
        self.written.append(data)

    def close(self):
        pass


async def test_a_closed_document_leaves_nothing_in_the_caches(tmp_path, monkeypatch, unfrozen):
    """What the analysis of a document read of other files (its header, the sibling source that
    defines a callee, the include resolver's directives) is dropped once it closes, with the
    document's own state: nothing of it stays in the server."""
    from lsprotocol import types as lsp

    from perflsp.server import lifecycle
    from perflsp.server.app import PerfLanguageServer, did_close
    from perflsp.server.workspace import WorkspaceState

    (tmp_path / "helpers.cuh").write_text(HEADER)
    (tmp_path / "offset.cu").write_text(SIBLING)
    main = tmp_path / "main.cu"
    main.write_text(MAIN)
    monkeypatch.setattr(memory, "TRIM_DELAY_S", 0.05)
    memory.drop_file_caches()  # (what earlier tests of this process left)
    ls = PerfLanguageServer()
    ls.protocol.set_writer(Sink())
    ls.workspace_state = WorkspaceState([(tmp_path.as_uri(), tmp_path)], {})
    ls.ready.set()
    uri = main.as_uri()
    lifecycle.open_document(ls, lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=MAIN)))
    worker = ls.workers[uri]
    snap = await asyncio.wait_for(worker.current(), 60)
    assert snap is not None and snap.complete
    assert memory.file_cache_entries() > 0 and ls.workspace_state.remembered_files > 0  # (what to drop)
    gone = weakref.ref(worker)
    del worker, snap

    did_close(ls, lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    for _ in range(200):  # the trim after the close (TRIM_DELAY_S, once no job runs)
        if ls._trim is None:
            break
        await asyncio.sleep(0.02)
    assert ls._trim is None
    assert memory.file_cache_entries() == 0 and ls.workspace_state.remembered_files == 0
    assert uri not in ls.workers and uri not in ls.recent and uri not in ls.perf_protocol._encoded
    gc.collect()
    assert gone() is None  # the worker (its text, trees, extraction, analysis) is garbage
    ls.cycles.close()
