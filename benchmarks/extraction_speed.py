"""Extraction speed vs bare tree-sitter parsing over a source tree.

    python benchmarks/extraction_speed.py [SRC_DIR] [--labels CSV] [--repeat 3]

SRC_DIR defaults to $PERFLSP_EVAL_SRC. With --labels, only the benchmark folders named in the
labels' `target` column are scanned (the labeled benchmark sources). Both passes run in the same
process over the same files (read into memory first, so disk I/O is excluded), alternating, and
the median of --repeat runs is reported. Extraction includes its own parse.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.source.files import LoadedFile, iter_source_paths, load_file
from perflsp.source.parser import new_parser


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", default=os.environ.get("PERFLSP_EVAL_SRC"))
    ap.add_argument("--labels", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.src:
        sys.exit("give the source folder (or set PERFLSP_EVAL_SRC)")
    root = Path(args.src)
    folders = [root]
    if args.labels:
        with args.labels.open(newline="") as fh:
            folders = sorted({root / r["target"] for r in csv.DictReader(fh)})
    files = [load_file(p) for p in iter_source_paths(folders) if isinstance(p, Path)]
    files = [f for f in files if isinstance(f, LoadedFile)]
    total_bytes = sum(len(f.data) for f in files)
    print(f"{len(files)} files, {total_bytes / 1e6:.1f} MB")

    parser = new_parser()
    parse_times, extract_times = [], []
    kernels = regions = launches = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for f in files:
            parser.parse(f.data)
        parse_times.append(time.perf_counter() - t0)

        resolver = IncludeResolver()
        t0 = time.perf_counter()
        kernels = regions = launches = 0
        for f in files:
            fk = extract(f.data, path=str(f.path), env=resolver.env_for(f.path, f.data))
            kernels += len(fk.kernels)
            regions += len(fk.omp_regions)
            launches += len(fk.launches)
        extract_times.append(time.perf_counter() - t0)

    parse_s = statistics.median(parse_times)
    extract_s = statistics.median(extract_times)
    print(f"found: {kernels} CUDA kernels, {regions} OpenMP target regions, {launches} launch sites")
    print(f"bare parse : median {parse_s:.2f} s  ({len(files) / parse_s:.0f} files/s)")
    print(f"extraction : median {extract_s:.2f} s  ({len(files) / extract_s:.0f} files/s)")
    print(f"ratio extraction / bare parse: {extract_s / parse_s:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
