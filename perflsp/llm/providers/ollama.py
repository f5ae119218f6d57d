"""Ollama's native chat API, `POST /api/chat`.

Structured output: `format` set to the JSON schema. Streaming: newline-delimited JSON objects,
the last with `"done": true` and the token counts `prompt_eval_count` / `eval_count`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from perflsp.llm.prompts import Message
from perflsp.llm.providers.base import Done, Piece, Provider, ProviderProtocolError, TokenUsage, loads_event
from perflsp.llm.providers.sse import iter_ndjson_lines


class OllamaProvider(Provider):
    kind = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    default_key_env = None  # local Ollama needs none; set api_key_env for a proxy or ollama.com

    def _path(self) -> str:
        return "/api/chat"

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"authorization": f"Bearer {key}"} if key else {}

    def _body(self, messages: Sequence[Message], schema: dict[str, Any] | None, stream: bool) -> dict:
        options: dict[str, Any] = {"num_predict": self.config.max_output_tokens}
        if self.config.temperature is not None:
            options["temperature"] = self.config.temperature
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": stream,
            "options": options,
        }
        if schema is not None:
            body["format"] = schema
        return body

    def _pieces_from_document(self, data: dict[str, Any]) -> list[Piece]:
        if not isinstance(data, dict):
            raise ProviderProtocolError(f"{self.endpoint} sent a malformed response")
        if "error" in data:
            raise ProviderProtocolError(f"{self.endpoint} reported: {self._error_message(data)}")
        message = data.get("message")
        pieces: list[Piece] = []
        if isinstance(message, dict) and message.get("content"):
            pieces.append(message["content"])
        if data.get("done"):
            pieces.append(
                TokenUsage(int(data.get("prompt_eval_count") or 0), int(data.get("eval_count") or 0))
            )
            pieces.append(Done(data.get("done_reason"), data.get("model")))
        return pieces

    async def _pieces_from_stream(self, response: httpx.Response) -> AsyncGenerator[Piece, None]:
        ended = False
        async for line in iter_ndjson_lines(response.aiter_lines()):
            if ended:
                continue  # read to the end of the body so the connection can be reused
            for piece in self._pieces_from_document(loads_event(line, self.endpoint)):
                yield piece
                ended = ended or isinstance(piece, Done)
