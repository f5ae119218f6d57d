"""Startup, documents and configuration changes (the handlers in app.py delegate here)."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.server import engine_adapter as engine
from perflsp.server import logs
from perflsp.server.config import CONFIG_FILE, Origin
from perflsp.server.scheduler import DocumentWorker
from perflsp.server.text import Change, path_of
from perflsp.server.workspace import WorkspaceState
from perflsp.source.positions import Position

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext

log = logging.getLogger("perflsp.server")


async def initialized(ls: ServerContext) -> None:
    params = ls.init_params
    assert params is not None
    folders: list[tuple[str, Path | None]] = [(f.uri, path_of(f.uri)) for f in params.workspace_folders or []]
    if not folders and (params.root_uri or params.root_path):
        from pygls.uris import from_fs_path

        uri = params.root_uri or from_fs_path(params.root_path or "") or ""
        folders = [(uri, path_of(uri))]
    if ls.log_handler is not None:
        ls.log_handler.loop = asyncio.get_running_loop()
    state = WorkspaceState(folders, params.initialization_options)
    ls.workspace_state = state
    await pull_configuration(ls)
    await refresh_all(ls, initial=True)
    await _register_watchers(ls)
    await asyncio.to_thread(warm_up)
    # What start-up allocated lives as long as the server: keep it out of every later garbage
    # collection, so collections during an analysis scan only the documents' objects.
    gc.collect()
    gc.freeze()
    log.info("perflsp %s ready: %d workspace folder(s), %s diagnostics, lint rules %s", ls.version,
             len([f for f in state.folders if f.uri]), "pull" if ls.pull_mode else "push",
             "on" if engine.lints_available() else "not installed")
    ls.send_status()


_WARM_UP_SOURCE = (Path(__file__).resolve().parents[2] / "examples" / "cuda" / "saxpy.cu")


def warm_up() -> None:
    """Run every stage once on a small kernel before the first document: tree-sitter queries,
    the engine's and the rules' first-use work, the LSP types' serialisers."""
    import json

    from perflsp.server.analysis import Analyzer
    from perflsp.server.config import defaults
    from perflsp.server.documents import Snapshot
    from perflsp.server.features import diagnostics, hover
    from perflsp.server.json_types import lsp_json
    from perflsp.server.text import TextState

    source = _WARM_UP_TEXT
    try:
        from perflsp.source.parser import warm_up as compile_queries

        compile_queries()  # every query file, also those the small kernel below does not reach
        config = defaults()
        state = TextState(source, 0, None)
        analyzer = Analyzer()
        analyzer.start(state, state.extracted, config.gpus, None, (0,), state.lines)
        analysis = analyzer.step(None)
        snap = Snapshot("file:///warm-up.cu", 0, state.data, state.tree, state.lines, state.extracted.kernels,
                        analysis, config, state.preprocessed)
        items = diagnostics.build(snap)
        json.dumps(lsp_json(items))
        for report in snap.reports():
            hover.kernel_markdown(report)
    except Exception:
        log.exception("warm-up failed")


_WARM_UP_TEXT = """
#define BLOCK 256
__device__ float twice(float v) { return 2.0f * v; }
__global__ void __launch_bounds__(BLOCK) k(int n, float a, const float *__restrict__ x, float *__restrict__ y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * twice(x[i]) + y[i] + 1.0;
}
int main() {
    const int n = 1 << 20;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, 2.0f, x, y);
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n])
    for (int i = 0; i < n; ++i) y[i] += x[i];
    return 0;
}
"""


async def pull_configuration(ls: ServerContext) -> None:
    """Ask the client for `perflsp` settings of each folder (when it answers configuration requests)."""
    state = ls.initialized_workspace
    if not ls.capability("workspace.configuration"):
        return
    folders = state.folders
    items = [lsp.ConfigurationItem(section="perflsp", scope_uri=f.uri or None) for f in folders]
    try:
        results = await asyncio.wait_for(ls.workspace_configuration_async(lsp.ConfigurationParams(items=items)), 10)
    except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the other layers
        log.warning("workspace/configuration failed: %s", exc)
        return
    from perflsp.server.config import client_values

    for folder, result in zip(folders, results or []):
        folder.workspace_settings = client_values(result) if isinstance(result, dict) else {}


