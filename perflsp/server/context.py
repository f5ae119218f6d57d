"""What the server's features and services use of the language server, as a typed interface.

`app.PerfLanguageServer` is the one implementation; the features (`features/*`), the services
around an analysis (`advice.py`, `compiled.py`, `resource_usage.py`, `progress.py`) and the
lifecycle handlers (`lifecycle.py`) are typed against `ServerContext` and never import `app.py`,
which imports them (lazily) to register them: the server's class sits at the top of the package.

`ServerContext` extends what a document worker needs (`host.DocumentHost`) and what the advisor
needs (`advice.AdviceHost`: the workspace state, `ready`, messages, the status notification, and
through `progress.ProgressClient` the client's capabilities and progress bars) with the server's
state (workers, services) and the few other pygls requests and notifications the features send
(refreshes, registrations, configuration). Each of those smaller interfaces is declared by the
module that uses it, so that it does not import this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types as lsp

from perflsp.server.advice import AdviceHost
from perflsp.server.host import DocumentHost
from perflsp.server.json_types import JsonObject

if TYPE_CHECKING:
    from pygls.workspace import Workspace

    from perflsp.server.advice import AdviceService
    from perflsp.server.documents import Snapshot
    from perflsp.server.logs import ClientLogHandler
    from perflsp.server.measured import MeasuredService
    from perflsp.server.scheduler import DocumentWorker
    from perflsp.server.tuning_state import TuningState
    from perflsp.server.workspace import WorkspaceState

# a file of the workspace scan (perflsp.rooflineData): path, mtime_ns, size, configuration generation,
# mtime_ns of the folder's stored profiles
ScanKey = tuple[str, int, int, int, int | None]


class ServerContext(DocumentHost, AdviceHost, Protocol):
    """The language server as its features see it."""

    # (from AdviceHost: workspace_state, ready, window_show_message, send_status;
    #  from ProgressClient: capability, work_done_progress)

    workers: dict[str, DocumentWorker]  # uri -> the open document's worker
    refused: dict[str, str]  # uri -> why an open document is not analysed (too large)
    pull_mode: bool  # the client pulls diagnostics (else they are published)
    init_params: lsp.InitializeParams | None
    log_handler: ClientLogHandler | None
    # reports of files not open, as JSON, per path: (the state they were made for, the reports)
    scan_cache: dict[str, tuple[ScanKey, list[JsonObject]]]

    @property
    def version(self) -> str | None: ...

    @property
    def advice(self) -> AdviceService:
        """The LLM advisor's side of the server."""
        ...

    @property
    def measured(self) -> MeasuredService:
        """Stored Nsight Compute results."""
        ...

    @property
    def tuning(self) -> TuningState:
        """Kernel Tuner runs of this session."""
        ...

    @property
    def initialized_workspace(self) -> WorkspaceState:
        """The workspace's folders and their configuration (after `initialized`)."""
        ...

    @property
    def workspace(self) -> Workspace:
        """pygls' workspace (the text of documents the server did not open itself)."""
        ...

    async def snapshot(self, uri: str, exact: bool = False) -> Snapshot | None:
        """The document's newest analysis (`exact`: of its current version)."""
        ...

    def refresh_folder(self, root: Path | None) -> None:
        """Stored profiles of a folder changed: republish its open documents."""
        ...

    def notify(self, method: str, params: object) -> None:
        """Send a notification of perflsp's own (`perflsp/status`, `perflsp/explanation`)."""
        ...

    def workspace_code_lens_refresh(self, params: None) -> object: ...

    def workspace_inlay_hint_refresh(self, params: None) -> object: ...

    def workspace_diagnostic_refresh(self, params: None) -> object: ...

    async def workspace_configuration_async(self, params: lsp.ConfigurationParams) -> Sequence[object]:
        """The client's settings, one raw JSON value per item asked (validated by `config`)."""
        ...

    async def client_register_capability_async(self, params: lsp.RegistrationParams) -> None: ...


__all__ = ["ScanKey", "ServerContext"]
