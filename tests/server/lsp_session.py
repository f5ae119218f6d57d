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
        self.initialize_result: lsp.InitializeResult | None = None
        self.registrations: list[lsp.Registration] = []

        self.refreshes = {"codeLens": 0, "inlayHint": 0, "diagnostic": 0}
        self._refreshed = asyncio.Event()

        def refreshed(kind: str) -> None:
            self.refreshes[kind] += 1
            self._refreshed.set()

        @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
        def on_lens_refresh(params: Any) -> None:
            refreshed("codeLens")

        @client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
        def on_hint_refresh(params: Any) -> None:
            refreshed("inlayHint")

        client.protocol.fm.features.pop(lsp.WORKSPACE_DIAGNOSTIC_REFRESH, None)  # pytest-lsp's: replaced

        @client.feature(lsp.WORKSPACE_DIAGNOSTIC_REFRESH)
        def on_diagnostic_refresh(params: Any) -> None:
            refreshed("diagnostic")

        @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: lsp.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

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
            payload = _plain(params)
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

    async def diagnostics_matching(self, uri: str, predicate: Any,
                                   timeout: float = 30) -> lsp.PublishDiagnosticsParams:
        """The first publication (the latest already received, or one to come) that satisfies
        `predicate`: for results that arrive later (LLM answers, imported measurements)."""

        async def watch() -> lsp.PublishDiagnosticsParams:
            while True:
                waiter = self.expect_diagnostics(uri)
                for params in self.published.get(uri, [])[-1:]:
                    if predicate(params):
                        return params
                await waiter

        return await asyncio.wait_for(watch(), timeout)

    async def open(self, path: Path, text: str | None = None, version: int = 1, timeout: float = 30) -> lsp.PublishDiagnosticsParams:
        uri = path.as_uri()
        text = path.read_text() if text is None else text
        waiter = self.expect_diagnostics(uri, version)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=version, text=text)))
        self.versions[uri] = version
        await asyncio.wait_for(waiter, timeout)
        return await self.settled(uri, timeout)

    async def settled(self, uri: str, timeout: float = 30) -> lsp.PublishDiagnosticsParams:
        """The last publication once the analysis is complete (a large file's first publication
        may be partial). A code lens answer says when it is partial (`data.partial`: the
        document's first analysis is still running); the server then asks for lenses again
        (`workspace/codeLens/refresh`) after publishing the complete analysis, so once an answer
        is not partial the stream holds that publication."""
        async def complete() -> None:
            while True:
                seen = self.refreshes["codeLens"]
                lenses = await self.client.text_document_code_lens_async(
                    lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=uri)))
                if not any(is_partial(lens) for lens in lenses or ()):
                    return
                await self.refreshed("codeLens", seen)

        await asyncio.wait_for(complete(), timeout)
        return self.published[uri][-1]

    async def refreshed(self, kind: str, seen: int) -> None:
        """Until the server has asked for a refresh of `kind` more than `seen` times."""
        while self.refreshes[kind] <= seen:
            self._refreshed.clear()
            await self._refreshed.wait()

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
        await asyncio.wait_for(waiter, timeout)
        return await self.settled(uri, timeout)

    async def pull(self, uri: str, timeout: float = 60) -> list[lsp.Diagnostic]:
        report = await asyncio.wait_for(self.client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri))), timeout)
        return list(report.items)

    async def command(self, name: str, *arguments: Any, timeout: float = 60) -> Any:
        return await asyncio.wait_for(self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=list(arguments))), timeout)


def roofline(params: lsp.PublishDiagnosticsParams) -> dict[str, lsp.Diagnostic]:
    """The verdict diagnostics of a publication, by kernel name."""
    return {d.data["kernel"]: d for d in params.diagnostics if str(d.code).startswith("roofline/")}


def _plain(value: Any) -> Any:
    """pygls decodes unknown notifications into namedtuples: back to JSON shapes."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def apply_text_edits(text: str, edits: list[lsp.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions) to `text`, last first."""
    lines = text.splitlines(keepends=True)

    def offset(pos: lsp.Position) -> int:
        before = sum(len(line) for line in lines[: pos.line])
        line = lines[pos.line] if pos.line < len(lines) else ""
        units = 0
        for index, ch in enumerate(line):
            if units >= pos.character:
                return before + index
            units += 2 if ord(ch) > 0xFFFF else 1
        return before + len(line.rstrip("\r\n"))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


def replace(start: tuple[int, int], end: tuple[int, int], text: str) -> lsp.TextDocumentContentChangePartial:
    return lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text)


def is_partial(lens: lsp.CodeLens) -> bool:
    """A lens of an answer given before the document's first analysis completed."""
    return isinstance(lens.data, dict) and bool(lens.data.get("partial"))


def capabilities(name: str = "visual-studio-code", pull: bool = False, refreshes: bool = False) -> lsp.ClientCapabilities:
    """A real client's capabilities; `refreshes`: it also honours `workspace/inlayHint/refresh` and
    `workspace/diagnostic/refresh` (VS Code does; pytest-lsp's profile of it lists lenses only)."""
    caps = client_capabilities(name)
    if caps.text_document is not None:
        caps.text_document.diagnostic = lsp.DiagnosticClientCapabilities(related_document_support=False) if pull else None
    if refreshes and caps.workspace is not None:
        caps.workspace.inlay_hint = lsp.InlayHintWorkspaceClientCapabilities(refresh_support=True)
        caps.workspace.diagnostics = lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return caps


@contextlib.asynccontextmanager
async def session(
    workspace: Path | None = None,
    *,
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    client: str = "visual-studio-code",
    pull: bool = False,
    refreshes: bool = False,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> AsyncIterator[Session]:
    lsp_client = make_test_lsp_client()
    if configuration is not None:
        lsp_client.set_configuration(configuration)
    wrapper = Session(lsp_client)
    await lsp_client.start_io(sys.executable, "-m", "perflsp", "serve", *args, env=server_env(**(env or {})), cwd=str(ROOT))
    status = wrapper.expect_status()
    folders = [lsp.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)] if workspace else None
    wrapper.initialize_result = await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(client, pull, refreshes),
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
