"""Robustness end to end (malformed JSON-RPC: test_jsonrpc_hygiene.py): thousands of random
edits (braces, quotes, pragmas, non-ASCII, deletions) leave a server that answers every request and
whose diagnostics equal a fresh analysis of the final text."""

import asyncio
import itertools
import os
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from perflsp.server.config import resolve
from perflsp.server.oneshot import analyse_text, diagnostic_keys
from perflsp.source.positions import LineIndex
from tests.server.lsp_session import EXAMPLES, session

FILES = [EXAMPLES / "cuda" / n for n in ("reduction.cu", "nbody.cu", "templated.cu", "saxpy.cu")] + [
    EXAMPLES / "lints" / "launch_slips.cu", EXAMPLES / "lints" / "precision_slips.cu",
    EXAMPLES / "openmp" / "jacobi_omp.cpp", EXAMPLES / "openmp" / "matmul_omp.cpp"]
SNIPPETS = ["{", "}", "(", ")", "[", "]", '"', "'", ";", "\n", "\r\n", "\r", "/*", "*/", "//", "\\", "é", "𝄞", "ü", " ",
            "x", "0.5", "2.0", "1.0f", "pow(x, 2.0)", "<<<", ">>>", "__global__ ", "__device__ ", "__syncthreads();",
            "#pragma omp target teams distribute parallel for\n", "#pragma unroll\n", "#define N 64\n", "#if 0\n", "#endif\n",
            "k<<<n / 256, 256>>>(n);", "for (int j = 0; j < 8; ++j) ", "\t", "template <typename T> "]


# --------------------------------------------------------------------------- random edits


class Background:
    """One server session on an event loop in a thread, shared by the hypothesis examples."""

    def __init__(self, workspace: Path):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stop = None
        self.session = self.call(self._enter(workspace), 120)

    async def _enter(self, workspace: Path):
        self.stop = asyncio.Event()
        ready: asyncio.Future = asyncio.get_running_loop().create_future()

        async def hold():
            async with session(workspace) as s:
                ready.set_result(s)
                await self.stop.wait()

        self.holder = asyncio.get_running_loop().create_task(hold())
        return await ready

    def call(self, coro, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        async def finish():
            self.stop.set()
            await self.holder

        self.call(finish(), 60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def background(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("robust")
    shutil.copy(EXAMPLES / "cuda" / "check.cuh", workspace / "check.cuh")
    bg = Background(workspace)
    bg.workspace = workspace
    yield bg
    bg.close()


COUNTER = itertools.count()
edit = st.tuples(st.floats(0, 1), st.integers(0, 12), st.sampled_from(SNIPPETS), st.integers(0, 3))


def _boundary(text: str, index: int) -> int:
    """LSP positions cannot point between the CR and LF of a line break (no client sends that)."""
    return index - 1 if 0 < index < len(text) and text[index - 1] == "\r" and text[index] == "\n" else index


async def _drive(s, workspace: Path, source: Path, edits) -> tuple[str, Path, list]:
    path = workspace / f"{next(COUNTER)}_{source.name}"
    text = source.read_text()
    path.write_text(text)
    uri = path.as_uri()
    await s.open(path, text)
    version = 1
    for index, (where, delete, snippet, kind) in enumerate(edits):
        data = text.encode()
        lines = LineIndex(data)
        start = _boundary(text, int(where * len(text)))
        end = _boundary(text, min(len(text), start + (delete if kind != 1 else 0)))
        new = "" if kind == 0 else snippet
        a = lines.position(len(text[:start].encode()))
        b = lines.position(len(text[:end].encode()))
        version += 1
        s.versions[uri] = version - 1
        s.change(uri, [lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(a.line, a.character), lsp.Position(b.line, b.character)), text=new)])
        text = text[:start] + new + text[end:]
        if index % 60 == 59:  # requests while edits stream in are answered
            position = lsp.Position(a.line, a.character)
            ident = lsp.TextDocumentIdentifier(uri=uri)
            answers = await asyncio.wait_for(asyncio.gather(
                s.client.text_document_hover_async(lsp.HoverParams(ident, position)),
                s.client.text_document_code_lens_async(lsp.CodeLensParams(ident)),
                s.client.text_document_inlay_hint_async(lsp.InlayHintParams(ident, lsp.Range(lsp.Position(0, 0), position))),
                s.client.text_document_code_action_async(lsp.CodeActionParams(
                    ident, lsp.Range(position, position), lsp.CodeActionContext(diagnostics=[]))),
            ), 120)
            assert answers[1] is not None
    pulled = await s.pull(uri, 180)
    s.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
    return text, path, pulled


@settings(max_examples=int(os.environ.get("PERFLSP_ROBUSTNESS_EXAMPLES", "8")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(source=st.sampled_from(FILES), edits=st.lists(edit, min_size=150, max_size=350))
def test_random_edits_keep_the_server_answering_and_exact(background, source, edits):
    text, path, pulled = background.call(_drive(background.session, background.workspace, source, edits), 600)
    fresh = analyse_text(text, path.as_uri(), resolve([]), path=str(path))
    assert diagnostic_keys(pulled) == diagnostic_keys(fresh.diagnostics)
