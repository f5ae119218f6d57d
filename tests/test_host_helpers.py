"""Values the host code states through helpers: functions of guarded returns (`roundUp`,
`isPowerOf2`), in the file or in a header it includes; single-precision math functions in a
folded size; the macros of a function an OpenMP region calls; a comment inside a parameter
list. Small programs of our own, one per rule."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.notes import texts
from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.return_forms import returned_expression, scan_pure_functions
from perflsp.source.parser import parse
from tests.engine_reports import reports
from tests.test_host_values import launch_args, trips, unknown_trips

ROUND_UP = """
size_t roundUp(int group_size, size_t global_size)
{
    if (global_size == 0) return group_size;
    int r = global_size % group_size;
    if (r == 0)
    {
        return global_size;
    } else
    {
        return global_size + group_size - r;
    }
}
template <typename T>
int isPowerOf2(T val)
{
  long long _val = val;
  if ((_val & (-_val)) - _val == 0 && _val != 0)
    return 0;
  else
    return 1;
}
"""

GUARDED = ROUND_UP + """
__global__ void k(float *a, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 1; j < width; j++) s += a[j] * 2.0f;
  a[i] = s;
}
int main(int argc, char **argv) {
  int length = atoi(argv[1]);
  if (isPowerOf2(length)) { length = 7; }
  int n = roundUp(256, length + 5);
  float *d;
  cudaMalloc((void **)&d, n * sizeof(float));
  k<<<n / 256, 256>>>(d, n);
}
"""


def test_a_function_of_guarded_returns_folds_where_it_is_called():
    # 2048 is a power of two (this helper says 0 then): `length` stays; 2053 rounds up to 2304
    assert launch_args(GUARDED, "k", ("2048",))[1] == 2304
    # 1000 is not: `length = 7`, which rounds up to one group
    assert launch_args(GUARDED, "k", ("1000",))[1] == 256
    report = next(r for r in reports(GUARDED, options=AnalysisOptions(argv=("2048",))) if r.kernel.name == "k")
    assert trips(report) == {"j": 2303}
    assert not unknown_trips(report)


def test_the_guarded_returns_read_as_one_conditional_expression():
    data = ROUND_UP.encode()
    function = parse(data).root_node.named_children[0]
    body = function.child_by_field_name("body")
    assert body is not None
    text = returned_expression(data, body)
    assert text is not None
    env = ConstEnv(constants={"group_size": 256, "global_size": 1000})
    assert try_evaluate(text, env)[0] == 1024
    env = ConstEnv(constants={"group_size": 256, "global_size": 0})
    assert try_evaluate(text, env)[0] == 256


def test_a_helper_that_loops_or_writes_is_not_a_formula():
    src = b"""
int roundToPowerOf2(int val)
{
  val--;
  for (int i = 0; i < 4; i++) val |= val >> (1 << i);
  return val + 1;
}
int clampPositive(int v)
{
  int r = v;
  r += 1;
  return r;
}
int noValue(int v)
{
  if (v > 0) return 1;
}
"""
    root = parse(src).root_node
    for function in root.named_children:
        body = function.child_by_field_name("body")
        assert body is not None
        assert returned_expression(src, body) is None
    assert scan_pure_functions(src) == []
    assert [name for name, _, _ in scan_pure_functions(ROUND_UP.encode())] == ["roundUp", "isPowerOf2"]


def test_a_pure_helper_of_an_included_header_folds(tmp_path: Path):
    (tmp_path / "utils.h").write_text(ROUND_UP)
    src = GUARDED.replace(ROUND_UP, '#include "utils.h"\n')
    path = tmp_path / "main.cu"
    path.write_text(src)
    report = next(r for r in reports(src, path, AnalysisOptions(argv=("2048",))) if r.kernel.name == "k")
    assert trips(report) == {"j": 2303}
    assert not unknown_trips(report)


def test_single_precision_math_functions_fold_in_host_sizes():
    src = """
