"""What every provider shares: one keep-alive httpx client, error mapping, streaming framing.

A provider speaks one wire protocol. It turns chat messages (+ the response JSON schema) into a
request, and the response (one JSON document, or a stream) into `Piece`s: text, token usage and a
final `Done`. The base class assembles pieces into a `Completion` for structured answers and
passes text through for streamed explanations. A stream that ends without its protocol's end
marker is an error (`ProviderProtocolError`), never a silently shortened answer.

Security: redirects are never followed (a key must reach only the configured host), environment
proxies are ignored for loopback endpoints, the key is sent only in the protocol's auth header and
masked in every error message and log record (see `perflsp.llm.secrets`).
"""

from __future__ import annotations

import email.utils
import json
import logging
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from perflsp.llm.privacy import is_loopback_url
from perflsp.llm.prompts import Message
from perflsp.llm.providers.sse import NotAnEventStream
from perflsp.llm.sanitize import StreamCleaner, char_limit, clean, inert_markdown, truncation_note
from perflsp.llm.secrets import redact, resolve_api_key

log = logging.getLogger("perflsp.llm.providers")

ProviderKind = Literal["openai", "ollama", "anthropic"]
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504, 529}  # 529: Anthropic "overloaded"
_RETRY_AFTER_STATUS = {429, 503, 529}
_ERROR_BODY_LIMIT_BYTES = 4096


# ---------------------------------------------------------------------------------------------
# results


