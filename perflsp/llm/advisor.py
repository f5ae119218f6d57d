"""The LLM advisor: ask a model about one kernel, validate the answer, or fall back to static.

    advisor = Advisor(provider, settings, cache=VerdictCache(), on_status=..., on_message=...)
    result = await advisor.ask(question)           # AdvisorResult, never raises ProviderError
    task = advisor.submit(question)                # same, as a task; a changed kernel cancels it
    async for chunk in advisor.explain_stream(q):  # Markdown text for "Explain kernel"
        ...

Flow of `ask`: render the prompt (trimmed to the token budget) → cache → circuit breaker →
concurrency limit → provider call (per-attempt timeout, retries with exponential backoff that
honour Retry-After on 429/503) → pydantic validation → one repair turn that sends the validation
error back → else the static verdict, marked `source="static"` with the reason.

Status for the UI: `on_status(AdvisorStatus)` on every change of off/ready/busy/failing, and
`on_message(text)` exactly once per failure episode (a run of failed requests that ends with the
next good answer), so a dead endpoint produces one notice, not one per kernel.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perflsp import __version__
from perflsp.llm.cache import CacheError, CacheKey, VerdictCache
from perflsp.llm.prompts import Message, PromptRenderer, PromptTooLarge, RenderedPrompt
from perflsp.llm.providers.base import (
    Completion,
    Provider,
    ProviderError,
    ProviderTimeout,
    TokenUsage,
)
from perflsp.llm.request import KernelQuestion, StaticVerdictKind, Task
from perflsp.llm.sanitize import clean
from perflsp.llm.schema import (
    MAX_FACTORS,
    Factor,
    LlmVerdict,
    LlmVerdictKind,
    Proposals,
    response_json_schema,
)

log = logging.getLogger("perflsp.llm.advisor")

STATIC_LABEL = "static"


# ---------------------------------------------------------------------------------------------
# settings, status, results


class AdvisorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: int = Field(default=2, ge=1, le=32)
    request_timeout_s: float = Field(default=90.0, gt=0)  # one attempt, first byte to last
    max_retries: int = Field(default=2, ge=0, le=6)
    backoff_initial_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    max_retry_after_s: float = Field(default=120.0, ge=0)  # longer waits fail now instead
    breaker_threshold: int = Field(default=3, ge=1)  # consecutive failed requests that open it
    breaker_cooldown_s: float = Field(default=60.0, ge=0)
    few_shot: bool = False
    max_prompt_tokens: int = Field(default=8000, ge=500)


class AdvisorState(StrEnum):
    OFF = "off"
    READY = "ready"
    BUSY = "busy"
    FAILING = "failing"


@dataclass(frozen=True, slots=True)
class AdvisorStatus:
    state: AdvisorState
    detail: str
    label: str | None = None  # "LLM: <model>"


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """Tokens of one HTTP request (a repair turn is a request of its own)."""

    kernel_id: str
    task: str
    model: str
    purpose: Literal["answer", "repair", "explain"]
    prompt_tokens: int
    completion_tokens: int
    at: float


class AdvisorResult(BaseModel):
    """The advisor's answer for one question, ready for a diagnostic, a hover or `--json`.

    `source` says who decided ("llm" or "static"), `label` how to show it ("LLM: gpt-x" or
    "static"); factor lines are file lines (1-based). `fallback_reason` explains a static answer
    given instead of an LLM one.
    """

    model_config = ConfigDict(frozen=True)

    kernel_id: str
    kernel_hash: str
    task: Task
    source: Literal["llm", "static"]
    label: str
    verdict: LlmVerdictKind
    confidence: float
    rationale: str
    factors: list[Factor]
    proposals: Proposals | None
    static_verdict: StaticVerdictKind
    disagrees_with_static: bool
    fallback_reason: str | None = None
    from_cache: bool = False
    model: str | None = None
    prompt_version: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    trimmed: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line for a hover header or a log, e.g. "LLM: m: bandwidth (0.80), static: compute"."""
        head = f"{self.label}: {self.verdict} ({self.confidence:.2f})"
        if self.source == "llm" and self.disagrees_with_static:
            head += f"; static says {self.static_verdict}"
        if self.fallback_reason:
            head += f" [{self.fallback_reason}]"
        return head


class AdvisorUnavailable(RuntimeError):
    """Raised by `explain_stream` when no explanation can be produced; the message says why."""


class AnswerInvalid(ValueError):
    """The model's text is not a valid `LlmVerdict`; the message is safe to send back to it."""


# ---------------------------------------------------------------------------------------------
# validation