typedef struct { int b; int kernel_size; } params;
void car(float *out, const params p, const int n)
{
  const int kernels_size = p.kernel_size;
  const int k_size = (int)sqrtf(float(kernels_size));
  #pragma omp target teams distribute parallel for map(tofrom: out[0:n])
  for (int i = 0; i < n; i++) {
    float r = 0.0f;
    for (int k = 0; k < k_size; ++k) r += out[i] * 2.0f;
    out[i] = r;
  }
}
int main() { params p = {128, 9}; float o[100]; car(o, p, 100); }
"""
    report = reports(src)[0]
    assert trips(report)["k"] == 3
    assert not unknown_trips(report)
    assert try_evaluate("powf(2, 3) + fabsf(-1) + log2f(8)", ConstEnv())[0] == 12


def test_the_macros_of_a_function_an_openmp_region_calls_are_its_constants():
    src = """
#define NAO_SAMPLES 8
#pragma omp declare target
void occlusion(float *col, int k)
{
  int i, j;
  int ntheta = NAO_SAMPLES;
  int nphi = NAO_SAMPLES / 2;
  float sum = 0.0f;
  for (j = 0; j < ntheta; j++)
    for (i = 0; i < nphi; i++)
      sum += col[k] * 2.0f;
  col[k] = sum;
}
#pragma omp end declare target
void render(float *col, int n)
{
  #pragma omp target teams distribute parallel for map(tofrom: col[0:n])
  for (int k = 0; k < n; k++) occlusion(col, k);
}
int main() { float c[100]; render(c, 100); }
"""
    report = reports(src)[0]
    assert trips(report)["j"] == 8 and trips(report)["i"] == 4
    assert not unknown_trips(report)


def test_a_comment_in_a_parameter_list_is_not_a_parameter():
    src = """
__global__ void k(float *a, const int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 1; j < width; j += 1) s += a[j] * 2.0f;
  a[i] = s;
}
void run(float *d,
    // the problem's length
    const int length,
    const float tolerance)
{
  dim3 grid(length / 256);
  dim3 block(256);
  k<<<grid, block>>>(d, length);
}
int main(int argc, char **argv) {
  int length = atoi(argv[1]);
  float *d;
  cudaMalloc((void **)&d, length * 4);
  run(d, length, 0.001f);
}
"""
    report = next(r for r in reports(src, options=AnalysisOptions(argv=("2048",))) if r.kernel.name == "k")
    assert trips(report) == {"j": 2047}
    assert not any("unknown" in a for a in texts(report.facts.assumptions))


def test_a_character_of_a_program_argument_folds():
    # an option loop that tells flags by their characters (`argv[i][0] == '-'`, `switch (argv[i][1])`)
    src = """
#include <stdlib.h>
int parseCommandline(int argc, char *argv[], int *q, int *size) {
  int i;
  char flag;
  for (i = 1; i < argc; i++) {
    if (argv[i][0] == '-') {
      flag = argv[i][1];
      switch (flag) {
        case 's':
          i++;
          *size = atoi(argv[i]);
          break;
        case 'q':
          *q = 1;
          break;
      }
    }
  }
  return 0;
}
void run(float *a, int size) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:size])
  for (int i = 0; i < size; i++) a[i] *= 2.0f;
}
int main(int argc, char *argv[]) {
  int size = 16, quiet = 0;
  parseCommandline(argc, argv, &quiet, &size);
  float *a = (float *)malloc(size * sizeof(float));
  run(a, size);
}
"""
    report = reports(src, options=AnalysisOptions(argv=("-q", "-s", "4096")))[0]
    assert trips(report) == {"i": 4096}
    assert not unknown_trips(report)
    env = ConstEnv(argv=("prog", "-s"))
    assert [try_evaluate(text, env)[0] for text in ("argv[1][0] == '-'", "argv[1][1]", "argv[1][2]")] == [1, ord("s"), 0]
    assert try_evaluate("argv[1][3]", env)[0] is None  # (past the string's end)


def test_a_bound_that_varies_with_the_worksharing_loop_s_index_runs_its_average():
    src = """
