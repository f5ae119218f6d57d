"""An independent LSP client: edit latency of `perflsp serve` measured without perflsp's or pygls' code.

    python benchmarks/lsp_probe.py [--edits 40] [--lines 10000] [--kernels 500] [--opens 5]
                                   [--server "perflsp serve"] [--init-options JSON]

Plain blocking pipes and a reader thread; Content-Length framing written here by hand; nothing
imported from perflsp, pygls, lsprotocol or benchmarks/lsp_latency.py. The only shared piece is
the input: the generated file of benchmarks/generated_cuda.py (>= 500 small kernels, one launched
from `main`), which this client writes to disk and opens.

Measured: first diagnostics after `didOpen` (median of `--opens` opens, each under a new name),
and on each of those opens one edit sent at once after that first publication (the server is
still parsing and analysing the whole file), timed to its version's diagnostics. Then, in one
document opened as an editor opens it (`didOpen`, then `textDocument/codeLens`, which VS Code asks
for at once: it answers when the file's analysis is complete), single-character edits typed
(incremental `didChange`) inside the launched kernel, inside an unlaunched kernel, and in `main`,
each timed to the `publishDiagnostics` of its own version; the server's RSS from /proc at the end.
Edits follow each other as soon as the last one's diagnostics arrive (no pause between them).

Two ways of typing, each in both kernels: a new statement at the start of a body line (`float t =
1.0f;`: until it is complete the kernel does not parse, so most keystrokes change no analysis), and
digits inside a float literal of the kernel (it parses after every keystroke: each one re-analyses
the kernel, the costlier case). The targets are the issue's for both.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generated_cuda import generate, unlaunched_kernel  # noqa: E402

Message = dict[str, Any]


class RawLspClient:
    """JSON-RPC 2.0 over a child's stdin/stdout; notifications land in a queue with arrival times."""

    def __init__(self, argv: list[str], cwd: Path):
        self.child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, cwd=str(cwd))
        self.inbox: queue.Queue[tuple[float, Message] | None] = queue.Queue()
        self.next_id = 0
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    def _read_loop(self) -> None:
        stream = self.child.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    self.inbox.put(None)
                    return
                header = header.strip()
                if not header:
                    break
                name, _, value = header.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is None:
                continue
            body = stream.read(length)
            arrived = time.perf_counter()  # the server's answer is complete; decoding it is the client's time
            self.inbox.put((arrived, json.loads(body)))

    def _write(self, message: Message) -> None:
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        stdin = self.child.stdin
        assert stdin is not None
        stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        stdin.flush()

    def notify(self, method: str, params: Any) -> float:
        sent = time.perf_counter()
        self._write({"jsonrpc": "2.0", "method": method, "params": params})
        return sent

    def request(self, method: str, params: Any, timeout_s: float = 120.0) -> Message:
        self.next_id += 1
        wanted = self.next_id
        self._write({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == wanted and "method" not in m, timeout_s)[1]

    def wait(self, predicate: Any, timeout_s: float = 120.0) -> tuple[float, Message]:
        """The first message matching `predicate`; requests from the server are answered with null."""
        deadline = time.perf_counter() + timeout_s
        while True:
            item = self.inbox.get(timeout=max(0.001, deadline - time.perf_counter()))
            if item is None:
                raise ConnectionError("the server closed its output")
            when, message = item
            if "method" in message and "id" in message:
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
            if predicate(message):
                return when, message

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.child.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        try:
            self.request("shutdown", None, 30)
            self.notify("exit", None)
            self.child.wait(30)
        except (OSError, queue.Empty, ConnectionError, subprocess.TimeoutExpired):
            self.child.kill()


def published(uri: str, version: int) -> Any:
    def predicate(message: Message) -> bool:
        params = message.get("params") or {}
        return (message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri
                and params.get("version") == version)

    return predicate


def open_document(client: RawLspClient, path: Path, text: str) -> float:
    """didOpen -> first publishDiagnostics of version 1, in seconds."""
    uri = path.as_uri()
    sent = client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp",
                                                                   "version": 1, "text": text}})
    arrived, _ = client.wait(published(uri, 1))
    return arrived - sent


def literal_position(lines: list[str], line: int) -> tuple[int, int]:
    """(line, column) just before the `f` of the first float literal (`0.5f`) from `line` on."""
    for number in range(line, min(line + 20, len(lines))):
        found = re.search(r"\d\.\d+f", lines[number])
        if found:
            return number, found.end() - 1
    raise ValueError(f"no float literal below line {line}")


