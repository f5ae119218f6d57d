"""Values the host code determines: what a kernel's loop bounds, launch shapes and OpenMP
iteration counts are, read from the host code that sets them. Small programs of our own, one per
rule."""

from __future__ import annotations

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import texts
from perflsp.kernels.consteval import NO_ARGUMENTS_NOTE
from perflsp.kernels.extract import extract
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse
from tests.engine_reports import reports


def model_of(src: str, argv: tuple[str, ...] | None = None) -> ProgramModel:
    data = src.encode()
    tree = parse(data)
    return ProgramModel(data, tree, extract(data, tree), argv=argv)


def launch_args(src: str, kernel: str, argv: tuple[str, ...] | None = None) -> list[object]:
    """The folded arguments of the first launch of `kernel`, read where it is launched."""
    model = model_of(src, argv)
    site = next(s for s in model.kernels.launches if s.name == kernel)
    return [model.fold_at(a.span.start_byte, a.text) if a.span is not None else None for a in site.args]


def trips(report: KernelReport) -> dict[str, float]:
    return {loop.variable: loop.trip_count for loop in report.facts.loops}


def unknown_trips(report: KernelReport) -> list[str]:
    return [a for a in texts(report.facts.assumptions) if "trip count of the" in a]


# control flow of the host code: branches whose condition folds, loops on their first pass ------

BRANCHES = """
__global__ void k(const float *x, float *y, int n, int reps, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int r = 0; r < reps; r++)
    for (int w = 0; w < width; w++) acc += x[(i + w) % n];
  y[i] = acc;
}
int main(int argc, char **argv) {
  int n = 1 << 20;
  int reps = 8;
  if (argc > 2) {
    reps = atoi(argv[2]);
  } else {
    n = n * 2;
  }
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  for (int width = 3; width < 64; width += 2) {
    int blocks = n / 256;
    blocks++;
    k<<<blocks, 256>>>(x, y, n, reps, width);
  }
  return 0;
}
"""


CHAINED = """
__global__ void k(float *x, int n, int m, int reps) { x[threadIdx.x] = n + m + reps; }
int main() {
  float *x;
  int n, m, reps;
  n = m = 1 << 12;
  reps = m;
  m = 3;
  k<<<n / 256, 256>>>(x, n, m, reps);
}
"""


def test_a_chained_assignment_gives_every_name_the_value():
    # `n = m = 4096`: both take it; `m` changed later leaves `reps` (read before) as it was
    assert launch_args(CHAINED, "k")[1:] == [4096, 3, 4096]


def test_a_branch_whose_condition_folds_is_taken_or_skipped():
    # no argument beyond argv[1]: the `else` branch runs, `reps` keeps its default
    assert launch_args(BRANCHES, "k", ("7",))[2:4] == [1 << 21, 8]
    # with argv[2], the `if` branch reads it and the `else` branch does not run
    assert launch_args(BRANCHES, "k", ("7", "3"))[2:4] == [1 << 20, 3]



def test_a_launch_in_a_loop_is_read_on_the_loop_s_first_pass():
    # `width` takes its first value (the update clause has not run yet); `blocks++` counts
    n, reps, width = launch_args(BRANCHES, "k", ("7",))[2:]
    assert width == 3
    model = model_of(BRANCHES, ("7",))
    site = next(s for s in model.kernels.launches if s.name == "k")
    assert model.fold_at(site.grid.span.start_byte, site.grid.text) == (1 << 21) // 256 + 1
    report = next(r for r in reports(BRANCHES, options=AnalysisOptions(argv=("7",))) if r.kernel.name == "k")
    assert trips(report) == {"r": 8, "w": 3}
    assert not unknown_trips(report)


def test_a_loop_that_does_not_run_leaves_its_variables_as_they_were():
    src = """
__global__ void k(float *y, int n) { for (int j = 0; j < n; j++) y[j] = 0.0f; }
int main(int argc, char **argv) {
  int n = 1024;
  for (int i = 1; i < argc; i++) n = atoi(argv[i]);
  float *y;
  cudaMalloc(&y, 4096 * sizeof(float));
  k<<<1, 1>>>(y, n);
}
"""
    assert launch_args(src, "k", ())[1] == 1024  # no arguments: the loop never runs
    # it runs once per argument, each pass followed: the last one sets `n`
    assert launch_args(src, "k", ("5", "7"))[1] == 7


SHADOWED = """
#include <cstdlib>
__global__ void k(float *y, long blocks, long n) { for (long b = blockIdx.x; b < blocks; b += gridDim.x) y[b] = n; }
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  long blocks = (n + 127) / 128;
  float *y = (float *) malloc(n * sizeof(float));
  for (long n = 0; n < 16; n++) y[n] = 0.0f;
  { long n = 5; y[n] = 1.0f; }
  k<<<64, 1>>>(y, blocks, n);
}
"""


def test_a_block_s_own_variable_does_not_change_the_outer_one_of_its_name():
    # the loop's and the block's `n` end with them: `blocks` and `n` after them are main's
    assert launch_args(SHADOWED, "k", ("1000000",))[1:] == [7813, 1000000]


