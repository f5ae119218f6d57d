"""Compiled facts in the editor (`perflsp.compile`): compiled off the keystroke path after open
and after a typing pause, kept per kernel until its own text changes, only in a trusted workspace."""

import asyncio
import os
import shutil

import pytest
from lsprotocol import types as lsp

from perflsp.compiled.toolchain import find_toolchain
from tests.server.lsp_session import EXAMPLES, session
from tests.template_programs import SCALE_TEMPLATE

pytestmark = pytest.mark.asyncio
MISSING = find_toolchain().missing("cuda")
needs_cuda = pytest.mark.skipif(MISSING is not None and not os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"),
                                reason=MISSING or "")
COMPILED = "counted in the compiled code"


def _position(text: str, needle: str, offset: int = 2) -> lsp.Position:
    for i, line in enumerate(text.splitlines()):
        if needle in line:
            return lsp.Position(i, line.index(needle) + offset)
    raise AssertionError(needle)


async def _hover(s, uri: str, text: str, needle: str) -> str:
    result = await s.client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri=uri), _position(text, needle)))
    return result.contents.value


async def _until(s, uri: str, text: str, needle: str, wanted: str, timeout: float = 120) -> str:
    """The hover once it says `wanted` (a later analysis republishes it)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        shown = await _hover(s, uri, text, needle)
        if wanted in shown or loop.time() > end:
            return shown
        await asyncio.sleep(0.25)


@needs_cuda
async def test_compiled_counts_arrive_after_open_and_after_a_typing_pause(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    text = path.read_text()
    async with session(tmp_path, init_options={"workspaceTrusted": True, "gpus": ["rtx3080"],
                                              "compileDelayMs": 300}) as s:
        uri = path.as_uri()
        await s.open(path)
        shown = await _until(s, uri, text, "saxpy(int n", COMPILED)
        assert COMPILED in shown
        assert any("compiled saxpy.cu for sm_86" in m.message for m in s.client.log_messages)
        # an edit inside the kernel: its counts are the source's until the next compile
        line = next(i for i, t in enumerate(text.splitlines()) if "saxpy(int n" in t)
        edited = text.splitlines()
        body = next(i for i in range(line, len(edited)) if "{" in edited[i])
        edited.insert(body + 1, "    float unused = 0.0f;")
        new_text = "\n".join(edited) + "\n"
        s.change(uri, [lsp.TextDocumentContentChangeWholeDocument(text=new_text)])
        shown = await _until(s, uri, new_text, "saxpy(int n", "edited since the file was compiled", 30)
        assert "estimated from the source" in shown
        # typing paused: compiled again, from the unsaved buffer
        shown = await _until(s, uri, new_text, "saxpy(int n", COMPILED)
        assert COMPILED in shown
        assert path.read_text() == text  # the buffer was never written over the file


async def test_an_untrusted_workspace_compiles_nothing(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "saxpy.cu"
    async with session(tmp_path, init_options={"gpus": ["rtx3080"]}) as s:
        await s.open(path)
        await asyncio.sleep(1.0)
        shown = await _hover(s, path.as_uri(), path.read_text(), "saxpy(int n")
        assert COMPILED not in shown and "estimated from the source" in shown
        assert any("compiled facts off: the workspace is not trusted" in m.message for m in s.client.log_messages)


@needs_cuda
async def test_a_kernel_templates_instantiations_are_judged_apart_once_compiled(tmp_path):
    path = tmp_path / "scale.cu"
    path.write_text(SCALE_TEMPLATE)
    async with session(tmp_path, init_options={"workspaceTrusted": True, "gpus": ["rtx3080"],
                                              "compileDelayMs": 300}) as s:
        uri = path.as_uri()
        await s.open(path)
        # (before the compile, the source's instantiations are judged apart: both compute-bound there)
        shown = await _until(s, uri, SCALE_TEMPLATE, "scale(const", COMPILED)
        assert COMPILED in shown and "Per instantiation" in shown
        # FP64 is compute-bound on a GeForce, the same loop in FP32 bandwidth-bound
        assert "| `scale<double>` |" in shown and "| `scale<float>` |" in shown
        double_row = next(line for line in shown.splitlines() if line.startswith("| `scale<double>`"))
        assert "compute-bound" in double_row
        diagnostics = await s.pull(uri)
        verdict = next(d for d in diagnostics if d.code and str(d.code).startswith("roofline/"))
        assert "per instantiation:" in verdict.message
        assert "`scale<double>` compute-bound" in verdict.message and "`scale<float>` bandwidth-bound" in verdict.message
