"""pygls protocol adjustments, and the one module that uses pygls internals (names with a leading
underscore, its protocol's method table): pygls 2.1 has no public API for these, so they are kept
here, typed, and the rest of the server uses pygls' public API only.

- the message loop (`serve_messages`, pygls' `run_async` with its framing) answers every request
  id, whatever is wrong with the message: the envelope is checked first (messages.py: -32700 for
  a body that is not UTF-8 or JSON, -32600 for a batch or a malformed envelope), then params that
  do not fit the method get `InvalidParams` (-32602), an unknown method `MethodNotFound`
  (-32601), a request after `shutdown` -32600 and one before `initialize` -32002. A client's
  mistake is one line in the log, never a traceback (those are the server's own failures);
- positions are always UTF-16 (the line index converts UTF-8 bytes to UTF-16 columns);
- open documents are kept by the server's own workers (incremental parse trees), not copied
  into pygls' workspace as well: each change is applied once;
- a handled notification's future is not kept (pygls keeps every one under a made-up id);
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
from concurrent.futures import Executor, Future
from itertools import repeat
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Protocol, cast

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcRequestCancelled,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, MsgId
from pygls.protocol.language_server import lsp_method

from perflsp.server import messages
from perflsp.server.json_types import JsonObject

if TYPE_CHECKING:
    from _collections_abc import dict_items

    from cattrs import Converter
    from pygls.lsp.server import LanguageServer
    from pygls.protocol.json_rpc import MessageCallback, MessageHandler, RPCMessage

log = logging.getLogger(__name__)

# a published diagnostic's encoding, kept per document: (the dict published, its JSON text)
_NOT_ENCODED: tuple[JsonObject | None, str] = (None, "")
_ENCODED_DICT = operator.itemgetter(0)
_ENCODED_TEXT = operator.itemgetter(1)
_COMPACT = (",", ":")  # (no spaces: a large file's publication is ~10% smaller)
_PIPE_BYTES = 1 << 20  # stdout's pipe buffer, when the system lets it grow (Linux: up to pipe-max-size)
# what pygls' method table yields to its dispatcher: (handler, positional arguments, keyword arguments)
_Dispatch = Generator[tuple[Callable[..., object], tuple[object, ...], None], object, None]


# errors a request handler raises for what the client sent: answered, logged as one line
_CLIENT_ERRORS = (JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound, JsonRpcRequestCancelled,
                  JsonRpcContentModified, JsonRpcServerNotInitialized)
MAX_MESSAGE_BYTES = 256 << 20  # a larger body is skipped unread (a 16 MiB document is ~17-32 MiB of JSON)



class _Futures(dict[MsgId, Future[object]]):
    """pygls' handler futures by request id. Its `shutdown` cancels each while iterating over
    them, and a cancelled thread's future runs its callbacks at once, which remove its entry
    (`_execute_handler`): iterating over a copy keeps that from failing ("dictionary changed size
    during iteration", a traceback and an internal error for the shutdown request)."""

    def items(self) -> dict_items[MsgId, Future[object]]:
        return dict(self).items()

class PerfProtocol(LanguageServerProtocol):
    def __init__(self, server: LanguageServer, converter: Converter) -> None:
        super().__init__(server, converter)
        self._request_futures = _Futures()
        self._encoded: dict[str, dict[int, tuple[JsonObject | None, str]]] = {}  # per document: id -> (dict, text)
        self._writes: set[asyncio.Future[None]] = set()
        self._initialize_seen = False

    # ------------------------------------------------------------------ receiving

    def receive(self, body: bytes) -> None:
        """One message body from the client: checked, decoded and dispatched, or answered with
        the error that says what is wrong with it."""
        message = messages.decode(body)
        if isinstance(message, messages.Rejected):
            self.reject(message)
            return
        method = message.get("method")
        request = isinstance(method, str) and "id" in message
        if request and self._shutdown and method != types.EXIT:
            self.reject(messages.Rejected((messages.error_reply(message["id"], messages.INVALID_REQUEST,
                                                                f"{method}: the server is shutting down"),),
                                          f"{method} (id {message['id']}) after shutdown"))
            return
        if request and not self._initialize_seen and method != types.INITIALIZE:
            self.reject(messages.Rejected((messages.error_reply(message["id"], messages.SERVER_NOT_INITIALIZED,
                                                                f"{method}: the server is not initialized"),),
                                          f"{method} (id {message['id']}) before initialize"))
            return
        try:
            decoded = self._structure(message)
        except Exception as exc:  # noqa: BLE001 - any decoding failure is the client's params
            what = f"invalid params for {method}: {_reason(exc)}" if method else f"an unreadable response: {_reason(exc)}"
            replies = (messages.error_reply(message["id"], messages.INVALID_PARAMS, what),) if request else ()
            self.reject(messages.Rejected(replies, what))
            return
        if request and not hasattr(decoded, "id"):  # a notification's method, sent with an id
            self.reject(messages.Rejected((messages.error_reply(message["id"], messages.INVALID_REQUEST,
                                                                f"{method} is a notification: it takes no id"),),
                                          f"{method} sent as a request (id {message['id']})"))
            return
        if method == types.INITIALIZE:
            self._initialize_seen = True
        self.handle_message(decoded)

    def reject(self, rejected: messages.Rejected) -> None:
        log.warning("client message rejected: %s", rejected.reason)
        for reply in rejected.replies:
            self._send_data(reply)

    def _structure(self, data: dict[str, Any]) -> RPCMessage:
        """pygls' `structure_message` for a checked envelope, without its traceback in the log."""
        method = data.get("method")
        if "method" not in data:
            if "error" in data:
                # (its `id` may be null where RPCError's may not: pygls dispatches it as an error all the same)
                return cast("RPCMessage", self._converter.structure(data, types.ResponseErrorMessage))
            response_type = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        elif "id" in data:
            response_type = self.get_message_type(method) or JsonRPCRequestMessage
        else:
            response_type = self.get_message_type(method) or JsonRPCNotification
        message: RPCMessage = self._converter.structure(data, response_type)
        return message

    def structure_message(self, data: dict[str, Any]) -> object:
        return self._structure(data) if "jsonrpc" in data else data

    # ------------------------------------------------------------------ handlers and their results

    def _execute_handler(self, msg_id: MsgId, handler: MessageHandler, callback: MessageCallback,
                         args: tuple[object, ...] | None = None, kwargs: dict[str, object] | None = None) -> None:
        # pygls keeps the future of every handler it runs under its id until a request's answer
        # is sent; a notification's (and a builtin handler's inner step) stayed for ever: dropped
        # here once done (the same future only: a client may reuse an id)
        def done(future: Future[object]) -> None:
            if self._request_futures.get(msg_id) is future:
                del self._request_futures[msg_id]
            callback(future)

        super()._execute_handler(msg_id, handler, done, args, kwargs)

    def _run_generator(self, future: Future[object] | None, *, gen: Generator[object, object, object],
                       result_future: Future[object]) -> None:
        # a builtin handler's inner step (a command of `workspace/executeCommand`) that ends after
        # its request was cancelled: pygls drops it unread, and asyncio logs its error with a
        # traceback when the task is collected. Its error is read here; the answer was sent.
        if result_future.cancelled() and future is not None and future.done() and not future.cancelled():
            future.exception()
            gen.close()
            return
        super()._run_generator(future, gen=gen, result_future=result_future)

    def _send_handler_result(self, future: Future[object], *, msg_id: MsgId) -> None:
        error = None if future.cancelled() else future.exception()
        if isinstance(error, _CLIENT_ERRORS):  # the client's mistake: its answer and one line (pygls: a traceback)
            self._request_futures.pop(msg_id, None)
            if not isinstance(error, (JsonRpcRequestCancelled, JsonRpcContentModified)):
                log.warning("request %s failed: %s", msg_id, error)
            self._send_response(msg_id, error=error.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def publish_diagnostics_json(self, uri: str, version: int | None, diagnostics: list[JsonObject]) -> None:
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

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[object, object, types.InitializeResult]:
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


# pygls' header pattern (`pygls.io_.run_async`), also found at the end of a line after the rest
# of a body whose Content-Length was too short (so the next message is read again)
_CONTENT_LENGTH = re.compile(rb"Content-Length: (\d+)\r\n\Z")


def content_length(line: bytes) -> int | None:
    """The length a header line gives the body, or None (not that header)."""
    match = _CONTENT_LENGTH.search(line)
    return int(match.group(1)) if match else None


class MessageReader:
    """pygls' stdin reader (`readline`, `readexactly`), reading each message in one thread job.

    pygls' own reads every header line and the body in a job of their own: three thread hops
    per message, ~1 ms of each keystroke's latency on a loaded machine. Here the first read of a
    message reads its header lines and its body in the thread (framed as `serve_messages` frames
    them: a header it does not take as the length is a line like any other) and the reads that
    follow are answered from what it read, with no hop. An empty body or one over
    `MAX_MESSAGE_BYTES` is not read here (the loop answers or skips it)."""

    def __init__(self, stdin: BinaryIO, executor: Executor | None = None):
        self.stdin = stdin
        self.executor = executor
        self._read: deque[bytes] = deque()

    def _message(self) -> list[bytes]:
        """The next message's header lines, then its body (fewer parts at the end of input)."""
        parts: list[bytes] = []
        length: int | None = None
        while True:
            line = self.stdin.readline()
            parts.append(line)
            if not line:
                return parts
            if length is None:
                length = content_length(line)
            if length is not None and not line.strip():
                if 0 < length <= MAX_MESSAGE_BYTES:
                    parts.append(self.stdin.read(length))
                return parts

    async def readline(self) -> bytes:
        if not self._read:
            self._read.extend(await asyncio.get_running_loop().run_in_executor(self.executor, self._message))
        return self._read.popleft()

    async def readexactly(self, n: int) -> bytes:
        if self._read:
            return self._read.popleft()  # (the body `_message` read, of the length the loop asks for)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.stdin.read, n)


class Reader(Protocol):
    """What the message loop reads from: `MessageReader`, or asyncio's `StreamReader` (TCP)."""

    async def readline(self) -> bytes: ...

    async def readexactly(self, n: int) -> bytes: ...


async def serve_messages(stop: threading.Event, reader: Reader, protocol: PerfProtocol) -> None:
    """pygls' `run_async` loop (the same framing of valid input), answering what it cannot read:
    a header block without a Content-Length it can take is skipped with one log line; an empty
    body, or one over `MAX_MESSAGE_BYTES` (skipped unread), is a parse error with id null; every
    body goes to `PerfProtocol.receive`."""
    length: int | None = None
    first_header: bytes | None = None
    while not stop.is_set():
        try:
            line = await reader.readline()
        except ValueError as exc:  # asyncio's StreamReader: a line longer than its limit, dropped
            log.warning("client message rejected: a header line too long to read (%s)", exc)
            continue
        if not line:
            break
        if line.strip():
            if length is None:
                length = content_length(line)
            first_header = first_header or line
            continue
        if length is None:  # (a blank line between messages is no message)
            if first_header is not None:
                protocol.reject(messages.Rejected((), f"headers without a Content-Length ({_short(first_header)}): "
                                                      f"what follows is read as the next message's headers"))
            first_header = None
            continue
        size, length, first_header = length, None, None
        if size == 0 or size > MAX_MESSAGE_BYTES:
            if size:
                await _skip(reader, size)
            reason = "an empty body (Content-Length: 0)" if not size else \
                f"a body of {size} bytes, over the limit of {MAX_MESSAGE_BYTES} (skipped)"
            protocol.reject(messages.Rejected((messages.error_reply(None, messages.PARSE_ERROR, reason),), reason))
            continue
        try:
            body = await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:  # (the end of a TCP stream)
            body = exc.partial
            stop.set()
        if not body:
            break
        try:
            protocol.receive(body)
        except Exception:  # the server's own failure, not the client's: logged with its traceback
            log.exception("failed to handle a message")


async def _skip(reader: Reader, size: int) -> None:
    left = size
    while left > 0:
        chunk = await reader.readexactly(min(left, 1 << 20))
        if not chunk:
            return
        left -= len(chunk)


def _short(line: bytes) -> str:
    text = repr(line.rstrip(b"\r\n"))
    return text if len(text) <= 60 else text[:57] + "..."


def _reason(exc: BaseException) -> str:
    """What a failed decoding of params says, in one line."""
    from cattrs import transform_error
    from cattrs.errors import ClassValidationError

    if isinstance(exc, ClassValidationError):
        return "; ".join(transform_error(exc))
    cause = exc.__cause__ or exc
    return str(cause).splitlines()[0] if str(cause) else type(cause).__name__


def _grow_pipe(stream: IO[str]) -> None:
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
    from pygls.io_ import StdoutWriter

    stop = server._stop_event = threading.Event()
    _grow_pipe(sys.stdout)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    protocol = server.protocol
    assert isinstance(protocol, PerfProtocol)
    try:
        asyncio.run(serve_messages(stop, MessageReader(sys.stdin.buffer, server.thread_pool), protocol))
    except BrokenPipeError:
        log.error("the connection to the client is lost: shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


def serve_tcp(server: LanguageServer, host: str, port: int) -> None:
    """pygls' `start_tcp` (the same loop and shutdown), saying on stderr which port it bound."""
    stop = server._stop_event = threading.Event()
    protocol = server.protocol
    assert isinstance(protocol, PerfProtocol)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        protocol.set_writer(writer)
        await serve_messages(stop, reader, protocol)
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