# options read with getopt() --------------------------------------------------------------------

OPTIONS = """
__global__ void k(float *y, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j += 256) y[i] += y[j];
}
int main(int argc, char **argv) {
  int n = 1000;
  int reps = 3;
  int mode = 0;
  int opt;
  while ((opt = getopt(argc, argv, "n:r:vh")) != -1) {
    switch (opt) {
      case 'n':
        n = atoi(optarg);
        break;
      case 'r': reps = atoi(optarg); break;
      case 'v': mode = 1; break;
      case 'h': return 0;
    }
  }
  float *y;
  cudaMalloc(&y, n * sizeof(float));
  k<<<n / 256, 256>>>(y, n, reps + mode);
}
"""


def test_options_read_with_getopt_take_the_program_s_arguments():
    # `-n 20000`, `-r7` (attached), a flag; an operand before them does not stop glibc's getopt
    assert launch_args(OPTIONS, "k", ("in.txt", "-n", "20000", "-vr7"))[1:] == [20000, 8]
    # an option not given keeps its default; the loop's variables are unknown after it
    assert launch_args(OPTIONS, "k", ("-r", "5"))[1:] == [1000, 5]
    report = next(r for r in reports(OPTIONS, options=AnalysisOptions(argv=("-n", "2560", "-r", "4")))
                  if r.kernel.name == "k")
    assert trips(report) == {"r": 4, "j": 10}
    assert not unknown_trips(report)
    # without arguments the loop never runs: the defaults, said to rest on that assumption
    report = next(r for r in reports(OPTIONS) if r.kernel.name == "k")
    assert trips(report) == {"r": 3, "j": 4}  # (ceil(1000 / 256))
    assert any("run without arguments" in a for a in texts(report.facts.assumptions))
    # a long option this reading cannot match: the options stay unknown
    assert launch_args(OPTIONS, "k", ("--size=8",))[1:] == [None, None]


# options compared with strcmp(argv[i], "-x") ---------------------------------------------------

STRCMP_OPTIONS = """
__global__ void k(float *y, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j += 256) y[i] += y[j];
}
int main(int argc, char **argv) {
  int n = 1000;
  int reps = 3;
  float scale = 1.0f;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0) {
      n = atoi(argv[i + 1]);
      i++;
    } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
      i++;
      reps = atoi(argv[i]);
    } else if (strcmp(argv[i], "-s") == 0) {
      scale = atof(argv[i + 1]);
      i++;
      continue;
    }
    if (strcmp(argv[i], "-q") == 0) break;
  }
  float *y;
  cudaMalloc(&y, n * sizeof(float));
  k<<<n / 256, 256>>>(y, n, reps);
}
"""


def test_options_compared_with_strcmp_take_the_program_s_arguments():
    # each argument is compared in turn: `-n 20000` and `-r 7` set what they name
    assert launch_args(STRCMP_OPTIONS, "k", ("-n", "20000", "-r", "7"))[1:] == [20000, 7]
    # `continue` after `-s 2` and a value that is not an option leave the defaults; `-q` ends the loop
    assert launch_args(STRCMP_OPTIONS, "k", ("-s", "2", "-r", "5", "-q", "-n", "512"))[1:] == [1000, 5]
    report = next(r for r in reports(STRCMP_OPTIONS, options=AnalysisOptions(argv=("-n", "2560", "-r", "4")))
                  if r.kernel.name == "k")
    assert trips(report) == {"r": 4, "j": 10}
    assert not unknown_trips(report)
    # without arguments the loop never runs: the defaults, said to rest on that assumption
    report = next(r for r in reports(STRCMP_OPTIONS) if r.kernel.name == "k")
    assert trips(report) == {"r": 3, "j": 4}
    assert any("run without arguments" in a for a in texts(report.facts.assumptions))


def test_an_argument_loop_with_a_jump_whose_branch_is_unknown_is_not_followed():
    src = STRCMP_OPTIONS.replace('if (strcmp(argv[i], "-q") == 0) break;', "if (rand() > 3) break;")
    assert launch_args(src, "k", ("-n", "20000", "-r", "7"))[1:] == [None, None]


# out-parameters: a same-file callee assigns `*p` ---------------------------------------------------

OUT_PARAMETERS = """
__global__ void k(float *y, int n, int reps) {
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j++) y[j] += 1.0f;
}
void getargs(int argc, char **argv, int *size, int *reps, int scale) {
  *reps = 2 * scale;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      i++;
      *size = atoi(argv[i]) * scale;
    }
  }
}
void fill(int *count) {
  for (int i = 0; i < 4; i++) *count += i;
}
int main(int argc, char **argv) {
  int n = 100, reps = 1, other = 7;
  getargs(argc, argv, &n, &reps, 3);
  fill(&other);
  float *y;
  k<<<1, 1>>>(y, n, reps + other);
}
"""


