"""Random interleavings against the real server: edits, opens, closes, saves and every request
kind, checked against a fresh server.

    python benchmarks/lsp_fuzz.py [SRC_DIR] [--edits 10000] [--seed 1] [--projects 6] [--open 8]

Copies a few whole projects of SRC_DIR (folders of C/C++/CUDA sources of at most 60 KB, default
examples/) and a generated many-kernel file (analysed in many steps: a close can meet a step in
flight) into a temporary workspace, starts `perflsp serve` there with a raw JSON-RPC client, and
until `--edits` edits were sent, in bursts of 1-30 actions with short random pauses between:

- random edits of open documents (tokens, lines, braces, quotes, comments, pragmas, non-ASCII,
  deletions anywhere), with or without a range (a whole-text replacement now and then);
- opens (a closed file again, from its text on disk), closes (also right after an open or in the
  middle of a burst of edits), saves;
- requests of every kind: hover, code action, inlay hint, code lens, pulled diagnostics, and each
  `perflsp.*` command (some with arguments that do not fit: their answer is an error), at random
  positions (some past the end of the text), 5% cancelled at once.

Then every open document's exact diagnostics (`textDocument/diagnostic`) are compared with those
of a fresh server that opens the final texts. Prints: actions sent, answers per method, crashes
(the server died, a request got no answer in 120 s, or an internal error -32603), stale results
(within one open of a document its published version went back, a closed document got
diagnostics after the clearing publication that answers its close, or final diagnostics differ
from the fresh server's; publications of an earlier open still in flight when the client closed
and reopened the document are told apart by that clearing publication), and the tracebacks in the
server's log. Target (issue 28): >= 10,000 edits, 0 crashes, 0 stale, 0 tracebacks.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generated_cuda import generate  # noqa: E402
from benchmarks.lsp_latency import Client  # noqa: E402

SUFFIXES = (".cu", ".cpp", ".cc", ".c", ".h", ".cuh", ".hpp")
SNIPPETS = [" ", "x", "1", "+", ";", "\n", "\r\n", "{", "}", "(", ")", "[", "]", '"', "'", "/*", "*/", "//", "\\",
            "é", "𝄞", "ü", "\t", "0.5", "2.0", "1.0f", "pow(x, 2.0)", "<<<", ">>>", "__global__ ", "__device__ ",
            "__syncthreads();\n", "float t = 0.0f;\n", "double d = 1.0;\n", "#define N 64\n", "#if 0\n", "#endif\n",
            "#pragma omp target teams distribute parallel for\n", "#pragma unroll\n", "k<<<n / 256, 256>>>(n);",
            "for (int j = 0; j < 8; ++j) ", "template <typename T> ", "// note\n", "\n\n\n"]
METHODS = ("textDocument/hover", "textDocument/codeAction", "textDocument/inlayHint", "textDocument/codeLens",
           "textDocument/diagnostic", "workspace/executeCommand")
COMMANDS = ("perflsp.explainKernel", "perflsp.profileKernel", "perflsp.askLaunchParameters", "perflsp.listGpus",
            "perflsp.setGpus", "perflsp.rooflineData", "perflsp.status", "perflsp.importProfile",
            "perflsp.verifyLaunchParameters", "perflsp.tuneKernel", "perflsp.importTuningCache",
            "perflsp.cancelTuning")
CLIENT_ERRORS = (-32602, -32800, -32801)  # invalid params (a command's bad argument), cancelled, modified
KERNEL = re.compile(r"__global__\s+(?:\w+\s+)*?(\w+)\s*\(")
DEFAULT_GPU = "h100-sxm5-80gb"


# --------------------------------------------------------------------------- documents


class Doc:
    def __init__(self, path: Path):
        self.path = path
        self.uri = path.as_uri()
        self.text = ""
        self.version = 0
        self.open = False
        self.closes = 0  # didClose sent
        self.clears = 0  # clearing publications (no version, no diagnostics) received: one per close
        self.published_version: int | None = None  # newest version published in this open

    def position(self, offset: int) -> dict[str, int]:
        before = self.text[:offset]
        line = before.count("\n")
        start = before.rfind("\n") + 1
        return {"line": line, "character": len(before[start:].encode("utf-16-le")) // 2}

    def boundary(self, offset: int) -> int:
        """Never between the CR and LF of a line break (no client points there)."""
        text = self.text
        return offset - 1 if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n" else offset

    def random_change(self, rng: random.Random) -> dict[str, Any]:
        if rng.random() < 0.005:  # a whole-text replacement (no range)
            self.text = self.text + rng.choice(SNIPPETS)
            return {"text": self.text}
        size = len(self.text)
        start = self.boundary(rng.randrange(size + 1))
        if rng.random() < 0.6 or size < 50:
            end, new = start, rng.choice(SNIPPETS)
        else:
            end, new = self.boundary(min(size, start + rng.randint(1, 12))), ""
        change = {"range": {"start": self.position(start), "end": self.position(end)}, "text": new}
        self.text = self.text[:start] + new + self.text[end:]
        return change

    def random_position(self, rng: random.Random) -> dict[str, int]:
        lines = self.text.count("\n") + 1
        return {"line": rng.randrange(lines + 3), "character": rng.randrange(0, 90)}  # (some past the end)

    def kernel_name(self, rng: random.Random) -> str:
        names = KERNEL.findall(self.text)
        return rng.choice(names) if names and rng.random() < 0.9 else "no_such_kernel"


def workspace(src: Path | None, projects: int, seed: int) -> tuple[Path, list[Path]]:
    """A temporary folder: `projects` whole project folders of `src` and a generated file."""
    folder = Path(tempfile.mkdtemp(prefix="perflsp-fuzz-"))
    rng = random.Random(seed)
    files: list[Path] = []
    if src is not None and src.is_dir():
        candidates = sorted(d for d in src.iterdir() if d.is_dir())
        rng.shuffle(candidates)
        taken = 0
        for project in candidates:
            sources = [p for p in project.iterdir() if p.suffix in SUFFIXES and p.is_file()]
            if not sources or len(sources) > 12 or any(p.stat().st_size > 60_000 for p in sources):
                continue
            shutil.copytree(project, folder / project.name, ignore=shutil.ignore_patterns("*.o", "*.bin", "*.dat"))
            files += sorted((folder / project.name / p.name) for p in sources)
            taken += 1
            if taken == projects:
                break
    if not files:
        for example in sorted((ROOT / "examples").rglob("*")):
            if example.suffix in SUFFIXES and example.is_file():
                target = folder / example.relative_to(ROOT / "examples")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(example, target)
                files.append(target)
    many = folder / "many_kernels.cu"
    many.write_text(generate(lines=3000, min_kernels=150, launch_every=10).text)
    files.append(many)
    return folder, files


# --------------------------------------------------------------------------- the run


class Fuzz:
    def __init__(self, client: Client, docs: list[Doc], rng: random.Random, folder: Path):
        self.client, self.docs, self.rng, self.folder = client, docs, rng, folder
        self.by_uri = {d.uri: d for d in docs}
        self.counts: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.crashes: list[str] = []
        self.stale: list[str] = []
        self.client_errors = 0
        self.tasks: list[asyncio.Task[None]] = []
        client.listeners.append(self._published)

    def _published(self, message: dict[str, Any], _when: float) -> None:
        if message.get("method") != "textDocument/publishDiagnostics":
            return
        params = message["params"]
        doc = self.by_uri.get(params["uri"])
        if doc is None:
            return
        version = params.get("version")
        diagnostics = params["diagnostics"]
        if version is None and not diagnostics and doc.clears < doc.closes:
            doc.clears += 1  # (the server answers each close with one, in order)
            return
        if doc.clears < doc.closes:
            # the server has not handled the last close yet: this is an earlier open's, in
            # flight (a client cannot tell it from this open's until the close's clear arrives)
            return
        if not doc.open:
            if diagnostics:
                self.stale.append(f"{doc.path.name}: diagnostics published after it was closed and cleared")
            return
        if version is not None:
            if doc.published_version is not None and version < doc.published_version:
                self.stale.append(f"{doc.path.name}: published v{version} after v{doc.published_version}")
            doc.published_version = max(version, doc.published_version or version)

    # -- actions

    def open(self, doc: Doc) -> None:
        doc.text = doc.path.read_bytes().decode("utf-8", errors="replace")
        doc.version = 1
        doc.open, doc.published_version = True, None
        language = "cuda-cpp" if doc.path.suffix in (".cu", ".cuh") else "cpp"
        self.client.notify("textDocument/didOpen", {"textDocument": {
            "uri": doc.uri, "languageId": language, "version": 1, "text": doc.text}})
        self.counts["open"] += 1

    def close(self, doc: Doc) -> None:
        doc.open = False
        doc.closes += 1
        self.client.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
        self.counts["close"] += 1

    def edit(self, doc: Doc) -> None:
        changes = [doc.random_change(self.rng) for _ in range(1 if self.rng.random() < 0.9 else 3)]
        doc.version += 1
        self.client.notify("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": doc.version},
                                                      "contentChanges": changes})
        self.counts["edit"] += 1

    def save(self, doc: Doc) -> None:
        self.client.notify("textDocument/didSave", {"textDocument": {"uri": doc.uri}})
        self.counts["save"] += 1

    def request(self, doc: Doc) -> None:
        method = self.rng.choice(METHODS)
        params = self._params(method, doc)
        name = method if method != "workspace/executeCommand" else params["command"]
        cancel = self.rng.random() < 0.05
        self.tasks.append(asyncio.get_running_loop().create_task(self._ask(method, params, name, cancel)))
        self.counts["request"] += 1

    def _params(self, method: str, doc: Doc) -> dict[str, Any]:
        rng, ident = self.rng, {"uri": doc.uri}
        at = doc.random_position(rng)
        if method == "textDocument/hover":
            return {"textDocument": ident, "position": at}
        if method == "textDocument/codeAction":
            return {"textDocument": ident, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}
        if method == "textDocument/inlayHint":
            end = {"line": at["line"] + rng.randrange(80), "character": 0}
            return {"textDocument": ident, "range": {"start": at, "end": end}}
        if method != "workspace/executeCommand":
            return {"textDocument": ident}
        command = rng.choice(COMMANDS)
        kernel = doc.kernel_name(rng)
        arguments: dict[str, Any] = {"uri": doc.uri, "kernel": kernel, "quiet": True}
        if command == "perflsp.setGpus":
            arguments = {"gpus": [DEFAULT_GPU], "quiet": True}  # (the default: results stay comparable)
        elif command == "perflsp.verifyLaunchParameters":
            arguments.update(current=128, proposed=256)
        elif command in ("perflsp.importProfile", "perflsp.importTuningCache"):
            arguments = {"path": str(self.folder / "no-such-report.ncu-rep"), "uri": doc.uri, "quiet": True}
        elif command in ("perflsp.listGpus", "perflsp.status", "perflsp.rooflineData", "perflsp.cancelTuning"):
            arguments = {}
        return {"command": command, "arguments": [arguments]}

    async def _ask(self, method: str, params: dict[str, Any], name: str, cancel: bool) -> None:
        client = self.client
        msg_id = next(client.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        client.pending[msg_id] = future
        client.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        if cancel:
            client.notify("$/cancelRequest", {"id": msg_id})
        try:
            reply = await asyncio.wait_for(future, 120)
        except TimeoutError:
            self.crashes.append(f"{name}: no answer in 120 s")
            return
        error = reply.get("error")
        if error is None:
            self.answers[name] += 1
        elif error.get("code") in CLIENT_ERRORS:
            self.client_errors += 1
            self.answers[name + " (error for the client)"] += 1
        else:
            self.crashes.append(f"{name}: error {error.get('code')}: {str(error.get('message'))[:200]}")

    # -- the loop

    async def run(self, edits: int, open_at_once: int) -> None:
        rng = self.rng
        for doc in rng.sample(self.docs, min(open_at_once, len(self.docs))):
            self.open(doc)
        while self.counts["edit"] < edits:
            for _ in range(rng.randint(1, 30)):
                self.step(open_at_once)
            pause = rng.choice((0.0, 0.0, 0.0, 0.002, 0.01, 0.05, 0.2))
            await asyncio.sleep(pause)
            if self.client.process.returncode is not None:
                self.crashes.append("the server exited")
                return
            if len(self.tasks) > 200:
                await asyncio.gather(*self.tasks)
                self.tasks.clear()
        await asyncio.gather(*self.tasks)

    def step(self, open_at_once: int) -> None:
        rng = self.rng
        opened = [d for d in self.docs if d.open]
        roll = rng.random()
        if not opened or (roll < 0.03 and len(opened) < open_at_once):
            closed = [d for d in self.docs if not d.open]
            if closed:
                self.open(rng.choice(closed))
            return
        doc = rng.choice(opened)
        if roll < 0.05:
            self.close(doc)
        elif roll < 0.06:
            self.save(doc)
        elif roll < 0.25:
            self.request(doc)
        else:
            self.edit(doc)


async def exact_diagnostics(client: Client, docs: list[Doc]) -> dict[str, list[tuple[Any, ...]]]:
    async def one(doc: Doc) -> tuple[str, list[tuple[Any, ...]]]:
        reply = await asyncio.wait_for(client.request("textDocument/diagnostic", {"textDocument": {"uri": doc.uri}}),
                                       300)
        items = reply.get("result", {}).get("items", []) if isinstance(reply.get("result"), dict) else []
        return doc.uri, sorted((d["range"]["start"]["line"], d["range"]["start"]["character"],
                                d["range"]["end"]["line"], d["range"]["end"]["character"], str(d.get("code")),
                                d["message"]) for d in items)

    return dict(await asyncio.gather(*(one(d) for d in docs)))


async def run(args: argparse.Namespace) -> bool:
    folder, files = workspace(args.src, args.projects, args.seed)
    docs = [Doc(p) for p in files]
    log = folder / "server.log"
    started = time.perf_counter()
    with log.open("wb") as err:
        client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve", stderr=err)
    await client.initialize(folder, wait_ready=True)
    fuzz = Fuzz(client, docs, random.Random(args.seed), folder)
    await fuzz.run(args.edits, args.open)
    fuzzed_s = time.perf_counter() - started
    final = [d for d in docs if d.open]
    alive = client.process.returncode is None
    exact = await exact_diagnostics(client, final) if alive else {}
    await client.close()

    with (folder / "fresh.log").open("wb") as err:
        fresh, _ = await Client.start(sys.executable, "-m", "perflsp", "serve", stderr=err)
    await fresh.initialize(folder, wait_ready=True)
    for doc in final:
        language = "cuda-cpp" if doc.path.suffix in (".cu", ".cuh") else "cpp"
        fresh.notify("textDocument/didOpen", {"textDocument": {"uri": doc.uri, "languageId": language,
                                                                "version": doc.version, "text": doc.text}})
    expected = await exact_diagnostics(fresh, final)
    await fresh.close()
    differing = [d.path.name for d in final if exact.get(d.uri) != expected[d.uri]]
    fuzz.stale += [f"{name}: final diagnostics differ from a fresh server's" for name in differing]
    tracebacks = log.read_text(errors="replace").count("Traceback (most recent call last)")

    counts = fuzz.counts
    print(f"fuzz: {counts['edit']} edits, {counts['open']} opens, {counts['close']} closes, {counts['save']} saves, "
          f"{counts['request']} requests over {len(docs)} files in {fuzzed_s:.0f} s (seed {args.seed})")
    for name, count in sorted(fuzz.answers.items()):
        print(f"  {name:50s} {count}")
    print(f"fuzz: {len(final)} documents open at the end compared with a fresh server")
    print(f"fuzz: crashes {len(fuzz.crashes) + (0 if alive else 1)}" + (f" ({fuzz.crashes[0]})" if fuzz.crashes else ""))
    print(f"fuzz: stale {len(fuzz.stale)}" + (f" ({fuzz.stale[0]})" if fuzz.stale else ""))
    for line in fuzz.stale[1:10]:
        print(f"      {line}")
    print(f"fuzz: tracebacks in the server's log {tracebacks}" + (f" ({log})" if tracebacks else ""))
    ok = counts["edit"] >= args.edits and alive and not fuzz.crashes and not fuzz.stale and not tracebacks
    print(f"fuzz: target >= {args.edits} edits, 0 crashes, 0 stale, 0 tracebacks: {'met' if ok else 'NOT met'}")
    if ok and not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, nargs="?", default=None,
                        help="a folder of project folders of real sources (default: examples/)")
    parser.add_argument("--edits", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--projects", type=int, default=6, help="project folders of SRC copied into the workspace")
    parser.add_argument("--open", type=int, default=8, help="documents open at most at once")
    parser.add_argument("--keep", action="store_true", help="keep the workspace (and the server's log)")
    args = parser.parse_args()
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
