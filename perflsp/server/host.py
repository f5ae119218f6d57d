"""What a document worker (`scheduler.DocumentWorker`) needs from the server that hosts it.

The language server (`app.PerfLanguageServer`) is the real host; tests drive a worker with a
small stand-in that implements `DocumentHost` only. The other two protocols are optional
capabilities, found with `isinstance` (they are `runtime_checkable`): a host with a `WorkPool`
ranks every document's CPU work through it (else each job runs in its own thread), and a host
with `AnalysisHooks` adds the LLM's questions and stored measurements to each analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lsprotocol import types as lsp

from perflsp.server.json_types import JsonObject

if TYPE_CHECKING:
    from perflsp.analysis.reader import ReadContext
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.documents import Snapshot
    from perflsp.server.measured import SnapshotMeasured
    from perflsp.server.pool import WorkPool
    from perflsp.server.scheduler import DocumentWorker


class DocumentHost(Protocol):
    """Configuration, file context and publishing: every worker calls these."""

    def config_for(self, uri: str) -> ResolvedConfig:
        """The resolved settings (GPUs, rules, debounce, ...) of the document's folder."""
        ...

    def document_enabled(self, uri: str, config: ResolvedConfig) -> bool:
        """False when the settings exclude the document (it is then published empty)."""
        ...

    def path_for(self, uri: str) -> str | None:
        """The document's file path (None for untitled buffers)."""
        ...

    def reading_for(self, uri: str) -> ReadContext:
        """What the document is read with: its folder's include resolver (include directories
        and compile-flag macros) and its flags from the compile database its folders lead to."""
        ...

    def lint_codes(self, config: ResolvedConfig) -> set[str] | None:
        """Lint rules to run (None: all)."""
        ...

    def publish(self, uri: str, version: int | None, diagnostics: list[lsp.Diagnostic],
                as_json: list[JsonObject] | None = None) -> None:
        """Send a version's diagnostics (`as_json`: the same, already unstructured)."""
        ...

    def document_idle(self, worker: DocumentWorker) -> None:
        """The worker finished a round of work (the host may free its syntax trees later)."""
        ...


@runtime_checkable
class PooledHost(Protocol):
    """A host whose documents share one ranked pool of CPU slots (pool.py)."""

    pool: WorkPool


@runtime_checkable
class AnalysisHooks(Protocol):
    """What the server adds around an analysis: LLM questions and answers, stored measurements."""

    def annotate(self, worker: DocumentWorker, snap: Snapshot) -> None:
        """After an analysis, in the worker's thread: attach measurements and LLM questions."""
        ...

    def published_hook(self, worker: DocumentWorker, snap: Snapshot) -> None:
        """On the event loop, once the static diagnostics are out: ask the LLM."""
        ...

    def diagnostics_refreshed(self, worker: DocumentWorker) -> None:
        """A version was republished (an answer or a measurement arrived)."""
        ...

    def measure(self, snap: Snapshot) -> SnapshotMeasured | None:
        """Stored measurements of the snapshot's kernels, read again (worker thread)."""
        ...


__all__ = ["AnalysisHooks", "DocumentHost", "PooledHost"]
