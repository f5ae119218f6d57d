"""Cost of the CLI on large generated files: wall time and peak RSS per command, and time per MB.

    python benchmarks/big_file.py [--sizes 1,4,15] [--commands check,check-json,kernels]
                                  [--launch-every 10] [--timeout 600] [--keep DIR]

Each size (MB) is a generated `.cu` file of many small kernels (saxpy, stencils, reduction,
n-body, ...) with host helpers that allocate and launch every `--launch-every`-th kernel, and a
`main` (benchmarks/generated_cuda.py). Each command runs as its own subprocess, as a user runs it:
`perflsp check FILE`, `perflsp check --json FILE`, `perflsp kernels FILE`. Peak RSS is that
process' own (os.wait4), not the benchmark's. Linear cost shows as a flat s/MB column; the target
(issue 13) is `check` of a 15 MB file under 30 s and 1 GB. The size limit of a file is 16 MiB.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generated_cuda import generate  # noqa: E402

COMMANDS: dict[str, list[str]] = {
    "check": ["check"],
    "check-json": ["check", "--json"],
    "kernels": ["kernels"],
}


@dataclass(frozen=True, slots=True)
class Run:
    command: str
    size_mb: float
    wall_s: float
    peak_rss_mib: float
    exit_code: int | None  # None: killed at the timeout
    output_bytes: int


def perflsp_argv() -> list[str]:
    """The installed `perflsp` next to this interpreter, else `python -m perflsp`."""
    script = Path(sys.executable).with_name("perflsp")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "perflsp"]


def run_command(argv: list[str], timeout_s: float) -> tuple[float, float, int | None, int]:
    """Wall seconds, peak RSS (MiB) of the child itself, exit code (None on timeout), stdout size."""
    with open(os.devnull, "wb") as devnull, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=devnull) as child:
        started = time.perf_counter()
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            child.send_signal(signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        output = 0
        assert child.stdout is not None
        while chunk := child.stdout.read(1 << 16):
            output += len(chunk)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    peak_mib = usage.ru_maxrss / 1024  # Linux: KiB
    return wall, peak_mib, None if timed_out.is_set() else child.returncode, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4,15", help="file sizes in MB (10^6 bytes), comma separated")
    parser.add_argument("--commands", default=",".join(COMMANDS), help=f"of {', '.join(COMMANDS)}")
    parser.add_argument("--launch-every", type=int, default=10, help="a host helper launches every n-th kernel")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command before it is killed")
    parser.add_argument("--keep", type=Path, default=None, help="write the generated files here (default: a temp dir)")
    args = parser.parse_args()

    folder = args.keep or Path(os.environ.get("TMPDIR", "/tmp")) / "perflsp-big-file"
    folder.mkdir(parents=True, exist_ok=True)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    runs: list[Run] = []
    print(f"{'command':<11} {'MB':>5} {'kernels':>7} {'wall s':>8} {'s/MB':>6} {'peak RSS MiB':>12} {'exit':>5}")
    for size in (float(s) for s in args.sizes.split(",")):
        generated = generate(size_bytes=int(size * 1_000_000), launch_every=args.launch_every)
        path = folder / f"generated_{size:g}mb.cu"
        path.write_text(generated.text)
        actual_mb = path.stat().st_size / 1_000_000
        for name in commands:
            wall, peak, code, output = run_command([*perflsp_argv(), *COMMANDS[name], str(path)], args.timeout)
            runs.append(Run(name, actual_mb, wall, peak, code, output))
            exit_text = "kill" if code is None else str(code)
            print(f"{name:<11} {actual_mb:>5.2f} {len(generated.kernels):>7} {wall:>8.1f} {wall / actual_mb:>6.2f} "
                  f"{peak:>12.0f} {exit_text:>5}", flush=True)
    killed = [r for r in runs if r.exit_code is None]
    if killed:
        print(f"{len(killed)} command(s) killed after {args.timeout:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
