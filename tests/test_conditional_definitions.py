"""Definitions in preprocessor branches: the branch the macros take is the one the compiler
reads (`#ifdef SINGLE_PRECISION typedef float real; #else typedef double real; #endif` without SINGLE_PRECISION:
double), in the file and in the headers it includes, wherever the other branch comes first."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import IncludeResolver, balanced_view
from perflsp.source.parser import parse

RTX3080 = load_database().get("rtx3080")

KERNEL = """\
__global__ void axpy(const real *x, real *y, real a, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
int main() {
  real *x, *y;
  int n = 1 << 24;
  axpy<<<n / 256, 256>>>(x, y, 2, n);
}
"""

BRANCHES = """\
#ifdef SINGLE_PRECISION
typedef float real;
#else
typedef double real;
#endif
"""


def _per_item(path: Path):
    prepared = read_program(path, path.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    (report,) = FileAnalysis.of(prepared, prepared.options).reports([RTX3080])
    return report.facts.per_item


def test_a_typedef_of_the_file_takes_the_branch_the_macros_choose(tmp_path):
    source = tmp_path / "axpy.cu"
    source.write_text(BRANCHES + KERNEL)
    per_item = _per_item(source)
    # double: two 8-byte loads, one FMA in FP64
    assert per_item.global_load_bytes == 16 and per_item.fp64 == 2 and per_item.fp32 == 0
    source.write_text("#define SINGLE_PRECISION\n" + BRANCHES + KERNEL)
    per_item = _per_item(source)
    assert per_item.global_load_bytes == 8 and per_item.fp32 == 2 and per_item.fp64 == 0


def test_a_typedef_of_an_included_header_takes_the_branch_the_macros_choose(tmp_path):
    (tmp_path / "common.h").write_text(BRANCHES + "const int tile = 64;\n")
    source = tmp_path / "axpy.cu"
    source.write_text('#include "common.h"\n' + KERNEL)
    assert _per_item(source).global_load_bytes == 16
    source.write_text('#define SINGLE_PRECISION\n#include "common.h"\n' + KERNEL)
    assert _per_item(source).global_load_bytes == 8


DEVICE_VARIANTS = """\
#ifdef SLOW
__device__ float f(float x) { float s = 0; for (int k = 0; k < 100; k++) s += x * k; return s; }
#else
__device__ float f(float x) { return x * 2.0f; }
#endif
__global__ void k(const float *x, float *y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}
int main() { float *x, *y; int n = 1 << 24; k<<<n / 256, 256>>>(x, y, n); }
"""


def test_a_device_function_defined_in_two_branches_is_the_active_one(tmp_path):
    source = tmp_path / "variants.cu"
    source.write_text(DEVICE_VARIANTS)
    assert _per_item(source).fp32 == 1  # x * 2.0f, not the 100-trip loop of the `SLOW` branch
    source.write_text("#define SLOW\n" + DEVICE_VARIANTS)
    assert _per_item(source).fp32 == 200


# a conditional that splits a brace pair between its branches (two loop headers for one body):
# the parser reading the text as written loses the function; the branch the macros take is read
SPLIT_HEADERS = """\
#include <cstdlib>
#include "kernels.cu"
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *x;
  cudaMalloc(&x, sizeof(float) * n);
#ifdef DEBUG_SWEEP
  for (int m = 9; m <= 9; ++m) {
  for (int reps = m; reps <= 16; ++reps) {
#else
  for (int m = 3; m <= 4; ++m) {
  for (int reps = m; reps <= 16; ++reps) {
#endif
    steps(x, n, reps);
  }
  }
  return 0;
}
"""

SPLIT_KERNELS = """\
__global__ void scale(float *x, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) for (int r = 0; r < reps; r++) x[i] *= 0.5f;
}
void steps(float *x, int n, int reps) { scale<<<(n + 255) / 256, 256>>>(x, n, reps); }
"""


def _report(path: Path, argv: tuple[str, ...]):
    prepared = read_program(path, path.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions(argv=argv))
    (report,) = FileAnalysis.of(prepared, prepared.options).reports([RTX3080])
    return report


def test_loop_headers_split_between_branches_are_read_as_the_macros_choose(tmp_path):
    (tmp_path / "main.cu").write_text(SPLIT_HEADERS)
    kernels = tmp_path / "kernels.cu"
    kernels.write_text(SPLIT_KERNELS)
    report = _report(kernels, ("4096",))
    # the wrapper's caller, in the loops the `#else` branch opens: reps = m = 3 on the first pass
    assert {loop.variable: loop.trip_count for loop in report.facts.loops} == {"r": 3}
    assert report.facts.work_items == 4096
    (tmp_path / "main.cu").write_text("#define DEBUG_SWEEP\n" + SPLIT_HEADERS)
    assert {loop.variable: loop.trip_count for loop in _report(kernels, ("4096",)).facts.loops} == {"r": 9}


def test_balanced_view_blanks_only_groups_that_split_braces():
    env = ConstEnv()
    env.macros["WIDE"] = "1"
    data = (b"void f() {\n#if WIDE\n  g(); /* { */\n#else\n  h();\n#endif\n}\n"
            b"void k() {\n#if WIDE\n  for (;;) {\n#else\n  while (1) {\n#endif\n    step();\n  }\n}\n")
    view = balanced_view(data, env)
    assert len(view) == len(data) and view.count(b"\n") == data.count(b"\n")
    assert view.startswith(data[:data.index(b"void k")])  # (paired branches, a brace in a comment: as written)
    tail = view[data.index(b"void k"):].decode()
    assert "for (;;) {" in tail and "while" not in tail and "#" not in tail
    assert not parse(view).root_node.has_error
    plain = b"int x;\n#ifdef A\nint y;\n#endif\n"
    assert balanced_view(plain, env) is plain
