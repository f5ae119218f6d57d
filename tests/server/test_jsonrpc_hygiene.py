"""JSON-RPC hygiene end to end: malformed frames, sent raw to `perflsp serve`, get the spec's error
codes (every request id answered), and each client mistake is one line in the server's log,
never a traceback; the server answers well-formed requests afterwards."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.raw_client import RawServer, frame, message

HOVER = {"textDocument": {"uri": "file:///nowhere/a.cu"}, "position": {"line": 0, "character": 0}}


@pytest.mark.asyncio
async def test_malformed_frames_get_the_specs_errors_and_one_log_line_each(tmp_path):
    server = await RawServer.start(tmp_path / "server.log")
    try:
        server.write(frame(message(id=1, method="textDocument/hover", params=HOVER)))  # before initialize
        assert (await server.replies({1}))[1]["error"]["code"] == -32002
        server.write(frame(message(id=2, method="initialize", params={"capabilities": {}})))
        assert "capabilities" in (await server.replies({2}))[2]["result"]
        server.write(frame(message(method="initialized", params={})))

        hover_bad_utf8 = message(id=10, method="textDocument/hover", params=HOVER).replace(b"a.cu", b"a\xff.cu")
        status = {"command": "perflsp.status", "arguments": [{}]}
        frames = [
            frame(hover_bad_utf8),  # invalid UTF-8 in a request: parse error with its id
            frame(b"\xff\xfe not utf-8"),  # nothing readable: parse error, id null
            frame(b'{"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": {'),  # cut short: null
            frame(json.dumps([{"jsonrpc": "2.0", "id": 11, "method": "textDocument/hover", "params": HOVER},
                              {"jsonrpc": "2.0", "id": 12, "method": "workspace/executeCommand", "params": status},
                              {"jsonrpc": "2.0", "method": "initialized", "params": {}}]).encode()),  # a batch
            frame(b"[]"),  # an empty batch: null
            frame(b"42"),  # not an object: null
            frame(json.dumps({"id": 13, "method": "textDocument/hover", "params": HOVER}).encode()),  # no jsonrpc
            frame(json.dumps({"jsonrpc": "1.0", "id": 14, "method": "textDocument/hover", "params": HOVER}).encode()),
            frame(message(id=15, method=5, params={})),  # method not a string
            frame(message(id={"a": 1}, method="textDocument/hover", params=HOVER)),  # id an object: null
            frame(message(id=None, method="textDocument/hover", params=HOVER)),  # id null on a request: null
            frame(message(id=16, method="textDocument/hover", params=5)),  # params not structured
            frame(message(id=17, method="textDocument/hover", params={"textDocument": 5})),  # params of the wrong shape
            frame(message(id=18, method="perflsp/noSuchMethod", params={})),  # unknown method
            frame(message(method="perflsp/noSuchNotification", params={})),  # unknown notification: no reply
            frame(message(method="textDocument/didChange", params={"oops": True})),  # bad notification: no reply
            frame(message(id=19, method="workspace/executeCommand",
                          params={"command": "perflsp.explainKernel", "arguments": [42]})),  # bad command argument
            frame(message(id=20, method="initialized", params={})),  # a notification sent with an id
            frame(message(id=999, result=None)),  # a response to no request: no reply
            frame(message(id=21)),  # an id, no method, no result: an invalid request
            frame(message(id=22, method="textDocument/hover", params=HOVER), length=b"abc"),  # no usable length
            frame(b"", length=b"0"),  # an empty body: null
            frame(message(id=23, method="textDocument/hover", params=HOVER), length=b"10"),  # too short: null
        ]
        for data in frames:
            server.write(data)
        server.write(frame(message(id=30, method="workspace/executeCommand", params=status)))  # still answering
        nulls = 8  # garbage, cut short, [], 42, object id, null id, Content-Length 0, too short
        got = await server.replies({10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30}, nulls)
        codes = {key: got[key]["error"]["code"] for key in range(10, 30) if key in got}
        assert codes == {10: -32700, 11: -32600, 12: -32600, 13: -32600, 14: -32600, 15: -32600, 16: -32600,
                         17: -32602, 18: -32601, 19: -32602, 20: -32600, 21: -32600}
        assert sorted(r["error"]["code"] for r in got[None]) == [-32700] * 4 + [-32600] * 4
        assert "hover" in got[17]["error"]["message"] and "UTF-8" in got[10]["error"]["message"]
        assert "batch" in got[11]["error"]["message"]
        assert got[30]["result"]["ready"] is True
        assert 22 not in got and 23 not in got  # (their bodies could not be framed: nothing to answer)

        server.write(frame(message(id=40, method="shutdown")))
        await server.replies({40})
        server.write(frame(message(id=41, method="textDocument/hover", params=HOVER)))  # after shutdown
        assert (await server.replies({41}))[41]["error"]["code"] == -32600
        server.write(frame(message(method="exit")))
        assert await asyncio.wait_for(server.process.wait(), 30) == 0
    finally:
        if server.process.returncode is None:
            server.process.kill()
            await server.process.wait()
        server.reader.cancel()

    log = server.log.read_text(errors="replace")
    assert "Traceback" not in log, log
    # one line per mistake: every line of the log is a record (starts with its date), none a continuation
    lines = [line for line in log.splitlines() if line.strip()]
    assert all(line[:2] == "20" for line in lines), log
    assert sum("client message rejected" in line for line in lines) >= 20


@pytest.mark.asyncio
async def test_a_failing_command_cancelled_by_the_client_leaves_no_traceback(tmp_path):
    """The command's error after its request was cancelled is read, not left to asyncio (which
    logged it as 'Task exception was never retrieved', with a traceback)."""
    server = await RawServer.start(tmp_path / "server.log")
    try:
        server.write(frame(message(id=1, method="initialize", params={"capabilities": {}})))
        await server.replies({1})
        server.write(frame(message(method="initialized", params={})))
        explain = {"command": "perflsp.explainKernel", "arguments": ["file:///nowhere/a.cu", "no_such_kernel"]}
        for request in range(10, 20):
            server.write(frame(message(id=request, method="workspace/executeCommand", params=explain)))
            server.write(frame(message(method="$/cancelRequest", params={"id": request})))
        got = await server.replies(set(range(10, 20)))
        assert all("error" in got[request] for request in range(10, 20)), got  # cancelled, or the command's error
        server.write(frame(message(id=30, method="shutdown")))
        await server.replies({30})
        server.write(frame(message(method="exit")))
        assert await asyncio.wait_for(server.process.wait(), 30) == 0
    finally:
        if server.process.returncode is None:
            server.process.kill()
            await server.process.wait()
        server.reader.cancel()
    log = server.log.read_text(errors="replace")
    assert "Traceback" not in log and "never retrieved" not in log, log
