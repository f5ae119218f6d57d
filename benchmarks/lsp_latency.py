"""LSP latency of the real server (a subprocess over stdio, driven by a raw JSON-RPC client).

    python benchmarks/lsp_latency.py [SRC_DIR] [--labels CSV] [--edits 200] [--lines 10000]

Measures, in one run:
- initialize: spawn -> `initialize` answered, perflsp vs a minimal pygls server (median of 5 each,
  alternating); target: perflsp within 1.3x of the minimal server;
- first diagnostics: `didOpen` of a ~10,000-line CUDA file generated from examples/cuda (each
  example in its own namespace) -> its first `publishDiagnostics`; target <= 300 ms;
- edit latency: `--edits` single-character edits typed inside one kernel in the middle of that
  file, each `didChange` -> `publishDiagnostics` for that version (p50, p95, max); target p95 <= 50 ms;
- the hard case (issue 13): a generated file of >= 500 small kernels in about 10,000 lines, ONE
  launched from `main` (benchmarks/generated_cuda.py): first diagnostics after `didOpen` (median
  of 5 opens), then, in a document opened as an editor opens it (`didOpen`, then
  `textDocument/codeLens`, answered once the file's analysis is complete), `--hard-edits`
  single-character edits typed back to back in each of three places -- inside
  the launched kernel, inside an unlaunched kernel, in `main` -- each `didChange` (incremental) ->
  `publishDiagnostics` of that version (p50, p95, max), and the server's RSS; targets p95 <= 30 ms
  (launched), <= 20 ms (unlaunched), <= 100 ms (host code), first diagnostics <= 300 ms; then the
  same in both kernels typing digits inside a float literal (the kernel parses after every
  keystroke, so each one re-analyses it: the costlier way of typing), same targets;
- RSS of the server after opening every file of the labeled benchmark sources (SRC_DIR, default
  $PERFLSP_EVAL_SRC or /work/data/src; with --labels only the folders named in its `target`
  column) and waiting for all their diagnostics.

`--only-hard` runs the hard case alone. benchmarks/lsp_probe.py measures the same hard case with a
client that shares no code with this one.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generated_cuda import generate, unlaunched_kernel  # noqa: E402

MINIMAL_SERVER = "from pygls.lsp.server import LanguageServer; LanguageServer('minimal', '0').start_io()"
_LABELS_NAME = Path("shared") / "eval" / "rtx3080-roofline-dev.csv"
DEFAULT_LABELS = Path(os.environ["PERFLSP_EVAL_LABELS"]) if os.environ.get("PERFLSP_EVAL_LABELS") else next(
    (base / _LABELS_NAME for base in (ROOT.parent, ROOT.parent.parent) if (base / _LABELS_NAME).is_file()),
    ROOT.parent / _LABELS_NAME)


class Client:
    """Content-Length framed JSON-RPC over a subprocess' stdio."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.listeners: list[Any] = []
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, *argv: str, stderr: Any = asyncio.subprocess.DEVNULL) -> tuple[Client, float]:
        """The server `argv` (its log to `stderr`: a file object, or discarded)."""
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                       stderr=stderr, env=env, cwd=str(ROOT), limit=1 << 24)
        return cls(process), started

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while True:
                line = await stdout.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await stdout.readexactly(length)
            now = time.perf_counter()  # the server's answer is complete; decoding it is the client's time
            message = json.loads(body)
            if "id" in message and "method" not in message:
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
            elif "id" in message and "method" in message:  # a request from the server
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                for listener in list(self.listeners):
                    listener(message, now)
            else:
                for listener in list(self.listeners):
                    listener(message, now)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any) -> Any:
        msg_id = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = future
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, predicate: Any) -> asyncio.Future[float]:
        """Future of the arrival time of the first notification matching `predicate`."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        def listener(message: dict[str, Any], when: float) -> None:
            if not future.done() and predicate(message):
                future.set_result(when)
                self.listeners.remove(listener)

        self.listeners.append(listener)
        return future

    async def initialize(self, root: Path | None = None, wait_ready: bool = False,
                         capabilities: dict[str, Any] | None = None) -> None:
        ready = self.wait_for(lambda m: m.get("method") == "perflsp/status") if wait_ready else None
        await self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri() if root else None,
                                          "capabilities": capabilities or {"textDocument": {"publishDiagnostics": {}}}})
        self.notify("initialized", {})
        if ready is not None:  # perflsp says it is ready (settings read, analysis code loaded)
            await asyncio.wait_for(ready, 120)

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 30)
            self.notify("exit", None)
            await asyncio.wait_for(self.process.wait(), 30)
        except (TimeoutError, ConnectionError, BrokenPipeError):
            self.process.kill()
        self.reader.cancel()


def diagnostics_of(uri: str, version: int | None = None) -> Any:
    def predicate(message: dict[str, Any]) -> bool:
        if message.get("method") != "textDocument/publishDiagnostics":
            return False
        params = message["params"]
        return params["uri"] == uri and (version is None or params.get("version") == version)

    return predicate


# --------------------------------------------------------------------------- the big file


def generate_big_file(lines: int) -> str:
    """Concatenate examples/cuda/*.cu, each copy in its own namespace, to about `lines` lines."""
    sources = sorted((ROOT / "examples" / "cuda").glob("*.cu"))
    header = "#include <cstdio>\n#include <cmath>\n#include <vector>\n#include \"check.cuh\"\n"
    parts = [header]
    count = header.count("\n")
    for copy in itertools.count():
        for source in sources:
            text = "\n".join(row for row in source.read_text().splitlines() if not row.startswith("#include"))
            text = re.sub(r"\bint main\(\)", f"int main_{copy}()", text)
            block = f"namespace copy{copy} {{\n{text}\n}}  // namespace copy{copy}\n"
            parts.append(block)
            count += block.count("\n")
            if count >= lines:
                return "".join(parts)
    raise AssertionError("unreachable")


def kernel_body_line(text: str) -> int:
    """A line inside a kernel body near the middle of the file (0-based)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("__global__")]
    middle = starts[len(starts) // 2]
    for i in range(middle, len(lines)):
        if lines[i].startswith("{"):
            return i + 1
    raise AssertionError("no kernel body")


# --------------------------------------------------------------------------- measurements


async def initialize_time(argv: list[str]) -> float:
    client, started = await Client.start(*argv)
    await client.initialize()
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def cold_first_diagnostics(big: Path, text: str) -> float:
    """Spawn -> initialize -> didOpen at once -> first publishDiagnostics (imports included)."""
    client, started = await Client.start(sys.executable, "-m", "perflsp", "serve")
    uri = big.as_uri()
    first = client.wait_for(diagnostics_of(uri, 1))
    await client.initialize(big.parent)
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1,
                                                            "text": text}})
    elapsed = await asyncio.wait_for(first, 120) - started
    await client.close()
    return elapsed


async def edit_latency(big: Path, text: str, edits: int) -> tuple[float, list[float]]:
    client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve")
    await client.initialize(big.parent, wait_ready=True)
    # first diagnostics: opened under five names (each a new document), median of the five
    firsts = []
    for copy in range(1, 6):
        other = big.with_name(f"{big.stem}_copy{copy}{big.suffix}")
        other.write_text(text)
        other_uri = other.as_uri()
        first = client.wait_for(diagnostics_of(other_uri, 1))
        opened = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": other_uri, "languageId": "cuda-cpp",
                                                                "version": 1, "text": text}})
        firsts.append(await asyncio.wait_for(first, 120) - opened)
        await asyncio.wait_for(client.request("textDocument/codeLens", {"textDocument": {"uri": other_uri}}), 120)
        client.notify("textDocument/didClose", {"textDocument": {"uri": other_uri}})
        other.unlink()
    first_s = statistics.median(firsts)
    print(f"first diagnostics of each of 5 opens: {', '.join(f'{x * 1000:.0f}' for x in firsts)} ms")
    uri = big.as_uri()
    first = client.wait_for(diagnostics_of(uri, 1))
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1,
                                                            "text": text}})
    await asyncio.wait_for(first, 120)
    # the analysis of the opened file completes (the first publication may be partial) before typing:
    # a code lens request is answered from the complete analysis
    await asyncio.wait_for(client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), 120)
    line = kernel_body_line(text)
    typed = "    float extra = acc * 2.0f + 1.0f;  // tuning\n"
    column = 0
    latencies = []
    version = 1
    for index in range(edits):
        version += 1
        if index % 10 == 9 and column > 0:  # a backspace now and then
            change = {"range": {"start": {"line": line, "character": column - 1}, "end": {"line": line, "character": column}},
                      "text": ""}
            column -= 1
        else:
            ch = typed[index % len(typed)]
            change = {"range": {"start": {"line": line, "character": column}, "end": {"line": line, "character": column}},
                      "text": ch}
            if ch == "\n":
                line, column = line + 1, 0
            else:
                column += 1
        published = client.wait_for(diagnostics_of(uri, version))
        sent = time.perf_counter()
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [change]})
        latencies.append(await asyncio.wait_for(published, 60) - sent)
    await client.close()
    return first_s, latencies


# --------------------------------------------------------------------------- the hard case

HARD_TARGETS_MS = {"launched kernel": 30.0, "unlaunched kernel": 20.0, "host code (main)": 100.0,
                   "launched, literal": 30.0, "unlaunched, literal": 20.0}


@dataclass
class HardCase:
    lines: int
    kernels: int
    launched: str
    first_s: list[float] = field(default_factory=list)  # first diagnostics after each counted didOpen
    latencies_s: dict[str, list[float]] = field(default_factory=dict)  # per case, one per edit
    rss_mib: float | None = None

    def report(self) -> list[str]:
        rows = [f"hard case: {self.lines} lines, {self.kernels} kernels, only {self.launched} launched (from main)",
                f"  first diagnostics after didOpen: median of {len(self.first_s)} opens "
                f"{statistics.median(self.first_s) * 1000:.0f} ms ({', '.join(f'{x * 1000:.0f}' for x in self.first_s)}; "
                "target <= 300)"]
        for name, values in self.latencies_s.items():
            rows.append(f"  {name:<18} {len(values)} edits: p50 {percentile(values, .5) * 1000:.1f} ms, "
                        f"p95 {percentile(values, .95) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms "
                        f"(target p95 <= {HARD_TARGETS_MS[name]:g})")
        if self.rss_mib is not None:
            rows.append(f"  server RSS after the edits: {self.rss_mib:.0f} MiB")
        return rows


def _literal_at(text: str, line: int) -> tuple[int, int]:
    """(line, column) just before the `f` of the first float literal (`0.5f`) from `line` on."""
    lines = text.split("\n")
    for number in range(line, min(line + 20, len(lines))):
        found = re.search(r"\d\.\d+f", lines[number])
        if found:
            return number, found.end() - 1
    raise ValueError(f"no float literal below line {line}")


async def _type_at(client: Client, uri: str, line: int, edits: int, version: int,
                   first_column: int = 0, literal: bool = False) -> tuple[list[float], int]:
    """Type `edits` characters at `first_column` of `line` (every 8th a backspace), then delete
    what is left: a statement (the kernel does not parse until it is complete), or digits inside
    a float literal (`literal`: the kernel parses after every keystroke, each re-analyses it)."""
    typed = "1" if literal else "int t = 3 * 7;"
    column = first_column
    latencies = []
    for index in range(edits):
        version += 1
        if index % 8 == 7 and column > first_column:
            start, end, text = column - 1, column, ""
            column -= 1
        else:
            start, end, text = column, column, typed[(column - first_column) % len(typed)]
            column += 1
        change = {"range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
                  "text": text}
        published = client.wait_for(diagnostics_of(uri, version))
        sent = time.perf_counter()
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [change]})
        latencies.append(await asyncio.wait_for(published, 60) - sent)
    if column > first_column:
        version += 1
        published = client.wait_for(diagnostics_of(uri, version))
        change = {"range": {"start": {"line": line, "character": first_column},
                            "end": {"line": line, "character": column}}, "text": ""}
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [change]})
        await asyncio.wait_for(published, 60)
    return latencies, version


async def hard_case(folder: Path, lines: int = 10_000, kernels: int = 500, edits: int = 40, opens: int = 5) -> HardCase:
    """The generated many-kernel file: first diagnostics, then edits in three places (see the docstring)."""
    generated = generate(lines=lines, min_kernels=kernels)
    text = generated.text
    result = HardCase(text.count("\n"), len(generated.kernels), generated.launched)
    folder.mkdir(parents=True, exist_ok=True)
    client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve")
    await client.initialize(folder, wait_ready=True)
    for number in range(opens + 1):  # open 0 warms the analysis code up: not counted
        path = folder / f"hard_{number}.cu"
        path.write_text(text)
        uri = path.as_uri()
        first = client.wait_for(diagnostics_of(uri, 1))
        opened = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1,
                                                                "text": text}})
        seconds = await asyncio.wait_for(first, 120) - opened
        if number:
            result.first_s.append(seconds)
        await asyncio.wait_for(client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), 120)
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        path.unlink()
    path = folder / "hard_edit.cu"
    path.write_text(text)
    uri = path.as_uri()
    first = client.wait_for(diagnostics_of(uri, 1))
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1,
                                                            "text": text}})
    await asyncio.wait_for(first, 120)
    await asyncio.wait_for(client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}), 120)
    version = 1
    launched = generated.body_line(generated.launched)
    unlaunched = generated.body_line(unlaunched_kernel(generated))
    places = {"launched kernel": ((launched, 0), False),
              "unlaunched kernel": ((unlaunched, 0), False),
              "host code (main)": ((generated.host_line, 0), False),
              "launched, literal": (_literal_at(text, launched), True),
              "unlaunched, literal": (_literal_at(text, unlaunched), True)}
    for name, ((line, column), literal) in places.items():
        result.latencies_s[name], version = await _type_at(client, uri, line, edits, version, column, literal)
    result.rss_mib = rss_mib(client.process.pid)
    await client.close()
    path.unlink()
    return result


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def rss_after_opening(src: Path, labels: Path | None) -> tuple[int, float | None, float | None]:
    from perflsp.source.files import iter_source_paths

    folders = [src]
    if labels is not None and labels.is_file():
        with labels.open(newline="") as fh:
            folders = sorted({src / row["target"] for row in csv.DictReader(fh)} )
        folders = [f for f in folders if f.is_dir()]
    files = [p for p in iter_source_paths(folders) if isinstance(p, Path)]
    client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve")
    await client.initialize(src, wait_ready=True)
    baseline = rss_mib(client.process.pid)
    waiting = []
    for path in files:
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        uri = path.as_uri()
        waiting.append(client.wait_for(diagnostics_of(uri)))
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1,
                                                                "text": text}})
    await asyncio.wait_for(asyncio.gather(*waiting), 1800)
    rss = rss_mib(client.process.pid)
    await client.close()
    return len(waiting), baseline, rss


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", default=os.environ.get("PERFLSP_EVAL_SRC", "/work/data/src"))
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS if DEFAULT_LABELS.is_file() else None)
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--skip-rss", action="store_true")
    ap.add_argument("--hard-edits", type=int, default=40, help="edits per place in the hard case")
    ap.add_argument("--only-hard", action="store_true", help="run only the hard case")
    args = ap.parse_args()

    bench_folder = Path(os.environ.get("TMPDIR", "/tmp")) / "perflsp-bench"
    hard = await hard_case(bench_folder, edits=args.hard_edits)
    print("\n".join(hard.report()), flush=True)
    if args.only_hard:
        return

    ours, minimal = [], []
    for _ in range(5):
        minimal.append(await initialize_time([sys.executable, "-c", MINIMAL_SERVER]))
        ours.append(await initialize_time([sys.executable, "-m", "perflsp", "serve"]))
    ours_s, minimal_s = statistics.median(ours), statistics.median(minimal)
    print(f"initialize: perflsp {ours_s * 1000:.0f} ms, minimal pygls {minimal_s * 1000:.0f} ms "
          f"(ratio {ours_s / minimal_s:.2f}, target <= 1.3)")

    text = generate_big_file(args.lines)
    big = bench_folder / "big.cu"
    big.parent.mkdir(parents=True, exist_ok=True)
    big.write_text(text)
    (big.parent / "check.cuh").write_text((ROOT / "examples" / "cuda" / "check.cuh").read_text())
    first_s, latencies = await edit_latency(big, text, args.edits)
    print(f"big file: {text.count(chr(10))} lines, first diagnostics after didOpen: median of 5 opens "
          f"{first_s * 1000:.0f} ms (target <= 300; server ready)")
    cold = await cold_first_diagnostics(big, text)
    print(f"cold start: spawn -> first diagnostics of the big file {cold * 1000:.0f} ms (initialize, settings, "
          "loading the analysis code included)")
    print(f"didChange -> publishDiagnostics over {len(latencies)} edits: p50 {percentile(latencies, .5) * 1000:.1f} ms, "
          f"p95 {percentile(latencies, .95) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms (target p95 <= 50)")

    if not args.skip_rss:
        src = Path(args.src)
        if not src.is_dir():
            print(f"RSS: skipped ({src} is not a folder; pass SRC_DIR or set PERFLSP_EVAL_SRC)")
            return
        count, baseline, rss = await rss_after_opening(src, args.labels)
        print(f"RSS after opening {count} files of {src}"
              f"{' (labeled folders)' if args.labels else ''}: {rss:.0f} MiB (after initialize: {baseline:.0f} MiB)")


if __name__ == "__main__":
    asyncio.run(main())
