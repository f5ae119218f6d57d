"""Host helpers that compute a size in a loop, run on their known arguments (`helper_runs`):
a returned log2, an out-parameter set inside a loop that breaks, an argument scanner that
returns an index, a helper defined in another source of the folder; and what is not run (a
run past its step budget, a write to a global, a reference parameter). Small programs of our own."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.notes import texts
from perflsp.kernels.consteval import NO_ARGUMENTS_NOTE, try_evaluate
from perflsp.kernels.helper_runs import MAX_STEPS, assigned_condition
from perflsp.source.parser import parse
from tests.engine_reports import reports
from tests.test_host_values import launch_args, model_of, trips, unknown_trips

HELPERS = """
int log2Of(unsigned int length) {
  int levels = 0;
  while ((1u << levels) < length) levels++;
  return levels;
}
int getLevels(unsigned int length, unsigned int *levels) {
  int status = 1;
  for (unsigned int i = 0; i < 24; ++i) {
    if (length == (1U << i)) { *levels = i; status = 0; break; }
  }
  return status;
}
int ArgPos(char *str, int argc, char **argv) {
  int a;
  for (a = 1; a < argc; a++) if (!strcmp(str, argv[a])) {
    if (a == argc - 1) { return -1; }
    return a;
  }
  return -1;
}
"""

KERNEL = """
__global__ void k(float *a, int levels, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int l = 0; l < levels; l++) a[i] += 2.0f * a[i + l];
  for (int s = 0; s < steps; s++) a[i] += 3.0f;
}
"""

MAIN = HELPERS + KERNEL + """
int main(int argc, char **argv) {
  int n = 1 << 12, i;
  int size = 5;
  if ((i = ArgPos((char *)"-size", argc, argv)) > 0) size = atoi(argv[i + 1]);
  unsigned int levels = 0;
  if (getLevels(n, &levels) == 1) return 1;
  float *d;
  cudaMalloc((void **)&d, n * sizeof(float));
  k<<<n / 256, 256>>>(d, levels, log2Of(size * 100));
}
"""


def test_a_helper_computing_a_log2_in_a_loop_is_run_on_its_arguments():
    env = model_of(HELPERS).env
    assert try_evaluate("log2Of(1000)", env) == (10, None)
    assert try_evaluate("log2Of(1024) + log2Of(1)", env) == (10, None)


def test_an_out_parameter_set_in_a_loop_that_breaks_takes_the_value_of_the_run():
    # 4096 = 2^12: `levels` is 12; `-size 7`: 700 rounds up to 2^10
    assert launch_args(MAIN, "k", ("-size", "7"))[1:] == [12, 10]
    report = next(r for r in reports(MAIN, options=AnalysisOptions(argv=("-size", "7"))) if r.kernel.name == "k")
    assert {loop.variable: loop.trip_count for loop in report.facts.loops} == {"l": 12, "s": 10}
    assert not unknown_trips(report)


def test_an_argument_scanner_returns_the_index_of_its_option():
    # the option given: its value follows it
    assert launch_args(MAIN, "k", ("-v", "-size", "3"))[2] == 9  # (300 rounds up to 2^9)
    # not given (or given last, without a value): the scanner says -1, `size` keeps its 5
    assert launch_args(MAIN, "k", ("-v",))[2] == 9  # (500 rounds up to 2^9)
    assert launch_args(MAIN, "k", ("-size",))[2] == 9
    # without arguments the value rests on a run without any, said as an assumption
    report = next(r for r in reports(MAIN) if r.kernel.name == "k")
    assert trips(report) == {"l": 12, "s": 9}
    assert NO_ARGUMENTS_NOTE in texts(report.facts.assumptions)


def test_a_condition_that_assigns_reads_as_the_value_it_assigns():
    data = b"void f() { if ((i = ArgPos(\"-n\", argc, argv)) > 0) {} }"
    condition = parse(data).root_node.named_children[0].child_by_field_name("body").named_children[0] \
        .child_by_field_name("condition")
    assert assigned_condition(data, condition) == '(((ArgPos("-n", argc, argv))) > 0)'
    data = b"void f() { if ((i += 2) > 0) {} }"
    condition = parse(data).root_node.named_children[0].child_by_field_name("body").named_children[0] \
        .child_by_field_name("condition")
    assert assigned_condition(data, condition) is None  # (a compound assignment: not a plain value)


def test_a_helper_in_another_source_of_the_folder_is_run(tmp_path: Path):
    (tmp_path / "util.cpp").write_text("""
size_t roundUpPow2(size_t n) {
  size_t p = 1;
  while (p < n) { p <<= 1; }
  return p;
}
""")
    src = KERNEL + """
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *d;
  k<<<1, 256>>>(d, roundUpPow2(n) / 64, 3);
}
"""
    (tmp_path / "main.cu").write_text(src)
    (report,) = reports(src, tmp_path / "main.cu", AnalysisOptions(argv=("3000",)))
    assert trips(report) == {"l": 64, "s": 3}
    assert not unknown_trips(report)


def test_what_a_run_cannot_follow_is_not_folded():
    src = """
