"""Real loopback HTTP/1.1 servers that speak each provider's wire protocol, scripted per test.

`ScriptedServer` is a `http.server.ThreadingHTTPServer` on 127.0.0.1: every POST is recorded
(path, headers, JSON body, client port = connection) and answered by the next `Reply` of its
script: a whole document, a chunked stream (optionally cut off mid-body or stalled until the
test ends), an error status with headers. `Wire` builds the replies of one protocol (OpenAI Chat
Completions SSE, Ollama NDJSON, Anthropic Messages SSE) from an answer.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # a whole body with Content-Length
    chunks: list[bytes] | None = None  # a chunked body, one write per item
    truncate: bool = False  # close the connection before the terminating chunk
    stall_after: int | None = None  # send this many chunks, then wait until the server closes
    hang: bool = False  # send nothing until the server closes
    gate: threading.Event | None = None  # wait for this before answering


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedServer:
    def __init__(self, script: list[Reply] | Callable[[Recorded], Reply] | None = None):
        self._script = script if script is not None else []
        self.requests: list[Recorded] = []
        self.release = threading.Event()
        self._cond = threading.Condition()
        self.active = 0
        self.max_active = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                record = Recorded(
                    "POST",
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    self.client_address[1],
                )
                with outer._cond:
                    outer.requests.append(record)
                    outer.active += 1
                    outer.max_active = max(outer.max_active, outer.active)
                    outer._cond.notify_all()
                try:
                    outer._answer(self, outer._next(record))
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                finally:
                    with outer._cond:
                        outer.active -= 1
                        outer._cond.notify_all()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> None:
        assert isinstance(self._script, list)
        with self._cond:
            self._script.extend(replies)

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> bool:
        """Block (call via asyncio.to_thread) until `count` requests have arrived."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= count, timeout=timeout_s)

    # -- answering -----------------------------------------------------------------------------
    def _next(self, record: Recorded) -> Reply:
        if callable(self._script):
            return self._script(record)
        with self._cond:
            if self._script:
                return self._script.pop(0)
        return Reply(500, body=b'{"error": {"message": "test script exhausted"}}')

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.gate is not None:
            reply.gate.wait()
        if reply.hang:
            self.release.wait()
            handler.close_connection = True
            return
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunks is None:
            handler.send_header("Content-Length", str(len(reply.body)))
            handler.end_headers()
            handler.wfile.write(reply.body)
            handler.wfile.flush()
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for index, chunk in enumerate(reply.chunks):
            if reply.stall_after is not None and index == reply.stall_after:
                self.release.wait()
                handler.close_connection = True
                return
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()
        if reply.truncate:
            handler.close_connection = True
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------------------------------------
# wire formats


def _split(text: str, parts: int) -> list[str]:
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


JSON_HEADERS = {"Content-Type": "application/json"}
SSE_HEADERS = {"Content-Type": "text/event-stream"}


