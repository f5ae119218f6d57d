"""What a document worker needs from its host (perflsp.server.host): the language server provides
every capability, and a host with the analysis hooks has them called at the documented points."""

import asyncio
from pathlib import Path

import pytest

from perflsp.server.app import server
from perflsp.server.documents import Snapshot
from perflsp.server.host import AnalysisHooks, PooledHost
from perflsp.server.measured import SnapshotMeasured
from perflsp.server.scheduler import DocumentWorker, Published
from tests.server.test_scheduler import Host

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "cuda" / "saxpy.cu"


class HookedHost(Host):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int | None]] = []

    def annotate(self, worker: DocumentWorker, snap: Snapshot) -> None:
        self.calls.append(("annotate", snap.version))

    def published_hook(self, worker: DocumentWorker, snap: Snapshot) -> None:
        self.calls.append(("published", snap.version))

    def diagnostics_refreshed(self, worker: DocumentWorker) -> None:
        self.calls.append(("refreshed", None))

    def measure(self, snap: Snapshot) -> SnapshotMeasured | None:
        self.calls.append(("measure", snap.version))
        return None


def test_the_language_server_offers_every_optional_capability():
    # found with isinstance: a renamed hook would silently stop the LLM and the measurements
    assert isinstance(server, AnalysisHooks)
    assert isinstance(server, PooledHost)
    assert not isinstance(Host(), AnalysisHooks) and not isinstance(Host(), PooledHost)


@pytest.mark.asyncio
async def test_hooks_run_after_the_analysis_and_after_the_publish():
    host = HookedHost()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker.start()
    snap = await asyncio.wait_for(worker.current(), 30)
    assert snap is not None and snap.version == 1
    assert host.calls == [("annotate", 1), ("published", 1)]
    assert worker.published[-1] == Published(1, True)

    worker.refresh(remeasure=True)  # stored profiles changed: measured again, nothing new to show
    for _ in range(200):
        if ("measure", 1) in host.calls:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert host.calls[2:] == [("measure", 1), ("published", 1)]  # same diagnostics: not republished
    worker.close()


@pytest.mark.asyncio
async def test_a_plain_host_analyses_without_hooks_or_pool():
    host = Host()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker.start()
    snap = await asyncio.wait_for(worker.current(), 30)
    assert snap is not None and snap.advice is None and snap.measured is None
    assert [version for version, _ in host.published] == [1]
    worker.close()
