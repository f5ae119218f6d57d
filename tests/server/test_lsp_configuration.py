"""Configuration end to end: .perflsp.toml, workspace/configuration, initializationOptions,
live changes (didChangeConfiguration, watched files), errors shown once, trust, log level."""

import asyncio
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.server.lsp_session import EXAMPLES, session

pytestmark = pytest.mark.asyncio


def make_workspace(tmp_path: Path, config: str | None = None) -> Path:
    shutil.copytree(EXAMPLES / "cuda", tmp_path / "cuda")
    shutil.copytree(EXAMPLES / "lints", tmp_path / "lints")
    if config is not None:
        (tmp_path / ".perflsp.toml").write_text(config)
    return tmp_path


def gpus_in(diagnostics) -> set[str]:
    return {d.message.split(" on ")[1].split(":")[0] for d in diagnostics if d.code.startswith("roofline/")}


async def test_config_file_errors_are_shown_once_and_the_last_good_config_is_kept(tmp_path):
    ws = make_workspace(tmp_path, 'gpus = ["rtx3080"]\n')
    saxpy = ws / "cuda" / "saxpy.cu"
    async with session(ws) as s:
        first = await s.open(saxpy)
        assert gpus_in(first.diagnostics) == {"GeForce RTX 3080 (10GB)"}
        assert any(r.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in s.registrations)

        # a broken file: one message naming the file and the field; the RTX 3080 stays
        (ws / ".perflsp.toml").write_text('gpus = ["rtx3080", "h1000"]\n')
        status = s.expect_status()
        s.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=(ws / ".perflsp.toml").as_uri(), type=lsp.FileChangeType.Changed)]))
        payload = await asyncio.wait_for(status, 30)
        errors = [m for m in s.client.messages if m.type == lsp.MessageType.Error]
        assert len(errors) == 1
        assert str(ws / ".perflsp.toml") in errors[0].message and "gpus[1]: unknown GPU 'h1000'" in errors[0].message
        assert payload["configErrors"] and payload["gpus"][0]["id"] == "rtx-3080-10gb"

        status = s.expect_status()
        s.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=(ws / ".perflsp.toml").as_uri(), type=lsp.FileChangeType.Changed)]))
        await asyncio.wait_for(status, 30)
        assert len([m for m in s.client.messages if m.type == lsp.MessageType.Error]) == 1  # not shown again

        # fixed: applies live, the open document is analysed again
        (ws / ".perflsp.toml").write_text('gpus = ["h100", "mi300x"]\n[rules]\n"roofline/bandwidth-bound" = "hint"\n')
        republished = s.expect_diagnostics(saxpy.as_uri(), 1)
        s.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=(ws / ".perflsp.toml").as_uri(), type=lsp.FileChangeType.Changed)]))
        await asyncio.wait_for(republished, 30)
        again = await s.settled(saxpy.as_uri())
        assert gpus_in(again.diagnostics) == {"H100 SXM5 80GB", "Instinct MI300X"}
        assert s.refreshes["codeLens"] >= 1  # the client asks again for lenses
        bandwidth = [d for d in again.diagnostics if d.code == "roofline/bandwidth-bound"]
        assert bandwidth and all(d.severity == lsp.DiagnosticSeverity.Hint for d in bandwidth)


async def test_workspace_configuration_and_did_change_configuration(tmp_path):
    ws = make_workspace(tmp_path)
    slips = ws / "lints" / "launch_slips.cu"
    async with session(ws, configuration={"perflsp": {"gpus": ["a100"]}}) as s:
        first = await s.open(slips)
        assert gpus_in(first.diagnostics) == {"A100 SXM4 40GB"}
        assert any(d.code == "launch/block-size-not-warp-multiple" for d in first.diagnostics)

        s.client.set_configuration({"perflsp": {"gpus": ["a100"], "rules": {"launch/block-size-not-warp-multiple": "off",
                                                                            "roofline/compute-bound": "error"}}})
        republished = s.expect_diagnostics(slips.as_uri(), 1)
        s.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        await asyncio.wait_for(republished, 30)
        again = await s.settled(slips.as_uri())
        assert not any(d.code == "launch/block-size-not-warp-multiple" for d in again.diagnostics)
        assert all(d.severity == lsp.DiagnosticSeverity.Error for d in again.diagnostics if d.code == "roofline/compute-bound")

        # enable = false: diagnostics are cleared and features answer nothing
        s.client.set_configuration({"perflsp": {"enable": False}})
        cleared = s.expect_diagnostics(slips.as_uri())
        s.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        assert list((await asyncio.wait_for(cleared, 30)).diagnostics) == []
        lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(slips.as_uri())))
        assert not lenses


