"""The perflsp language server: the pygls server class and the registration of its features.

Analysis code is imported only after `initialize` has been answered (the editor waits for that
answer); each feature lives in `perflsp.server.features.<name>`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from perflsp import __version__
from perflsp.server import memory
from perflsp.server.features.commands import COMMANDS
from perflsp.server.json_types import JsonObject
from perflsp.server.pool import WorkPool
from perflsp.server.protocol import PerfProtocol

if TYPE_CHECKING:
    from perflsp.analysis.reader import ReadContext
    from perflsp.server.advice import AdviceService
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ScanKey
    from perflsp.server.documents import Snapshot
    from perflsp.server.logs import ClientLogHandler
    from perflsp.server.measured import MeasuredService, SnapshotMeasured
    from perflsp.server.scheduler import DocumentWorker
    from perflsp.server.tuning_state import TuningState
    from perflsp.server.workspace import WorkspaceState

log = logging.getLogger("perflsp.server")
T = TypeVar("T")

CODE_ACTION_KINDS = [lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.RefactorRewrite, lsp.CodeActionKind.Empty]
STATUS_NOTIFICATION = "perflsp/status"
HOT_DOCUMENTS = 16  # documents whose syntax trees stay in memory (the others are parsed again on use)
REFRESH_DELAY_S = 0.1  # refreshes owed by several documents completing together are sent once
FIRST_WAIT_S = 0.2  # how long a request on the only document being opened waits for its first analysis


class PerfLanguageServer(LanguageServer):
    """The host of the document workers (it implements `host.DocumentHost` and `host.AnalysisHooks`)
    and the `context.ServerContext` its features are typed against."""

    def __init__(self) -> None:
        super().__init__("perflsp", __version__, protocol_cls=PerfProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.workers: dict[str, DocumentWorker] = {}  # uri -> its worker
        self.workspace_state: WorkspaceState | None = None  # after `initialized`
        self.init_params: lsp.InitializeParams | None = None
        self.pull_mode = False
        self.log_handler: ClientLogHandler | None = None
        self._ready: asyncio.Event | None = None
        # reports of files not open, as JSON, per path: (the state they were made for, the reports)
        self.scan_cache: dict[str, tuple[ScanKey, list[JsonObject]]] = {}
        self.recent: dict[str, None] = {}  # uris, least recently active first
        self._advice: AdviceService | None = None  # created on first use
        self._measured: MeasuredService | None = None
        self._tuning: TuningState | None = None
        self.pool = WorkPool(1)  # every document's CPU work, most wanted first (pool.py)
        self.refused: dict[str, str] = {}  # uri -> why an open document is not analysed (too large)
        self._trim: asyncio.TimerHandle | None = None
        self.cycles = memory.CycleCollector()  # full garbage collections wait for idle moments
        self._owed_refresh: set[str] = set()  # refreshes owed to answers given from partial states
        self._refresh_timer: asyncio.TimerHandle | None = None

    @property
    def advice(self) -> AdviceService:
        """The LLM advisor's side of the server (advice.py)."""
        if self._advice is None:
            from perflsp.server.advice import AdviceService

            self._advice = AdviceService(self)
        return self._advice

    @property
    def measured(self) -> MeasuredService:
        """Stored Nsight Compute results (measured.py)."""
        if self._measured is None:
            from perflsp.server.measured import MeasuredService

            self._measured = MeasuredService()
        return self._measured

    @property
    def tuning(self) -> TuningState:
        """Kernel Tuner runs of this session (tuning_state.py; features/tuning.py runs them)."""
        if self._tuning is None:
            from perflsp.server.tuning_state import TuningState

            self._tuning = TuningState()
        return self._tuning

    @property
    def perf_protocol(self) -> PerfProtocol:
        """`protocol`, with the type it was created with (pygls types it as its base class)."""
        protocol = self.protocol
        assert isinstance(protocol, PerfProtocol)
        return protocol

    @property
    def initialized_workspace(self) -> WorkspaceState:
        """The workspace's folders and their configuration (handlers wait for `ready` first)."""
        state = self.workspace_state
        if state is None:
            raise RuntimeError("the workspace is read in `initialized`, before any document is handled")
        return state

    # ------------------------------------------------------------------ lifecycle helpers

    @property
    def ready(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    def report_server_error(self, error: Exception, source: object) -> None:
        """pygls' report of a handler's failure. A request's was answered and logged already (a
        client's mistake as one line, a failure of the server with its traceback); a
        notification handler's failure is the server's own: logged with its traceback."""
        from pygls.exceptions import FeatureRequestError

        if source is FeatureRequestError:
            return
        data = getattr(error, "data", None)  # (pygls' internal error: the traceback as text)
        trace = "".join(data.get("traceback", ())) if isinstance(data, dict) else ""
        if trace:
            log.error("server error: %s\nTraceback (most recent call last):\n%s", error, trace.rstrip())
        else:
            log.error("server error: %s", error, exc_info=error if error.__traceback__ is not None else None)

    def capability(self, path: str) -> bool:
        """Whether the client declared the capability at dotted `path` of its
        `ClientCapabilities` (for example `workspace.code_lens.refresh_support`)."""
        value: object = self.client_capabilities
        for part in path.split("."):
            value = getattr(value, part, None) if value is not None else None
        return bool(value)

    # ------------------------------------------------------------------ what workers ask

    def config_for(self, uri: str) -> ResolvedConfig:
        return self.initialized_workspace.config_for(uri)

    def document_enabled(self, uri: str, config: ResolvedConfig) -> bool:
        return self.initialized_workspace.document_enabled(uri, config)

    def path_for(self, uri: str) -> str | None:
        from perflsp.server.text import path_of

        path = path_of(uri)
        return str(path) if path is not None else None

    def reading_for(self, uri: str) -> ReadContext:
        return self.initialized_workspace.reading_for(uri)

    def lint_codes(self, config: ResolvedConfig) -> set[str] | None:
        from perflsp.server import engine_adapter as engine

        codes = engine.lint_codes()
        levels = config.settings.rules
        return {c for c in codes if levels.get(c) != "off"} if codes else None

    def publish(self, uri: str, version: int | None, diagnostics: list[lsp.Diagnostic],
                as_json: list[JsonObject] | None = None) -> None:
        self.cycles.published(lambda: self.pool.busy)
        if self.pull_mode:
            return
        if as_json is None:
            self.perf_protocol.forget_diagnostics(uri)
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, version=version,
                                                                                diagnostics=diagnostics))
            return
        self.perf_protocol.publish_diagnostics_json(uri, version, as_json)

    async def snapshot(self, uri: str, exact: bool = False) -> Snapshot | None:
        await self.ready.wait()
        worker = self.workers.get(uri)
        if worker is None:
            return None
        return await worker.current(exact=exact)

    async def read_latest(self, uri: str, fn: Callable[[Snapshot], T], in_thread: bool = False, *,
                          owe: str | None = None, queued: Callable[[DocumentWorker], T] | None = None) -> T | None:
        """`fn(snapshot)` for hover, inlay hints, lens, code actions: the newest snapshot, never
        queued behind an analysis (`DocumentWorker.request` and `read`). None when the document
        is not analysed. Before its first analysis completes the snapshot is partial and the
        answer is owed a refresh of kind `owe`; before its text is even parsed, `queued(worker)`
        answers (None without it)."""
        await self.ready.wait()
        worker = self.workers.get(uri)
        if worker is None:
            return None
        # a lone document opened (the common case) is usually analysed within FIRST_WAIT_S: its first
        # answers are then complete; with many opening at once, what is known is answered at once
        snap = await worker.request(first_wait_s=FIRST_WAIT_S if self.queued_documents() <= 1 else 0.0)
        if snap is None:
            if not worker.first_analysis_pending or worker.closed:
                return None
            if owe is not None:
                worker.owe(owe)
            return queued(worker) if queued is not None else None
        if owe is not None and worker.first_analysis_pending:
            worker.owe(owe)
        return await worker.read(fn, in_thread)

    def refresh_owed(self, kinds: set[str]) -> None:
        """Answers given from a partial state can be asked again: send the refreshes the client
        supports, once for the documents that complete within `REFRESH_DELAY_S` of each other."""
        self._owed_refresh |= kinds
        if self._refresh_timer is None:
            self._refresh_timer = asyncio.get_running_loop().call_later(REFRESH_DELAY_S, self._send_refreshes)

    def _send_refreshes(self) -> None:
        kinds, self._owed_refresh, self._refresh_timer = self._owed_refresh, set(), None
        if "lens" in kinds and self.capability("workspace.code_lens.refresh_support"):
            self.workspace_code_lens_refresh(None)
        if "hint" in kinds and self.capability("workspace.inlay_hint.refresh_support"):
            self.workspace_inlay_hint_refresh(None)
        if "diagnostic" in kinds and self.capability("workspace.diagnostics.refresh_support"):
            self.workspace_diagnostic_refresh(None)

    def closed(self, uri: str) -> None:
        """A document was closed: drop what it held, and give freed memory back soon after."""
        self.refused.pop(uri, None)
        self.recent.pop(uri, None)
        if self._advice is not None:
            self._advice.closed(uri)
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(memory.TRIM_DELAY_S, self._trim_when_idle, 120)

    def _trim_when_idle(self, tries: int) -> None:
        """Give memory back once no job runs (a closed document's job may still be finishing)."""
        # (a full collection takes ~0.1 s with a large file analysed: not between two keystrokes)
        typing = time.monotonic() - self.cycles.last_published < memory.TRIM_DELAY_S
        if (self.pool.busy or typing) and tries:
            self._trim = asyncio.get_running_loop().call_later(0.5, self._trim_when_idle, tries - 1)
            return
        self._trim = None
        self.drop_file_caches()
        memory.give_back()

    def drop_file_caches(self) -> None:
        """What analyses read of other files (headers, siblings, includers): dropped once documents
        closed; the documents still open read again what they need (memory.py)."""
        dropped = memory.drop_file_caches()
        if self.workspace_state is not None:
            dropped += self.workspace_state.remembered_files
            self.workspace_state.forget_files()
        log.debug("memory: %d cached entries of other files dropped", dropped)

    def queued_documents(self) -> int:
        """Open documents whose first analysis is not complete yet."""
        return sum(1 for worker in self.workers.values() if worker.first_analysis_pending and worker.enabled)

    def document_idle(self, worker: DocumentWorker) -> None:
        """Keep the syntax trees of the HOT_DOCUMENTS most recently active documents only."""
        self.recent.pop(worker.uri, None)
        self.recent[worker.uri] = None
        for uri in list(self.recent)[:-HOT_DOCUMENTS]:
            cold = self.workers.get(uri)
            if cold is None or cold.hibernate():
                self.recent.pop(uri, None)

    def send_status(self) -> None:
        from perflsp.server.features import status

        self.notify(STATUS_NOTIFICATION, status.payload(self))

    def notify(self, method: str, params: object) -> None:
        """A notification of perflsp's own to the client."""
        self.protocol.notify(method, params)

    # ------------------------------------------------------------------ LLM answers, measurements

    def annotate(self, worker: DocumentWorker, snap: Snapshot) -> None:
        """After an analysis, in the worker's thread: stored measurements and LLM questions."""
        snap.measured = self.measured.evidence(snap)
        snap.advice = self.advice.prepare(worker, snap)

    def measure(self, snap: Snapshot) -> SnapshotMeasured | None:
        return self.measured.evidence(snap)

    def published_hook(self, worker: DocumentWorker, snap: Snapshot) -> None:
        """The static diagnostics are out: ask the LLM about what it has not answered."""
        self.advice.published(worker, snap)

    def diagnostics_refreshed(self, worker: DocumentWorker) -> None:
        if self.pull_mode and self.capability("workspace.diagnostics.refresh_support"):
            self.workspace_diagnostic_refresh(None)
        if self.capability("workspace.code_lens.refresh_support"):
            self.workspace_code_lens_refresh(None)

    def refresh_folder(self, root: Path | None) -> None:
        """Stored profiles of a folder changed: republish its open documents."""
        for uri, worker in self.workers.items():
            config = self.config_for(uri)
            if root is None or config.root == root:
                worker.refresh(remeasure=True)


