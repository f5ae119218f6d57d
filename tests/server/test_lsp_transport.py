"""`perflsp serve`: stdio (default, `--stdio`), `--tcp HOST:PORT`, logs on stderr only."""

import asyncio
import json
import re
import subprocess
import sys

import pytest

from tests.server.lsp_session import ROOT, server_env, session


async def read_message(reader: asyncio.StreamReader) -> dict:
    length = 0
    while True:
        line = await reader.readline()
        assert line, "connection closed"
        if line.strip() == b"":
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(await reader.readexactly(length))


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.asyncio
async def test_tcp():
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "perflsp", "serve", "--tcp", "127.0.0.1:0", "--log-level", "info",
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=server_env(), cwd=str(ROOT))
    try:
        port = None
        while port is None:
            line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
            assert line, "the server exited"
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else None
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}))
        response = await asyncio.wait_for(read_message(reader), 60)
        assert response["result"]["serverInfo"]["name"] == "perflsp"
        writer.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        while (await asyncio.wait_for(read_message(reader), 60)).get("id") != 2:
            pass
        writer.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        await writer.drain()
        await asyncio.wait_for(process.wait(), 30)
        assert await process.stdout.read() == b""  # nothing but the socket carries the protocol
    finally:
        if process.returncode is None:
            process.kill()


@pytest.mark.asyncio
async def test_stdio_flag_and_logs_on_stderr(tmp_path):
    async with session(tmp_path, init_options={"logLevel": "debug"}, args=("--stdio", "--log-level", "debug")) as s:
        assert s.statuses[-1]["ready"]
        assert any("ready" in m.message for m in s.client.log_messages)  # window/logMessage


def test_bad_arguments():
    result = subprocess.run([sys.executable, "-m", "perflsp", "serve", "--tcp", "nonsense"], capture_output=True,
                            text=True, env=server_env(), cwd=ROOT)
    assert result.returncode == 2 and "HOST:PORT" in result.stderr and result.stdout == ""
    result = subprocess.run([sys.executable, "-m", "perflsp", "serve", "--stdio", "--tcp", "1.2.3.4:5"],
                            capture_output=True, text=True, env=server_env(), cwd=ROOT)
    assert result.returncode == 2 and "not both" in result.stderr
    help_text = subprocess.run([sys.executable, "-m", "perflsp", "serve", "--help"], capture_output=True, text=True,
                               env=server_env(), cwd=ROOT).stdout
    assert "--stdio" in help_text and "--tcp" in help_text


@pytest.mark.asyncio
async def test_the_message_loop_frames_messages_as_pygls_does():
    # `serve_messages` reading through `MessageReader` (a message in one thread job) must frame
    # valid input exactly as pygls' loop and reader do: extra headers, a header it does not take
    # as the length, a message split across writes, a body of non-ASCII text, a cut-off end
    import io
    import threading

    from pygls.io_ import StdinAsyncReader, run_async

    from perflsp.server.protocol import MessageReader, serve_messages

    body = json.dumps({"jsonrpc": "2.0", "method": "x/é", "params": {"text": "𝄞 ü"}}).encode()
    stream = (frame({"jsonrpc": "2.0", "method": "a", "params": {}})
              + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
              + b"Content-Length: %d\r\n\r\n" % len(body) + body
              + b"content-length: 5\r\nContent-Length: 2\r\n\r\n{}"
              + frame({"jsonrpc": "2.0", "id": 1, "method": "b", "params": [1, 2]})
              + b"Content-Length: 40\r\n\r\n{\"jsonrpc\"")

    class Recorder:
        def __init__(self):
            self.seen = []
            self.errors = []

        def structure_message(self, data):  # (pygls' loop)
            return data

        def handle_message(self, message):
            self.seen.append(message)

        def receive(self, body):  # (ours)
            try:
                self.seen.append(json.loads(body))
            except ValueError as exc:
                self.errors.append(type(exc).__name__)

        def reject(self, rejected):
            self.errors.append(rejected.reason)

    pygls_side = Recorder()
    await run_async(stop_event=threading.Event(), reader=StdinAsyncReader(io.BytesIO(stream), None),
                    protocol=pygls_side, error_handler=lambda exc, kind: pygls_side.errors.append(type(exc).__name__))
    ours = Recorder()
    await serve_messages(threading.Event(), MessageReader(io.BytesIO(stream), None), ours)
    assert ours.seen == pygls_side.seen and ours.errors == pygls_side.errors == ["JSONDecodeError"]
    assert [m.get("method") for m in ours.seen] == ["a", "x/é", None, "b"]
