"""Memory of the server while real files are opened and closed in place.

    python benchmarks/lsp_memory.py SRC_DIR [--files 300] [--cycles 2] [--batch 50] [--seed 1]

Picks `--files` C/C++/CUDA sources and headers under SRC_DIR, project by project (every file of
each folder under SRC_DIR, the folders in a seeded shuffle), and drives `perflsp serve` with a raw JSON-RPC client, the
folder SRC_DIR being the workspace: each file is opened *where it lies*, with its headers, its
sibling sources and the sources that `#include` it, as an editor opens it. Prints the server's
RSS (`/proc/PID/status`, VmRSS):

- after `initialize` (and 2 s idle);
- after each batch of `--batch` files is opened and every one of them is analysed whole;
- the peak while they are open (sampled every 0.1 s);
- 1, 3 and 10 s after the last of them is closed;

then the same again for each further cycle (the same files: memory that stays after the first
cycle and does not grow later is a bounded cache, what grows per cycle is a leak), and counts
the tracebacks in the server's log (stderr). Targets (issue 28): peak <= 400 MiB with 300 files;
10 s after the last close, within 50 MiB of the post-initialize RSS; no traceback.

It prints figures; it asserts nothing (a timed test would measure the machine, not the code).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.lsp_latency import Client, rss_mib  # noqa: E402

SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh")
MAX_FILE_BYTES = 1 << 20  # (larger files are generated data, not code one edits)
PEAK_TARGET_MIB = 400.0
CLOSED_SLACK_MIB = 50.0


def pick_files(src: Path, count: int, seed: int) -> list[Path]:
    """Every source and header of whole projects (the folders under `src`, in a seeded shuffle)
    until `count` files: what a user opens working on a few projects, headers included."""
    folders = sorted(d for d in src.iterdir() if d.is_dir() and not d.name.startswith("."))
    random.Random(seed).shuffle(folders)
    found: list[Path] = []
    for folder in folders:
        found += sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file()
                        and p.stat().st_size <= MAX_FILE_BYTES)
        if len(found) >= count:
            break
    return found[:count]


class Peak:
    """The highest RSS seen, sampled every `every_s` while running."""

    def __init__(self, pid: int, every_s: float = 0.1):
        self.pid, self.every_s, self.value = pid, every_s, 0.0
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.value = max(self.value, rss_mib(self.pid) or 0.0)
            await asyncio.sleep(self.every_s)

    def stop(self) -> float:
        self.task.cancel()
        self.value = max(self.value, rss_mib(self.pid) or 0.0)
        return self.value


async def start(src: Path, log: Path) -> Client:
    with log.open("wb") as err:
        client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve", stderr=err)
    await client.initialize(src, wait_ready=True)
    return client


async def open_batch(client: Client, paths: list[Path], timeout_s: float) -> int:
    """Open `paths` and wait until each one is analysed whole (its pulled diagnostics, which wait
    for the exact analysis of the version); how many did not answer in time."""
    for path in paths:
        text = path.read_bytes().decode("utf-8", errors="replace")
        language = "cuda-cpp" if path.suffix in (".cu", ".cuh") else "cpp"
        client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": language,
                                                                "version": 1, "text": text}})
    asks = [asyncio.ensure_future(client.request("textDocument/diagnostic", {"textDocument": {"uri": p.as_uri()}}))
            for p in paths]
    _, pending = await asyncio.wait(asks, timeout=timeout_s)
    for future in pending:
        future.cancel()
    return len(pending)


async def run(args: argparse.Namespace) -> bool:
    src = args.src.resolve()
    paths = pick_files(src, args.files, args.seed)
    if not paths:
        print(f"memory: no sources of 1-60 KB under {src}")
        return False
    size_kib = sum(p.stat().st_size for p in paths) / 1024
    log = Path(tempfile.mkstemp(prefix="perflsp-memory-", suffix=".log")[1])
    client = await start(src, log)
    pid = client.process.pid
    await asyncio.sleep(2.0)
    initial = rss_mib(pid) or 0.0
    print(f"memory: {len(paths)} files ({size_kib / 1024:.1f} MiB of source) under {src}")
    print(f"memory: RSS after initialize {initial:.0f} MiB")
    peaks: list[float] = []
    closed: list[float] = []
    for cycle in range(1, args.cycles + 1):
        peak = Peak(pid)
        started = time.perf_counter()
        steps, missing = [], 0
        for first in range(0, len(paths), args.batch):
            batch = paths[first:first + args.batch]
            missing += await open_batch(client, batch, args.timeout)
            steps.append(f"{first + len(batch)}: {rss_mib(pid) or 0:.0f}")
        opened_s = time.perf_counter() - started
        for path in paths:
            client.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
        closed_at = time.perf_counter()
        after = []
        for wait_s in (1.0, 3.0, 10.0):
            await asyncio.sleep(max(0.0, closed_at + wait_s - time.perf_counter()))
            after.append(rss_mib(pid) or 0.0)
        peaks.append(peak.stop())
        closed.append(after[-1])
        print(f"memory: cycle {cycle}: RSS (MiB) with n files open: {', '.join(steps)} "
              f"({opened_s:.0f} s{f', {missing} without diagnostics' if missing else ''}); peak {peaks[-1]:.0f}")
        print(f"memory: cycle {cycle}: RSS after closing all: {after[0]:.0f} (1 s), {after[1]:.0f} (3 s), "
              f"{after[2]:.0f} MiB (10 s): {after[2] - initial:+.0f} MiB against after initialize")
    alive = client.process.returncode is None
    await client.close()
    text = log.read_text(errors="replace")
    tracebacks = text.count("Traceback (most recent call last)")
    print(f"memory: server alive: {alive}; tracebacks in its log: {tracebacks}" + (f" ({log})" if tracebacks else ""))
    if not tracebacks:
        log.unlink()
    ok = max(peaks) <= PEAK_TARGET_MIB and max(closed) - initial <= CLOSED_SLACK_MIB and alive and not tracebacks
    print(f"memory: target peak <= {PEAK_TARGET_MIB:.0f} MiB, after closing <= {initial + CLOSED_SLACK_MIB:.0f} MiB "
          f"(post-initialize + {CLOSED_SLACK_MIB:.0f}), no traceback: {'met' if ok else 'NOT met'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="a folder of real CUDA/OpenMP sources (opened in place)")
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--batch", type=int, default=50, help="files opened before RSS is read again")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a batch may take to be analysed")
    args = parser.parse_args()
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