void rotate(float *m, const int n) {
  #pragma omp target teams distribute parallel for map(tofrom: m[0:n*n])
  for (int layer = 0; layer < n / 2; ++layer) {
    int first = layer;
    int last = n - 1 - layer;
    for (int i = first; i < last; ++i)
      m[first * n + i] = m[(last - i + first) * n + first] * 2.0f;
  }
}
int main() { float *m = new float[100 * 100]; rotate(m, 100); }
"""
    report = reports(src)[0]
    # layers 0 .. 49 run 99, 97, .. 1 iterations: 50 on average
    assert trips(report)["i"] == 50
    assert not unknown_trips(report)
    assert any("the `i` loop's bounds depend on the parallel loop's index: 50 iterations on average (1 to 99)" in t
               for t in texts(report.facts.evidence))


# options parsed into a struct through a pointer, in a helper of another source ---------------

OPTIONS_HEADER = """
struct cmdLineOpts { int its; int nx; int quiet; };
void ParseCommandLineOptions(int argc, char *argv[], int myRank, struct cmdLineOpts *opts);
"""

OPTIONS_UTIL = """
#include <stdlib.h>
#include <string.h>
#include "opts.h"
int StrToInt(const char *token, int *retVal)
{
   const char *c;
   char *endptr;
   const int decimal_base = 10;
   if (token == NULL)
      return 0;
   c = token;
   *retVal = (int)strtol(c, &endptr, decimal_base);
   if ((endptr != c) && ((*endptr == ' ') || (*endptr == '\\0')))
      return 1;
   else
      return 0;
}
void ParseCommandLineOptions(int argc, char *argv[], int myRank, struct cmdLineOpts *opts)
{
   if (argc > 1) {
      int i = 1;
      while (i < argc) {
         int ok;
         if (strcmp(argv[i], "-i") == 0) {
            ok = StrToInt(argv[i+1], &(opts->its));
            i += 2;
         }
         else if (strcmp(argv[i], "-s") == 0) {
            ok = StrToInt(argv[i+1], &(opts->nx));
            i += 2;
         }
         else if (strcmp(argv[i], "-q") == 0) {
            opts->quiet = 1;
            i++;
         }
         else {
            i++;
         }
      }
   }
}
"""

OPTIONS_MAIN = """
#include <stdlib.h>
#include "opts.h"
void run(float *a, int n, int reps) {
  for (int r = 0; r < reps; r++) {
    #pragma omp target teams distribute parallel for map(tofrom: a[0:n])
    for (int i = 0; i < n; i++) a[i] *= 2.0f;
  }
}
int main(int argc, char *argv[]) {
  struct cmdLineOpts opts;
  opts.its = 10;
  opts.nx = 30;
  opts.quiet = 0;
  ParseCommandLineOptions(argc, argv, 0, &opts);
  int n = opts.nx * opts.nx * (opts.quiet + 1);
  float *a = (float *)malloc(n * sizeof(float));
  run(a, n, opts.its);
}
"""


def test_options_a_helper_of_another_source_parses_into_a_struct_are_followed(tmp_path: Path):
    (tmp_path / "opts.h").write_text(OPTIONS_HEADER)
    (tmp_path / "util.cc").write_text(OPTIONS_UTIL)
    path = tmp_path / "main.cc"
    path.write_text(OPTIONS_MAIN)
    # `-s 128` through `StrToInt(argv[i+1], &(opts->nx))` (strtol with an end pointer), `-q` set directly
    report = reports(OPTIONS_MAIN, path, AnalysisOptions(argv=("-i", "100", "-s", "128", "-q")))[0]
    assert trips(report) == {"i": 128 * 128 * 2}
    assert not unknown_trips(report)
    # options not given keep the defaults main set before the call
    report = reports(OPTIONS_MAIN, path, AnalysisOptions(argv=("-i", "100")))[0]
    assert trips(report) == {"i": 900}


def test_a_helper_that_returns_early_on_the_run_is_not_followed():
    src = """
#include <stdlib.h>
#include <string.h>
int parse(int argc, char *argv[], int *size) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0) return 1;
    if (strcmp(argv[i], "-s") == 0) { *size = atoi(argv[i + 1]); i++; }
  }
  return 0;
}
void run(float *a, int size) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:size])
  for (int i = 0; i < size; i++) a[i] *= 2.0f;
}
int main(int argc, char *argv[]) {
  int size = 16;
  parse(argc, argv, &size);
  float *a = (float *)malloc(size * sizeof(float));
  run(a, size);
}
"""
    # the run returns at the end: the value it set holds
    report = reports(src, options=AnalysisOptions(argv=("-s", "4096")))[0]
    assert trips(report) == {"i": 4096}
    # `-h` first: the run returns inside the loop, before `-s` is read; `size` is not followed
    report = reports(src, options=AnalysisOptions(argv=("-h", "-s", "4096")))[0]
    assert any("trip count of the `i` loop unknown (`size`)" in a for a in unknown_trips(report))
