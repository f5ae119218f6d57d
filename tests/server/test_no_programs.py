"""The server starts no program of its own: not at start-up, not for a document of an untrusted
workspace whose `.perflsp.toml` sets every setting that would run one. Checked with Python's audit
hooks in the server process (every way Python starts a program raises an audit event); the
same as `strace -f -e trace=execve` shows (docs/server.md)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from tests.server.lsp_session import EXAMPLES
from tests.server.raw_client import RawServer, frame, message

# the server, with a hook that writes every program-starting audit event to stderr
AUDITED = """
import runpy, sys
EVENTS = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "os.fork", "os.forkpty",
          "pty.spawn", "os.startfile")
def hook(event, args):
    if event == "os.exec" and args[0] == sys.executable and list(args[1]) == list(sys.orig_argv) \\
            and args[2].get("PYTHONMALLOC") == "malloc":
        sys.stderr.write("SELF-EXEC with the C allocator\\n")  # the server itself, once (memory.py)
        sys.stderr.flush()
    elif event in EVENTS:
        sys.stderr.write(f"AUDIT {event} {args!r:.300}\\n")
        sys.stderr.flush()
sys.addaudithook(hook)
sys.argv = ["perflsp", "serve"]
runpy.run_module("perflsp", run_name="__main__", alter_sys=True)
"""

UNTRUSTED = """nvccPath = "/bin/true"
resourceUsage = true
[profiling]
enabled = true
buildCommand = ["/bin/true", "{exe}", "{file}"]
[llm]
enabled = true
model = "m"
baseUrl = "https://llm.example.com/v1"
"""


@pytest.mark.asyncio
async def test_the_server_starts_no_program_in_an_untrusted_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".perflsp.toml").write_text(UNTRUSTED)
    source = workspace / "saxpy.cu"
    source.write_text((EXAMPLES / "cuda" / "saxpy.cu").read_text())
    uri = source.as_uri()
    at = {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 20}}
    server = await RawServer.start(tmp_path / "server.log", [sys.executable, "-c", AUDITED], cwd=workspace)
    try:
        server.write(frame(message(id=1, method="initialize", params={
            "rootUri": workspace.as_uri(), "capabilities": {"workspace": {"configuration": False}}})))
        await server.replies({1})
        server.write(frame(message(method="initialized", params={})))
        server.write(frame(message(method="textDocument/didOpen", params={"textDocument": {
            "uri": uri, "languageId": "cuda-cpp", "version": 1, "text": source.read_text()}})))
        requests = {
            2: ("textDocument/diagnostic", {"textDocument": {"uri": uri}}),
            3: ("textDocument/hover", at),
            4: ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": at["position"],
                                            "end": at["position"]}, "context": {"diagnostics": []}}),
            5: ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
            6: ("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}}),
            7: ("workspace/executeCommand", {"command": "perflsp.profileKernel",
                                             "arguments": [{"uri": uri, "kernel": "saxpy", "quiet": True}]}),
        }
        for request_id, (method, params) in requests.items():
            server.write(frame(message(id=request_id, method=method, params=params)))
        got = await server.replies(set(requests), timeout=120)
        assert all("result" in got[i] for i in requests), json.dumps([got[i] for i in requests])[:2000]
        assert got[7]["result"]["status"] == "disabled"
        server.write(frame(message(method="textDocument/didSave", params={"textDocument": {"uri": uri}})))
        server.write(frame(message(id=8, method="workspace/executeCommand", params={
            "command": "perflsp.status", "arguments": [{}]})))
        await server.replies({8})
        await asyncio.sleep(0.5)  # (a program started on save would be started by now)
        assert await server.stop() == 0
    finally:
        if server.process.returncode is None:
            server.process.kill()
    log = server.log.read_text(errors="replace")
    assert "AUDIT" not in log, "\n".join(line for line in log.splitlines() if "AUDIT" in line)
    assert log.count("SELF-EXEC") == 1  # `perflsp serve` re-executes itself with PYTHONMALLOC=malloc, once
    assert "Traceback" not in log, log