@dataclass(frozen=True)
class Wire:
    """Replies of one protocol. `answer` is the model's text (the JSON answer as a string)."""

    kind: str
    usage: tuple[int, int] = (120, 45)

    # -- successful answers -------------------------------------------------------------------
    def reply(self, text: str, *, stream: bool = True, end: bool = True, truncate: bool = False,
              stall_after: int | None = None, tool: bool = True) -> Reply:
        if not stream:
            return Reply(200, JSON_HEADERS, body=json.dumps(self.document(text, tool=tool)).encode())
        events = self.stream_events(text, tool=tool)
        if not end:
            events = events[:-1]
        if truncate:
            events = events[: max(1, len(events) // 2)]
        headers = {"Content-Type": "application/x-ndjson"} if self.kind == "ollama" else SSE_HEADERS
        return Reply(200, headers, chunks=events, truncate=truncate, stall_after=stall_after)

    def document(self, text: str, *, tool: bool = True) -> dict:
        prompt, completion = self.usage
        if self.kind == "openai":
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "fake-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            }
        if self.kind == "ollama":
            return {"model": "fake-model", "message": {"role": "assistant", "content": text},
                    "done": True, "done_reason": "stop", "prompt_eval_count": prompt,
                    "eval_count": completion}
        block = ({"type": "tool_use", "id": "toolu_1", "name": "report_kernel_verdict",
                  "input": json.loads(text)} if tool else {"type": "text", "text": text})
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model",
                "content": [block], "stop_reason": "tool_use" if tool else "end_turn",
                "usage": {"input_tokens": prompt, "output_tokens": completion}}

    def stream_events(self, text: str, *, tool: bool = True) -> list[bytes]:
        prompt, completion = self.usage
        pieces = _split(text, 4)
        if self.kind == "openai":
            events = [_sse({"id": "c1", "object": "chat.completion.chunk", "model": "fake-model",
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]})]
            events += [_sse({"id": "c1", "object": "chat.completion.chunk", "model": "fake-model",
                             "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
                       for p in pieces]
            events.append(_sse({"id": "c1", "object": "chat.completion.chunk", "model": "fake-model",
                                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            events.append(_sse({"id": "c1", "object": "chat.completion.chunk", "model": "fake-model",
                                "choices": [], "usage": {"prompt_tokens": prompt,
                                                          "completion_tokens": completion}}))
            events.append(_sse("[DONE]"))
            return events
        if self.kind == "ollama":
            lines = [json.dumps({"model": "fake-model", "message": {"role": "assistant", "content": p},
                                 "done": False}).encode() + b"\n" for p in pieces]
            lines.append(json.dumps({"model": "fake-model", "message": {"role": "assistant", "content": ""},
                                     "done": True, "done_reason": "stop", "prompt_eval_count": prompt,
                                     "eval_count": completion}).encode() + b"\n")
            return lines
        start_block = ({"type": "tool_use", "id": "toolu_1", "name": "report_kernel_verdict", "input": {}}
                       if tool else {"type": "text", "text": ""})
        delta_type, delta_key = ("input_json_delta", "partial_json") if tool else ("text_delta", "text")
        events = [
            _sse({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                       "model": "fake-model", "content": [],
                                                       "usage": {"input_tokens": prompt, "output_tokens": 1}}},
                 "message_start"),
            _sse({"type": "content_block_start", "index": 0, "content_block": start_block},
                 "content_block_start"),
            _sse({"type": "ping"}, "ping"),
        ]
        events += [_sse({"type": "content_block_delta", "index": 0,
                         "delta": {"type": delta_type, delta_key: p}}, "content_block_delta") for p in pieces]
        events += [
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse({"type": "message_delta", "delta": {"stop_reason": "tool_use" if tool else "end_turn"},
                  "usage": {"output_tokens": completion}}, "message_delta"),
            _sse({"type": "message_stop"}, "message_stop"),
        ]
        return events

    # -- failures ----------------------------------------------------------------------------
    def error(self, status: int, message: str = "boom", headers: dict[str, str] | None = None) -> Reply:
        if self.kind == "anthropic":
            body = {"type": "error", "error": {"type": "api_error", "message": message}}
        elif self.kind == "ollama":
            body = {"error": message}
        else:
            body = {"error": {"message": message, "type": "server_error"}}
        return Reply(status, {**JSON_HEADERS, **(headers or {})}, body=json.dumps(body).encode())

    # -- reading requests --------------------------------------------------------------------
    def messages(self, request: Recorded) -> list[dict]:
        return request.json["messages"]

    def prompt_text(self, request: Recorded) -> str:
        body = request.json
        parts = [m["content"] for m in body["messages"]]
        if self.kind == "anthropic" and "system" in body:
            parts.insert(0, body["system"])
        return "\n".join(parts)


WIRES = [Wire("openai"), Wire("ollama"), Wire("anthropic")]
