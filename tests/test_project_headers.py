"""Headers no build names: a benchmark suite's shared header, found around the file as a developer
would (`kernels/project_headers.py`), only where no compile database gives the file's flags."""

from __future__ import annotations

import json
from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.kernels.compile_db import CompileDatabase
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.project_headers import HeaderIndex, find_header_folder, search_root
from tests.engine_reports import H100
from tests.test_host_values import trips, unknown_trips

# the suite's shared header chooses loop bounds through a function-like macro; the benchmark's own
# header (beside it) names the sizes; its Makefile would add `-I../../utilities`
SUITE_HEADER = "#define LOOP_BOUND(x, y) y\n"
BENCH_HEADER = '#define NX 4096\n#define _PB_NX LOOP_BOUND(NX, nx)\n'
BENCH = """#include "bench.cuh"
#include <suite.h>
#include <stdio.h>

__global__ void row_sums(int nx, const float *a, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < _PB_NX) {
    float s = 0.0f;
    for (int j = 0; j < _PB_NX; j++) s += a[i * NX + j];
    out[i] = s;
  }
}

int main() {
  float *a, *out;
  int nx = NX;
  cudaMalloc(&a, sizeof(float) * NX * NX);
  cudaMalloc(&out, sizeof(float) * NX);
  row_sums<<<NX / 256, 256>>>(nx, a, out);
  return 0;
}
"""


def suite(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "utilities").mkdir()
    (root / "utilities" / "suite.h").write_text(SUITE_HEADER)
    (root / "other" / "utilities").mkdir(parents=True)
    (root / "other" / "utilities" / "suite.h").write_text("#define LOOP_BOUND(x, y) x\n")
    bench = root / "linear-algebra" / "rows"
    bench.mkdir(parents=True)
    (bench / "bench.cuh").write_text(BENCH_HEADER)
    (bench / "rows.cu").write_text(BENCH)
    return bench / "rows.cu"


def report(path: Path, context: ReadContext) -> KernelReport:
    program = read_program(path, path.read_bytes(), context, AnalysisOptions())
    unit = AnalysisUnit.of(program.model, program.options)
    return analyze_kernel(unit, program.kernels.kernels[0], [H100])


def test_an_angled_header_of_the_project_is_found_around_the_file_without_a_compile_database(tmp_path: Path):
    path = suite(tmp_path / "suite")
    found = report(path, ReadContext(IncludeResolver()))
    assert trips(found)["j"] == 4096  # `j < LOOP_BOUND(4096, nx)`: nx, folded at the launch
    assert not unknown_trips(found)


def test_the_nearest_copy_of_a_header_is_taken(tmp_path: Path):
    path = suite(tmp_path / "suite")
    root = tmp_path / "suite"
    assert search_root(path.parent) == root  # (the repository's root: the walk stops there)
    assert HeaderIndex(root, path.parent).folder_for("suite.h", path.parent) == root / "utilities"
    assert find_header_folder("suite.h", root / "other" / "x") == root / "other" / "utilities"
    assert find_header_folder("stdio.h", path.parent) is None


def test_with_a_compile_database_only_its_include_folders_are_searched(tmp_path: Path):
    path = suite(tmp_path / "suite")
    entry = {"directory": str(path.parent), "file": str(path), "arguments": ["nvcc", "-c", str(path)]}
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry]))
    database = CompileDatabase.load(tmp_path / "compile_commands.json")
    found = report(path, ReadContext.of(path, IncludeResolver(), database))
    assert unknown_trips(found)  # the build names no -I: `LOOP_BOUND` stays unknown, as it would to the compiler
    entry["arguments"] = ["nvcc", f"-I{tmp_path / 'suite' / 'utilities'}", "-c", str(path)]
    (tmp_path / "compile_commands.json").write_text(json.dumps([entry]))
    database = CompileDatabase.load(tmp_path / "compile_commands.json")
    found = report(path, ReadContext.of(path, IncludeResolver(), database))
    assert trips(found)["j"] == 4096  # the angled include on the build's include path
