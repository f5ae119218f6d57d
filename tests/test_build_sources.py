"""Host code the build names from another folder: an OpenMP port whose Makefile compiles its
sibling port's `main.cpp` (`main.o: ../x-cuda/main.cpp`), or whose compile database names a
generated copy of it (`build/<target>-main.cpp`) that a clean build folder lacks. The offloaded
function's caller, and the arguments it passes, are found there. Small programs of our own."""

from __future__ import annotations

import json
from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.kernels.build_sources import makefile_sources, program_sources
from perflsp.kernels.compile_db import CompileDatabase
from perflsp.kernels.includes import IncludeResolver
from tests.engine_reports import H100
from tests.test_host_values import trips, unknown_trips

# the offloaded function, in the OpenMP port's folder; its caller is in the CUDA port's
KERNELS = """
#include <omp.h>
void scale(float *x, int rows, int cols) {
  #pragma omp target teams distribute parallel for map(tofrom: x[0:rows*cols])
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) x[r * cols + c] *= 2.0f;
}
extern "C" void offload(float *x, int rows, int cols, int repeat) {
  for (int i = 0; i < repeat; i++) scale(x, rows, cols);
}
"""

MAIN = """
#include <cstdlib>
#include "utils.h"
extern "C" void offload(float *x, int rows, int cols, int repeat);
int main(int argc, char **argv) {
  const int repeat = atoi(argv[1]);
  float *x = (float *) malloc(sizeof(float) * ROWS * COLS);
  offload(x, ROWS, COLS, repeat);
  free(x);
  return 0;
}
"""

MAKEFILE = """
CC = clang++
source = kernels.cpp \\
         ../common/shared.cc
obj = main.o kernels.o shared.o
$(program): $(obj)
\t$(CC) $(obj) -o $@ ../elsewhere/recipe.cpp
kernels.o: kernels.cpp
\t$(CC) -c $< -o $@
main.o: ../x-cuda/main.cpp ../x-cuda/utils.h # the CUDA port's host code
\t$(CC) -c $< -o $@
%.o: %.cpp $(DEPS)
"""


def ports(root: Path, makefile: str | None = MAKEFILE) -> Path:
    """`x-omp/kernels.cpp` (returned) and `x-cuda/main.cpp`, with `x-omp/Makefile` when given."""
    (root / "x-omp").mkdir()
    (root / "x-cuda").mkdir()
    (root / "common").mkdir()
    (root / "elsewhere").mkdir()
    (root / "x-cuda" / "main.cpp").write_text(MAIN)
    (root / "x-cuda" / "utils.h").write_text("#define ROWS 300\n#define COLS 40\n")
    (root / "common" / "shared.cc").write_text("int shared_value() { return 1; }\n")
    (root / "elsewhere" / "recipe.cpp").write_text("int recipe_value() { return 2; }\n")
    if makefile is not None:
        (root / "x-omp" / "Makefile").write_text(makefile)
    path = root / "x-omp" / "kernels.cpp"
    path.write_text(KERNELS)
    return path


def region(path: Path, argv: tuple[str, ...], context: ReadContext | None = None) -> KernelReport:
    context = context or ReadContext(IncludeResolver())
    prepared = read_program(path, path.read_bytes(), context, AnalysisOptions(argv=argv))
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (found,) = prepared.kernels.omp_regions
    return analyze_kernel(unit, found, [H100])


def test_the_makefile_names_sources_of_other_folders_in_lists_and_prerequisites(tmp_path: Path):
    path = ports(tmp_path)
    # a source list (continued over a line), a rule's prerequisites; not a recipe's words, not a
    # header, not a variable, not a source of the folder itself
    assert makefile_sources(path.parent) == ((tmp_path / "common" / "shared.cc").resolve(),
                                            (tmp_path / "x-cuda" / "main.cpp").resolve())


