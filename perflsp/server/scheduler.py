"""One worker per open document: applies edits, analyses, publishes; never blocks the event loop.

- Edits are queued as they arrive; the worker applies every queued edit, then parses and
  analyses once (in a thread, `asyncio.to_thread`). A lone edit is analysed at once; edits that
  arrive before the last edit's results were published (partly or whole) are a burst: the worker
  waits `debounceMs` for typing to pause. (An edit during a long analysis whose last edit was
  published is not: the edited kernels go first, and their results are published within
  `EDIT_PUBLISH_S`.)
- A result whose version is older than the newest edit is dropped, never published.
- A long analysis (a large file opened, or an edit outside kernel bodies) publishes what it has
  after `FIRST_PUBLISH_S` (`OPEN_PUBLISH_S` for a document's first analysis: the verdicts of the
  kernels at the top of the file), then the rest. A large document's first publication comes
  even before its text is parsed whole: from the top of the text alone (opening.py).
- tree-sitter's error recovery can differ between an incremental and a fresh parse, so when the
  tree has errors, the worker re-parses from scratch once the user pauses (`SETTLE_S`) and
  republishes if that changes anything. Pull diagnostics wait for this exact state.
- After each analysis the host may annotate the snapshot in the same thread (`host.annotate`:
  LLM questions, stored measurements) and act once it is published (`host.published_hook`: ask the
  LLM). Answers and imported results arrive later: `refresh()` republishes the current version.
- Each round of work on the text holds `lock`; `exclusive(fn)` runs `fn(snapshot)` in a thread
  under it, so commands read a snapshot whose spans no edit is moving meanwhile.
- Requests never queue behind an analysis (`request()`): when the edits are applied (a short,
  first-ranked job) the worker also makes a *provisional* snapshot of the new text that carries
  the last complete analysis (kernels matched by identity, an edited one by name), and requests
  read it unless the complete analysis of the newest version is ready within `REQUEST_WAIT_S`.
  Applying edits moves the spans (and the line index) that snapshots share with the live text,
  so only `latest`, the snapshot of the live text, is ever read, and only under `text_lock`
  (`read()`), which an apply holds too: a request waits at most for one apply in progress,
  never for an analysis or for other documents' work.
- Before a document's first analysis is complete, requests read what is known: a *partial*
  snapshot (the extraction, with the reports and findings of the kernels analysed so far, renewed
  every `PARTIAL_EVERY_S` while the analysis runs), or nothing at all before the text is even
  parsed (the features then answer "queued"). The kinds of answers given from it are owed a
  refresh (`host.refresh_owed`: `workspace/codeLens/refresh`, `workspace/inlayHint/refresh`) once
  the analysis completes. A pull (`diagnostics_for_pull`) waits `PULL_WAIT_S` for the exact
  state of the newest version, then answers with the newest diagnostics built (partial) and owes
  a `workspace/diagnostic/refresh` until that exact state is published.
- CPU work runs through the host's `WorkPool` (pool.py), ranked by `rank()`: applying edits, then
  documents with requests waiting or recently asked about or edited, then background documents.
  Analyses run in steps of `FIRST_PUBLISH_S`, so a background document yields within a step.
- A file can cost at most `ANALYSIS_BUDGET_S` of analysis (analysis.py): the kernels after that
  are reported as not analysed, with the reason (one diagnostic).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

from lsprotocol import types as lsp

from perflsp.server import opening
from perflsp.server.analysis import AnalysisState, Analyzer
from perflsp.server.documents import Snapshot
from perflsp.server.features.common import kernel_name
from perflsp.server.host import AnalysisHooks, DocumentHost, PooledHost
from perflsp.server.json_types import JsonObject
from perflsp.server.pool import WorkPool
from perflsp.server.text import Change, TextState
from perflsp.source.parser import has_syntax_errors

if TYPE_CHECKING:
    from perflsp.analysis.models import KernelReport
    from perflsp.compiled.model import CompiledSource
    from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion
    from perflsp.server.advice_state import DocumentAdvice
    from perflsp.server.config import ResolvedConfig

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

FIRST_PUBLISH_S = 0.12  # analysis time after which partial results are published
OPEN_PUBLISH_S = 0.02  # the same for a document's first analysis: its first diagnostics come early
RESUME_STEP_S = 0.003  # later steps of a long analysis (an edit waits for at most one)
EDIT_PUBLISH_S = 0.0  # and after an edit: its kernels are analysed first, then what is known is published
CONTINUE_S = 0.3  # pause after which an analysis deferred during a held edit goes on
TYPING_PAUSE_S = 0.05  # and after any other edit: typing faster than this leaves it waiting
SETTLE_S = 0.4  # pause after which an error-recovered tree is checked against a fresh parse
REQUEST_WAIT_S = 0.03  # how long a request waits for the newest version's complete analysis
PULL_WAIT_S = 0.1  # how long a pull waits for the newest version's exact analysis before answering what is known
PARTIAL_EVERY_S = 0.25  # how often a first analysis renews the partial snapshot requests read
VISIBLE_S = 30.0  # a document asked about or edited this recently counts as visible (ranks first)


class Closed(Exception):
    """A job of a document that was closed before the job ran: it did nothing."""


@dataclass(frozen=True, slots=True)
class Published:
    """One publication of a document's diagnostics."""

    version: int | None  # None: cleared (the document is not analysed)
    complete: bool  # False: partial results of a long analysis