int counter;
int spins(int n) { int s = 0; while (1) { s++; } return s; }
int global(int n) { counter = n; return n; }
int byRef(int &n) { n = 4; return n; }
int table(int n) { int t[4] = {1, 2, 3, 4}; return t[n]; }
int checked(int n) { if (n > 8) { printf("too large"); exit(1); } return n * 2; }
"""
    env = model_of(src).env
    value, reason = try_evaluate("spins(3)", env)
    assert value is None and reason is not None and f"{MAX_STEPS} steps" in reason  # (bounded)
    assert try_evaluate("global(3)", env)[0] is None  # (writes a global)
    assert try_evaluate("byRef(3)", env)[0] is None  # (may write the caller's variable)
    assert try_evaluate("table(2)", env)[0] is None  # (a local array: not a plain value)
    assert try_evaluate("checked(3)", env) == (6, None)  # (a call statement that prints: run past)
    assert try_evaluate("checked(9)", env)[0] is None  # (the run ends the program)


# the CUDA samples' command-line helpers, read by their libraries' rules -------------------------

SAMPLE_OPTIONS = """
__global__ void k(float *a, int nz, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int z = 0; z < nz; z++) a[i + z] += 1.0f;
  for (int r = 0; r < reps; r++) a[i] *= 0.5f;
}
int main(int argc, char **argv) {
  int dimz = 48, reps = 2;
  char *text = 0;
  shrGetCmdLineArgumenti(argc, (const char **)argv, "dimz", &dimz);
  if (shrGetCmdLineArgumentstr(argc, (const char **)argv, "reps", &text)) reps = atoi(text);
  if (checkCmdLineFlag(argc, (const char **)argv, "quick")) reps = 1;
  int scale = getCmdLineArgumentInt(argc, (const char **)argv, "scale");
  float *d;
  k<<<1, 256>>>(d, dimz * (scale > 0 ? scale : 1), reps);
}
"""


def test_the_option_getters_read_their_libraries_argument_forms():
    from perflsp.kernels.sample_options import returned, written

    argv = ("program", "--Size=64", "-n128", "--qatest", "--dimx=192", "-flag=1")
    assert returned("getCmdLineArgumentInt", argv, "size") == 64  # (a prefix, any case)
    assert returned("getCmdLineArgumentInt", argv, "n") == 128  # (the value may follow the name)
    assert returned("getCmdLineArgumentInt", argv, "missing") == 0
    assert returned("getCmdLineArgumentFloat", ("p", "--eps=0.5x"), "eps") == 0.5
    assert returned("checkCmdLineFlag", argv, "qatest") == 1
    assert returned("checkCmdLineFlag", argv, "flag") == 1  # (`-flag=1` names the flag too)
    assert returned("checkCmdLineFlag", argv, "qa") == 0  # (a flag's whole name)
    assert written("shrGetCmdLineArgumenti", argv, "dimx") == (1, 192)
    assert written("shrGetCmdLineArgumenti", argv, "dim") == (0, None)  # (shrUtils: the exact name)
    assert written("shrGetCmdLineArgumentstr", argv, "dimx") == (1, "192")


def test_option_getters_of_the_cuda_samples_fold_with_the_programs_arguments():
    assert launch_args(SAMPLE_OPTIONS, "k", ("--dimz=64", "--reps=5", "--scale=2"))[1:] == [128, 5]
    assert launch_args(SAMPLE_OPTIONS, "k", ("--dimz=64", "--reps=5", "--quick"))[1:] == [64, 1]
    # not given: the defaults the host code sets stay (the getters leave them), said to rest on
    # a run without arguments where none are given
    assert launch_args(SAMPLE_OPTIONS, "k", ("--other",))[1:] == [48, 2]
    report = next(r for r in reports(SAMPLE_OPTIONS) if r.kernel.name == "k")
    assert trips(report) == {"z": 48, "r": 2}
    assert NO_ARGUMENTS_NOTE in texts(report.facts.assumptions)


def test_a_template_helper_called_with_explicit_types_runs_with_them():
    src = """
template <typename T>
T roundToPowerOf2(T val) {
  int bytes = sizeof(T);
  val--;
  for (int i = 0; i < bytes; i++) val |= val >> (1 << i);
  val++;
  return val;
}
template <typename T> T half(T v) { T r = v; r = r / 2; return r; }
void scaled(float *out, int n) { for (int i = 0; i < n; i++) *out = *out * 1.5f; }
"""
    env = model_of(src).env
    assert try_evaluate("roundToPowerOf2<unsigned int>(3000)", env) == (4096, None)
    assert try_evaluate("half<float>(3)", env) == (1.5, None)  # (the argument converted to T)
    assert try_evaluate("half<int>(3)", env) == (1, None)  # (C's integer division)
    assert try_evaluate("a < 3 > (2)", env)[0] is None  # (a comparison, not a list of types)


def test_a_launch_in_nested_host_loops_takes_their_first_pass():
    # the inner loop starts from the outer one's variable: on the first pass `q` is `m`'s first
    # value (a loop that grows a size launches its smallest first; the engine takes that pass)
    src = KERNEL + """
int main(int argc, char **argv) {
  float *d;
  for (int m = 2; m <= 4; ++m)
    for (int w = 4; w <= 8; ++w)
      for (int q = m; q <= 4; ++q) {
        if (getenv("SKIP")) continue;
        k<<<1, 256>>>(d, q, w);
      }
}
"""
    assert launch_args(src, "k")[1:] == [2, 4]