def test_the_makefile_s_plain_variables_are_expanded_in_the_names(tmp_path: Path):
    makefile = """
inc = ../x-cuda
shared := ${inc}/../common
objs = main.o
objs += shared.o
main.o: $(inc)/main.cpp $(inc)/utils.h
shared.o: $(shared)/shared.cc $(unset)/other.cpp
extra.o: $(gone)/recipe.cpp
"""
    path = ports(tmp_path, makefile)
    assert makefile_sources(path.parent) == ((tmp_path / "x-cuda" / "main.cpp").resolve(),
                                            (tmp_path / "common" / "shared.cc").resolve())


def test_a_named_source_that_does_not_exist_is_not_read(tmp_path: Path):
    path = ports(tmp_path, MAKEFILE.replace("../x-cuda/main.cpp", "../gone/main.cpp"))
    assert makefile_sources(path.parent) == ((tmp_path / "common" / "shared.cc").resolve(),)


def test_the_caller_in_the_source_the_makefile_names_folds_the_bounds(tmp_path: Path):
    report = region(ports(tmp_path), ("5",))
    assert trips(report) == {"r": 300, "c": 40}
    assert unknown_trips(report) == []


def test_without_the_makefile_the_bounds_are_unknown(tmp_path: Path):
    report = region(ports(tmp_path, makefile=None), ("5",))
    assert trips(report)["c"] != 40
    assert any("`cols`" in text for text in unknown_trips(report))


def database(root: Path, include_cuda_port: bool = True) -> Path:
    """A CMake compile database of target `x-omp`: `kernels.cpp`, and a copy of the CUDA port's
    `main.cpp` generated into the build folder (which holds nothing now)."""
    build = root / "build"
    build.mkdir()
    flags = f"-I{root / 'x-omp'}" + (f" -I{root / 'x-cuda'}" if include_cuda_port else "")
    entries = [
        {"directory": str(build), "file": str(root / "x-omp" / "kernels.cpp"),
         "command": f"clang++ {flags} -fopenmp -fopenmp-targets=nvptx64 -c {root / 'x-omp' / 'kernels.cpp'}",
         "output": "CMakeFiles/x-omp.dir/x-omp/kernels.cpp.o"},
        {"directory": str(build), "file": str(build / "x-omp-main.cpp"),
         "command": f"clang++ {flags} -fopenmp -c {build / 'x-omp-main.cpp'}",
         "output": "CMakeFiles/x-omp.dir/x-omp-main.cpp.o"},
        {"directory": str(build), "file": str(root / "common" / "shared.cc"),  # (another target's)
         "command": f"clang++ -c {root / 'common' / 'shared.cc'}", "output": "CMakeFiles/other.dir/shared.cc.o"},
    ]
    (root / "compile_commands.json").write_text(json.dumps(entries))
    return root / "compile_commands.json"


def test_a_missing_generated_copy_is_the_source_an_include_folder_holds(tmp_path: Path):
    path = ports(tmp_path, makefile=None)
    flags = CompileDatabase.load(database(tmp_path)).flags_for(path)
    assert flags is not None
    assert flags.unit_sources == ((tmp_path / "x-cuda" / "main.cpp").resolve(),)
    report = region(path, ("5",), ReadContext(IncludeResolver(), flags))
    assert trips(report) == {"r": 300, "c": 40}
    assert unknown_trips(report) == []


def test_a_missing_generated_copy_is_the_source_the_target_s_makefile_names(tmp_path: Path):
    path = ports(tmp_path)
    flags = CompileDatabase.load(database(tmp_path, include_cuda_port=False)).flags_for(path)
    assert flags is not None
    assert flags.unit_sources == ((tmp_path / "x-cuda" / "main.cpp").resolve(),)


def test_a_copy_found_nowhere_adds_no_source(tmp_path: Path):
    path = ports(tmp_path, makefile=None)
    flags = CompileDatabase.load(database(tmp_path, include_cuda_port=False)).flags_for(path)
    assert flags is not None and flags.unit_sources == ()
    assert program_sources(path.resolve(), flags.unit_sources) == ()