def test_an_out_parameter_takes_the_value_its_callee_assigns():
    # (`fill` adds in a loop: run on the value `other` holds, 7 + 0 + 1 + 2 + 3, and `reps` is 6)
    assert launch_args(OUT_PARAMETERS, "k", ("-n", "50"))[1:] == [150, 19]
    report = next(r for r in reports(OUT_PARAMETERS.replace("fill(&other);", ""),
                                     options=AnalysisOptions(argv=("-n", "8"))) if r.kernel.name == "k")
    assert trips(report) == {"r": 13, "j": 24}
    assert not unknown_trips(report)
    # without arguments the callee's loop never runs: `*size` is not set, `n` keeps its 100, and
    # that rests on the run without arguments
    report = next(r for r in reports(OUT_PARAMETERS.replace("fill(&other);", "")) if r.kernel.name == "k")
    assert trips(report) == {"r": 13, "j": 100}
    assert NO_ARGUMENTS_NOTE in texts(report.facts.assumptions)
    # a callee that hands its pointer on may set it there: `n` is unknown
    handed = OUT_PARAMETERS.replace("fill(&other);", "").replace("  *reps = 2 * scale;\n", "  *reps = 2 * scale;\n  init(size);\n")
    report = next(r for r in reports(handed) if r.kernel.name == "k")
    assert any("`j` loop" in a for a in unknown_trips(report)) and trips(report).get("r") == 13


# struct fields set one by one in the host code -------------------------------------------------

def test_a_struct_field_set_in_the_host_code_folds_where_it_is_read():
    src = """
struct Params { int n; int iters; float scale; };
__global__ void k(float *y, int n, int iters) {
  for (int r = 0; r < iters; r++)
    for (int j = 0; j < n; j++) y[j] += 1.0f;
}
void init(int *v);
int main(int argc, char **argv) {
  Params p;
  p.n = argc > 1 ? atoi(argv[1]) : 64;
  p.iters = 2 * p.n;
  p.scale = 0.5f;
  float *y;
  k<<<1, 1>>>(y, p.n, p.iters);
  if (argc > 2) p.iters = 3;
  k<<<1, 1>>>(y, p.n, p.iters);
  init(&p.n);
  k<<<1, 1>>>(y, p.n, p.iters);
}
"""
    model = model_of(src, ("10",))
    sites = [s for s in model.kernels.launches if s.name == "k"]
    folded = [[model.fold_at(a.span.start_byte, a.text) for a in site.args[1:]] for site in sites]
    # set in straight-line code; a branch that folds (no third argument) does not run; `&p.n` may change it
    assert folded == [[10, 20], [10, 20], [None, 20]]
    report = next(r for r in reports(src) if r.kernel.name == "k")
    assert trips(report) == {"r": 128, "j": 64}


def test_a_struct_passed_to_a_kernel_by_value_carries_the_fields_the_host_set():
    src = """
struct NoiseParams { float scale; int octaves; int width; };
__global__ void k(float *y, NoiseParams params) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int o = 1; o < params.octaves; o++) y[i] += params.scale;
  for (int j = 0; j < params.width; j++) y[j] += 1.0f;
}
int main() {
  NoiseParams params;
  params.scale = 2.0f;
  params.octaves = 5;
  float *y;
  cudaMalloc(&y, 1024 * sizeof(float));
  k<<<4, 256>>>(y, params);
}
"""
    report = next(r for r in reports(src) if r.kernel.name == "k")
    assert trips(report)["o"] == 4
    assert any("`j` loop" in a for a in unknown_trips(report))  # (`width` is never set)


def test_a_switch_on_a_known_value_runs_the_case_it_selects():
    src = """
__global__ void k(float *y, int n) { for (int j = 0; j < n; j++) y[j] = 0.0f; }
int main(int argc, char **argv) {
  int kind = argc > 1 ? atoi(argv[1]) : 2;
  int n = 8;
  switch (kind) {
    case 1: n = 16; break;
    case 2: n = 32;
    case 3: n += 1; break;
    default: n = 64;
  }
  float *y;
  k<<<1, 1>>>(y, n);
}
"""
    assert launch_args(src, "k", ("1",))[1] == 16
    assert launch_args(src, "k", ("2",))[1] == 33  # (falls through to the next case)
    assert launch_args(src, "k", ("9",))[1] == 64



def test_an_element_of_a_constant_array_folds_with_a_known_index():
    src = """
const int tiles[] = {8, 16, 32};
__global__ void k(float *y, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < t; j++) y[i] += y[(i + j) % n];
}
int main(int argc, char **argv) {
  int sizeClass = atoi(argv[1]);
  const int probSizes[] = { 12288, 24576, 36864, 73728 };
  int sizes[] = { 1, 2 };
  int nAtom = probSizes[sizeClass];
  float *y;
  cudaMalloc(&y, nAtom * sizeof(float));
  k<<<nAtom / 256, 256>>>(y, nAtom, tiles[sizeClass - 1]);
  k<<<1, 1>>>(y, sizes[0], 1);
}
"""
    assert launch_args(src, "k", ("3",))[1:] == [73728, 32]
    # an index past the end, or an array that is not constant (it may be written): unknown
    assert launch_args(src, "k", ("7",))[1:] == [None, None]
    model = model_of(src, ("3",))
    second = [s for s in model.kernels.launches if s.name == "k"][1]
    assert model.fold_at(second.args[1].span.start_byte, second.args[1].text) is None
    report = next(r for r in reports(src, options=AnalysisOptions(argv=("2",))) if r.kernel.name == "k")
    assert trips(report) == {"j": 16}
    assert not unknown_trips(report)


