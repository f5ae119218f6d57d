"""The LLM advisor in the editor: ask about changed kernels once the static diagnostics are out,
and republish when the answers arrive.

Flow per document (the worker in `scheduler.py` calls in at two points):

1. `prepare` (the worker's thread, right after an analysis): one `KernelQuestion` per kernel and
   GPU (`perflsp.llm.questions.question_for`), rebuilt only for reports the analysis produced
   anew, so an edit to one kernel builds one question. The snapshot keeps the questions' digests
   (`SnapshotAdvice`); features look answers up by digest, so an answer about an older text is
   never shown for a newer one.
2. `published` (the event loop, after the static diagnostics went out): questions without an
   answer are submitted (`Advisor.submit`: the same content joins the running request, a changed
   kernel cancels the obsolete one); `$/progress` runs while any are in flight; each answer is
   stored under its digest and the worker republishes its current version.

One advisor per distinct LLM configuration (settings, their origins, workspace trust), kept
across configuration changes that do not touch it (its cache, breaker and connection stay).
Status: `off` (with the endpoint policy's reason), `ready`, `busy`, `failing` (breaker open or no
API key); the advisor's failure message is shown once per failure episode.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types as lsp
from pydantic import SecretStr

from perflsp.analysis.models import KernelReport
from perflsp.hardware.models import Gpu
from perflsp.llm.advisor import Advisor, AdvisorResult, AdvisorState, AdvisorStatus
from perflsp.llm.config import create_advisor
from perflsp.llm.privacy import EndpointDecision, SettingOrigin, origin_is_trusted
from perflsp.llm.questions import question_for
from perflsp.llm.request import KernelQuestion, Task
from perflsp.llm.sanitize import inert_text
from perflsp.llm.schema import Proposals
from perflsp.server import engine_adapter as engine
from perflsp.server.advice_state import Asked, DocumentAdvice, InFlight, Key, SnapshotAdvice
from perflsp.server.features.common import kernel_name
from perflsp.server.progress import Progress, ProgressClient

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.documents import Snapshot
    from perflsp.server.scheduler import DocumentWorker
    from perflsp.server.workspace import WorkspaceState

log = logging.getLogger(__name__)

# the last launch-parameter answer about a kernel: (kernel hash, GPU, the LLM's proposals, "LLM: <model>")
StoredProposals = tuple[str, Gpu, Proposals | None, str]


def kernel_id(uri: str, name: str, gpu_id: str) -> str:
    """The advisor's identity of a question: one request slot per kernel *and* GPU (two GPUs'
    questions about one kernel must not cancel each other)."""
    return f"{uri}#{name}@{gpu_id}"


def llm_origins(config: ResolvedConfig) -> dict[str, SettingOrigin]:
    """Where each `perflsp.llm.*` value came from, for the endpoint policy."""
    return {path.split(".", 1)[1]: origin.llm_origin() for path, origin in config.origins.items()
            if path.startswith("llm.")}


def decision_for(config: ResolvedConfig) -> EndpointDecision:
    """The endpoint policy applied to a configuration (may its LLM settings be used at all?)."""
    from perflsp.llm.config import decide

    return decide(config.settings.llm, llm_origins(config), workspace_trusted=config.workspace_trusted)


@dataclass(frozen=True)
class _Fingerprint:
    """What decides whether two folder configurations can share one advisor."""

    llm_settings: str  # perflsp.llm.* as JSON
    origins: tuple[tuple[str, str], ...]  # (setting, the layer that set it)
    workspace_trusted: bool
    api_key: bool  # the editor passed a key from its secret storage


@dataclass
class _Advisor:
    fingerprint: _Fingerprint
    advisor: Advisor | None  # None: off or unusable (see decision / problem)
    decision: EndpointDecision
    problem: str | None = None  # configured but cannot work (no API key): shown as "failing"

    @property
    def usable(self) -> bool:
        return self.advisor is not None and self.advisor.provider is not None and self.problem is None


@dataclass
class _ProgressState:
    bar: Progress | None = None
    starting: asyncio.Task[None] | None = None
    pending: int = 0
    total: int = 0
    answered: int = 0
    label: str = ""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class AdviceHost(ProgressClient, Protocol):
    """What the advisor uses of the server (`context.ServerContext` has it): the workspace's
    folders, messages to the user, the status notification and progress bars."""

    workspace_state: WorkspaceState | None

    @property
    def ready(self) -> asyncio.Event: ...

    def window_show_message(self, params: lsp.ShowMessageParams) -> None: ...

    def send_status(self) -> None: ...


class AdviceService:
    def __init__(self, ls: AdviceHost) -> None:
        self.ls = ls
        self._advisors: dict[_Fingerprint, _Advisor] = {}
        self._by_generation: dict[int, _Advisor] = {}
        self._told: set[str] = set()
        self._progress = _ProgressState()
        self._status_scheduled = False
        self._last_status: tuple[str, str] | None = None
        # the last launch-parameter answer per (uri, kernel): (kernel hash, GPU, proposals, label);
        # code actions offer its edits while the kernel's text is unchanged
        self.proposals: dict[tuple[str, str], StoredProposals] = {}

    # ------------------------------------------------------------------ configuration

    def configure(self, configs: list[ResolvedConfig]) -> None:
        """Match each folder configuration with an advisor (on the event loop)."""
        wanted: dict[_Fingerprint, _Advisor] = {}
        by_generation: dict[int, _Advisor] = {}
        for config in configs:
            fingerprint = self._fingerprint(config)
            entry = wanted.get(fingerprint) or self._advisors.get(fingerprint)
            if entry is None:
                entry = self._create(config, fingerprint)
            wanted[fingerprint] = entry
            by_generation[config.generation] = entry
        for fingerprint, entry in self._advisors.items():
            if fingerprint not in wanted and entry.advisor is not None:
                self._spawn(entry.advisor.aclose())  # cancels its requests too
        self._advisors = wanted
        self._by_generation = by_generation

    def entry_for(self, config: ResolvedConfig) -> _Advisor:
        entry = self._by_generation.get(config.generation)
        if entry is None:  # a configuration resolved lazily (config_for): match it now
            self.configure([*self._configs(), config])
            entry = self._by_generation[config.generation]
        return entry

    def advisor_for(self, config: ResolvedConfig) -> Advisor | None:
        entry = self.entry_for(config)
        return entry.advisor if entry.usable else None

    def status(self, config: ResolvedConfig) -> tuple[str, str, str | None]:
        """(off | ready | busy | failing, why, "LLM: <model>" or None)."""
        entry = self.entry_for(config)
        if entry.problem is not None:
            return AdvisorState.FAILING.value, entry.problem, None
        if entry.advisor is None or entry.advisor.provider is None:
            return AdvisorState.OFF.value, entry.decision.reason, None
        status = entry.advisor.status
        return status.state.value, status.detail, status.label

    def _configs(self) -> list[ResolvedConfig]:
        state = self.ls.workspace_state
        return [f.config for f in state.folders if f.config is not None] if state is not None else []

    def _api_key(self) -> SecretStr | None:
        state = self.ls.workspace_state
        return state.api_key if state is not None else None

    def _fingerprint(self, config: ResolvedConfig) -> _Fingerprint:
        origins = tuple(sorted((p, o.value) for p, o in config.origins.items() if p.startswith("llm.")))
        return _Fingerprint(config.settings.llm.model_dump_json(), origins, config.workspace_trusted,
                            self._api_key() is not None)

    def _create(self, config: ResolvedConfig, fingerprint: _Fingerprint) -> _Advisor:
        settings = config.settings.llm
        origins = llm_origins(config)
        trusted = config.workspace_trusted
        api_key = self._api_key()
        if not origin_is_trusted(origins.get("base_url", SettingOrigin.DEFAULT), trusted):
            # An endpoint a repository chose (loopback only, by the policy) never gets the user's key.
            api_key = None
            if settings.api_key_env is None or origin_is_trusted(origins.get("api_key_env", SettingOrigin.DEFAULT),
                                                                 trusted):
                settings = settings.model_copy(update={"api_key_env": ""})
            # else: a key variable the repository chose is refused by the policy, with a message
            # (as `perflsp explain` refuses it)
        advisor, decision = create_advisor(
            settings, origins, workspace_trusted=trusted, api_key=api_key,
            engine_version=engine.ENGINE_VERSION, on_status=self._on_status, on_message=self._on_message)
        entry = _Advisor(fingerprint, advisor if advisor.provider is not None else None, decision)
        if not decision.allowed:
            if settings.enabled and "untrusted workspace" in decision.reason:
                self._tell(f"perflsp: LLM advisor not used: {decision.reason}.", lsp.MessageType.Warning)
            elif settings.enabled:
                self._tell(f"perflsp: LLM advisor not started: {decision.reason}.", lsp.MessageType.Warning)
            return entry
        provider = advisor.provider
        assert provider is not None
        if decision.warning:
            self._tell(f"perflsp: {decision.warning}.", lsp.MessageType.Warning)
        if not decision.loopback and provider.kind != "ollama" and not provider.has_api_key:
            variable = provider.api_key_env or "the API key variable"
            entry.problem = (f"no API key for {provider.endpoint}: set the environment variable {variable} for the "
                             "editor (or perflsp.llm.apiKeyEnv), or pass the key from the editor's secret storage")
            self._tell(f"perflsp: LLM advisor not used: {entry.problem}.", lsp.MessageType.Warning)
            self._spawn(advisor.aclose())
            entry.advisor = None
            return entry
        log.info("LLM advisor on: %s at %s (%s)", provider.label, provider.endpoint, decision.reason)
        return entry

    def _tell(self, message: str, kind: lsp.MessageType) -> None:
        if message in self._told:
            return
        self._told.add(message)
        log.warning("%s", message)
        self.ls.window_show_message(lsp.ShowMessageParams(type=kind, message=inert_text(message)))

    def _on_message(self, message: str) -> None:
        # the advisor says this once per failure episode (a run of failures until the next answer);
        # it may quote the endpoint's words: plain text, no link (`inert_text`)
        log.warning("%s", message)
        self.ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=inert_text(message)))

    def _on_status(self, _status: AdvisorStatus) -> None:
        if self._status_scheduled:
            return
        self._status_scheduled = True
        try:
            asyncio.get_running_loop().call_soon(self._send_status)
        except RuntimeError:  # not on the loop (constructing): the caller sends the status
            self._status_scheduled = False

    def _send_status(self) -> None:
        self._status_scheduled = False
        if self.ls.workspace_state is None or not self.ls.ready.is_set():
            return  # `initialized` sends the first status once the server is ready
        state, reason, _label = self.status(self.ls.workspace_state.folders[0].config or self._configs()[0])
        shown = (state, "" if state == AdvisorState.BUSY.value else reason)
        if shown != self._last_status:
            self._last_status = shown
            self.ls.send_status()

    def status_sent(self, state: str, reason: str) -> None:
        self._last_status = (state, "" if state == AdvisorState.BUSY.value else reason)

    def _spawn(self, coroutine: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._progress.tasks.add(task)
        task.add_done_callback(self._progress.tasks.discard)

    async def aclose(self) -> None:
        for entry in self._advisors.values():
            if entry.advisor is not None:
                await entry.advisor.aclose()
        self._advisors.clear()

    # ------------------------------------------------------------------ per document

    def prepare(self, worker: DocumentWorker, snap: Snapshot) -> SnapshotAdvice | None:
        """The questions of an analysed snapshot (worker thread; reads the text, so it must run
        before the worker applies the next edit)."""
        entry = self._by_generation.get(snap.config.generation)
        if entry is None or not entry.usable:
            return None
        advisor = entry.advisor
        assert advisor is not None and advisor.provider is not None
        state: DocumentAdvice | None = worker.advice
        if state is None or state.advisor is not advisor:
            state = DocumentAdvice(advisor)  # answers of another model or endpoint do not apply
            worker.advice = state
        gpus = {g.name: g for g in snap.config.gpus}
        asked: dict[Key, Asked] = {}
        for report in snap.reports():
            name = kernel_name(report.kernel)
            for estimate in report.estimates:
                gpu = gpus.get(estimate.gpu)
                if gpu is None:
                    continue
                key = (name, estimate.gpu)
                old = state.asked.get(key)
                if old is not None and old.report is report:
                    asked[key] = old
                    continue
                try:
                    question = question_for(report, estimate, gpu, snap.data, snap.kernels, "verdict",
                                            kernel_id=kernel_id(snap.uri, name, gpu.id), tree=snap.tree,
                                            model=snap.model)
                except Exception:  # a question that cannot be built leaves the static verdict
                    log.exception("cannot build the LLM question for %s on %s", name, gpu.name)
                    continue
                asked[key] = Asked(question, question.content_digest(), report)
        state.asked = asked
        return SnapshotAdvice(state, asked, advisor.provider.label)

    def published(self, worker: DocumentWorker, snap: Snapshot) -> None:
        """Submit the snapshot's unanswered questions (event loop)."""
        advice: SnapshotAdvice | None = snap.advice
        if advice is None:
            return
        state = advice.state
        advisor = state.advisor
        if advisor is None or worker.advice is not state:
            return
        now = time.monotonic()
        for key, asked in advice.asked.items():
            answer_key = (key, asked.digest)
            answer = state.answers.get(answer_key)
            if answer is not None and (answer.source == "llm" or now < state.retry_at.get(answer_key, 0.0)):
                continue
            running = state.inflight.get(key)
            if running is not None and running.digest == asked.digest and not running.task.done():
                continue
            task = advisor.submit(asked.question)  # cancels the request about an older text
            state.inflight[key] = InFlight(asked.digest, task)
            self._track(task, advisor)
            task.add_done_callback(functools.partial(self._answered, worker, state, key, asked.digest))
        for key, running in list(state.inflight.items()):
            if key not in advice.asked:  # the kernel is gone
                running.task.cancel()
                del state.inflight[key]
        for answer_key in list(state.answers):
            key, digest = answer_key
            current = advice.asked.get(key)
            if current is None or current.digest != digest:
                del state.answers[answer_key]
                state.retry_at.pop(answer_key, None)

    def _answered(self, worker: DocumentWorker, state: DocumentAdvice, key: Key, digest: str,
                  task: asyncio.Task[AdvisorResult]) -> None:
        running = state.inflight.get(key)
        if running is not None and running.task is task:
            del state.inflight[key]
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("LLM request for %s failed: %s", key[0], error)
            return
        result = task.result()
        state.answers[(key, digest)] = result
        if result.source != "llm" and state.advisor is not None:
            state.retry_at[(key, digest)] = time.monotonic() + state.advisor.settings.breaker_cooldown_s
        asked = state.asked.get(key)
        if asked is None or asked.digest != digest:
            return  # the kernel changed meanwhile: a newer question is under way
        if worker.advice is state and not worker.closed:
            worker.refresh()

    def closed(self, uri: str) -> None:
        """The document was closed: the launch-parameter proposals asked for it go."""
        for key in [k for k in self.proposals if k[0] == uri]:
            del self.proposals[key]

    def forget(self, worker: DocumentWorker) -> None:
        """The document was closed: its requests are not needed any more."""
        if worker.advice is not None:
            worker.advice.cancel()

    # ------------------------------------------------------------------ progress

    def _track(self, task: asyncio.Task[AdvisorResult], advisor: Advisor) -> None:
        progress = self._progress
        progress.pending += 1
        progress.total += 1
        if progress.bar is None:
            label = advisor.provider.label if advisor.provider else "LLM"
            progress.bar = Progress(self.ls, f"perflsp: asking {label}")
            progress.starting = asyncio.get_running_loop().create_task(progress.bar.begin())
        progress.bar.report(f"{progress.answered} of {progress.total} kernel verdicts",
                            int(100 * progress.answered / progress.total))
        task.add_done_callback(self._progress_done)

    def _progress_done(self, _task: asyncio.Task[AdvisorResult]) -> None:
        progress = self._progress
        progress.pending -= 1
        progress.answered += 1
        bar = progress.bar
        if bar is None:
            return
        bar.report(f"{progress.answered} of {progress.total} kernel verdicts", int(100 * progress.answered / progress.total))
        if progress.pending > 0:
            return
        starting = progress.starting
        self._progress = _ProgressState(tasks=progress.tasks)
        if starting is not None and not starting.done():
            starting.add_done_callback(lambda _t: bar.end("done"))
        else:
            bar.end("done")

    # ------------------------------------------------------------------ commands

    def question(self, snap: Snapshot, report: KernelReport, gpu: Gpu, task: Task) -> KernelQuestion:
        """A question for a command (call with the document's worker lock held)."""
        estimate = next(e for e in report.estimates if e.gpu == gpu.name)
        name = kernel_name(report.kernel)
        return question_for(report, estimate, gpu, snap.data, snap.kernels, task,
                            kernel_id=kernel_id(snap.uri, name, gpu.id), tree=snap.tree, model=snap.model)


__all__ = ["AdviceHost", "AdviceService", "Asked", "DocumentAdvice", "InFlight", "SnapshotAdvice", "decision_for", "kernel_id",
           "llm_origins"]
