"""pygls protocol adjustments, and the one module that uses pygls internals (names with a leading
underscore, its protocol's method table): pygls 2.1 has no public API for these, so they are kept
here, typed, and the rest of the server uses pygls' public API only.

- bad input gets a JSON-RPC error instead of silence: a request whose params do not fit the
  method gets `InvalidParams` with its id, a body that is not JSON gets `ParseError` (id null);
- positions are always UTF-16 (the line index converts UTF-8 bytes to UTF-16 columns);
- open documents are kept by the server's own workers (incremental parse trees), not copied
  into pygls' workspace as well: each change is applied once;
- diagnostics already unstructured to JSON (cached per diagnostic) are sent as they are, without
  a second pass through the converter (`publish_diagnostics_json`);
- `serve_tcp`: pygls' `start_tcp`, reporting the bound port on stderr (useful with port 0).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import operator
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcParseError
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

# a published diagnostic's encoding, kept per document: (the dict published, its JSON text)
_NOT_ENCODED: tuple[Any, str] = (None, "")
_ENCODED_DICT = operator.itemgetter(0)
_ENCODED_TEXT = operator.itemgetter(1)
_COMPACT = (",", ":")  # (no spaces: a large file's publication is ~10% smaller)
_PIPE_BYTES = 1 << 20  # stdout's pipe buffer, when the system lets it grow (Linux: up to pipe-max-size)
# what pygls' method table yields to its dispatcher: (handler, positional arguments, keyword arguments)
_Dispatch = Generator[tuple[Callable[..., object], tuple[object, ...], None], object, None]


@dataclass(frozen=True, slots=True)
class InvalidMessage:
    """A message that could not be decoded into its method's parameter type."""

    id: int | str | None  # the request's id (None: a notification, or a response we cannot read)
    method: str
    reason: str
    jsonrpc: str = "2.0"


class PerfProtocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._encoded: dict[str, dict[int, tuple[dict[str, Any], str]]] = {}  # per document: id -> (dict, text)
        self._writes: set[asyncio.Future[Any]] = set()

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception as exc:  # any decoding failure becomes an error reply
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

    def publish_diagnostics_json(self, uri: str, version: int | None, diagnostics: list[dict[str, Any]]) -> None:
        """`textDocument/publishDiagnostics` with diagnostics that are JSON already. The server
        passes the same dict for an unchanged diagnostic from one publish to the next, so each
        dict's text is kept per document and only new ones are encoded."""
        if self.writer is None:
            return
        previous = self._encoded.get(uri, {})
        # (C-level passes over the ~1,000 diagnostics of a large file, published per keystroke:
        # a Python step only for the few that are new)
        ids = list(map(id, diagnostics))
        entries = list(map(previous.get, ids, repeat(_NOT_ENCODED)))
        for index, known in enumerate(map(operator.is_, map(_ENCODED_DICT, entries), diagnostics)):
            if not known:
                entries[index] = (diagnostics[index], json.dumps(diagnostics[index], separators=_COMPACT))
        self._encoded[uri] = dict(zip(ids, entries))
        parts = list(map(_ENCODED_TEXT, entries))
        version_part = "" if version is None else f',"version":{int(version)}'
        body = (f'{{"jsonrpc":"2.0","method":"{types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS}",'
                f'"params":{{"uri":{json.dumps(uri)},"diagnostics":[{",".join(parts)}]{version_part}}}}}')
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        res = self.writer.write((header + body if self._include_headers else body).encode(self.CHARSET))
        if inspect.isawaitable(res):
            task = asyncio.ensure_future(res)
            self._writes.add(task)  # held until written (the loop keeps only a weak reference)
            task.add_done_callback(self._writes.discard)

    def forget_diagnostics(self, uri: str) -> None:
        """Drop the encoded diagnostics kept for `uri` (the document was closed)."""
        self._encoded.pop(uri, None)

    def send_parse_error(self, exc: Exception) -> None:
        # a plain dict: the converter would drop the `"id": null` that JSON-RPC requires here
        self._send_data({"jsonrpc": "2.0", "id": None,
                         "error": {"code": JsonRpcParseError.CODE, "message": f"the message body is not valid JSON: {exc}"}})

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> _Dispatch:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> _Dispatch:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> _Dispatch:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def is_parse_error(exc: Exception) -> bool:
    return isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError))


# pygls' header pattern (`pygls.io_.run_async`): a message is read as it reads it
_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")


class MessageReader:
    """pygls' stdin reader (`readline`, `readexactly`), reading each message in one thread job.

    pygls' own reads every header line and the body in a job of their own: three thread hops
    per message, ~1 ms of each keystroke's latency on a loaded machine. Here the first read of a
    message reads its header lines and its body in the thread (framed as pygls frames them: a
    header it does not take as the length is a line like any other) and the reads that follow
    are answered from what it read, with no hop."""

    def __init__(self, stdin: BinaryIO, executor: Executor | None = None):
        self.stdin = stdin
        self.executor = executor
        self._read: deque[bytes] = deque()

    def _message(self) -> list[bytes]:
        """The next message's header lines, then its body (fewer parts at the end of input)."""
        parts: list[bytes] = []
        length = 0
        while True:
            line = self.stdin.readline()
            parts.append(line)
            if not line:
                return parts
            if not length:
                match = _CONTENT_LENGTH.fullmatch(line)
                if match:
                    length = int(match.group(1))
            if length and not line.strip():
                parts.append(self.stdin.read(length))
                return parts

    async def readline(self) -> bytes:
        if not self._read:
            self._read.extend(await asyncio.get_running_loop().run_in_executor(self.executor, self._message))
        return self._read.popleft()

    async def readexactly(self, n: int) -> bytes:
        if self._read:
            return self._read.popleft()  # (the body `_message` read, of the length pygls asks for)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.read, n)


def _grow_pipe(stream: Any) -> None:
    """Let a pipe to the client hold a whole large publication (~0.5 MB for a file of a thousand
    kernels): the write then returns at once instead of waiting for the client to read each
    64 KiB. Nothing changes where that is not possible (not a pipe, not Linux, no permission)."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def serve_stdio(server: LanguageServer) -> None:
    """pygls' `start_io` (the same loop, writer and shutdown) with `MessageReader`."""
    from pygls.io_ import StdoutWriter, run_async

    stop = server._stop_event = threading.Event()
    _grow_pipe(sys.stdout)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    try:
        asyncio.run(run_async(stop_event=stop, reader=MessageReader(sys.stdin.buffer, server.thread_pool),
                              protocol=server.protocol, logger=logging.getLogger("pygls"),
                              error_handler=server.report_server_error))
    except BrokenPipeError:
        log.error("the connection to the client is lost: shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


def serve_tcp(server: LanguageServer, host: str, port: int) -> None:
    """pygls' `start_tcp` (the same loop and shutdown), saying on stderr which port it bound."""
    from pygls.io_ import run_async

    stop = server._stop_event = threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.protocol.set_writer(writer)
        await run_async(stop_event=stop, reader=reader, protocol=server.protocol, logger=logging.getLogger("pygls"),
                        error_handler=server.report_server_error)
        server.shutdown()

    async def main() -> None:
        tcp_server = await asyncio.start_server(connection, host, port)
        server._server = tcp_server
        bound = tcp_server.sockets[0].getsockname()
        sys.stderr.write(f"perflsp: listening on {bound[0]}:{bound[1]}\n")
        sys.stderr.flush()
        async with tcp_server:
            try:
                await tcp_server.serve_forever()
            except asyncio.CancelledError:
                pass

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