# the editor's case: the program's arguments are not known ---------------------------------------

def test_without_program_arguments_the_host_code_s_defaults_are_assumed_and_said():
    # the values of a run without arguments: `argc > 2` is false
    assert launch_args(BRANCHES, "k")[2:4] == [1 << 21, 8]
    report = next(r for r in reports(BRANCHES) if r.kernel.name == "k")
    assert trips(report) == {"r": 8, "w": 3}
    assert any("run without arguments" in a for a in texts(report.facts.assumptions))
    # a value read from argv without a default stays unknown (production size), and a kernel
    # whose sizes do not depend on the arguments says nothing about them
    src = """
__global__ void k(float *y, int n) { for (int j = 0; j < n; j++) y[j] = 0.0f; }
__global__ void c(float *y) { for (int j = 0; j < 64; j++) y[j] = 1.0f; }
int main(int argc, char **argv) {
  if (argc != 2) return 1;
  int n = atoi(argv[1]);
  float *y;
  cudaMalloc(&y, 4096 * sizeof(float));
  k<<<1, 1>>>(y, n);
  c<<<1, 1>>>(y);
}
"""
    assert launch_args(src, "k")[1] is None
    by_name = {r.kernel.name: r for r in reports(src)}
    assert unknown_trips(by_name["k"])
    assert not any("run without arguments" in a for a in texts(by_name["c"].facts.assumptions))


# the editor's case (no program arguments): launches fold with what their callers pass ----------

CALLER = """
__global__ void smooth(const float *in, float *out, int n, int taps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int t = 0; t < taps; t++) s += in[(i + t) % n];
  out[i] = s / taps;
}
static void run(const float *in, float *out, int n, int taps) {
  smooth<<<(n + 255) / 256, 256>>>(in, out, n, taps);
}
int main() {
  float *in, *out;
  cudaMalloc(&in, (1 << 22) * sizeof(float));
  cudaMalloc(&out, (1 << 22) * sizeof(float));
  run(in, out, 1 << 22, 9);
  return 0;
}
"""


def test_without_program_arguments_a_launch_takes_its_callers_arguments():
    (report,) = [r for r in reports(CALLER) if r.kernel.name == "smooth"]
    assert trips(report) == {"t": 9}
    assert report.facts.work_items == 1 << 22
    assert not any("problem size unknown" in a for a in texts(report.facts.assumptions))


# file-scope variables that keep their initial value ----------------------------------------------

GLOBALS = """
#include <string>
int ARRAY_SIZE = 1 << 24;
unsigned int num_times = 100;
int scratch = 7;

void parse_arguments(int argc, char *argv[]) {
  for (int i = 1; i < argc; i++) {
    if (!std::string("--size").compare(argv[i])) ARRAY_SIZE = atoi(argv[++i]);
  }
}

void triad(double *a, const double *b, const double *c) {
  const int array_size = ARRAY_SIZE;
  #pragma omp target teams distribute parallel for
  for (int i = 0; i < array_size; i++) a[i] = b[i] + 0.4 * c[i];
}

void bump() { scratch++; }

int main(int argc, char *argv[]) {
  parse_arguments(argc, argv);
  double *a, *b, *c;
  for (unsigned k = 0; k < num_times; k++) triad(a, b, c);
  bump();
  return 0;
}
"""


def test_a_file_scope_variable_keeps_its_initial_value_where_nothing_writes_it():
    model = model_of(GLOBALS, ())
    region = model.kernels.omp_regions[0]
    assert model.fold_at(region.span.start_byte, "array_size") == 1 << 24  # the parse loop never runs
    assert model.fold_at(region.span.start_byte, "num_times") == 100  # never written
    assert model.fold_at(region.span.start_byte, "scratch") is None  # written by bump()
    # with arguments the parse loop runs and may set it
    assert model_of(GLOBALS, ("--size", "8")).fold_at(region.span.start_byte, "array_size") is None
    (report,) = [r for r in reports(GLOBALS, options=AnalysisOptions(argv=())) if not hasattr(r.kernel, "params")]
    assert report.facts.work_items == 1 << 24


def test_only_the_branch_a_condition_chooses_is_folded():
    src = """
__global__ void k(float *y, int n, int degree) { for (int d = 0; d < degree; d++) y[d % n] += 1.0f; }
int main(int argc, char **argv) {
  int degree = argc > 1 ? atoi(argv[1]) : 4;
  int n = argc > 2 ? atoi(argv[2]) : (argc > 1 ? 2 * atoi(argv[1]) : 1 << 20);
  float *y;
  cudaMalloc(&y, n * sizeof(float));
  k<<<1, 1>>>(y, n, degree);
}
"""
    assert launch_args(src, "k", ())[1:] == [1 << 20, 4]  # argv[1] is not read: it is not given
    assert launch_args(src, "k", ("9",))[1:] == [18, 9]