@dataclass(slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Done:
    finish_reason: str | None = None
    model: str | None = None


Piece = str | TokenUsage | Done


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    usage: TokenUsage
    model: str | None
    finish_reason: str | None


# ---------------------------------------------------------------------------------------------
# errors


class ProviderError(Exception):
    """A request that produced no usable answer. `message` is safe to show and to log.

    retryable: worth another attempt (429, 5xx, connection refused, truncated stream);
    transport: the endpoint, not the model, failed (counts toward the circuit breaker);
    retry_after_s: the server's Retry-After, when it sent one.
    """

    retryable = False
    transport = True

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        message = clean(message)  # may quote the endpoint's or the model's words
        super().__init__(redact(message))
        self.message = redact(message)
        self.status = status
        self.retry_after_s = retry_after_s


class ProviderHTTPError(ProviderError):
    def __init__(self, message: str, *, status: int, retry_after_s: float | None = None):
        super().__init__(message, status=status, retry_after_s=retry_after_s)
        self.retryable = status in _RETRYABLE_STATUS


class ProviderUnreachable(ProviderError):
    retryable = True


class ProviderTimeout(ProviderError):
    retryable = False  # a server too slow now is usually too slow a second later


class ProviderProtocolError(ProviderError):
    """Malformed envelope or a stream cut short."""

    retryable = True


class ProviderRefusal(ProviderError):
    """The model answered but declined (OpenAI `refusal`)."""

    transport = False


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# ---------------------------------------------------------------------------------------------
# configuration


class ProviderConfig(BaseModel):
    """Where and how to ask. The key itself is never part of the config (see `api_key_env`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ProviderKind = "openai"
    base_url: str | None = None  # None: the protocol's default (OpenAI, local Ollama, Anthropic)
    model: str = Field(min_length=1)
    api_key_env: str | None = None  # None: the protocol's usual variable (OPENAI_API_KEY, ...)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=120.0, gt=0)  # between bytes; the advisor bounds the whole
    max_output_tokens: int = Field(default=1500, ge=64, le=32_000)
    temperature: float | None = Field(default=0.0, ge=0.0, le=2.0)
    stream: bool = True
    use_env_proxy: bool = True  # honour HTTPS_PROXY etc. (never for loopback endpoints)


def display_endpoint(url: str) -> str:
    """scheme://host:port/path without user info, query or fragment: safe to show and to hash."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


# ---------------------------------------------------------------------------------------------
# provider


class Provider(ABC):
    kind: ClassVar[ProviderKind]
    default_base_url: ClassVar[str]
    default_key_env: ClassVar[str | None]

    def __init__(
        self,
        config: ProviderConfig,
        api_key: SecretStr | str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.config = config
        self.base_url = (config.base_url or self.default_base_url).rstrip("/")
        key_env = config.api_key_env if config.api_key_env is not None else self.default_key_env
        self.api_key_env = key_env
        self._api_key = resolve_api_key(api_key, key_env)
        loopback = is_loopback_url(self.base_url)
        self._client = httpx.AsyncClient(
            http1=True,
            http2=False,
            follow_redirects=False,
            trust_env=config.use_env_proxy and not loopback,
            timeout=httpx.Timeout(
                connect=config.connect_timeout_s,
                read=config.read_timeout_s,
                write=config.connect_timeout_s,
                pool=config.read_timeout_s,
            ),
            transport=transport,
            verify=_ssl_context(),
        )

    # -- identity ----------------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self.config.model

    @property
    def label(self) -> str:
        """How results are marked in the UI, e.g. "LLM: gpt-4o-mini" (one line of inert Markdown: the
        model's name comes from settings, perhaps a repository's, and is shown in Markdown)."""
        return f"LLM: {inert_markdown(' '.join(clean(self.config.model).split()))}"

    @property
    def endpoint(self) -> str:
        return display_endpoint(self.base_url)

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None

    def _key(self) -> str | None:
        return self._api_key.get_secret_value() if self._api_key else None

    # -- protocol hooks ----------------------------------------------------------------------
    @abstractmethod
    def _path(self) -> str: ...

    @abstractmethod
    def _headers(self) -> dict[str, str]: ...

    @abstractmethod
    def _body(self, messages: Sequence[Message], schema: dict[str, Any] | None, stream: bool) -> dict:
        ...

    @abstractmethod
    def _pieces_from_document(self, data: dict[str, Any]) -> list[Piece]: ...

    @abstractmethod
    def _pieces_from_stream(self, response: httpx.Response) -> AsyncGenerator[Piece, None]: ...

    @staticmethod
    def _error_message(data: Any) -> str | None:
        """The human-readable message in an error body (each protocol nests it differently)."""
        if isinstance(data, dict):
            err = data.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return err["message"]
            if isinstance(err, str):
                return err
            if isinstance(data.get("message"), str):
                return data["message"]
        return None

    # -- public API ----------------------------------------------------------------------------
    async def complete_json(self, messages: Sequence[Message], schema: dict[str, Any]) -> Completion:
        """Ask for an answer that follows `schema`; returns its raw text (not yet validated)."""
        text: list[str] = []
        size = 0
        limit = char_limit(self.config.max_output_tokens)
        usage = TokenUsage()
        done: Done | None = None
        async with aclosing(self._pieces(messages, schema, self.config.stream)) as pieces:
            async for piece in pieces:
                if isinstance(piece, str):
                    text.append(piece)
                    size += len(piece)
                    if size > limit:  # longer than the token limit allows: cut, as the server should have
                        return Completion("".join(text)[:limit], usage, done.model if done else None, "length")
                elif isinstance(piece, TokenUsage):
                    usage = usage + piece
                else:
                    done = piece
        assert done is not None  # _pieces raises otherwise
        return Completion("".join(text), usage, done.model, done.finish_reason)

    async def stream_text(self, messages: Sequence[Message]) -> AsyncGenerator[str | TokenUsage, None]:
        """Free-text answer as it arrives (always streamed); TokenUsage items report usage.

        The text is model output: control sequences are removed (`perflsp.llm.sanitize`) and
        the stream stops, with a note, once it is longer than `max_output_tokens` allows."""
        limit = char_limit(self.config.max_output_tokens)
        cleaner = StreamCleaner(limit)
        async with aclosing(self._pieces(messages, None, True)) as pieces:
            async for piece in pieces:
                if isinstance(piece, str):
                    text = cleaner.feed(piece)
                    if text:
                        yield text
                    if cleaner.truncated:
                        yield truncation_note(limit)
                        return  # closes the response: the rest is never read
                elif not isinstance(piece, Done):
                    yield piece
        rest = cleaner.flush()
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- transport ---------------------------------------------------------------------------
    async def _pieces(
        self, messages: Sequence[Message], schema: dict[str, Any] | None, stream: bool
    ) -> AsyncGenerator[Piece, None]:
        url = f"{self.base_url}{self._path()}"
        body = self._body(messages, schema, stream)
        headers = {"content-type": "application/json", **self._headers()}
        if stream:
            headers["accept"] = "text/event-stream" if self.kind != "ollama" else "application/x-ndjson"
        request = self._client.build_request("POST", url, json=body, headers=headers)
        log.debug("POST %s model=%s stream=%s", self.endpoint, self.model, stream)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectError as exc:
            raise ProviderUnreachable(f"cannot connect to {self.endpoint}: {_reason(exc)}") from None
        except httpx.TimeoutException:
            raise ProviderTimeout(f"{self.endpoint} did not answer in time") from None
        except httpx.TransportError as exc:
            raise ProviderUnreachable(f"request to {self.endpoint} failed: {_reason(exc)}") from None
        try:
            await self._check_status(response)
            done = False
            media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if stream and media != "application/json":
                async with aclosing(self._pieces_from_stream(response)) as pieces:
                    try:
                        async for piece in pieces:
                            done = done or isinstance(piece, Done)
                            yield piece
                    except NotAnEventStream as exc:
                        raise ProviderProtocolError(
                            f"{self.endpoint} answered with invalid JSON, not a stream of events: {exc}") from None
            else:  # asked for no stream, or the server ignored `stream` and sent one JSON document
                raw = bytearray()
                cap = max(1 << 20, 16 * char_limit(self.config.max_output_tokens))
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) > cap:
                        raise ProviderProtocolError(
                            f"{self.endpoint} sent an answer over {cap} bytes, more than its output token limit allows")
                try:
                    data = json.loads(bytes(raw))
                except ValueError:
                    raise ProviderProtocolError(f"{self.endpoint} answered with invalid JSON") from None
                for piece in self._pieces_from_document(data):
                    done = done or isinstance(piece, Done)
                    yield piece
            if not done:
                raise ProviderProtocolError(f"the stream from {self.endpoint} ended before its end marker")
        except httpx.TimeoutException:
            raise ProviderTimeout(f"{self.endpoint} stopped sending before the answer was complete") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise ProviderProtocolError(
                f"the connection to {self.endpoint} broke mid-answer (truncated stream): {_reason(exc)}"
            ) from None
        finally:
            await response.aclose()

    async def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 300:
            return
        if 300 <= status < 400:
            target = display_endpoint(response.headers.get("location", "?"))
            raise ProviderHTTPError(
                f"{self.endpoint} redirected to {target}; redirects are not followed so the API key "
                "reaches only the configured host: set base_url to the final address",
                status=status,
            )
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= _ERROR_BODY_LIMIT_BYTES:
                break
        try:
            detail = self._error_message(json.loads(body))
        except ValueError:
            detail = None
        if detail is None:
            detail = body.decode("utf-8", "replace").strip()[:300] or response.reason_phrase
        hint = ""
        if status in (401, 403):
            hint = (
                f" (no API key: set {self.api_key_env} or the client's secret)"
                if not self.has_api_key
                else " (check the API key)"
            )
        retry_after = parse_retry_after(response.headers) if status in _RETRY_AFTER_STATUS else None
        raise ProviderHTTPError(
            f"{self.endpoint} answered HTTP {status}: {detail[:300]}{hint}",
            status=status,
            retry_after_s=retry_after,
        )


@cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context for all providers (loading the CA bundle takes ~0.1 s)."""
    return httpx.create_ssl_context()


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]


def loads_event(data: str, endpoint: str) -> Any:
    """Parse one streamed JSON document, mapping garbage to a protocol error."""
    try:
        return json.loads(data)
    except ValueError:
        raise ProviderProtocolError(f"{endpoint} sent a malformed stream event") from None
