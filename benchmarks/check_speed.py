"""Throughput of the `perflsp check` core (extraction, engine, lints) over a source tree.

    python benchmarks/check_speed.py [PATH] [--gpu NAME] [--runs N] [--limit FILES] [--compile [--cache-dir DIR]]

PATH defaults to $PERFLSP_EVAL_SRC (the benchmark sources). Every run checks the same files
in-process with fresh caches and prints files/s and kernels/s; the summary is the median.
With `--compile` the files are compiled first as `perflsp check` does (a pool, the compile
database found as clangd finds it), cached in `--cache-dir` (default: the user's cache): a first
run on an empty cache folder is the cold case, the next ones the warm case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflsp.analysis.report import CheckSettings
from perflsp.cli.check_cmd import check_paths, source_paths
from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler, default_cache_dir
from perflsp.compiled.toolchain import find_toolchain
from perflsp.hardware import load_database
from perflsp.kernels.compile_db import DiscoveredDatabases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=os.environ.get("PERFLSP_EVAL_SRC"))
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="check only the first N files")
    parser.add_argument("--compile", action="store_true", help="compile the device code as `perflsp check` does")
    parser.add_argument("--cache-dir", type=Path, help="folder of the compile cache (default: the user's)")
    args = parser.parse_args()
    if not args.path or not Path(args.path).exists():
        print("check_speed: no source tree: pass PATH or set PERFLSP_EVAL_SRC", file=sys.stderr)
        return 2
    files, _ = source_paths([Path(args.path)])
    files = files[: args.limit] if args.limit else files
    gpus = [load_database().get(name) for name in args.gpu.split(",")]
    rates: list[tuple[float, float, float]] = []
    for number in range(1, args.runs + 1):
        compiler = None
        flags = DiscoveredDatabases()
        if args.compile:
            cache = CompileCache(args.cache_dir if args.cache_dir else default_cache_dir())
            compiler = Compiler(find_toolchain(), cache, flags=flags)
        run = check_paths(files, gpus, CheckSettings(), flags, compiler=compiler)
        if compiler is not None:
            compiler.close()
        files_per_s = len(run.files) / run.elapsed_s
        kernels_per_s = run.kernel_count / run.elapsed_s
        rates.append((run.elapsed_s, files_per_s, kernels_per_s))
        print(f"run {number}: {len(run.files)} files ({len(run.skipped)} skipped), {run.kernel_count} kernels in "
              f"{run.elapsed_s:.2f} s · {files_per_s:.1f} files/s · {kernels_per_s:.1f} kernels/s")
    seconds = statistics.median(r[0] for r in rates)
    print(f"median over {len(rates)} runs: {seconds:.2f} s · {statistics.median(r[1] for r in rates):.1f} files/s · "
          f"{statistics.median(r[2] for r in rates):.1f} kernels/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