async def test_init_options_exclude_and_log_messages(tmp_path):
    ws = make_workspace(tmp_path, 'exclude = ["lints/**"]\n')
    async with session(ws, init_options={"gpus": ["l4"], "logLevel": "debug"}) as s:
        kept = await s.open(ws / "cuda" / "saxpy.cu")
        assert gpus_in(kept.diagnostics) == {"L4"}
        excluded = await s.open(ws / "lints" / "launch_slips.cu")
        assert list(excluded.diagnostics) == []
        assert any("ready" in m.message for m in s.client.log_messages)


async def test_trust_decides_what_the_repository_file_may_switch_on(tmp_path):
    config = ('nvccPath = "/bin/true"\n[profiling]\nenabled = true\nbuildCommand = ["false", "{exe}", "{file}"]\n'
              '[llm]\nenabled = true\nmodel = "m"\nbaseUrl = "https://llm.example.com/v1"\n')
    ws = make_workspace(tmp_path, config)
    saxpy = ws / "cuda" / "saxpy.cu"
    async with session(ws) as s:
        status = s.statuses[-1]
        assert not status["trusted"] and status["profiling"] == "off" and status["llm"] == "off"
        assert "untrusted" in status["llmReason"]
        assert any("profiling.enabled ignored" in i for i in status["ignoredSettings"])
        assert any("nvccPath ignored" in i for i in status["ignoredSettings"])
        warnings = [m for m in s.client.messages if m.type == lsp.MessageType.Warning]
        assert any("not trusted" in m.message for m in warnings)
        ignored = [m.message for m in s.client.messages if "ignored" in m.message]
        assert len(ignored) == 1, ignored  # one message lists every ignored setting, not one pop-up each
        assert len(status["ignoredSettings"]) >= 3 and f"{len(status['ignoredSettings'])} settings ignored" in ignored[0]
        assert "nvccPath" in ignored[0] and "profiling.enabled" in ignored[0]
        await s.open(saxpy)
        titles = await action_titles(s, saxpy)
        assert any(t.startswith("Explain `saxpy`") for t in titles)
        assert not any(t.startswith("Profile `saxpy`") for t in titles), titles  # profiling is off
        profiled = await s.command("perflsp.profileKernel", {"uri": saxpy.as_uri(), "kernel": "saxpy", "quiet": True})
        assert profiled["status"] == "disabled"

    async with session(ws, init_options={"workspaceTrusted": True}, env={"OPENAI_API_KEY": ""}) as s:
        status = s.statuses[-1]
        assert status["trusted"] and status["profiling"] == "ready" and not status["ignoredSettings"]
        # the remote endpoint is allowed in a trusted workspace, but there is no key for it
        assert status["llm"] == "failing" and "no API key" in status["llmReason"]
        await s.open(saxpy)
        titles = await action_titles(s, saxpy)
        assert any(t.startswith("Profile `saxpy`") for t in titles), titles  # profiling may run
        profiled = await s.command("perflsp.profileKernel", {"uri": saxpy.as_uri(), "kernel": "saxpy", "quiet": True})
        # the trusted workspace's build command ran (and failed: it is `false`)
        assert profiled["status"] == "failed" and "build command failed with status 1" in profiled["message"]


async def action_titles(s, path) -> list[str]:
    text = path.read_text()
    line = text[:text.index("saxpy<<<")].count("\n")
    actions = await s.client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=path.as_uri()),
        range=lsp.Range(start=lsp.Position(line=line, character=0), end=lsp.Position(line=line + 1, character=0)),
        context=lsp.CodeActionContext(diagnostics=[])))
    return [a.title for a in actions or []]


async def test_set_gpus_command(tmp_path):
    ws = make_workspace(tmp_path)
    async with session(ws) as s:
        saxpy = ws / "cuda" / "saxpy.cu"
        await s.open(saxpy)
        republished = s.expect_diagnostics(saxpy.as_uri(), 1)
        result = await s.command("perflsp.setGpus", {"gpus": ["rtx4090"]})
        assert result == {"gpus": ["rtx-4090"]}
        await asyncio.wait_for(republished, 30)
        assert gpus_in((await s.settled(saxpy.as_uri())).diagnostics) == {"GeForce RTX 4090"}
        with pytest.raises(Exception, match="unknown GPU 'rtx9999'"):
            await s.command("perflsp.setGpus", {"gpus": ["rtx9999"]})
