"""One JSON-RPC message body, checked against the JSON-RPC 2.0 envelope before pygls sees it.

A client's mistake gets the specification's error code, as a reply to every request id it
names, and one line for the log (never a traceback):

- a body that is not UTF-8 is a parse error (-32700), answered with the request's id when the
  rest of the body still says it (each invalid byte replaced), else with id null;
- a body that is not JSON is a parse error, id null (the id cannot be known);
- a JSON array (a JSON-RPC batch: LSP sends one message per frame), a scalar, a missing or wrong
  `"jsonrpc": "2.0"`, an id that is not a number or a string, a method that is not a string,
  params that are neither an object nor an array: invalid request (-32600), with the id when
  it is a valid one.

What passes is a plain dict; the protocol (protocol.py) then decodes its params (-32602 when they
do not fit the method) and dispatches it (-32601 for an unknown method).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from perflsp.server.json_types import JsonObject

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002

Id = int | str


@dataclass(frozen=True, slots=True)
class Rejected:
    """A body that is not one valid JSON-RPC message: its error replies (none for a message
    that is not a request) and the one line that the log gets."""

    replies: tuple[JsonObject, ...]
    reason: str


def error_reply(request_id: Id | None, code: int, message: str) -> JsonObject:
    """A JSON-RPC error response (a plain dict: `"id": null` must stay in it)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def valid_id(value: object) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def decode(body: bytes) -> dict[str, Any] | Rejected:
    """The message in `body`, or why it is rejected and what to answer. (The message is the
    protocol edge: raw JSON, its envelope checked here, its params by lsprotocol's converter.)"""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"the message is not valid UTF-8 (byte {exc.start} of {len(body)})"
        try:
            readable = json.loads(body.decode("utf-8", errors="replace"))
        except ValueError:
            readable = None
        return _rejected(PARSE_ERROR, reason, _request_ids(readable))
    try:
        value = json.loads(text)
    except ValueError as exc:
        return _rejected(PARSE_ERROR, f"the message is not valid JSON: {exc}", [])
    if isinstance(value, list):
        reason = (f"a JSON-RPC batch (an array of {len(value)}) is not supported: LSP sends one message per frame"
                  if value else "an empty JSON array is not a message")
        return _rejected(INVALID_REQUEST, reason, _request_ids(value))
    if not isinstance(value, dict):
        return _rejected(INVALID_REQUEST, f"a message is a JSON object, not {type(value).__name__}", [])
    problem = _envelope_problem(value)
    if problem is None:
        return value
    # a request, or what can only have meant one (an id, no result or error): answered; a
    # malformed response (to a request of the server) is only logged
    is_request = "method" in value or not ("result" in value or "error" in value)
    ids = [value["id"]] if is_request and valid_id(value.get("id")) else []
    return _rejected(INVALID_REQUEST, problem, ids, reply=is_request)


def _envelope_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return f'"jsonrpc" must be "2.0", not {_short(message.get("jsonrpc"))}'
    if "method" in message:
        if not isinstance(message["method"], str):
            return f'"method" must be a string, not {_short(message["method"])}'
        if "id" in message and not valid_id(message["id"]):
            return f'a request\'s "id" must be a number or a string, not {_short(message["id"])}'
        if "params" in message and not isinstance(message["params"], (dict, list)) and message["params"] is not None:
            return f'"params" must be an object or an array, not {_short(message["params"])}'
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return 'neither a request nor a notification (no "method") nor a response (no "id" with "result" or "error")'
    return None


def _request_ids(value: object) -> list[Id]:
    """The ids of the requests `value` holds (a message, or each message of an array)."""
    items = value if isinstance(value, list) else [value]
    return [item["id"] for item in items if isinstance(item, dict) and "method" in item and valid_id(item.get("id"))]


def _rejected(code: int, reason: str, ids: list[Id], reply: bool = True) -> Rejected:
    if not reply:
        return Rejected((), reason)
    answered: list[Id | None] = [*ids] or [None]
    return Rejected(tuple(error_reply(i, code, reason) for i in answered), reason)


def _short(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