# callers in other files of the program -----------------------------------------------------------

KERNELS_H = """
#pragma once
template <class T>
void add(T *data, int n, int iters, T v) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int gid = 0; gid < n; gid++) {
    T s = data[gid];
    for (int j = 0; j < iters; ++j) s = s + v;
    data[gid] = s;
  }
}
"""

MAIN_CPP = """
#include <cstdlib>
#include "kernels.h"
template <typename T>
void test(const int repeat, const int count) {
  T *mem = (T *)malloc(sizeof(T) * count);
  #pragma omp target data map(alloc: mem[0:count])
  {
    for (int i = 0; i < 4; i++) add<T>(mem, count, repeat, 10.0);
  }
  free(mem);
}
int main(int argc, char *argv[]) {
  const int repeat = atoi(argv[1]);
  const int count = 2 * 1024 * 1024;
  test<float>(repeat, count);
  return 0;
}
"""


def test_a_function_of_a_header_takes_the_arguments_its_includer_passes(tmp_path):
    (tmp_path / "kernels.h").write_text(KERNELS_H)
    (tmp_path / "main.cpp").write_text(MAIN_CPP)
    (report,) = reports(KERNELS_H, tmp_path / "kernels.h", AnalysisOptions(argv=("30",)))
    assert report.facts.work_items == 2 * 1024 * 1024
    assert trips(report)["j"] == 30
    assert not unknown_trips(report)


def test_a_function_like_macro_folds_inside_a_local_s_value():
    # `gridconfig` is folded by name: its text calls the macro `ceil(a, b)`, not math's ceil
    src = """
#define ceil(a,b) ((a) % (b) == 0 ? (a) / (b) : ((a) / (b)) + 1)
__global__ void k(double *q, int n) { int i = blockIdx.x * 16 + threadIdx.x; if (i < n) q[i] = 0.0; }
void run(double *q, int N) {
  dim3 gridconfig (ceil(N, 16), 1, 1);
  k<<<gridconfig, 16>>>(q, N);
}
int main() { double *q; cudaMalloc(&q, 1000 * sizeof(double)); run(q, 1000); }
"""
    model = model_of(src)
    site = model.kernels.launches[0]
    assert model.fold_at(site.grid.span.start_byte, site.grid.text) == (63, 1, 1)


def test_parameters_are_read_through_three_levels_of_callers():
    src = """
__global__ void k(float *y, int n, int taps) { for (int t = 0; t < taps; t++) y[t % n] += 1.0f; }
void launch(float *y, int n, int taps) { k<<<1, 1>>>(y, n, taps); }
void stage(float *y, int n) { launch(y, n, n / 64); }
void run(float *y, int n) { stage(y, n); }
int main() { float *y; cudaMalloc(&y, 4096 * sizeof(float)); run(y, 4096); }
"""
    assert launch_args(src, "k")[1:] == [4096, 64]


def test_a_branch_on_a_parameter_folds_with_what_the_caller_passes():
    src = """
__global__ void k(float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0.0f; }
void launch(float *y, int n) {
  int block = 256;
  if (n < 1024) block = 64;
  k<<<(n + block - 1) / block, block>>>(y, n);
}
int main() { float *y; cudaMalloc(&y, 512 * sizeof(float)); launch(y, 512); }
"""
    model = model_of(src)
    site = model.kernels.launches[0]
    assert model.fold_at(site.block.span.start_byte, site.block.text) == 64
    assert model.fold_at(site.grid.span.start_byte, site.grid.text) == 8



SWEEP = """
__global__ void k(float *y, int points, int n) { for (int j = 0; j < points; j++) y[j * n] += 1.0f; }
void interpolate(float *y, int points, int n) { k<<<n / 256, 256>>>(y, points, n); }
double measure(float *y, int points, int n) {
  if (points > STARTS)   // too few points: nothing to launch
    interpolate(y, points, n);
  return 0.0;
}
int main() {
  float *y;
  cudaMalloc(&y, 64 << 20);
  for (int points = 1; points <= 11; points += STEP) measure(y, points, 1 << 20);
}
"""


def test_a_launch_its_callers_first_pass_skips_takes_the_first_pass_that_reaches_it():
    # `points` is 1 on the sweep's first pass, where `measure` launches nothing: the program's
    # first launch is on the first pass that passes `points > 1`, with 2 points (3 stepping by 2)
    assert launch_args(SWEEP.replace("STARTS", "1").replace("STEP", "1"), "k")[1:] == [2, 1 << 20]
    assert launch_args(SWEEP.replace("STARTS", "1").replace("STEP", "2"), "k")[1:] == [3, 1 << 20]
    doubling = SWEEP.replace("STARTS", "3").replace("points += STEP", "points *= 2")
    assert launch_args(doubling, "k")[1:] == [4, 1 << 20]
    counting = SWEEP.replace("STARTS", "4").replace("points += STEP", "points++")
    assert launch_args(counting, "k")[1:] == [5, 1 << 20]
    # a guard no pass of the sweep passes: the first pass's values, as before
    assert launch_args(SWEEP.replace("STARTS", "20").replace("STEP", "1"), "k")[1:] == [1, 1 << 20]
    # a guard the first pass passes: the first pass
    assert launch_args(SWEEP.replace("STARTS", "0").replace("STEP", "1"), "k")[1:] == [1, 1 << 20]