server = PerfLanguageServer()


# ---------------------------------------------------------------------- lifecycle


@server.feature(lsp.INITIALIZE)
def on_initialize(ls: PerfLanguageServer, params: lsp.InitializeParams) -> None:
    ls.init_params = params
    ls.pull_mode = params.capabilities.text_document is not None and params.capabilities.text_document.diagnostic is not None


@server.feature(lsp.INITIALIZED)
async def on_initialized(ls: PerfLanguageServer, params: lsp.InitializedParams) -> None:
    from perflsp.server import lifecycle

    try:
        await lifecycle.initialized(ls)
    finally:
        ls.ready.set()


@server.feature(lsp.SHUTDOWN)
def on_shutdown(ls: PerfLanguageServer, params: None) -> None:
    for worker in ls.workers.values():
        worker.close()
        if ls._advice is not None:
            ls.advice.forget(worker)
    ls.workers.clear()


# ---------------------------------------------------------------------- documents


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: PerfLanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
    from perflsp.server.lifecycle import open_document

    open_document(ls, params)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PerfLanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
    from perflsp.server.lifecycle import change_document

    change_document(ls, params)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PerfLanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
    worker = ls.workers.pop(params.text_document.uri, None)
    refused = ls.refused.get(params.text_document.uri)
    ls.closed(params.text_document.uri)
    if worker is not None:
        worker.close()
        if ls._advice is not None:
            ls.advice.forget(worker)
    if (worker is not None or refused) and not ls.pull_mode:
        ls.publish(params.text_document.uri, None, [])


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: PerfLanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
    from perflsp.server.lifecycle import saved

    await saved(ls, params.text_document.uri)


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: PerfLanguageServer, params: lsp.DidChangeConfigurationParams) -> None:
    from perflsp.server.lifecycle import configuration_changed

    await ls.ready.wait()
    await configuration_changed(ls, params.settings)


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
async def did_change_watched_files(ls: PerfLanguageServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    from perflsp.server.lifecycle import files_changed

    await ls.ready.wait()
    await files_changed(ls, [change.uri for change in params.changes])


@server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def did_change_folders(ls: PerfLanguageServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    from perflsp.server.lifecycle import folders_changed

    await ls.ready.wait()
    await folders_changed(ls, params.event)


# ---------------------------------------------------------------------- language features


@server.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC,
                lsp.DiagnosticOptions(identifier="perflsp", inter_file_dependencies=False, workspace_diagnostics=False))
async def pull_diagnostics(ls: PerfLanguageServer, params: lsp.DocumentDiagnosticParams) -> lsp.DocumentDiagnosticReport:
    from perflsp.server.features import diagnostics

    await ls.ready.wait()
    worker = ls.workers.get(params.text_document.uri)
    if worker is None or not ls.capability("workspace.diagnostics.refresh_support"):
        # (a client that cannot be asked to pull again waits for the exact state)
        snap = await ls.snapshot(params.text_document.uri, exact=True)
        return diagnostics.full_report(snap, params.previous_result_id)
    snap, known = await worker.diagnostics_for_pull()
    if known is None:
        return diagnostics.full_report(snap, params.previous_result_id)
    return diagnostics.partial_report(worker.version, known)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
async def hover(ls: PerfLanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
    from perflsp.server.features import hover as feature

    return await ls.read_latest(params.text_document.uri, lambda snap: feature.hover(snap, params.position),
                                queued=lambda worker: feature.queued_hover(worker.pending_text(), params.position,
                                                                           ls.queued_documents()))


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=CODE_ACTION_KINDS, resolve_provider=False))
async def code_action(ls: PerfLanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
    from perflsp.server.features import code_actions

    worker = ls.workers.get(params.text_document.uri)
    cancelled = threading.Event()
    try:
        return await ls.read_latest(params.text_document.uri, lambda snap: code_actions.actions(
            ls, worker, snap, params, cancelled.is_set), in_thread=True, queued=lambda worker: [])
    except asyncio.CancelledError:
        cancelled.set()  # $/cancelRequest: the thread stops at its next check
        raise
    except code_actions.Cancelled:
        return None


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
async def inlay_hints(ls: PerfLanguageServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    from perflsp.server.features import inlay_hints as feature

    return await ls.read_latest(params.text_document.uri, lambda snap: feature.hints(snap, params.range), owe="hint",
                                queued=lambda worker: [])


@server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
async def code_lens(ls: PerfLanguageServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    from perflsp.server.features import code_lens as feature
    from perflsp.server.features.status import profiling_status

    def lenses(snap: Snapshot) -> list[lsp.CodeLens]:
        profiling = profiling_status(snap.config)[0] == "ready"
        return feature.lenses(snap, profiling, snap.advice.label if snap.advice is not None else None)

    return await ls.read_latest(params.text_document.uri, lenses, owe="lens",
                                queued=lambda worker: feature.queued_lenses(worker.uri, ls.queued_documents()))


# ---------------------------------------------------------------------- commands


CommandHandler = Callable[..., Awaitable[object]]  # (ls, *arguments as JSON) -> the JSON answer


def _register_commands() -> None:
    """Every command of the registry (`features.commands.COMMANDS`; each module imported on first use)."""
    for name in COMMANDS:
        def make(command: str) -> CommandHandler:
            async def handler(ls: PerfLanguageServer, *args: object) -> object:
                from perflsp.server.features import commands

                await ls.ready.wait()
                return await commands.run(ls, command, list(args))

            handler.__name__ = command.replace(".", "_")
            return handler

        server.command(name)(make(name))


_register_commands()


# ---------------------------------------------------------------------- entry point


def run(tcp: str | None = None, log_level: str = "info") -> None:
    from perflsp.server import logs

    server.log_handler = logs.setup(log_level, server)
    if tcp:
        host, _, port = tcp.rpartition(":")
        _serve_tcp(host or "127.0.0.1", int(port))
    else:
        from perflsp.server.protocol import serve_stdio

        serve_stdio(server)


def _serve_tcp(host: str, port: int) -> None:
    from perflsp.server.protocol import serve_tcp

    serve_tcp(server, host, port)
