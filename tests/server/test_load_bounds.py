"""Responsive and bounded under load and at the edges (issue 15): requests read the newest
snapshot instead of waiting for analyses, the work pool ranks documents, a cancelled request
stops, the size limit and the per-file analysis budget, memory released on close; end to end
the refusal of a file over the size limit. `benchmarks/lsp_load.py` measures the same under
load (latency percentiles, RSS curves, staleness against a fresh server)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from perflsp.analysis.pipeline import FileAnalysis
from perflsp.server import engine_adapter
from perflsp.server.analysis import Analyzer
from perflsp.server.config import defaults
from perflsp.server.documents import Snapshot
from perflsp.server.features import code_actions, diagnostics
from perflsp.server.pool import WorkPool
from perflsp.server.scheduler import DocumentWorker
from perflsp.server.text import Change, TextState
from perflsp.source.files import MAX_FILE_BYTES
from perflsp.source.positions import Position
from tests.server.lsp_session import session
from tests.server.test_scheduler import Host

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "cuda" / "saxpy.cu"
IMAGE = ROOT / "examples" / "cuda" / "image_pipeline.cu"
pytestmark = pytest.mark.asyncio


class PoolHost(Host):
    def __init__(self) -> None:
        super().__init__()
        self.pool = WorkPool(1)


def body_line(text: str, kernel: str) -> int:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if f"void {kernel}(" in line or (f" {kernel}(" in line
                 and "__global__" in line))
    return next(i for i in range(start, len(lines)) if "{" in lines[i]) + 1


async def test_requests_read_the_newest_snapshot_while_an_analysis_runs(monkeypatch):
    host = PoolHost()
    text = SAXPY.read_text()
    worker = DocumentWorker(host, "file:///saxpy.cu", text, 1)
    worker._kick()
    first = await asyncio.wait_for(worker.current(), 30)
    assert first.reports()
    slow = threading.Event()
    real = FileAnalysis.report

    def slow_analyze(analysis, kernel, gpus):
        if slow.is_set():
            time.sleep(1.0)
        return real(analysis, kernel, gpus)

    monkeypatch.setattr(FileAnalysis, "report", slow_analyze)
    slow.set()
    line = body_line(text, "saxpy")
    worker.change(2, [Change("    float typed = 2.0f * 3.0f;\n", Position(line, 0), Position(line, 0))])
    await asyncio.sleep(0.1)  # the edit is applied; the analysis now takes a second
    started = time.perf_counter()
    snap = await worker.request()
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, elapsed
    assert snap.version == 2 and snap.provisional and b"float typed" in snap.data
    (report,) = [r for r in snap.reports() if r.name == "saxpy"]
    assert report.kernel in snap.kernels.kernels  # on the new text's kernel (positions of the new text)
    assert await worker.read(lambda s: s.version) == 2
    slow.clear()
    final = await asyncio.wait_for(worker.current(), 30)
    assert final.version == 2 and not final.provisional
    assert (await worker.request()) is final
    worker.close()


async def test_the_pool_runs_the_most_wanted_document_first():
    pool = WorkPool(1)
    gate = threading.Event()
    order: list[str] = []
    blocker = asyncio.ensure_future(pool.run(lambda: (0, 0.0), gate.wait))
    await asyncio.sleep(0.05)
    background = asyncio.ensure_future(pool.run(lambda: (2, 0.0), order.append, "background"))
    visible = asyncio.ensure_future(pool.run(lambda: (1, -5.0), order.append, "visible"))
    urgent = asyncio.ensure_future(pool.run(lambda: (0, 0.0), order.append, "apply"))
    await asyncio.sleep(0.05)
    assert order == [] and pool.waiting == 3
    gate.set()
    await asyncio.gather(blocker, background, visible, urgent)
    assert order == ["apply", "visible", "background"]


async def test_a_cancelled_job_keeps_its_slot_until_its_thread_returns():
    pool = WorkPool(1)
    gate = threading.Event()
    running: list[str] = []
    first = asyncio.ensure_future(pool.run(lambda: (0, 0.0), gate.wait))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(pool.run(lambda: (0, 0.0), running.append, "second"))
    await asyncio.sleep(0.05)
    first.cancel()
    await asyncio.sleep(0.05)
    assert running == []  # the first thread still runs: no second thread meanwhile
    gate.set()
    await asyncio.wait_for(second, 5)
    assert running == ["second"]


async def test_newest_version_wins_under_a_burst_through_the_pool():
    host = PoolHost()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker._kick()
    for version in range(2, 30):
        worker.change(version, [Change("// x\n", Position(0, 0), Position(0, 0))])
        await asyncio.sleep(0.002)
    snap = await asyncio.wait_for(worker.current(), 30)
    assert snap.version == 29 and snap.data.count(b"// x\n") == 28
    versions = [v for v, _ in host.published]
    assert versions == sorted(versions) and versions[-1] == 29 and len(versions) < 28  # stale work dropped


async def test_closing_releases_the_document():
    host = PoolHost()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 30)
    worker.close()
    assert worker.state is None and worker.snapshot is None and worker.latest is None
    assert await worker.request() is None and await worker.current() is None


async def test_a_cancelled_code_action_stops_its_work():
    snap = analysed(SAXPY.read_text())
    params = lsp.CodeActionParams(text_document=lsp.TextDocumentIdentifier(uri=snap.uri),
                                  range=lsp.Range(start=lsp.Position(line=0, character=0),
                                                  end=lsp.Position(line=40, character=0)),
                                  context=lsp.CodeActionContext(diagnostics=[]))
    with pytest.raises(code_actions.Cancelled):
        code_actions.actions(None, None, snap, params, cancelled=lambda: True)


def analysed(text: str, budget_s: float | None = None) -> Snapshot:
    config = defaults()
    state = TextState(text, 1, None)
    analyzer = Analyzer()
    if budget_s is not None:
        analyzer.budget_s = budget_s
    analyzer.start(state, state.extracted, config.gpus, None, (0,), state.lines)
    analysis = analyzer.step(None)
    return Snapshot("file:///x.cu", 1, state.data, state.tree, state.lines, state.extracted.kernels, analysis,
                    config, state.preprocessed)


async def test_the_analysis_budget_leaves_the_rest_of_the_file_unanalysed_and_says_so():
    text = IMAGE.read_text()
    whole = analysed(text)
    assert len(whole.reports()) == 3 and not whole.analysis.unanalysed
    cut = analysed(text, budget_s=0.0)  # spent after the first kernel
    assert len(cut.reports()) == 1 and len(cut.analysis.unanalysed) == 2
    items = diagnostics.build(cut)
    (note,) = [d for d in items if (d.data or {}).get("kind") == "budget"]
    assert "analysis budget of 0 s" in note.message and "2 more" in note.message
    assert f"from line {note.range.start.line + 1} on" in note.message
    assert note.severity == lsp.DiagnosticSeverity.Information
    first = cut.reports()[0].name
    assert {(d.data or {}).get("kernel") for d in items if (d.data or {}).get("kind") == "roofline"} == {first}


# ---------------------------------------------------------------------- end to end


async def test_a_file_over_the_size_limit_is_refused_and_others_stay_responsive(tmp_path):
    big = tmp_path / "huge.cu"
    kernel = "__global__ void k(float *a) { a[threadIdx.x] = 1.0f; }\n"
    text = kernel * (MAX_FILE_BYTES // len(kernel) + 10)
    small = tmp_path / "saxpy.cu"
    small.write_text(SAXPY.read_text())
    async with session(tmp_path) as s:
        await s.open(small)
        uri = big.as_uri()
        published = s.expect_diagnostics(uri, 1)
        started = time.perf_counter()
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))
        refused = await asyncio.wait_for(published, 60)
        assert time.perf_counter() - started < 30
        (note,) = refused.diagnostics
        assert "huge.cu is not analysed: larger than 16 MiB" in note.message
        warnings = [m.message for m in s.client.messages if "huge.cu" in m.message]
        assert len(warnings) == 1 and "16 MiB" in warnings[0]
        hover = await asyncio.wait_for(s.client.text_document_hover_async(lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=small.as_uri()),
            position=lsp.Position(line=body_line(SAXPY.read_text(), "saxpy") - 1, character=20))), 10)
        del hover  # answered (a position between tokens may have nothing to show)
        data = await s.command("perflsp.rooflineData", {})
        assert {"path": str(big), "reason": refused_reason(note.message)} in data["skipped"]
        status = await s.command("perflsp.status", {})
        assert status["skippedDocuments"] == [{"uri": uri, "reason": refused_reason(note.message)}]
        lens = await s.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=uri)))
        assert not lens
        cleared = s.expect_diagnostics(uri)
        s.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
        assert list((await asyncio.wait_for(cleared, 10)).diagnostics) == []
        status = await s.command("perflsp.status", {})
        assert status["skippedDocuments"] == [] and status["openDocuments"] == 1


def refused_reason(message: str) -> str:
    return message.split("is not analysed: ", 1)[1].split(", the limit", 1)[0]


async def test_a_closed_document_stops_its_analysis_at_the_next_kernel():
    analyzer = Analyzer()
    config = defaults()
    state = TextState(IMAGE.read_text(), 1, None)
    analyzer.start(state, state.extracted, config.gpus, None, (0,), state.lines)
    analyzer.cancel()
    assert not analyzer.step(None).complete and analyzer.analysed == 0


async def test_very_large_files_are_linted_in_chunks_within_the_budget(monkeypatch):
    from perflsp.server import analysis

    kernel = "__global__ void k{n}(float *a, double d) {{ a[threadIdx.x] = a[threadIdx.x] * 2.0 + d; }}\n"
    text = "".join(kernel.format(n=n) for n in range(12))
    whole = analysed(text)
    assert whole.analysis.budget_note is None and whole.analysis.findings
    monkeypatch.setattr(analysis, "LINT_CHUNK", 5)
    chunked = analysed(text)  # three calls, the same findings
    assert [(f.code, f.kernel, f.span.start_byte) for f in chunked.analysis.findings] == \
        [(f.code, f.kernel, f.span.start_byte) for f in whole.analysis.findings]

    config = defaults()
    state = TextState(text, 1, None)
    analyzer = Analyzer()
    real = engine_adapter.run_lints

    def first_chunk_spends_the_budget(*args, **kwargs):
        analyzer.budget_s = 0.0
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_adapter, "run_lints", first_chunk_spends_the_budget)
    analyzer.start(state, state.extracted, config.gpus, None, (0,), state.lines)
    cut = analyzer.step(None)
    assert cut.complete and len(cut.reports) == 12 and not cut.unanalysed
    assert "7 of 12 kernels, functions and launch sites were not linted" in cut.budget_note
    assert {f.kernel for f in cut.findings} <= {f"k{n}" for n in range(5)}
    snap = Snapshot("file:///x.cu", 1, state.data, state.tree, state.lines, state.extracted.kernels, cut, config,
                    state.preprocessed)
    (note,) = [d for d in diagnostics.build(snap) if (d.data or {}).get("kind") == "budget"]
    assert note.range.start.line == 0 and "not linted" in note.message