STREAMED = """
#include <fstream>
__global__ void k(float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0.0f; }
int main(int argc, char **argv) {
  int n = 0, m = 4, threads = 256;
  std::ifstream in(argv[1]);
  if (in.is_open()) { in >> n >> m; }
  threads = threads >> 2;
  float *y;
  k<<<(n + 255) / 256, threads>>>(y, n);
}
"""


def test_a_variable_read_from_a_stream_is_unknown_and_a_shift_still_folds():
    # `in >> n >> m;` writes `n` and `m` (a file's size): not the 0 they were declared with
    model = model_of(STREAMED, ("points.txt",))
    site = model.kernels.launches[0]
    assert launch_args(STREAMED, "k", ("points.txt",))[1] is None
    assert model.fold_at(site.grid.span.start_byte, site.grid.text) is None
    # `threads >> 2` is arithmetic: 64
    assert model.fold_at(site.block.span.start_byte, site.block.text) == 64


# template values of the function around an OpenMP region -----------------------------------------

def test_a_region_reads_its_function_s_template_values_from_the_calls_that_instantiate_it():
    src = """
template <int R, typename T, int STEP = 2>
void smooth(const T *in, T *out, int n) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 0; i < n; i++) {
    T sum = 0;
    for (int j = -R; j <= R; j += STEP) sum += in[(i + j + n) % n];
    out[i] = sum;
  }
}
int main() {
  const int n = 1 << 20;
  float *in = new float[n], *out = new float[n];
  #pragma omp target data map(to: in[0:n]) map(from: out[0:n])
  {
    smooth<4, float>(in, out, n);
  }
}
"""
    report = reports(src)[0]  # (the file's one region)
    assert trips(report) == {"i": 1 << 20, "j": 5}  # -4, -2, 0, 2, 4 (the default step)
    assert not unknown_trips(report)
    assert not any("template value" in a for a in texts(report.facts.assumptions))
    # several instantiations: the first, said
    report = reports(src.replace("smooth<4, float>(in, out, n);",
                                 "smooth<4, float>(in, out, n);\n    smooth<8, float, 1>(in, out, n);"))[0]
    assert trips(report)["j"] == 5
    assert any("template value `R` differs between the instantiations (4, 8): assumed 4, the first" in a
               for a in texts(report.facts.assumptions))
    # the instantiation judged, named from outside (a profile's kernel): its values, not the first caller's
    report = reports(src.replace("smooth<4, float>(in, out, n);",
                                 "smooth<4, float>(in, out, n);\n    smooth<8, float, 1>(in, out, n);"),
                     options=AnalysisOptions(instantiation=("8", "float", "1")))[0]
    assert trips(report)["j"] == 17
    assert not any("template value" in a for a in texts(report.facts.assumptions))


# a file whose tree is lost (one ERROR node): the function around a region parsed on its own ------

def _unparsable_functions() -> str:
    """Three function templates whose loops run juxtaposed macro uses: tree-sitter reads the
    whole file as one ERROR node."""
    out = "#define STEP s = s * v + v;\n#define STEP4 STEP STEP STEP STEP\n"
    for name in ("scale", "shift", "blend"):
        out += f"""
template <class T>
void {name}(T *data, int count, int rounds, T v) {{
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 0; i < count; i++) {{
    T s = data[i];
    for (int j = 0; j < rounds; j++) {{
      STEP4 STEP4 STEP4
      STEP4 STEP4 STEP4
    }}
    data[i] = s;
  }}
}}
"""
    return out + """
int main(int argc, char **argv) {
  const int count = 1 << 20;
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  float *data = new float[count];
  #pragma omp target data map(tofrom: data[0:count])
  {
    scale<float>(data, count, rounds, 1.5f);
    shift<float>(data, count, 2 * rounds, 1.5f);
    blend<float>(data, count, 3 * rounds, 1.5f);
  }
}
"""


def test_a_region_in_a_file_whose_tree_is_lost_reads_its_function_s_parameters_from_the_callers():
    src = _unparsable_functions()
    assert model_of(src).tree.root_node.type == "ERROR"  # (the case this is about)
    by_line = sorted(reports(src, options=AnalysisOptions(argv=("7",))), key=lambda r: r.kernel.span.start.line)
    assert [trips(r) for r in by_line] == [{"i": 1 << 20, "j": 7}, {"i": 1 << 20, "j": 14}, {"i": 1 << 20, "j": 21}]
    assert not any(unknown_trips(r) for r in by_line)


