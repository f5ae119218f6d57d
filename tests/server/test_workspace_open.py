"""Requests while a document's first analysis runs (a workspace opened with many documents, a
large file): they are answered from what is known, say that it is partial, and the server asks the
client to request them again once the analysis is complete (issue 26). Synchronisation waits on
the protocol (answers, refresh requests, publications), never on time."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from lsprotocol import types as lsp

from benchmarks.lsp_latency import generate_big_file
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse
from tests.server.lsp_session import EXAMPLES, is_partial, session

pytestmark = pytest.mark.asyncio

LINES = 10000  # ~950 kernels: a first analysis of seconds, so the requests below meet it unfinished


def last_kernel(text: str) -> tuple[int, int, str]:
    """(line, column, name) of the name of the file's last kernel (the analysis reaches it last)."""
    data = text.encode()
    kernel = extract(data, parse(data)).kernels[-1]
    start = kernel.name_span.start
    return start.line, start.character + 1, kernel.name


async def test_requests_at_open_are_answered_from_what_is_known_then_refreshed(tmp_path):
    path = tmp_path / "big.cu"
    text = generate_big_file(LINES)
    path.write_text(text)
    shutil.copy(EXAMPLES / "cuda" / "check.cuh", tmp_path / "check.cuh")
    uri = path.as_uri()
    ident = lsp.TextDocumentIdentifier(uri=uri)
    line, column, name = last_kernel(text)
    async with session(tmp_path, refreshes=True) as s:
        seen = dict(s.refreshes)
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))
        s.versions[uri] = 1
        lenses, hover, hints, actions, pulled = await asyncio.gather(
            s.client.text_document_code_lens_async(lsp.CodeLensParams(ident)),
            s.client.text_document_hover_async(lsp.HoverParams(ident, lsp.Position(line, column))),
            s.client.text_document_inlay_hint_async(lsp.InlayHintParams(
                ident, lsp.Range(lsp.Position(0, 0), lsp.Position(LINES, 0)))),
            s.client.text_document_code_action_async(lsp.CodeActionParams(
                ident, lsp.Range(lsp.Position(line, column), lsp.Position(line, column)),
                lsp.CodeActionContext(diagnostics=[]))),
            s.client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=ident)),
        )
        # what is known, and said so: a lens at the top of the file, the kernel's hover
        top = [lens for lens in lenses if lens.range.start.line == 0]
        assert top and all(is_partial(lens) for lens in lenses), [lens.command.title for lens in lenses]
        assert top[0].command.title.startswith(("perflsp: analysing this file", "perflsp: queued for analysis"))
        assert hover is not None and f"{name}`" in hover.contents.value  # (qualified by its namespace)
        assert "Hover again in a moment" in hover.contents.value, hover.contents.value
        assert hints is not None and actions is not None  # answered (what is known: maybe nothing yet)
        assert pulled.result_id.startswith("partial:"), pulled.result_id

        # once the analysis is complete the server asks for lenses, hints and diagnostics again
        await asyncio.wait_for(asyncio.gather(*(s.refreshed(kind, seen[kind])
                                                for kind in ("codeLens", "inlayHint", "diagnostic"))), 120)
        lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(ident))
        assert lenses and not any(is_partial(lens) for lens in lenses)
        verdicts = [lens for lens in lenses if "bound on" in lens.command.title]
        assert len(verdicts) >= text.count("__global__") - 5
        hover = await s.client.text_document_hover_async(lsp.HoverParams(ident, lsp.Position(line, column)))
        assert "Hover again" not in hover.contents.value and "bound" in hover.contents.value
        pulled = await s.client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(text_document=ident))
        assert not pulled.result_id.startswith("partial:")
        assert [d.message for d in pulled.items] == [d.message for d in s.published[uri][-1].diagnostics]


async def test_a_client_without_diagnostic_refresh_still_gets_exact_pulls(tmp_path):
    """A pull is answered from what is known only where the client can be asked to pull again."""
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    async with session(tmp_path, pull=True) as s:
        uri = path.as_uri()
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=path.read_text())))
        report = await asyncio.wait_for(s.client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), 60)
        assert not report.result_id.startswith("partial:")
        assert [d.code for d in report.items] == ["roofline/bandwidth-bound"]