def type_edits(client: RawLspClient, uri: str, line: int, edits: int, version: int,
               literal: bool = False, first_column: int = 0) -> tuple[list[float], int]:
    """Type `edits` characters at `first_column` of `line` (every 8th a backspace): a statement,
    or digits (`literal`); latency per version."""
    typed = "1" if literal else "float t = 1.0f;"
    column = first_column
    latencies: list[float] = []
    for index in range(edits):
        version += 1
        if index % 8 == 7 and column > first_column:
            start, end, text = column - 1, column, ""
            column -= 1
        else:
            start = end = column
            text = typed[(column - first_column) % len(typed)]
            column += 1
        change = {"range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
                  "text": text}
        sent = client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                        "contentChanges": [change]})
        arrived, _ = client.wait(published(uri, version), 60)
        latencies.append(arrived - sent)
    # undo what is left on the line, so the next case starts from the generated text
    if column > first_column:
        version += 1
        change = {"range": {"start": {"line": line, "character": first_column},
                            "end": {"line": line, "character": column}},
                  "text": ""}
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [change]})
        client.wait(published(uri, version), 60)
    return latencies, version


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=40, help="edits per case")
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--kernels", type=int, default=500, help="at least this many kernels")
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--server", default=None, help="server command line (default: perflsp serve of this venv)")
    parser.add_argument("--init-options", default=None, metavar="JSON",
                        help='initializationOptions, e.g. \'{"workspaceTrusted": true, "gpus": ["rtx3080"]}\' '
                             "(compiling on: the background compiles of the open documents run while typing)")
    args = parser.parse_args()

    script = Path(sys.executable).with_name("perflsp")
    argv = shlex.split(args.server) if args.server else (
        [str(script), "serve"] if script.is_file() else [sys.executable, "-m", "perflsp", "serve"])
    generated = generate(lines=args.lines, min_kernels=args.kernels)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "perflsp-probe"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"file: {generated.text.count(chr(10))} lines, {len(generated.kernels)} kernels, "
          f"{generated.launched} launched from main; server: {' '.join(argv)}")

    client = RawLspClient(argv, folder)
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": folder.as_uri(),
                                      "capabilities": {"textDocument": {"publishDiagnostics": {}}},
                                      **({"initializationOptions": json.loads(args.init_options)}
                                         if args.init_options else {})})
        client.notify("initialized", {})
        firsts, at_once = [], []
        launched = generated.body_line(generated.launched)
        for number in range(args.opens + 1):  # the first open also loads the analysis code: not counted
            path = folder / f"probe_{number}.cu"
            path.write_text(generated.text)
            seconds = open_document(client, path, generated.text)
            edit_s, _ = type_edits(client, path.as_uri(), launched, 1, 1)
            if number:
                firsts.append(seconds)
                at_once.append(edit_s[0])
            client.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
        print(f"first diagnostics after didOpen: median of {len(firsts)} opens {statistics.median(firsts) * 1000:.0f} ms "
              f"({', '.join(f'{s * 1000:.0f}' for s in firsts)}; target <= 300)")
        print(f"an edit in the launched kernel at once after those first diagnostics: median "
              f"{statistics.median(at_once) * 1000:.0f} ms ({', '.join(f'{s * 1000:.0f}' for s in at_once)})")
        path = folder / "probe_edit.cu"
        path.write_text(generated.text)
        open_document(client, path, generated.text)
        client.request("textDocument/codeLens", {"textDocument": {"uri": path.as_uri()}})  # as an editor does
        uri, version = path.as_uri(), 1
        lines = generated.text.split("\n")
        unlaunched = generated.body_line(unlaunched_kernel(generated))
        cases = [("launched kernel", (launched, 0), False, 30.0),
                 ("unlaunched kernel", (unlaunched, 0), False, 20.0),
                 ("host code (main)", (generated.host_line, 0), False, 100.0),
                 ("launched, literal", literal_position(lines, launched), True, 30.0),
                 ("unlaunched, literal", literal_position(lines, unlaunched), True, 20.0)]
        for name, (line, column), literal, target in cases:
            latencies, version = type_edits(client, uri, line, args.edits, version, literal, column)
            print(f"{name:<19} {len(latencies)} edits: p50 {percentile(latencies, .5) * 1000:.1f} ms, "
                  f"p95 {percentile(latencies, .95) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms "
                  f"(target p95 <= {target:g})", flush=True)
        print(f"server RSS: {client.rss_mib():.0f} MiB")
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