def test_a_local_of_the_host_code_folds_with_the_template_values_it_names():
    src = """
template <typename T, int CHANNELS>
void pack(const T *in, T *out, int size) {
  auto iters = size / CHANNELS;
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int it = 0; it < iters; it++) {
    for (int c = 0; c < CHANNELS; c++) out[it * CHANNELS + c] = in[c * iters + it];
  }
}
int main() {
  const int size = 1 << 20;
  float *in = new float[size], *out = new float[size];
  #pragma omp target data map(to: in[0:size]) map(from: out[0:size])
  {
    pack<float, 8>(in, out, size);
    pack<float, 4>(in, out, size);
  }
}
"""
    report = reports(src)[0]
    assert trips(report) == {"it": (1 << 20) / 8, "c": 8}
    assert not unknown_trips(report)
    assert any("template value `CHANNELS` differs between the instantiations (8, 4): assumed 8, the first" in a
               for a in texts(report.facts.assumptions))


# template types of the function around an OpenMP region ------------------------------------------

_TYPED_TEMPLATE = """
template <typename T>
void scale(T *a, int n) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:n])
  for (int i = 0; i < n; i++) a[i] = a[i] * 2;
}
int main() {
  const int n = 1 << 20;
  double *x = new double[n];
  float *y = new float[n];
  CALLS
}
"""


def test_a_region_reads_its_function_s_template_types_from_the_calls_that_instantiate_it():
    for calls in ("scale<double>(x, n);", "scale(x, n);"):
        report = reports(_TYPED_TEMPLATE.replace("CALLS", calls))[0]
        per_item = report.facts.per_item
        assert (per_item.fp64, per_item.fp32) == (1, 0), calls
        assert per_item.global_load_bytes == 8, calls
        assert not any("template type" in a for a in texts(report.facts.assumptions)), calls
    report = reports(_TYPED_TEMPLATE.replace("CALLS", "scale(y, n);"))[0]
    assert (report.facts.per_item.fp64, report.facts.per_item.fp32) == (0, 1)
    assert report.facts.per_item.global_load_bytes == 4
    assert not any("template type" in a for a in texts(report.facts.assumptions))


def test_template_types_that_differ_between_the_instantiations_take_the_first_said():
    report = reports(_TYPED_TEMPLATE.replace("CALLS", "scale(x, n);\n  scale<float>(y, n);"))[0]
    assert (report.facts.per_item.fp64, report.facts.per_item.fp32) == (1, 0)
    assert any("template type `T` differs between the instantiations (double, float): assumed double, the first" in a
               for a in texts(report.facts.assumptions))
    # no instantiating call: float, as before, said
    report = reports(_TYPED_TEMPLATE.replace("CALLS", ""))[0]
    assert (report.facts.per_item.fp64, report.facts.per_item.fp32) == (0, 1)
    assert report.facts.per_item.global_load_bytes == 4
    assert any("template type `T` of the enclosing code: assumed float" in a for a in texts(report.facts.assumptions))


# values set through reference parameters, and the callers a run reaches -------------------------

REFERENCES = """
__global__ void sum(const float *in, float *out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}
void shape(int n, int maxBlocks, int &blocks, int &threads) {
  threads = n < 512 ? 64 : 256;
  blocks = (n + threads - 1) / threads;
  if (blocks > maxBlocks) blocks = maxBlocks;
}
void limited(int &threads) {
  if (deviceLimit() < 1024) threads = 128;   // a device property: not known here
}
void reduce(int n, float *in, float *out) {
  int blocks = 0, threads = 0;
  shape(n, 64, blocks, threads);
  sum<<<blocks, threads>>>(in, out, n);
}
void sweep(int from) { for (int n = from; n < (1 << 26); n *= 2) reduce(n, 0, 0); }
int main(int argc, char **argv) {
  bool bench = argc > 1;
  if (bench) sweep(1);
  else reduce(1 << 24, 0, 0);
}
"""


def test_a_variable_passed_to_a_reference_parameter_takes_what_the_callee_assigns():
    model = model_of(REFERENCES)
    site = next(s for s in model.kernels.launches if s.name == "sum")
    assert model.fold_at(site.span.start_byte, "threads") == 256
    assert model.fold_at(site.span.start_byte, "blocks") == 64  # capped at maxBlocks


def test_a_reference_the_callee_may_set_where_the_source_cannot_say_is_unknown():
    src = REFERENCES.replace("shape(n, 64, blocks, threads);", "shape(n, 64, blocks, threads);\n  limited(threads);")
    model = model_of(src)
    site = next(s for s in model.kernels.launches if s.name == "sum")
    assert model.fold_at(site.span.start_byte, "threads") is None  # not 256, not the 0 it started with


def test_the_caller_a_run_without_arguments_reaches_comes_first():
    # `sweep` (from one element) comes first in the source; a run without arguments calls
    # `reduce` from `main`'s other branch
    model = model_of(REFERENCES)
    site = next(s for s in model.kernels.launches if s.name == "sum")
    assert model.fold_at(site.span.start_byte, "n") == 1 << 24