def parse_answer(text: str, finish_reason: str | None = None) -> LlmVerdict:
    """Validate a model's raw text as an `LlmVerdict`, or raise AnswerInvalid with a short reason."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and body.count("```") == 2:
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body[: body.rfind("```")].strip()
    cut = ""
    if finish_reason == "length":
        cut = " (the answer was cut off at the output token limit: be more concise)"
    if not body:
        raise AnswerInvalid(f"the answer was empty{cut}")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerInvalid(f"not valid JSON ({exc.msg} at character {exc.pos}){cut}") from None
    if not isinstance(data, dict):
        raise AnswerInvalid("the answer must be one JSON object")
    try:
        return LlmVerdict.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()[:6]
        ]
        more = f" and {exc.error_count() - 6} more" if exc.error_count() > 6 else ""
        raise AnswerInvalid("schema violations: " + "; ".join(problems) + more) from None


# ---------------------------------------------------------------------------------------------
# circuit breaker


class CircuitBreaker:
    """Closed → open after `threshold` consecutive failures → half-open (one probe) after the
    cool-down → closed on the probe's success, open again on its failure."""

    def __init__(self, threshold: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic):
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.failures = 0
        self.state: Literal["closed", "open", "half_open"] = "closed"
        self._open_until = 0.0
        self._probe_out = False

    def allow(self) -> bool:
        if self.state == "closed":
            return True
        if self.state == "open" and self._clock() >= self._open_until:
            self.state = "half_open"
            self._probe_out = False
        if self.state == "half_open" and not self._probe_out:
            self._probe_out = True
            return True
        return False

    def retry_in_s(self) -> float:
        return max(0.0, self._open_until - self._clock()) if self.state == "open" else 0.0

    def record_success(self) -> None:
        self.failures = 0
        self.state = "closed"
        self._probe_out = False

    def record_failure(self, retry_after_s: float | None = None) -> None:
        self.failures += 1
        if self.state == "half_open" or self.failures >= self.threshold:
            self.state = "open"
            self._probe_out = False
            self._open_until = self._clock() + max(self.cooldown_s, retry_after_s or 0.0)

    def release_probe(self) -> None:
        """A probe that ended without a verdict on the endpoint (cancelled): let another try."""
        if self.state == "half_open":
            self._probe_out = False


# ---------------------------------------------------------------------------------------------
# advisor