async def refresh_all(ls: ServerContext, initial: bool = False) -> None:
    state = ls.initialized_workspace
    known = engine.known_rule_codes()
    changed_folders = []
    ignored: list[str] = []
    for folder in state.folders:
        changed, problems = state.refresh(folder, known)
        for problem in problems:
            log.warning("%s", problem)
            if "ignored" in problem:
                ignored.append(problem)  # one message lists them all (below)
            else:
                ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"perflsp: {problem}"))
        if changed:
            changed_folders.append(folder)
    if ignored:
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=ignored_message(ignored)))
    config = state.folders[0].config
    if config is not None and config.origin_of("log_level") is not Origin.DEFAULT:
        logs.set_level(ls.log_handler, config.settings.log_level)  # else `perflsp serve --log-level` stays
    ls.advice.configure([f.config for f in state.folders if f.config is not None])
    if initial:
        return
    for uri, worker in ls.workers.items():
        folder = state.folder_for(uri)
        if folder in changed_folders:
            worker.reanalyze(reextract=True)
    if changed_folders:
        if ls.capability("workspace.code_lens.refresh_support"):
            ls.workspace_code_lens_refresh(None)
        if ls.capability("workspace.inlay_hint.refresh_support"):
            ls.workspace_inlay_hint_refresh(None)
        if ls.pull_mode and ls.capability("workspace.diagnostics.refresh_support"):
            ls.workspace_diagnostic_refresh(None)
    ls.send_status()


def ignored_message(ignored: list[str]) -> str:
    """One message for every setting dropped for trust reasons (not one pop-up each)."""
    if len(ignored) == 1:
        return f"perflsp: {ignored[0]}"
    by_reason: dict[str, list[str]] = {}
    for item in ignored:
        what, sep, why = item.partition(" ignored: ")
        by_reason.setdefault(why if sep else "", []).append(what if sep else item)
    parts = [f"{', '.join(whats)} ignored" + (f": {why}" if why else "") for why, whats in by_reason.items()]
    return f"perflsp: {len(ignored)} settings ignored. " + ". ".join(parts)


async def _register_watchers(ls: ServerContext) -> None:
    if not ls.capability("workspace.did_change_watched_files.dynamic_registration"):
        return
    # (a header or a compile database changed: the open documents are read again, `files_changed`)
    watchers = [lsp.FileSystemWatcher(glob_pattern=f"**/{CONFIG_FILE}"),
                lsp.FileSystemWatcher(glob_pattern="**/*.{h,hh,hpp,hxx,cuh,inc,inl}"),
                lsp.FileSystemWatcher(glob_pattern="**/compile_commands.json")]
    registration = lsp.Registration(id="perflsp-watch", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                    register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers))
    try:
        await asyncio.wait_for(ls.client_register_capability_async(lsp.RegistrationParams(registrations=[registration])), 10)
    except Exception as exc:  # noqa: BLE001
        log.info("could not register file watchers (%s): .perflsp.toml changes apply after didChangeConfiguration", exc)


# ---------------------------------------------------------------------- documents


def too_large(text: str) -> str | None:
    """Why a document is not analysed for its size (the CLI's limit), or None."""
    from perflsp.source.files import MAX_FILE_BYTES

    size = len(text)
    if size * 4 > MAX_FILE_BYTES:  # only then can the UTF-8 form be over the limit
        size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB ({size} bytes)"
    return None


def open_document(ls: ServerContext, params: lsp.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    old = ls.workers.pop(doc.uri, None)
    if old is not None:
        old.close()
    reason = too_large(doc.text)
    if reason is not None:
        _refuse(ls, doc.uri, doc.version, reason)
        return
    ls.refused.pop(doc.uri, None)
    _open_worker(ls, doc.uri, doc.text, doc.version)


def _refuse(ls: ServerContext, uri: str, version: int | None, reason: str) -> None:
    """Too large to analyse: say so once (message and a diagnostic), keep nothing of it."""
    first = uri not in ls.refused
    ls.refused[uri] = reason
    name = uri.rsplit("/", 1)[-1]
    message = f"perflsp: {name} is not analysed: {reason}, the limit of `perflsp check` too"
    if first:
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))
        log.warning("%s", message)
    if not ls.pull_mode:
        zero = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
        ls.publish(uri, version, [lsp.Diagnostic(range=zero, message=message, source="perflsp",
                                                 severity=lsp.DiagnosticSeverity.Information,
                                                 data={"kind": "skipped", "reason": reason})])