def test_a_reference_parameter_of_a_function_in_a_source_beside_the_file(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file
    from perflsp.hardware import load_database
    from perflsp.kernels.includes import IncludeResolver

    (tmp_path / "shape.cpp").write_text("void shape(int n, int &blocks, int &threads) {\n"
                                        "  threads = 128;\n  blocks = (n + threads - 1) / threads;\n}\n")
    (tmp_path / "main.cu").write_text("""
void shape(int n, int &blocks, int &threads);
__global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.f;
}
int main() {
  int n = 1 << 22, blocks = 0, threads = 0;
  float *x;
  shape(n, blocks, threads);
  scale<<<blocks, threads>>>(x, n);
}
""")
    (scale,) = check_file(tmp_path / "main.cu", [load_database().get("H100")], CheckSettings(), IncludeResolver()).kernels
    assert scale.facts.work_items == 1 << 22  # 32,768 blocks of 128 threads, set in shape.cpp


# the types a function template's callers name ----------------------------------------------------

TEMPLATE_HOST = """
template <typename T>
__global__ void scale(T *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }
template <typename T, int B>
void run(int n) {
  size_t bytes = n * sizeof(T);
  T *d;
  cudaMalloc(&d, bytes);
  scale<<<(n + B - 1) / B, B>>>(d, n);
}
int main() { run<float, 256>(1 << 20); }
"""


def test_sizeof_a_type_parameter_is_the_size_of_the_type_its_callers_name():
    model = model_of(TEMPLATE_HOST)
    at = TEMPLATE_HOST.index("cudaMalloc")
    assert model.fold_at(at, "bytes") == 4 << 20
    # calls naming two types: which one a launch inside measures is not said
    both = TEMPLATE_HOST.replace("run<float, 256>(1 << 20);", "run<float, 256>(1 << 20); run<double, 256>(1 << 20);")
    assert model_of(both).fold_at(both.index("cudaMalloc"), "bytes") is None


# a method defined outside its class, called on an object in another source of the folder -----

NOISE_CU = """
struct Params { float scale; int octaves; };
__device__ float layers(float x, Params p) {
  float sum = 0.0f;
  for (int i = 1; i < p.octaves; i++) sum += __sinf(x * i) * p.scale;
  return sum;
}
__global__ void noise(float *out, int n, Params p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = layers(i * 0.5f, p);
}
class Generator {
 public:
  void run(float *out, int n, Params p);
};
void Generator::run(float *out, int n, Params p) {
  noise<<<(n + 255) / 256, 256>>>(out, n, p);
}
"""

NOISE_MAIN = """
#include "noise.h"
int main() {
  Params params;
  params.scale = 0.5f;
  params.octaves = 5;
  float *out;
  cudaMalloc(&out, (1 << 20) * sizeof(float));
  Generator generator;
  generator.run(out, 1 << 20, params);
  Generator *again = &generator;
  again->run(out, 1 << 10, params);
  return 0;
}
"""


def test_a_method_takes_the_arguments_of_its_call_on_an_object_in_another_source(tmp_path):
    (tmp_path / "main.cu").write_text(NOISE_MAIN)
    (report,) = [r for r in reports(NOISE_CU, tmp_path / "noise.cu") if r.kernel.name == "noise"]
    assert trips(report) == {"i": 4}  # 1 .. octaves - 1, the struct's field set by the caller
    assert report.facts.work_items == 1 << 20  # the first call's `n`
    assert not unknown_trips(report)


def test_method_calls_are_found_on_objects_and_pointers():
    model = model_of(NOISE_MAIN)
    calls = model.method_calls_to("run")
    assert [model.ctx.text(c) for c in calls] == ["generator.run(out, 1 << 20, params)", "again->run(out, 1 << 10, params)"]
    assert model.calls_to("run") == []  # (a plain call's name only)


def test_a_method_defined_in_its_class_takes_the_arguments_of_its_call_on_an_object(tmp_path):
    inline = NOISE_CU.replace("  void run(float *out, int n, Params p);\n",
                              "  void run(float *out, int n, Params p) { noise<<<(n + 255) / 256, 256>>>(out, n, p); }\n")
    inline = inline[:inline.index("void Generator::run")]
    (tmp_path / "main.cu").write_text(NOISE_MAIN)
    (report,) = [r for r in reports(inline, tmp_path / "noise.cu") if r.kernel.name == "noise"]
    assert trips(report) == {"i": 4} and report.facts.work_items == 1 << 20


COUNTED_UP = """
#include <cstdlib>
__global__ void k(float *y, int m, int r) { for (int j = 0; j < m; j++) y[j * r + threadIdx.x] = 0.0f; }
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int m = n;
  while (m % 64 != 0) m++;
  int s = n / 16;
  s -= (s % 256 == 0 ? 0 : s % 256);
  int r = 16;
  while (s * r < n) r++;
  float *y;
  k<<<1, 64>>>(y, m, r);
}
"""


def test_a_loop_that_only_steps_a_variable_is_run_to_its_end():
    # 100000 rounded up to a multiple of 64; r raised until s * r covers n (s = 6144)
    assert launch_args(COUNTED_UP, "k", ("100000",))[1:] == [100032, 17]
    # without the arguments the conditions do not fold: unknown, as before
    assert launch_args(COUNTED_UP, "k", ())[1:] == [None, None]
