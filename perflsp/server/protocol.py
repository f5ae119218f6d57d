"""pygls protocol adjustments:

- bad input gets a JSON-RPC error instead of silence: a request whose params do not fit the
  method gets `InvalidParams` with its id, a body that is not JSON gets `ParseError` (id null);
- positions are always UTF-16 (the line index converts UTF-8 bytes to UTF-16 columns);
- open documents are kept by the server's own workers (incremental parse trees), not copied
  into pygls' workspace as well: each change is applied once.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcParseError
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


class InvalidMessage:
    """A message that could not be decoded into its method's parameter type."""

    def __init__(self, msg_id: Any, method: str, reason: str):
        self.id = msg_id
        self.method = method
        self.reason = reason
        self.jsonrpc = "2.0"


class PerfProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception as exc:  # noqa: BLE001 - any decoding failure becomes an error reply
            if "jsonrpc" not in data:
                raise
            reason = str(exc.__cause__ or exc) or type(exc).__name__
            return InvalidMessage(data.get("id"), str(data.get("method", "")), reason)

    def handle_message(self, message: Any) -> None:
        if isinstance(message, InvalidMessage):
            if message.id is not None and message.method:
                error = JsonRpcInvalidParams(f"invalid params for {message.method}: {message.reason}")
                self._send_response(message.id, None, error.to_response_error())
            else:
                log.warning("ignored an undecodable message (%s): %s", message.method or "response", message.reason)
            return
        super().handle_message(message)

    def send_parse_error(self, exc: Exception) -> None:
        # a plain dict: the converter would drop the `"id": null` that JSON-RPC requires here
        self._send_data({"jsonrpc": "2.0", "id": None,
                         "error": {"code": JsonRpcParseError.CODE, "message": f"the message body is not valid JSON: {exc}"}})

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[override]
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):  # type: ignore[override]
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):  # type: ignore[override]
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):  # type: ignore[override]
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def is_parse_error(exc: Exception) -> bool:
    return isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError))