class Advisor:
    def __init__(
        self,
        provider: Provider | None,
        settings: AdvisorSettings | None = None,
        *,
        cache: VerdictCache | None = None,
        renderer: PromptRenderer | None = None,
        engine_version: str = __version__,
        off_reason: str = "the LLM advisor is off",
        on_status: Callable[[AdvisorStatus], None] | None = None,
        on_message: Callable[[str], None] | None = None,
        on_usage: Callable[[UsageRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.provider = provider
        self.settings = settings or AdvisorSettings()
        self.cache = cache
        self.renderer = renderer or PromptRenderer(max_prompt_tokens=self.settings.max_prompt_tokens)
        self.engine_version = engine_version
        self.off_reason = off_reason
        self._on_status = on_status
        self._on_message = on_message
        self._on_usage = on_usage
        self._sleep = sleep
        self.breaker = CircuitBreaker(
            self.settings.breaker_threshold, self.settings.breaker_cooldown_s, clock
        )
        self._semaphore = asyncio.Semaphore(self.settings.max_concurrent)
        self._in_flight = 0
        self._episode_open = False
        self._last_failure = ""
        self._status: AdvisorStatus | None = None
        self._tasks: dict[tuple[str, str], tuple[str, asyncio.Task[AdvisorResult]]] = {}
        self.usage_log: deque[UsageRecord] = deque(maxlen=1000)
        self.total_usage = TokenUsage()
        dialect: Literal["openai", "generic"] = "openai" if provider is not None and provider.kind == "openai" else "generic"
        self._schema = response_json_schema(dialect)
        self._publish_status()

    # -- public API ----------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.provider is not None

    @property
    def status(self) -> AdvisorStatus:
        assert self._status is not None
        return self._status

    async def ask(self, question: KernelQuestion) -> AdvisorResult:
        """Verdict (task "verdict") or launch-parameter proposals (task "launch_params").

        Never raises for endpoint or model faults: the result is then the static verdict with
        `fallback_reason`. Raises CancelledError when cancelled (see `submit`).
        """
        if question.task == "explain":
            raise ValueError("use explain_stream() for the explain task")
        if self.provider is None:
            return self._static(question, self.off_reason, None)
        try:
            prompt = self.renderer.render(question, few_shot=self.settings.few_shot)
        except PromptTooLarge as exc:
            return self._static(question, str(exc), None)
        key = self._cache_key(question, prompt)
        cached = await self._cache_get(key)
        if cached is not None:
            try:
                payload = json.loads(cached)
                answer = LlmVerdict.model_validate(payload["answer"])
                model = payload.get("model")
                return self._llm_result(question, prompt, answer, model, TokenUsage(), True)
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring an unreadable cache entry for %s", question.name)
        if not self.breaker.allow():
            return self._static(question, self._paused_reason(), prompt)

        async with self._request_slot():
            try:
                answer, completion, usage = await self._ask_validated(question, prompt.messages)
            except ProviderError as exc:
                self._record_failure(exc)
                return self._static(question, exc.message, prompt)
            except AnswerInvalid as exc:
                self.breaker.record_success()  # the endpoint works; the model's answer did not
                reason = f"{self.provider.label} gave no valid answer after one repair: {exc}"
                self._open_episode(reason)
                return self._static(question, reason, prompt)
            except asyncio.CancelledError:
                self.breaker.release_probe()
                raise
        self._record_success()
        payload = json.dumps(
            {"answer": answer.model_dump(mode="json"), "model": completion.model or self.provider.model}
        )
        await self._cache_put(key, payload)
        return self._llm_result(question, prompt, answer, completion.model, usage, False)

    def submit(self, question: KernelQuestion) -> asyncio.Task[AdvisorResult]:
        """`ask` as a task, one per (kernel_id, task): a question whose content changed cancels the
        request still running for the old content; the same content joins the running task."""
        slot = (question.kernel_id, question.task)
        digest = question.content_digest()
        running = self._tasks.get(slot)
        if running is not None and not running[1].done():
            if running[0] == digest:
                return running[1]
            running[1].cancel()
        task = asyncio.create_task(self.ask(question), name=f"perflsp-llm:{question.kernel_id}")
        self._tasks[slot] = (digest, task)

        def forget(done: asyncio.Task[AdvisorResult]) -> None:
            if self._tasks.get(slot, (None, None))[1] is done:
                del self._tasks[slot]

        task.add_done_callback(forget)
        return task

    def cancel(self, kernel_id: str) -> int:
        """Cancel every running request about `kernel_id` (the kernel changed or was closed)."""
        count = 0
        for (kid, _task), (_digest, task) in list(self._tasks.items()):
            if kid == kernel_id and not task.done():
                task.cancel()
                count += 1
        return count

    def cancel_all(self) -> None:
        for _digest, task in list(self._tasks.values()):
            task.cancel()

    async def explain_stream(self, question: KernelQuestion) -> AsyncIterator[str]:
        """Markdown explanation of the kernel, chunk by chunk as the model writes it.

        For the "Explain kernel" command (hover or virtual document). A cached explanation comes
        back as one chunk without a request. Raises AdvisorUnavailable (message says why) when the
        advisor is off, paused by the circuit breaker, or the endpoint fails; retries happen only
        before the first chunk.
        """
        question = question.model_copy(update={"task": "explain"})
        if self.provider is None:
            raise AdvisorUnavailable(self.off_reason)
        try:
            prompt = self.renderer.render(question)
        except PromptTooLarge as exc:
            raise AdvisorUnavailable(str(exc)) from None
        key = self._cache_key(question, prompt)
        cached = await self._cache_get(key)
        if cached is not None:
            try:
                yield clean(json.loads(cached)["text"])  # written before text was cleaned, perhaps
                return
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring an unreadable cache entry for %s", question.name)
        if not self.breaker.allow():
            raise AdvisorUnavailable(self._paused_reason())
        parts: list[str] = []
        usage = TokenUsage()
        async with self._request_slot():
            attempt = 0
            try:
                while True:
                    try:
                        async with aclosing(self._timed_stream(prompt.messages)) as stream:
                            async for piece in stream:
                                if isinstance(piece, TokenUsage):
                                    usage = usage + piece
                                else:
                                    parts.append(piece)
                                    yield piece
                        break
                    except ProviderError as exc:
                        if parts or not await self._may_retry(exc, attempt):
                            raise
                        attempt += 1
            except ProviderError as exc:
                self._record_failure(exc)
                raise AdvisorUnavailable(exc.message) from None
            except (asyncio.CancelledError, GeneratorExit):
                self.breaker.release_probe()
                raise
        self._record_success()
        self._record_usage(question, "explain", usage)
        text = "".join(parts)
        if text.strip():
            await self._cache_put(key, json.dumps({"text": text, "model": self.provider.model}))

    async def aclose(self) -> None:
        self.cancel_all()
        if self.provider is not None:
            await self.provider.aclose()

    # -- the request -------------------------------------------------------------------------
    async def _ask_validated(
        self, question: KernelQuestion, messages: Sequence[Message]
    ) -> tuple[LlmVerdict, Completion, TokenUsage]:
        completion = await self._complete(messages)
        self._record_usage(question, "answer", completion.usage)
        usage = completion.usage
        try:
            return parse_answer(completion.text, completion.finish_reason), completion, usage
        except AnswerInvalid as exc:
            log.info("invalid answer for %s, asking once more: %s", question.name, exc)
            repair = [
                *messages,
                Message("assistant", completion.text[:8000] or "(empty)"),
                self.renderer.repair_message(str(exc)),
            ]
        completion = await self._complete(repair)
        self._record_usage(question, "repair", completion.usage)
        usage = usage + completion.usage
        return parse_answer(completion.text, completion.finish_reason), completion, usage

    async def _timed_stream(self, messages: Sequence[Message]) -> AsyncGenerator[str | TokenUsage, None]:
        """The provider's text stream under one deadline for the whole answer.

        The deadline wraps each wait for the next piece, never a `yield`: a timeout scope that
        spans a yield would fire in the consumer's code instead of here.
        """
        assert self.provider is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.request_timeout_s
        async with aclosing(self.provider.stream_text(messages)) as stream:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        piece = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self._timeout_error() from None
                yield piece

    async def _complete(self, messages: Sequence[Message]) -> Completion:
        assert self.provider is not None
        attempt = 0
        while True:
            try:
                async with asyncio.timeout(self.settings.request_timeout_s):
                    return await self.provider.complete_json(messages, self._schema)
            except TimeoutError:
                raise self._timeout_error() from None
            except ProviderError as exc:
                if not await self._may_retry(exc, attempt):
                    raise
                attempt += 1

    async def _may_retry(self, exc: ProviderError, attempt: int) -> bool:
        """Sleep before the next attempt and return True, or return False to give up now."""
        if not exc.retryable or attempt >= self.settings.max_retries:
            return False
        if exc.retry_after_s is not None:
            if exc.retry_after_s > self.settings.max_retry_after_s:
                exc.message += f" (asked to retry after {exc.retry_after_s:.0f} s)"
                return False
            delay = exc.retry_after_s
        else:
            delay = min(self.settings.backoff_max_s, self.settings.backoff_initial_s * 2**attempt)
            delay *= random.uniform(0.8, 1.0)  # spread retries of concurrent requests
        log.info("retrying in %.1f s: %s", delay, exc.message)
        await self._sleep(delay)
        return True

    def _timeout_error(self) -> ProviderTimeout:
        assert self.provider is not None
        return ProviderTimeout(
            f"{self.provider.endpoint} gave no complete answer within "
            f"{self.settings.request_timeout_s:g} s"
        )

    # -- bookkeeping -------------------------------------------------------------------------
    def _request_slot(self) -> _RequestSlot:
        return _RequestSlot(self)

    def _record_usage(self, question: KernelQuestion, purpose: Any, usage: TokenUsage) -> None:
        assert self.provider is not None
        record = UsageRecord(
            question.kernel_id,
            question.task,
            self.provider.model,
            purpose,
            usage.prompt_tokens,
            usage.completion_tokens,
            time.time(),
        )
        self.usage_log.append(record)
        self.total_usage = self.total_usage + usage
        if self._on_usage:
            self._on_usage(record)

    def _record_success(self) -> None:
        self.breaker.record_success()
        self._episode_open = False
        self._publish_status()

    def _record_failure(self, exc: ProviderError) -> None:
        if exc.transport:
            self.breaker.record_failure(exc.retry_after_s)
        else:
            self.breaker.record_success()  # the endpoint answered; only the model declined
        self._last_failure = exc.message
        self._open_episode(exc.message)
        self._publish_status()

    def _open_episode(self, reason: str) -> None:
        log.warning("LLM request failed: %s", reason)
        if self._episode_open:
            return
        self._episode_open = True
        if self._on_message:
            self._on_message(f"perflsp: {reason}. Showing static verdicts until the LLM answers again.")

    def _paused_reason(self) -> str:
        wait = self.breaker.retry_in_s()
        when = f"next try in {wait:.0f} s" if wait > 0 else "a probe request is under way"
        return f"LLM paused after {self.breaker.failures} failed requests ({when}): {self._last_failure}"

    def _publish_status(self) -> None:
        label = self.provider.label if self.provider else None
        if self.provider is None:
            status = AdvisorStatus(AdvisorState.OFF, self.off_reason, label)
        elif self.breaker.state != "closed":
            detail = f"LLM paused after {self.breaker.failures} failed requests: {self._last_failure}"
            status = AdvisorStatus(AdvisorState.FAILING, detail, label)
        elif self._in_flight:
            status = AdvisorStatus(AdvisorState.BUSY, f"{self._in_flight} request(s) in flight", label)
        else:
            status = AdvisorStatus(AdvisorState.READY, f"{label} at {self.provider.endpoint}", label)
        changed = self._status is None or (self._status.state, self._status.detail) != (
            status.state,
            status.detail,
        )
        self._status = status
        if changed and self._on_status:
            self._on_status(status)

    # -- cache -------------------------------------------------------------------------------
    def _cache_key(self, question: KernelQuestion, prompt: RenderedPrompt) -> CacheKey:
        assert self.provider is not None
        return CacheKey(
            kernel_hash=question.kernel_hash,
            gpu=question.gpu.name,
            provider=self.provider.kind,
            endpoint=self.provider.endpoint,
            model=self.provider.model,
            prompt_version=prompt.prompt_version,
            engine_version=self.engine_version,
            task=question.task,
            prompt_digest=prompt.digest,
        )

    async def _cache_get(self, key: CacheKey) -> str | None:
        if self.cache is None:
            return None
        try:
            entry = await asyncio.to_thread(self.cache.get, key)
        except CacheError as exc:
            log.warning("%s", exc)
            return None
        return entry.payload if entry else None

    async def _cache_put(self, key: CacheKey, payload: str) -> None:
        if self.cache is None:
            return
        try:
            await asyncio.to_thread(self.cache.put, key, payload)
        except CacheError as exc:
            log.warning("%s", exc)

    # -- results -----------------------------------------------------------------------------
    def _static(self, question: KernelQuestion, reason: str, prompt: RenderedPrompt | None) -> AdvisorResult:
        static = question.static
        evidence = [e.strip()[:300] for e in static.evidence if e.strip()]
        rationale = "Static estimate: " + "; ".join(evidence[:3]) if evidence else "Static estimate."
        return AdvisorResult(
            kernel_id=question.kernel_id,
            kernel_hash=question.kernel_hash,
            task=question.task,
            source="static",
            label=STATIC_LABEL,
            verdict=static.verdict,
            confidence=static.confidence,
            rationale=rationale[:2000],
            factors=[Factor(text=e) for e in evidence[:MAX_FACTORS]],
            proposals=None,
            static_verdict=static.verdict,
            disagrees_with_static=False,
            fallback_reason=reason,
            prompt_version=prompt.prompt_version if prompt else None,
            trimmed=list(prompt.trimmed) if prompt else [],
        )

    def _llm_result(
        self,
        question: KernelQuestion,
        prompt: RenderedPrompt,
        answer: LlmVerdict,
        model: str | None,
        usage: TokenUsage,
        from_cache: bool,
    ) -> AdvisorResult:
        assert self.provider is not None
        lines = question.kernel_line_count

        def file_line(listing_line: int | None) -> int | None:
            # L-numbers outside the listing are the model's invention: keep the text, drop the line
            if listing_line is None or not 1 <= listing_line <= lines:
                return None
            return question.first_line + listing_line - 1

        return AdvisorResult(
            kernel_id=question.kernel_id,
            kernel_hash=question.kernel_hash,
            task=question.task,
            source="llm",
            label=self.provider.label,
            verdict=answer.verdict,
            confidence=answer.confidence,
            rationale=answer.rationale,
            factors=[Factor(text=f.text, line=file_line(f.line)) for f in answer.factors],
            proposals=answer.proposals,
            static_verdict=question.static.verdict,
            disagrees_with_static=answer.verdict != question.static.verdict,
            from_cache=from_cache,
            model=model or self.provider.model,
            prompt_version=prompt.prompt_version,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            trimmed=list(prompt.trimmed),
        )


class _RequestSlot:
    """Concurrency limit + in-flight count (drives the busy status) around one request."""

    def __init__(self, advisor: Advisor):
        self._advisor = advisor

    async def __aenter__(self) -> None:
        await self._advisor._semaphore.acquire()
        self._advisor._in_flight += 1
        self._advisor._publish_status()

    async def __aexit__(self, *exc_info: object) -> None:
        self._advisor._in_flight -= 1
        self._advisor._semaphore.release()
        self._advisor._publish_status()