Partial = tuple[list[lsp.Diagnostic], list[JsonObject]]  # diagnostics of a partial view, and their JSON


def _release_after_read(lock: threading.Lock, done: asyncio.Future[T]) -> None:
    """Release the text lock when the thread is done reading, not before; and retrieve how the
    read ended: when its request was cancelled meanwhile, nobody awaits it any more (a cancelled
    code action ends with its own `Cancelled`, which asyncio would log as never retrieved)."""
    lock.release()
    if not done.cancelled():
        done.exception()


class DocumentWorker:
    def __init__(self, host: DocumentHost, uri: str, text: str, version: int | None):
        self.host = host  # the language server (config_for, publish, ...)
        # its optional capabilities (host.py): a shared ranked pool, the LLM and measurement hooks
        self._pool: WorkPool | None = host.pool if isinstance(host, PooledHost) else None
        self._hooks: AnalysisHooks | None = host if isinstance(host, AnalysisHooks) else None
        self.uri = uri
        self.version = version  # newest version received
        self._opened_version = version
        self._initial: str | None = text
        self._unparsed: str | None = text  # the text as opened, until the worker has parsed it
        self._changes: list[Change] = []
        self._reset_text: str | None = None
        self.state: TextState | None = None
        self.analyzer = Analyzer()
        self.snapshot: Snapshot | None = None
        self.enabled = True
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        self._updated = asyncio.Condition()
        self._reanalyze = True
        self._reextract = False
        self._settle = False
        self._settle_timer: asyncio.TimerHandle | None = None
        # the last diagnostics built (for a publication) and the extraction they show (`_unmoved`)
        self._shown: tuple[FileKernels, list[lsp.Diagnostic], list[JsonObject]] | None = None
        # a large document's opening publication (its diagnostics and their JSON), shown in the
        # partial views of edits made before its first analysis completes, above `_intact_line`
        # (the first line any edit since touched): opening.py
        self._opening: tuple[list[lsp.Diagnostic], list[JsonObject]] | None = None
        self._intact_line = 0
        self._continue = False  # an analysis left unfinished while a definition was held goes on
        self._continue_timer: asyncio.TimerHandle | None = None
        self._busy = False
        self._burst = False
        self.latest: Snapshot | None = None  # the newest snapshot of the live text (complete or provisional)
        self.last_used = 0.0  # monotonic time of the last request or edit
        self._last_edit = 0.0  # monotonic time of the last edit
        self._urgent = 0  # requests waiting for this document's exact state
        self._applying = False  # edits are waiting to be applied, or being applied (ranks first)
        self.text_lock = threading.Lock()  # held while edits move spans, and while a request reads `latest`
        # held by each of this document's jobs in the pool's thread (`_job`): `close` drops the
        # document's state only while no job reads it
        self._job_lock = threading.Lock()
        self._failed: object = object()  # the version whose analysis raised (requests get the last result)
        self.published: list[Published] = []  # each publish of this document (tests)
        self.advice: DocumentAdvice | None = None  # the LLM's questions and answers for this document (advice.py)
        self.resource_task: asyncio.Task[None] | None = None  # the background nvcc run (resource_usage.py)
        self.compile_task: asyncio.Task[None] | None = None  # the background compile (compiled.py)
        self.lock = asyncio.Lock()
        self._republish = False
        self._remeasure = False
        self._owed: set[str] = set()  # answers given from a partial state, owed a refresh: "lens", "hint", "diagnostic"
        self._built: tuple[int | None, list[lsp.Diagnostic]] | None = None  # the newest diagnostics built (version, items)
        self._partial_at = 0.0  # monotonic time the partial snapshot was last renewed
        from perflsp.server.features.diagnostics import DiagnosticCache

        self._diagnostic_cache = DiagnosticCache()

    # ------------------------------------------------------------------ input

    def change(self, version: int | None, changes: Sequence[Change]) -> None:
        self.last_used = self._last_edit = time.monotonic()
        if self._opening is not None:
            for edit in changes:
                self._intact_line = min(self._intact_line, edit.start.line if edit.start is not None else 0)
        self._failed = object()
        self._changes.extend(changes)
        shown = bool(self.published) and self.published[-1].version == self.version
        self.version = version
        if self._busy and not shown:  # typing faster than results come: wait for a pause
            self._burst = True
        self._cancel_settle()
        self._kick()

    def queue(self, version: int | None, changes: Sequence[Change]) -> None:
        """Edits that arrive before the server is ready: applied once `start` is called."""
        self._changes.extend(changes)
        self.version = version

    def start(self) -> None:
        """Begin work on the text (the server calls this once the configuration is known)."""
        self._kick()

    def hibernate(self) -> bool:
        """Free the syntax trees of an idle document (it is parsed again when next needed)."""
        if self.state is None or self._busy or self._changes or (self._task is not None and not self._task.done()) \
                or self.text_lock.locked() or self.analyzer.running:  # (running: waits for a typing pause)
            return False
        self.state.hibernate()
        self.analyzer.release()
        for snap in (self.snapshot, self.latest):
            if snap is not None:
                snap.hibernate()
        return True

    def set_registers(self, registers: tuple[tuple[str, int], ...]) -> None:
        if self.state is not None and registers != self.state.registers:
            self.state.registers = registers
            self.reanalyze()

    def set_compiled(self, compiled: CompiledSource) -> None:
        """The device code compiled (compiled.py): analyse again with its counts."""
        if self.state is not None and not self.closed:
            self.state.compiled = compiled
            self.reanalyze()

    def reanalyze(self, reextract: bool = False) -> None:
        """Settings changed: analyse again (and extract again for new compile flags)."""
        self._reanalyze = True
        self._reextract = self._reextract or reextract
        self._kick()

    def refresh(self, remeasure: bool = False) -> None:
        """Republish the current version (an LLM answer arrived; with `remeasure`, stored profiles
        changed): diagnostics are built again, the analysis is kept."""
        self._republish = True
        self._remeasure = self._remeasure or remeasure
        self._kick()

    async def exclusive(self, fn: Callable[[Snapshot], T]) -> T | None:
        """`fn(snapshot)` in a thread while no edit is applied (None when nothing is analysed)."""
        async with self.lock:
            snap = self.snapshot
            if snap is None or self.closed:
                return None
            return await asyncio.to_thread(fn, snap)

    def close(self) -> None:
        """Stop all work and drop everything the document holds (its memory goes back). A job
        already in the pool's thread finishes first (it reads the state: it is dropped after);
        a job that had not started yet does nothing (`_job`)."""
        self.closed = True
        self._cancel_settle()
        self._cancel_continue()
        for task in (self.resource_task, self.compile_task):
            if task is not None:
                task.cancel()
        if self._task is not None:
            self._task.cancel()
        self.analyzer.cancel()  # a run in the pool's thread stops at its next kernel
        self.snapshot = self.latest = None
        self._initial = self._unparsed = None
        self._changes = []
        if self._job_lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._job_lock.release()
        else:  # (waits for the job in another thread, never on the event loop)
            asyncio.get_running_loop().run_in_executor(None, self._drop_after_job)

    def _drop_after_job(self) -> None:
        with self._job_lock:
            self._drop()

    def _drop(self) -> None:
        """What the closed document's work read: its text, trees, extraction, analysis caches."""
        self.state = None
        self.analyzer = Analyzer()
        self._shown = self._opening = None
        self.snapshot = self.latest = None

    def rank(self) -> tuple[int, float]:
        """This document's place in the work pool (lowest first)."""
        if self._applying or self._urgent:
            return (0, -self.last_used)
        if time.monotonic() - self.last_used < VISIBLE_S:
            return (1, -self.last_used)
        return (2, -self.last_used)

    async def _thread(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """`fn(*args)` in a thread (the host's pool, ranked); raises `Closed` when the document
        was closed before it ran."""
        if self.closed:
            raise Closed
        job: Callable[[], T] = functools.partial(self._job, fn, *args)
        if self._pool is None:
            return await asyncio.to_thread(job)
        return await self._pool.run(self.rank, job)

    def _job(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        # (a job queued in the pool, or handed to a thread, may start after the document closed:
        # then its state is gone and it must not run; while it runs, `close` leaves the state)
        with self._job_lock:
            if self.closed:
                raise Closed
            return fn(*args)

    async def read(self, fn: Callable[[Snapshot], T], in_thread: bool = False) -> T | None:
        """`fn(latest)` under `text_lock` (no edit moves its spans meanwhile); in a thread for
        slow readers (code actions). None when nothing is analysed."""
        lock = self.text_lock
        while not lock.acquire(blocking=False):  # an apply in progress: a few ms
            await asyncio.sleep(0.002)
        snap = self.latest
        if snap is None or self.closed or not in_thread:
            try:
                return None if snap is None or self.closed else fn(snap)
            finally:
                lock.release()
        future = asyncio.get_running_loop().run_in_executor(None, fn, snap)
        future.add_done_callback(lambda done: _release_after_read(lock, done))
        return await asyncio.shield(future)

    async def _wait(self, timeout: float) -> None:
        async with self._updated:
            try:
                await asyncio.wait_for(self._updated.wait(), timeout=timeout)
            except TimeoutError:
                pass

    def _kick(self) -> None:
        if self.closed:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    # ------------------------------------------------------------------ waiting

    async def current(self, exact: bool = False, complete: bool = True) -> Snapshot | None:
        """The snapshot of the newest version (waits for it); None when the document is not
        analysed (disabled, excluded, closed)."""
        if exact:
            self._urgent += 1
        try:
            return await self._current(exact, complete)
        finally:
            if exact:
                self._urgent -= 1

    async def _current(self, exact: bool, complete: bool) -> Snapshot | None:
        while True:
            if self.closed:
                return None
            snap = self.snapshot
            idle = not self._changes and (self._task is None or self._task.done())
            if not self.enabled and idle:
                return None
            if idle and self._failed == self.version and not self._changes:
                return snap  # this version could not be analysed (logged): the last result, if any
            if snap is not None and snap.version == self.version and not self._changes and not self._reanalyze \
                    and not self._reextract:
                if (snap.complete or not complete) and (snap.exact or not exact):
                    return snap
                if exact and not snap.exact and not self._settle:
                    self._settle = True
                    self._kick()
            elif idle and not self._paused:
                self._kick()
            await self._wait(1.0)

    async def request(self, wait_s: float = REQUEST_WAIT_S, first_wait_s: float = 0.0) -> Snapshot | None:
        """What a request (hover, inlay hints, lens, code actions) reads: the complete analysis of
        the newest version when it is ready within `wait_s`, else the newest snapshot of the live
        text (provisional: the last complete analysis on the newest applied text; before the first
        analysis completes, partial: what it knows so far; `first_wait_s`: how long to wait for
        that first analysis before). None when the text is not parsed yet (or the document is not
        analysed). Read the snapshot with `read()`."""
        self.last_used = time.monotonic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (max(wait_s, first_wait_s) if self.snapshot is None else wait_s)
        while True:
            if self.closed:
                return None
            idle = not self._changes and (self._task is None or self._task.done())
            if not self.enabled and idle:
                return None
            snap = self.snapshot
            if snap is not None and snap.version == self.version and not self._changes and snap is self.latest:
                return snap
            latest = self.latest
            if latest is None and loop.time() >= deadline:
                if self.closed or (not self.enabled and idle):
                    return None
                self._kick()
                return None  # not parsed yet: the caller answers "queued" (and is owed a refresh)
            if idle and self._failed == self.version:
                return latest
            if idle and not self._paused:
                self._kick()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return latest
            await self._wait(remaining)

    def pending_text(self) -> str:
        """The text as opened, before the worker has parsed it (empty once it has)."""
        return self._unparsed or ""

    def owe(self, kind: str) -> None:
        """An answer of `kind` ("lens", "hint", "diagnostic") was given from a partial state: ask
        the client to request it again once the state it lacked is there."""
        self._owed.add(kind)

    @property
    def first_analysis_pending(self) -> bool:
        """No complete analysis of this document yet (requests read a partial state or none)."""
        return self.snapshot is None and not self.closed

    async def diagnostics_for_pull(self, wait_s: float = PULL_WAIT_S) -> tuple[Snapshot | None, list[lsp.Diagnostic] | None]:
        """For a pull: the exact analysis of the newest version when it is ready within `wait_s`
        (its snapshot); else the newest diagnostics built (those of the newest version's partial
        publication, or of the last one: partial, owing a refresh). (None, None): the document is
        not analysed (disabled, excluded, closed)."""
        try:
            snap = await asyncio.wait_for(self.current(exact=True), wait_s)
        except TimeoutError:
            return None, self._partial_for_pull()
        return snap, None

    def _partial_for_pull(self) -> list[lsp.Diagnostic] | None:
        idle = not self._changes and (self._task is None or self._task.done())
        if self.closed or (not self.enabled and idle):
            return None
        self.owe("diagnostic")
        built = self._built
        return list(built[1]) if built is not None else []

    def _settled_now(self) -> None:
        """The newest version's analysis is published (complete; `exact` when it equals a fresh
        parse): pay what is owed."""
        snap = self.snapshot
        if not self._owed or snap is None or snap.version != self.version or self._changes:
            return
        kinds = {k for k in self._owed if k != "diagnostic" or snap.exact}
        if not kinds:
            return
        self._owed -= kinds
        owed = getattr(self.host, "refresh_owed", None)
        if owed is not None:
            owed(kinds)

    async def _notify(self) -> None:
        async with self._updated:
            self._updated.notify_all()

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        try:
            while not self.closed:
                if self._changes or self._initial is not None or self._reanalyze or self._reextract:
                    async with self.lock:
                        await self._analyse()
                elif self._continue or (self._urgent and self.analyzer.running):
                    self._continue = False
                    async with self.lock:
                        await self._continue_now()
                elif self._settle:
                    self._settle = False
                    async with self.lock:
                        await self._settle_now()
                elif self._republish:
                    async with self.lock:
                        await self._republish_now()
                else:
                    break
                if self._burst and self._changes:
                    self._burst = False
                    delay = self.host.config_for(self.uri).settings.debounce_ms / 1000
                    if delay:
                        await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except Closed:
            return
        except Exception:  # a bug must not kill the document: log it and keep the last result
            log.exception("analysis of %s failed", self.uri)
            self._failed = self.version
        finally:
            await self._notify()
            # an edit that arrived while this task was finishing (it found the task alive, so it
            # started none) must not wait for the next one
            if not self.closed and (self._changes or self._continue):
                asyncio.get_running_loop().call_soon(self._kick)

    async def _analyse(self) -> None:
        changes, self._changes = self._changes, []
        initial, self._initial = self._initial, None
        version = self.version
        config: ResolvedConfig = self.host.config_for(self.uri)
        reextract, self._reextract = self._reextract, False
        self._reanalyze = False
        self._republish = self._remeasure = False  # this analysis reads the answers and results anew
        self.enabled = self.host.document_enabled(self.uri, config)
        self._cancel_continue()
        self._busy = True
        edit_first = bool(self.published)
        try:
            if initial is not None and self.state is None and not changes and self.enabled \
                    and opening.worth_trying(initial):
                await self._publish_opening(initial, version, config)
            self._applying = True
            try:
                first = await self._thread(self._prepare_then_step, initial, changes, version, config, reextract,
                                           edit_first)
            finally:
                self._applying = False
            await self._notify()
            if self._changes or self.closed:
                return  # newer edits: apply them before analysing
        finally:
            self._busy = False
        await self._analysis_steps(version, config, edit_first=edit_first, first=first)

    async def _continue_now(self) -> None:
        """Go on with an analysis left unfinished while a definition was held (`_deferred`)."""
        if self.analyzer.running and not self._changes and not self.closed:
            await self._analysis_steps(self.version, self.host.config_for(self.uri))

    async def _analysis_steps(self, version: int | None, config: ResolvedConfig, edit_first: bool = False,
                              first: tuple[Snapshot, Partial | None] | None = None) -> None:
        """Analyse in steps, publishing what is known after the first one, then the whole.
        `first`: that step, when the job that applied the edits took it."""
        self._busy = True
        try:
            snap, view = first if first is not None else await self._thread(self._first_step, version, config,
                                                                               edit_first)
            while not snap.complete:
                if self._changes or self.closed:
                    return  # stale: the next round starts from the newer text
                if self.enabled and (not self.published or self.published[-1].version != version):
                    if view is None:
                        view = await self._thread(self._partial_diagnostics, snap)
                    partial = self._with_opening(view)
                    if self._changes or self.closed:
                        return
                    # (a view with no verdict yet, after an edit that reset the analysis, would
                    # clear the editor's diagnostics until the next one: the last stay meanwhile)
                    if partial[0] or not self.published:
                        self.host.publish(self.uri, version, *partial)
                        self.published.append(Published(version, False))
                        self._built = (version, partial[0])
                view = None
                if self._deferred():
                    return
                snap = await self._thread(self._resume, snap)
        finally:
            self._busy = False
        if self._changes or self.closed:
            return  # a newer version arrived: this result is stale
        self.snapshot = self.latest = snap
        if self.enabled:
            self._publish(snap)
            self._published_hook(snap)
        elif not self.published or self.published[-1].version is not None:
            self.host.publish(self.uri, version, [])  # not analysed: nothing to show (clears old results)
            self.published.append(Published(None, True))
        self._settled_now()
        await self._notify()
        if not snap.exact:
            self._schedule_settle()
        self.host.document_idle(self)

    def _deferred(self) -> bool:
        """The rest of an unfinished analysis (a large file's first one) waits while the user
        types: its steps would delay the next keystroke. Inside a held definition whose edits are
        not parsed yet (the rest needs the file's tree: a costly parse of a text with an error) it
        waits for a pause of `CONTINUE_S` or for the definition to parse; after other edits, for
        `TYPING_PAUSE_S` without one (between the keystrokes of ordinary typing it goes on). A
        request that needs the exact state does not wait."""
        state = self.state
        if state is None or self._urgent:
            return False
        if state.parsed_tree is None:
            wait = CONTINUE_S
        else:
            wait = self._last_edit + TYPING_PAUSE_S - time.monotonic()
            if wait <= 0:
                return False
        self._cancel_continue()
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._continue_timer = None
            self._continue = True
            self._kick()

        self._continue_timer = loop.call_later(wait, due)
        return True

    @property
    def _paused(self) -> bool:
        """An unfinished analysis waits for a pause in typing (`_deferred`): its timer starts it
        again. A waiter must not start it sooner (that spun the event loop while the user typed),
        unless it needs the exact state (`current(exact=True)`: then nothing waits)."""
        return self._continue_timer is not None and not self._urgent

    def _cancel_continue(self) -> None:
        self._continue = False
        if self._continue_timer is not None:
            self._continue_timer.cancel()
            self._continue_timer = None

    async def _publish_opening(self, text: str, version: int | None, config: ResolvedConfig) -> None:
        """A large document's first diagnostics, from the top of its text (opening.py)."""
        def stale() -> bool:
            return self.closed or bool(self._changes)

        started = time.monotonic()
        measure = self._hooks.measure if self._hooks is not None else None
        first = await self._thread(opening.first_diagnostics, self.uri, text, version, config,
                                   self.host.path_for(self.uri), self.host.reading_for(self.uri), measure, stale)
        if first is None or stale():
            return
        self.host.publish(self.uri, version, first.diagnostics, first.as_json)
        self.published.append(Published(version, False))
        self._opening, self._intact_line = (first.diagnostics, first.as_json), sys.maxsize
        log.debug("%s v%s: %d kernel(s) of the top of the text published in %.1f ms", self.uri.rsplit("/", 1)[-1],
                  version, first.kernels, (time.monotonic() - started) * 1000)
        # The parse and extraction that follow hold the pool for ~300 ms and a thread cannot be
        # stopped: a document closed at once (a preview, a peek) is cancelled here, before them.
        await asyncio.sleep(opening.OPENING_GRACE_S)

    def _prepare(self, initial: str | None, changes: list[Change], version: int | None, config: ResolvedConfig,
                 reextract: bool) -> None:
        """Apply the queued edits (in the pool's thread); the analysis follows in other jobs."""
        if self.state is not None:
            self.state.awake()  # (a hibernated tree is parsed again before the lock: it moves no span)
        with self.text_lock:
            self._apply(initial, changes, version, config, reextract)
            self.latest = self._provisional(version, config)

    def _apply(self, initial: str | None, changes: list[Change], version: int | None, config: ResolvedConfig,
               reextract: bool) -> None:
        if self.state is None:  # edits may have arrived before the first analysis: open, then apply them
            self.state = TextState(initial or "", self._opened_version, self.host.path_for(self.uri),
                                   self.host.reading_for(self.uri))
            self._unparsed = None
        if changes:
            self.state.apply(changes, version)
        if reextract:
            self.state.reextract(self.host.reading_for(self.uri))
        self.state.awake()
        if self.enabled:  # the analyzer sees every extraction (an edit outside kernels resets its caches)
            self._start_analysis(config)

    def _start_analysis(self, config: ResolvedConfig) -> None:
        state = self.state
        assert state is not None
        self.analyzer.start(state, state.extracted, config.gpus, self.host.lint_codes(config),
                            (config.generation, id(state.preprocessed)), state.lines, argv=config.argv)

    def _provisional(self, version: int | None, config: ResolvedConfig) -> Snapshot | None:
        """The live text with the last complete analysis (before the first one: what is known)."""
        last, state = self.snapshot, self.state
        if state is None or self.closed:
            return None
        if last is None:
            return self._first_view(version, config)
        extracted = state.extracted
        if last.data is state.data and last.kernels is extracted.kernels:
            return last
        fk = extracted.kernels
        old = last.analysis
        reports: dict[int, KernelReport]
        if fk.kernels is last.kernels.kernels and fk.omp_regions is last.kernels.omp_regions:
            reports = old.reports  # the same items (a held edit moved them): the same reports
        else:
            # unchanged items are the same objects: their reports carry over by id (a report holds
            # its item, so an id in the copy cannot belong to a new object); a new item takes the
            # report of the item of its name, if any
            reports = dict(old.reports)
            items: list[CudaFunction | OmpRegion] = [*fk.kernels, *fk.omp_regions]
            # (set operations in C over the ~1,000 items of a large file: a Python step only for
            # the few new ones, taken in document order)
            position = dict(zip(map(id, items), range(len(items))))
            new = sorted(position.keys() - reports.keys(), key=position.__getitem__)
            missing = {kernel_name(items[position[key]]): items[position[key]] for key in new}
            if missing:  # (the reports of items gone: a set difference, not a walk over every report)
                gone = reports.keys() - position.keys()
                for key in gone:
                    report = reports[key]
                    renamed = missing.pop(kernel_name(report.kernel), None)
                    if renamed is not None:
                        reports[id(renamed)] = dataclasses.replace(report, kernel=renamed)
        analysis = AnalysisState(old.context, reports, list(old.findings), True, list(old.lint_notes))
        analysis.unanalysed, analysis.budget_note = old.unanalysed, old.budget_note
        snap = Snapshot(self.uri, version, state.data, state.parsed_tree, state.lines, fk, analysis, config,
                        state.preprocessed, exact=False, diagnostics=last.diagnostics,
                        diagnostics_json=last.diagnostics_json, advice=last.advice, measured=last.measured,
                        provisional=True, document=state.model(config.argv))
        return snap

    def _first_view(self, version: int | None, config: ResolvedConfig) -> Snapshot:
        """Before the document's first analysis completes: the live text's extraction with the
        reports of the partial snapshot for the items it still has (none at first)."""
        state = self.state
        assert state is not None
        fk = state.extracted.kernels
        known = self.latest if self.latest is not None and self.latest.partial else None
        reports: dict[int, KernelReport] = {}
        if known is not None and known.analysis.reports:
            items = set(map(id, (*fk.kernels, *fk.omp_regions)))
            reports = {key: report for key, report in known.analysis.reports.items() if key in items}
        analysis = AnalysisState(self.analyzer.context, reports, [], False)
        return Snapshot(self.uri, version, state.data, state.parsed_tree, state.lines, fk, analysis, config,
                        state.preprocessed, exact=False, provisional=True, partial=True,
                        document=state.model(config.argv))

    def _renew_partial(self, snap: Snapshot, view: Snapshot | None = None) -> None:
        """(In the pool's thread, between steps of the first analysis.) The partial snapshot
        requests read: what the run knows now, at most every `PARTIAL_EVERY_S` (`view`: a partial
        view built for a publication, reused)."""
        if self.snapshot is not None or snap.complete or not self.enabled or self._changes or self.closed:
            return
        now = time.monotonic()
        latest = self.latest
        if view is None and latest is not None and latest.partial and latest.analysis.reports \
                and now - self._partial_at < PARTIAL_EVERY_S:
            return
        self._partial_at = now
        base = view if view is not None else dataclasses.replace(snap, analysis=self.analyzer.partial_view(snap.analysis))
        built = self._built
        self.latest = dataclasses.replace(base, exact=False, provisional=True, partial=True,
                                          diagnostics=built[1] if built is not None and built[0] == snap.version else [])

    def _prepare_then_step(self, initial: str | None, changes: list[Change], version: int | None,
                           config: ResolvedConfig, reextract: bool, edit_first: bool
                           ) -> tuple[Snapshot, Partial | None] | None:
        """`_prepare`, then for an edit of a published document its first analysis step in the
        same job (one thread hop less per keystroke); None when newer edits arrived meanwhile
        (they are applied first) or for a first analysis."""
        self._prepare(initial, changes, version, config, reextract)
        if not edit_first or self._changes or self.closed:
            return None
        return self._first_step(version, config, edit_first)

    def _first_step(self, version: int | None, config: ResolvedConfig, edit_first: bool
                    ) -> tuple[Snapshot, Partial | None]:
        """`_compute`, and when its result is partial and to be published (the version's first
        publication), its diagnostics in the same job: one thread hop less per keystroke."""
        snap = self._compute(version, config, edit_first)
        if snap.complete or self._changes or self.closed or not self.enabled \
                or (self.published and self.published[-1].version == version):
            return snap, None
        return snap, self._partial_diagnostics(snap)

    def _compute(self, version: int | None, config: ResolvedConfig, edit_first: bool = False) -> Snapshot:
        started = time.monotonic()
        first = OPEN_PUBLISH_S if not self.published else EDIT_PUBLISH_S
        snap = self._snapshot(config, version, started + first, start=False, edit_first=edit_first)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s v%s: %s extraction, %d kernel(s) analysed%s in %.1f ms", self.uri.rsplit("/", 1)[-1], version,
                      self.state.extracted.change if self.state else "?", self.analyzer.analysed,
                      "" if snap.complete else " (partial)", (time.monotonic() - started) * 1000)
        return snap

    def _snapshot(self, config: ResolvedConfig, version: int | None, deadline: float | None,
                  exact: bool | None = None, start: bool = True, edit_first: bool = False) -> Snapshot:
        state = self.state
        assert state is not None
        state.awake()
        extracted = state.extracted
        if not self.enabled:
            analysis = AnalysisState(self.analyzer.context, complete=True)
        else:
            if start:
                self._start_analysis(config)
            analysis = self.analyzer.step(deadline, edit_first)
        tree = state.parsed_tree  # (None: edits inside a held definition are not parsed yet)
        if exact is None:  # (a tree with errors is exact once a fresh parse gave it: settled)
            exact = tree is not None and (not has_syntax_errors(tree) or state.settled)
        snap = Snapshot(self.uri, version, state.data, tree, state.lines, extracted.kernels, analysis, config,
                        state.preprocessed, exact, document=state.model(config.argv))
        if analysis.complete:
            self._annotate(snap)
            snap.diagnostics = self._diagnostics(snap)
        return snap

    def _resume(self, snap: Snapshot) -> Snapshot:
        snap.analysis = self.analyzer.step(time.monotonic() + RESUME_STEP_S)
        if snap.analysis.complete:
            self._annotate(snap)
            snap.diagnostics = self._diagnostics(snap)
        else:
            self._renew_partial(snap)
        return snap

    def _annotate(self, snap: Snapshot) -> None:
        if self._hooks is not None and self.enabled:
            self._hooks.annotate(self, snap)

    def _published_hook(self, snap: Snapshot) -> None:
        if self._hooks is not None:
            self._hooks.published_hook(self, snap)

    # ------------------------------------------------------------------ republishing

    async def _republish_now(self) -> None:
        self._republish = False
        remeasure, self._remeasure = self._remeasure, False
        snap = self.snapshot
        if snap is None or self.closed or not self.enabled or not snap.complete:
            return
        if snap.version != self.version or self._changes:
            return  # the next analysis publishes the newer text with everything known by then
        before = snap.diagnostics_json
        await self._thread(self._rebuild, snap, remeasure)
        if self._changes or self.closed:
            return
        if snap.diagnostics_json != before:
            snap.revision += 1
            self._publish(snap)
            if self._hooks is not None:
                self._hooks.diagnostics_refreshed(self)
        if remeasure:
            self._published_hook(snap)
        await self._notify()

    def _rebuild(self, snap: Snapshot, remeasure: bool) -> None:
        if remeasure and self._hooks is not None:
            snap.measured = self._hooks.measure(snap)
        snap.diagnostics = self._diagnostics(snap)

    def _diagnostics(self, snap: Snapshot) -> list[lsp.Diagnostic]:
        """Build the complete snapshot's diagnostics (and their JSON, reusing unchanged ones)."""
        from perflsp.server.features import diagnostics

        unchanged = self._unmoved() if snap.advice is None and snap.measured is None else None
        if unchanged is not None:
            snap.diagnostics_json = unchanged[1]
            self._show(snap.kernels, True, *unchanged)
            return unchanged[0]
        cache = self._diagnostic_cache
        items = diagnostics.build(snap, cache)
        snap.diagnostics_json = cache.json(items)
        self._show(snap.kernels, snap.advice is None and snap.measured is None, items, snap.diagnostics_json)
        return items

    def _unmoved(self) -> tuple[list[lsp.Diagnostic], list[JsonObject]] | None:
        """The last published diagnostics (and their JSON), when this run reused the last one's
        results whole (an edit inside a held definition: nothing analysed or linted anew) on the
        same lines, and none of them touches the edited line: then none moved or changed.
        None: build them."""
        shown, state = self._shown, self.state
        reused = self.analyzer.reused_from
        if reused is None or shown is None or state is None or shown[0] is not reused.kernels \
                or self.analyzer.changed_results:
            return None
        extracted = state.extracted
        if extracted.region is None or extracted.region_lines[1] != 0 or extracted.region_lines[0] is None:
            return None
        line = state.lines.position(extracted.region[0]).line
        for diagnostic in shown[1]:
            if diagnostic.range.start.line <= line <= diagnostic.range.end.line:
                return None
            for related in diagnostic.related_information or ():
                if related.location.range.start.line <= line <= related.location.range.end.line:
                    return None
        return shown[1], shown[2]

    def _show(self, kernels: FileKernels, plain: bool, items: list[lsp.Diagnostic],
              as_json: list[JsonObject] | None) -> None:
        """Remember a publication for `_unmoved` (only one that no LLM answer or measurement
        annotated: those are built again)."""
        self._shown = None if not plain or as_json is None else (kernels, items, as_json)

    def _partial_diagnostics(self, snap: Snapshot) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
        """The diagnostics of an unfinished analysis (in the pool's thread): everything known so
        far (`Analyzer.partial_view`), annotated like a complete one."""
        from perflsp.server.features import diagnostics

        unchanged = self._unmoved()
        if unchanged is not None:
            self._show(snap.kernels, True, *unchanged)
            return unchanged
        cache = self._diagnostic_cache  # kernels analysed before keep their diagnostics and JSON
        view = dataclasses.replace(snap, analysis=self.analyzer.partial_view(snap.analysis))
        self._annotate(view)
        items = diagnostics.build(view, cache)
        as_json = cache.json(items)  # (the next build reuses these: a partial view holds every result known)
        self._show(snap.kernels, view.advice is None and view.measured is None, items, as_json)
        if self.snapshot is None:  # a first analysis: requests read this view meanwhile
            self._built = (snap.version, items)
            self._renew_partial(snap, view)
        return items, as_json

    def _with_opening(self, partial: tuple[list[lsp.Diagnostic], list[JsonObject]]
                      ) -> tuple[list[lsp.Diagnostic], list[JsonObject]]:
        """A partial view, with the opening publication's diagnostics of kernels it has no result
        for yet, while the document's first analysis is not complete: an edit made meanwhile
        does not take back what the opening showed. Only those above every line edited since,
        whose positions no edit moved."""
        if self._opening is None or self.snapshot is not None:
            self._opening = None
            return partial
        items, as_json = partial
        shown = {d.data.get("kernel") for d in items if isinstance(d.data, dict)}
        intact = self._intact_line
        kept = [(d, j) for d, j in zip(*self._opening)
                if d.range.end.line < intact
                and all(info.location.range.end.line < intact for info in d.related_information or ())
                and not (isinstance(d.data, dict) and d.data.get("kernel") in shown)]
        if not kept:
            return partial
        return items + [d for d, _ in kept], as_json + [j for _, j in kept]

    def _publish(self, snap: Snapshot) -> None:
        self._opening = None
        self.host.publish(self.uri, snap.version, snap.diagnostics, snap.diagnostics_json)
        self.published.append(Published(snap.version, True))
        self._built = (snap.version, snap.diagnostics)

    # ------------------------------------------------------------------ settling

    def _schedule_settle(self) -> None:
        self._cancel_settle()
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._settle_timer = None
            self._settle = True
            self._kick()

        self._settle_timer = loop.call_later(SETTLE_S, due)

    def _cancel_settle(self) -> None:
        if self._settle_timer is not None:
            self._settle_timer.cancel()
            self._settle_timer = None

    async def _settle_now(self) -> None:
        snap = self.snapshot
        if snap is None or snap.exact or self._changes or self.state is None:
            return
        changed = await self._thread(self._settle_text)
        if self._changes or self.closed:
            return
        if changed:  # analysed like an edit: in steps that an edit can interrupt, published when done
            log.debug("%s: a fresh parse differs from the incremental one: analysing again", self.uri)
            self._reanalyze = True
            self._kick()
        else:
            snap.exact = True
            self._settled_now()
        await self._notify()

    def _settle_text(self) -> bool:
        """Parse from scratch (`TextState.settle`); whether that changed the extraction. The parse
        and extraction run without the text lock (they change nothing a request reads, and the pool
        applies no edit meanwhile): a request waits only for the swap."""
        state = self.state
        if state is None:
            return False
        prepared = state.settle_prepare()
        with self.text_lock:
            return self.state is state and state.settle_apply(*prepared)

