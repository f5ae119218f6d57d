"""Anthropic Messages API, `POST /v1/messages`.

Structured output through tool use: one tool whose `input_schema` is the response schema, forced
with `tool_choice = {"type": "tool", "name": ...}`; the answer is the tool call's input.
Streaming: SSE events message_start (input tokens), content_block_delta with `input_json_delta`
(tool input) or `text_delta` (free text), message_delta (stop reason, output tokens), message_stop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx

from perflsp.llm.prompts import Message
from perflsp.llm.providers.base import Done, Piece, Provider, ProviderProtocolError, TokenUsage, loads_event
from perflsp.llm.providers.sse import iter_sse

API_VERSION = "2023-06-01"
TOOL_NAME = "report_kernel_verdict"


class AnthropicProvider(Provider):
    kind = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"

    def _path(self) -> str:
        return "/v1/messages"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key := self._key():
            headers["x-api-key"] = key
        return headers

    def _body(self, messages: Sequence[Message], schema: dict[str, Any] | None, stream: bool) -> dict:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_output_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in messages if m.role != "system"],
            "stream": stream,
        }
        if system:
            body["system"] = system
        if self.config.temperature is not None:
            body["temperature"] = min(self.config.temperature, 1.0)
        if schema is not None:
            body["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": "Report the roofline verdict for the kernel, with reasons and proposals.",
                    "input_schema": schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        return body

    def _pieces_from_document(self, data: dict[str, Any]) -> list[Piece]:
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ProviderProtocolError(f"{self.endpoint} sent a response without content")
        pieces: list[Piece] = []
        for block in data["content"]:
            if block.get("type") == "tool_use":
                pieces.append(json.dumps(block.get("input")))
            elif block.get("type") == "text" and block.get("text"):
                pieces.append(block["text"])
        usage = data.get("usage") or {}
        pieces.append(TokenUsage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)))
        pieces.append(Done(_finish(data.get("stop_reason")), data.get("model")))
        return pieces

    async def _pieces_from_stream(self, response: httpx.Response) -> AsyncGenerator[Piece, None]:
        model: str | None = None
        stop_reason: str | None = None
        in_tool = False
        input_tokens = output_tokens = 0
        ended = False
        async for event, data in iter_sse(response.aiter_lines()):
            if ended:
                continue  # read to the end of the body so the connection can be reused
            payload = loads_event(data, self.endpoint)
            kind = (payload.get("type") if isinstance(payload, dict) else None) or event
            if kind == "message_start":
                message = payload.get("message") or {}
                model = message.get("model")
                usage = message.get("usage") or {}
                input_tokens = int(usage.get("input_tokens") or 0)
                output_tokens = int(usage.get("output_tokens") or 0)
            elif kind == "content_block_start":
                block = payload.get("content_block") or {}
                in_tool = block.get("type") == "tool_use"
                if in_tool and block.get("input"):
                    yield json.dumps(block["input"])  # some proxies send the whole input here
            elif kind == "content_block_delta":
                delta = payload.get("delta") or {}
                if delta.get("type") == "input_json_delta" and delta.get("partial_json"):
                    yield delta["partial_json"]
                elif delta.get("type") == "text_delta" and delta.get("text") and not in_tool:
                    yield delta["text"]
            elif kind == "message_delta":
                stop_reason = (payload.get("delta") or {}).get("stop_reason") or stop_reason
                usage = payload.get("usage") or {}  # counts here are cumulative, not increments
                input_tokens = int(usage.get("input_tokens") or input_tokens)
                output_tokens = int(usage.get("output_tokens") or output_tokens)
            elif kind == "message_stop":
                yield TokenUsage(input_tokens, output_tokens)
                yield Done(_finish(stop_reason), model)
                ended = True
            elif kind == "error":
                raise ProviderProtocolError(
                    f"{self.endpoint} reported an error mid-stream: {self._error_message(payload)}"
                )
            # ping, content_block_stop: nothing to do


def _finish(stop_reason: str | None) -> str | None:
    return "length" if stop_reason == "max_tokens" else stop_reason
