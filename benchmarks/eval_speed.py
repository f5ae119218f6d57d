"""How long `perflsp eval` takes over a labels CSV (the dev labels: 957 kernels).

    python benchmarks/eval_speed.py [--labels CSV] [--src DIR] [--compile-commands FILE] [--runs N]

Each run is a fresh `python -m perflsp eval --json` process, timed from start to exit (what a
user waits for); the script prints every run, the median wall time, kernels/s, and the figures
of the last run. Paths default to $PERFLSP_EVAL_LABELS, $PERFLSP_EVAL_SRC and
compile_commands.json beside the src folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", default=os.environ.get("PERFLSP_EVAL_LABELS"))
    parser.add_argument("--src", default=os.environ.get("PERFLSP_EVAL_SRC"))
    parser.add_argument("--compile-commands", default=os.environ.get("PERFLSP_EVAL_COMPILE_COMMANDS"))
    parser.add_argument("--gpu-file", default=str(ROOT / "examples" / "gpus" / "rtx3080-study.toml"))
    parser.add_argument("--gpu", default="rtx3080-study")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.labels or not Path(args.labels).is_file():
        print("eval_speed: no labels CSV: pass --labels or set PERFLSP_EVAL_LABELS", file=sys.stderr)
        return 2
    if not args.src or not Path(args.src).is_dir():
        print("eval_speed: no source folder: pass --src or set PERFLSP_EVAL_SRC", file=sys.stderr)
        return 2
    compile_commands = args.compile_commands or str(Path(args.src).parent / "compile_commands.json")
    command = [sys.executable, "-m", "perflsp", "eval", "--labels", args.labels, "--src", args.src,
               "--gpu-file", args.gpu_file, "--gpu", args.gpu, "--json", "--no-progress"]
    if Path(compile_commands).is_file():
        command += ["--compile-commands", compile_commands]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    walls: list[float] = []
    report: dict = {}
    for number in range(1, args.runs + 1):
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            print(f"eval_speed: run {number} failed (exit {proc.returncode}): {proc.stderr.strip()}", file=sys.stderr)
            return 1
        report = json.loads(proc.stdout)
        walls.append(wall)
        print(f"run {number}: {wall:.2f} s wall ({report['elapsed_s']:.2f} s analysing)")
    median = statistics.median(walls)
    print(f"median {median:.2f} s over {len(walls)} runs · {report['listed'] / median:.1f} kernels/s · "
          f"{report['listed']} listed, {report['located']} located, {report['analyzed']} analysed · "
          f"accuracy {report['accuracy']:.3f}, balanced {report['balanced_accuracy']:.3f}"
          + (" · with compile_commands.json" if "--compile-commands" in command else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
