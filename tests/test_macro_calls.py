"""Calls that a function-like macro makes where it is used (`#define RUN(n) run<T, n>(size, x)`
then `RUN(64);`), and the template values a launching function template takes from its callers.
Small programs of our own, one per rule."""

from __future__ import annotations

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.notes import texts
from perflsp.kernels.extract import extract
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse
from tests.engine_reports import reports

# A driver of benchmark sizes: the size is read from argv in a helper, the launching function
# is a template over its block size, each block size run through a macro defined in the helper.
DRIVER = """
#include <cstdlib>
template <typename T, int THREADS>
__global__ void sum(T *out, const T *in, long n) {
  T acc = 0;
  for (long i = threadIdx.x; i < n; i += THREADS) acc += in[i];
  out[threadIdx.x] = acc;
}
template <typename T, int THREADS>
void eval(const long n, T *d_out, const T *d_in) {
  sum<T, THREADS><<<1, THREADS>>>(d_out, d_in, n);
}
template <typename T>
void driver(char **argv) {
  const long n = atol(argv[1]);
  T *d_in, *d_out;
  cudaMalloc(&d_in, n * sizeof(T));
  cudaMalloc(&d_out, 1024 * sizeof(T));
  #define EVAL(threads) \\
    eval<T, threads>(n, d_out, \\
                     d_in)
  EVAL(64);
  EVAL(128);
}
int main(int argc, char *argv[]) {
  driver<float>(argv);
  return 0;
}
"""


def model_of(src: str, argv: tuple[str, ...] | None = None) -> ProgramModel:
    data = src.encode()
    tree = parse(data)
    return ProgramModel(data, tree, extract(data, tree), argv=argv)


def test_a_macro_s_uses_are_calls_of_the_function_its_body_calls():
    calls = model_of(DRIVER).macro_calls_to("eval")
    assert [(c.arguments, c.template_arguments) for c in calls] == [
        (("n", "d_out", "d_in"), ("T", "64")), (("n", "d_out", "d_in"), ("T", "128"))]
    assert [DRIVER.encode()[c.site.start_byte:c.site.end_byte].decode() for c in calls] == ["EVAL(64)", "EVAL(128)"]
    assert model_of(DRIVER).macro_calls_to("driver") == []  # (written calls are `calls_to`'s)


def test_a_launch_reached_through_a_macro_takes_the_sizes_of_the_function_using_it():
    (report,) = [r for r in reports(DRIVER, options=AnalysisOptions(argv=("4096",))) if r.kernel.name == "sum"]
    notes = texts(report.facts.assumptions)
    assert not any("trip count" in a or "step of the" in a for a in notes), notes
    # 4,096 elements over the first use's 64 threads: 64 iterations a thread, one block
    assert [loop.trip_count for loop in report.facts.loops] == [64]
    assert report.facts.work_items == 64


def test_a_launching_function_template_takes_the_template_values_its_caller_writes():
    written = DRIVER.replace("  #define EVAL(threads) \\\n    eval<T, threads>(n, d_out, \\\n                     d_in)\n"
                             "  EVAL(64);\n  EVAL(128);\n", "  eval<T, 256>(n, d_out, d_in);\n")
    assert "EVAL" not in written
    (report,) = [r for r in reports(written, options=AnalysisOptions(argv=("4096",))) if r.kernel.name == "sum"]
    notes = texts(report.facts.assumptions)
    assert not any("template value" in a or "block `THREADS`" in a for a in notes), notes
    assert report.facts.work_items == 256
    assert [loop.trip_count for loop in report.facts.loops] == [16]
