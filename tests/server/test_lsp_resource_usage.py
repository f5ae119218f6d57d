"""Registers from ptxas feed occupancy (`perflsp.resourceUsage`), only where trusted."""

import asyncio
import shutil

import pytest
from lsprotocol import types as lsp

from perflsp.hardware.ptxas import locate_nvcc
from tests.server.lsp_session import EXAMPLES, session

pytestmark = pytest.mark.asyncio
NVCC = locate_nvcc().path


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (set CUDA_HOME or put nvcc on PATH)")
async def test_ptxas_registers_reach_the_occupancy(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    path = tmp_path / "cuda" / "sgemm_tiled.cu"
    async with session(tmp_path, init_options={"resourceUsage": True, "gpus": ["h100"]}) as s:
        uri = path.as_uri()
        await s.open(path)
        hover_params = lsp.HoverParams(lsp.TextDocumentIdentifier(uri=uri),
                                       lsp.Position(*next((i, l.index("sgemm_tiled(") + 2) for i, l in
                                                          enumerate(path.read_text().splitlines()) if "sgemm_tiled(" in l)))
        before = await s.client.text_document_hover_async(hover_params)
        assert "registers assumed 32/thread" in before.contents.value
        # the background compile republishes version 1 with ptxas registers
        for _ in range(60):
            republished = s.expect_diagnostics(uri, 1)
            await asyncio.wait_for(republished, 120)
            after = await s.client.text_document_hover_async(hover_params)
            if "registers assumed" not in after.contents.value:
                break
        assert "registers assumed 32/thread" not in after.contents.value
        assert any("resource usage of sgemm_tiled.cu" in m.message for m in s.client.log_messages)


async def test_a_repository_cannot_switch_compiling_on(tmp_path):
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    (tmp_path / ".perflsp.toml").write_text('resourceUsage = true\nnvccPath = "/bin/false"\n')
    async with session(tmp_path) as s:
        assert any("resourceUsage ignored" in i for i in s.statuses[-1]["ignoredSettings"])
        await s.open(tmp_path / "cuda" / "saxpy.cu")
        assert not any("resource usage" in m.message for m in s.client.log_messages)
