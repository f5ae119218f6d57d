"""OpenAI-compatible Chat Completions (OpenAI, vLLM, llama.cpp server, LM Studio, OpenRouter).

Structured output: `response_format = {"type": "json_schema", "json_schema": {..., "strict": true}}`.
Streaming: Server-Sent Events of `chat.completion.chunk` objects ending with `data: [DONE]`;
`stream_options.include_usage` asks for a final chunk carrying token usage.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from perflsp.llm.prompts import Message
from perflsp.llm.providers.base import (
    Done,
    Piece,
    Provider,
    ProviderProtocolError,
    ProviderRefusal,
    TokenUsage,
    loads_event,
)
from perflsp.llm.providers.sse import iter_sse

SCHEMA_NAME = "kernel_verdict"


class OpenAIProvider(Provider):
    kind = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    def _path(self) -> str:
        return "/chat/completions"

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"authorization": f"Bearer {key}"} if key else {}

    def _body(self, messages: Sequence[Message], schema: dict[str, Any] | None, stream: bool) -> dict:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": self.config.max_output_tokens,
            "stream": stream,
        }
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if stream:
            body["stream_options"] = {"include_usage": True}
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": schema},
            }
        return body

    @staticmethod
    def _usage(data: dict[str, Any]) -> TokenUsage | None:
        usage = data.get("usage")
        if not isinstance(usage, dict):
            return None
        return TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))

    def _pieces_from_document(self, data: dict[str, Any]) -> list[Piece]:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ProviderProtocolError(f"{self.endpoint} sent a response without choices") from None
        if message.get("refusal"):
            raise ProviderRefusal(f"{self.model} declined: {str(message['refusal'])[:200]}")
        pieces: list[Piece] = [message.get("content") or ""]
        if (usage := self._usage(data)) is not None:
            pieces.append(usage)
        pieces.append(Done(choice.get("finish_reason"), data.get("model")))
        return pieces

    async def _pieces_from_stream(self, response: httpx.Response) -> AsyncGenerator[Piece, None]:
        finish_reason: str | None = None
        model: str | None = None
        refusal: list[str] = []
        ended = False
        async for _event, data in iter_sse(response.aiter_lines()):
            if ended:
                continue  # read to the end of the body so the connection can be reused
            if data.strip() == "[DONE]":
                if refusal:
                    raise ProviderRefusal(f"{self.model} declined: {''.join(refusal)[:200]}")
                yield Done(finish_reason, model)
                ended = True
                continue
            chunk = loads_event(data, self.endpoint)
            if not isinstance(chunk, dict):
                raise ProviderProtocolError(f"{self.endpoint} sent a malformed stream event")
            if "error" in chunk:
                raise ProviderProtocolError(
                    f"{self.endpoint} reported an error mid-stream: {self._error_message(chunk)}"
                )
            model = chunk.get("model") or model
            if (usage := self._usage(chunk)) is not None:
                yield usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    yield delta["content"]
                if delta.get("refusal"):
                    refusal.append(delta["refusal"])
                finish_reason = choice.get("finish_reason") or finish_reason
