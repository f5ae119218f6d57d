"""Drive the real server (`python -m perflsp serve`, a subprocess over stdio) with pytest-lsp's
client. Synchronisation waits on the protocol (notifications, responses), never on sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


class Session:
    """A client connected to a server, with helpers to wait for diagnostics of a version."""

    def __init__(self, client: LanguageClient):
        self.client = client
        self.published: dict[str, list[lsp.PublishDiagnosticsParams]] = {}
        self._waiters: list[tuple[str, Any, asyncio.Future[lsp.PublishDiagnosticsParams]]] = []
        self.statuses: list[dict[str, Any]] = []
        self._status_waiters: list[asyncio.Future[dict[str, Any]]] = []
        self.versions: dict[str, int] = {}

        client.protocol.fm.features.pop(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, None)  # replaced below

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            client.diagnostics[params.uri] = params.diagnostics
            self.published.setdefault(params.uri, []).append(params)
            for waiter in list(self._waiters):
                uri, version, future = waiter
                if uri == params.uri and (version is None or params.version == version) and not future.done():
                    future.set_result(params)
                    self._waiters.remove(waiter)

        @client.feature("perflsp/status")
        def on_status(params: Any) -> None:
            payload = params if isinstance(params, dict) else client.protocol._converter.unstructure(params)
            self.statuses.append(payload)
            for future in self._status_waiters:
                if not future.done():
                    future.set_result(payload)
            self._status_waiters.clear()

    def expect_diagnostics(self, uri: str, version: int | None = None) -> asyncio.Future[lsp.PublishDiagnosticsParams]:
        """Register before the action that triggers the publication."""
        future: asyncio.Future[lsp.PublishDiagnosticsParams] = asyncio.get_running_loop().create_future()
        self._waiters.append((uri, version, future))
        return future

    def expect_status(self) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._status_waiters.append(future)
        return future

    async def open(self, path: Path, text: str | None = None, version: int = 1, timeout: float = 30) -> lsp.PublishDiagnosticsParams:
        uri = path.as_uri()
        text = path.read_text() if text is None else text
        waiter = self.expect_diagnostics(uri, version)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=version, text=text)))
        self.versions[uri] = version
        return await asyncio.wait_for(waiter, timeout)

    def change(self, uri: str, changes: list[lsp.TextDocumentContentChangeEvent]) -> int:
        version = self.versions[uri] + 1
        self.versions[uri] = version
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), changes))
        return version

    async def edit(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str,
                   timeout: float = 30) -> lsp.PublishDiagnosticsParams:
        waiter = self.expect_diagnostics(uri, self.versions[uri] + 1)
        self.change(uri, [replace(start, end, text)])
        return await asyncio.wait_for(waiter, timeout)

    async def pull(self, uri: str, timeout: float = 60) -> list[lsp.Diagnostic]:
        report = await asyncio.wait_for(self.client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), timeout)
        return list(report.items)

    async def command(self, name: str, *arguments: Any, timeout: float = 60) -> Any:
        return await asyncio.wait_for(self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=list(arguments))), timeout)


def replace(start: tuple[int, int], end: tuple[int, int], text: str) -> lsp.TextDocumentContentChangePartial:
    return lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text)


def capabilities(name: str = "visual-studio-code", pull: bool = False) -> lsp.ClientCapabilities:
    caps = client_capabilities(name)
    if not pull and caps.text_document is not None:
        caps.text_document.diagnostic = None
    return caps


@contextlib.asynccontextmanager
async def session(
    workspace: Path | None = None,
    *,
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    client: str = "visual-studio-code",
    pull: bool = False,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Session]:
    lsp_client = make_test_lsp_client()
    if configuration is not None:
        lsp_client.set_configuration(configuration)
    wrapper = Session(lsp_client)
    await lsp_client.start_io(sys.executable, "-m", "perflsp", "serve", env=server_env(**(env or {})), cwd=str(ROOT))
    status = wrapper.expect_status()
    folders = [lsp.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)] if workspace else None
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(client, pull),
        root_uri=workspace.as_uri() if workspace else None,
        workspace_folders=folders,
        initialization_options=init_options,
    ))
    await asyncio.wait_for(status, 60)
    try:
        yield wrapper
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(lsp_client.shutdown_session(), 20)
        await lsp_client.stop()