def _open_worker(ls: ServerContext, uri: str, text: str, version: int | None) -> None:
    worker = DocumentWorker(ls, uri, text, version)  # ranks as a background document until used
    ls.workers[uri] = worker
    asyncio.get_running_loop().create_task(_start(ls, worker))


async def _start(ls: ServerContext, worker: DocumentWorker) -> None:
    from perflsp.server import compiled, resource_usage

    await ls.ready.wait()
    worker.start()
    if await worker.current() is not None:
        resource_usage.schedule(ls, worker)
        compiled.schedule(ls, worker)


def change_document(ls: ServerContext, params: lsp.DidChangeTextDocumentParams) -> None:
    worker = ls.workers.get(params.text_document.uri)
    if worker is None and params.text_document.uri in ls.refused:
        _refused_changed(ls, params.text_document.uri, params.text_document.version)
        return
    if worker is None:
        log.warning("change to a document that is not open: %s", params.text_document.uri)
        return
    changes = []
    for change in params.content_changes:
        if isinstance(change, lsp.TextDocumentContentChangePartial):
            start, end = change.range.start, change.range.end
            changes.append(Change(change.text, Position(start.line, start.character), Position(end.line, end.character)))
        else:
            changes.append(Change(change.text))
    if ls.ready.is_set():
        worker.change(params.text_document.version, changes)
        from perflsp.server import compiled

        # compiled again once typing pauses (each edit restarts the wait)
        compiled.schedule(ls, worker, ls.config_for(worker.uri).settings.compile_delay_ms / 1000.0)
    else:  # queued: the worker starts once the configuration is known
        worker.queue(params.text_document.version, changes)


def _refused_changed(ls: ServerContext, uri: str, version: int | None) -> None:
    """A document too large to analyse was edited: analyse it once it is under the limit."""
    try:
        text = ls.workspace.get_text_document(uri).source  # pygls keeps the text
    except Exception:  # noqa: BLE001 - nothing to analyse then
        return
    reason = too_large(text)
    if reason is not None:
        ls.refused[uri] = reason
        return
    ls.refused.pop(uri, None)
    _open_worker(ls, uri, text, version)


async def saved(ls: ServerContext, uri: str) -> None:
    from perflsp.server import compiled, resource_usage

    await ls.ready.wait()
    worker = ls.workers.get(uri)
    if worker is not None:
        resource_usage.schedule(ls, worker)
        compiled.schedule(ls, worker)
    path = path_of(uri)
    if path is not None and path.suffix.lower() in (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl"):
        await files_changed(ls, [uri])


# ---------------------------------------------------------------------- configuration


async def configuration_changed(ls: ServerContext, settings: object) -> None:
    from perflsp.server.config import client_values

    state = ls.initialized_workspace
    pushed = client_values(settings) if isinstance(settings, dict) else {}
    if pushed and not ls.capability("workspace.configuration"):
        state.pushed = pushed  # a client without workspace/configuration sends its settings here
    elif pushed and "trustedWorkspace" in pushed:
        state.pushed = {"trusted_workspace": pushed["trustedWorkspace"]}
    await pull_configuration(ls)
    await refresh_all(ls)


async def files_changed(ls: ServerContext, uris: list[str]) -> None:
    state = ls.initialized_workspace
    configs = [u for u in uris if u.endswith("/" + CONFIG_FILE)]
    headers = [u for u in uris if u not in configs]
    if headers:
        state.forget_headers()
        for worker in ls.workers.values():
            worker.reanalyze(reextract=True)
    if configs:
        await refresh_all(ls)


async def folders_changed(ls: ServerContext, event: lsp.WorkspaceFoldersChangeEvent) -> None:
    state = ls.initialized_workspace
    for removed in event.removed:
        state.remove_folder(removed.uri)
    for added in event.added:
        state.add_folder(added.uri)
    await pull_configuration(ls)
    await refresh_all(ls)
