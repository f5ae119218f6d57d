"""Document sync end to end: incremental edits, stale versions, bursts, cancellation, pull mode."""

import asyncio
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcRequestCancelled

from perflsp.server.config import Layer, Origin, resolve
from perflsp.server.oneshot import analyse_text, diagnostic_keys
from tests.server.lsp_session import EXAMPLES, replace, session

pytestmark = pytest.mark.asyncio


def fresh_keys(text: str, path: Path, gpus=("h100",)):
    config = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": list(gpus)})])
    return diagnostic_keys(analyse_text(text, path.as_uri(), config, path=str(path)).diagnostics)


def big_file(lines: int) -> str:
    from benchmarks.lsp_latency import generate_big_file

    return generate_big_file(lines)


async def test_incremental_edits(tmp_path):
    shutil.copytree(EXAMPLES / "lints", tmp_path / "lints")
    shutil.copy(EXAMPLES / "cuda" / "check.cuh", tmp_path / "check.cuh")
    path = tmp_path / "lints" / "precision_slips.cu"
    text = path.read_text()
    async with session(tmp_path) as s:
        await s.open(path)
        uri = path.as_uri()
        # type a line into a kernel, one character per didChange, without waiting
        line = next(i for i, l in enumerate(text.splitlines()) if l.startswith("{")) + 1
        typed = "    float extra = 3.0 * 2.0f;\n"
        column = 0
        for ch in typed:
            s.change(uri, [replace((line, column), (line, column), ch)])
            line, column = (line + 1, 0) if ch == "\n" else (line, column + 1)
        final = s.versions[uri]
        final_published = s.expect_diagnostics(uri, final)
        await asyncio.wait_for(final_published, 60)
        published = await s.settled(uri)
        versions = [p.version for p in s.published[uri]]
        assert versions == sorted(versions), "a result for an older version was published after a newer one"
        assert final in versions and published.version == final
        lines = text.splitlines(keepends=True)
        target = next(i for i, l in enumerate(lines) if l.startswith("{")) + 1
        expected_text = "".join(lines[:target]) + typed + "".join(lines[target:])
        assert diagnostic_keys(published.diagnostics) == fresh_keys(expected_text, path)
        assert any(d.code == "precision/double-promotion" and d.range.start.line == target for d in published.diagnostics)


async def test_stale_results_are_dropped_and_requests_can_be_cancelled(tmp_path):
    path = tmp_path / "big.cu"
    text = big_file(6000)
    path.write_text(text)
    shutil.copy(EXAMPLES / "cuda" / "check.cuh", tmp_path / "check.cuh")
    async with session(tmp_path) as s:
        uri = path.as_uri()
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))
        s.versions[uri] = 1
        # a request waiting for the analysis (a command reads the complete analysis; hover and the
        # other reads answer at once) is cancelled: the server answers RequestCancelled
        future = s.client.protocol.send_request(lsp.WORKSPACE_EXECUTE_COMMAND, lsp.ExecuteCommandParams(
            command="perflsp.explainKernel", arguments=[{"uri": uri, "kernel": "bias_silu", "quiet": True}]),
            msg_id="cancel-me")
        s.client.protocol.notify("$/cancelRequest", lsp.CancelParams(id="cancel-me"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(asyncio.wrap_future(future), 30)
        # edits arriving while an analysis runs make it stale; a burst is analysed fewer times than
        # it has edits (each edit in host code re-analyses the whole file)
        host = next(i for i, l in enumerate(text.splitlines()) if l.startswith("int main_"))  + 2
        for _ in range(8):
            s.change(uri, [replace((host, 0), (host, 0), "    int unused_counter = 0;\n")])
        final = s.versions[uri]
        last = s.expect_diagnostics(uri, final)
        await asyncio.wait_for(last, 120)
        await s.settled(uri, 120)
        versions = [p.version for p in s.published[uri]]
        assert versions == sorted(versions) and versions[-1] == final
        assert len(set(versions)) < final, versions
        # the server still answers
        hover = await s.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri=uri), lsp.Position(0, 3)))
        assert hover is None


async def test_large_file_publishes_early_then_completes(tmp_path):
    path = tmp_path / "big.cu"
    text = big_file(10000)
    path.write_text(text)
    async with session(tmp_path) as s:
        uri = path.as_uri()
        first = await s.open(path, timeout=120)
        assert first.version == 1
        complete = s.published[uri][-1]
        kernels = text.count("__global__")
        assert len([d for d in complete.diagnostics if d.code.startswith("roofline/")]) >= kernels - 5


async def test_an_edit_right_after_open_is_not_lost(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    text = path.read_text()
    async with session(tmp_path) as s:
        uri = path.as_uri()
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))
        s.versions[uri] = 1
        final = s.expect_diagnostics(uri, 2)
        s.change(uri, [replace((0, 0), (0, 0), "// one\n// two\n")])
        await asyncio.wait_for(final, 30)
        published = await s.settled(uri)
        assert published.version == 2
        assert diagnostic_keys(published.diagnostics) == fresh_keys("// one\n// two\n" + text, path)


async def test_pull_diagnostics(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    async with session(tmp_path, pull=True) as s:
        assert s.statuses[-1]["diagnostics"] == "pull"
        uri = path.as_uri()
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=path.read_text())))
        report = await asyncio.wait_for(s.client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), 30)
        assert report.kind == "full" and [d.code for d in report.items] == ["roofline/bandwidth-bound"]
        again = await asyncio.wait_for(s.client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), previous_result_id=report.result_id)), 30)
        assert again.kind == "unchanged"
        s.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2), [replace((0, 0), (0, 0), "// x\n")]))
        changed = await asyncio.wait_for(s.client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), previous_result_id=report.result_id)), 30)
        assert changed.kind == "full" and changed.items[0].range.start.line == report.items[0].range.start.line + 1
        assert uri not in s.published  # pull clients get no pushed diagnostics
