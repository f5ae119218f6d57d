"""Wrappers that launch a kernel, called only through a table of function pointers
(`typedef void (*step_fn)(int, int, float *); step_fn steps[] = {w1, w2};`, a pointer taken
from the table and called `ptrs[j](n, reps, x)`): each wrapper the table lists is a callee of
that call, with its arguments. Small programs of our own."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.models import KernelReport
from perflsp.kernels.pointer_tables import calls_through, tables_listing
from perflsp.source.parser import parse
from tests.engine_reports import reports
from tests.test_host_values import trips, unknown_trips

KERNELS = """
__global__ void add_k(float *x, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j++) x[i] += j;
}
__global__ void mul_k(float *x, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < n; j++) x[i] *= 0.5f;
}
void add_step(int n, int reps, float *x) { add_k<<<64, 128>>>(x, n, reps); }
void mul_step(int n, int reps, float *x) { mul_k<<<64, 128>>>(x, n, reps); }
void (*step_table[])(int n, int reps, float *x) = { add_step, mul_step };
"""

MAIN = """
#include <cstdlib>
typedef void (*step_fn)(int n, int reps, float *x);
extern step_fn step_table[];
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *x;
  cudaMalloc(&x, 8192 * sizeof(float));
  step_fn *steps = (step_fn *) malloc(sizeof(step_fn) * 2);
  for (int s = 0; s < 2; s++) steps[s] = step_table[s];
  for (int s = 0; s < 2; s++) steps[s](n, 7, x);
  return 0;
}
"""


def program(tmp_path: Path, main: str = MAIN) -> Path:
    (tmp_path / "main.cu").write_text(main)
    path = tmp_path / "kernels.cu"
    path.write_text(KERNELS)
    return path


def by_name(path: Path, argv: tuple[str, ...]) -> dict[str, KernelReport]:
    return {r.kernel.name: r for r in reports(path.read_text(), path=path, options=AnalysisOptions(argv=argv))}


def test_a_table_lists_its_functions():
    data = KERNELS.encode()
    assert tables_listing(data, parse(data).root_node, "mul_step") == ("step_table",)
    assert tables_listing(data, parse(data).root_node, "mul_k") == ()  # (launched, not listed)


def test_calls_through_the_table_and_through_pointers_taken_from_it():
    src = MAIN + """
void more(int n, float *x) {
  step_fn one = step_table[1];
  one(n, 2, x);
  (*one)(n, 3, x);
  step_table[0](n, 4, x);
  other_table[0](n, 5, x);
}
"""
    data = src.encode()
    calls = calls_through(data, parse(data).root_node, ("step_table",))
    texts = [data[c.start_byte:c.end_byte].decode() for c in calls]
    assert texts == ["steps[s](n, 7, x)", "one(n, 2, x)", "(*one)(n, 3, x)", "step_table[0](n, 4, x)"]


def test_each_wrapper_of_the_table_gets_the_arguments_of_the_call_through_it(tmp_path: Path):
    found = by_name(program(tmp_path), ("300",))
    for kernel in ("add_k", "mul_k"):
        assert trips(found[kernel]) == {"r": 7, "j": 300}
        assert unknown_trips(found[kernel]) == []


def test_a_call_with_other_arguments_than_the_wrappers_take_is_not_theirs(tmp_path: Path):
    found = by_name(program(tmp_path, MAIN.replace("steps[s](n, 7, x)", "steps[s](n, 7)")), ("300",))
    assert trips(found["add_k"])["j"] != 300
    assert any("`n`" in text for text in unknown_trips(found["add_k"]))


OMP = """
#include <cstdlib>
typedef void (*region_fn)(float *, int);
void scale(float *x, int n) {
  #pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; i++) x[i] *= 2.0f;
}
void shift(float *x, int n) {
  #pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; i++) x[i] += 1.0f;
}
region_fn regions[2] = { scale, shift };
int main(int argc, char **argv) {
  int n = atoi(argv[1]) * 1000;
  float *x = (float *) malloc(sizeof(float) * n);
  for (int r = 0; r < 2; r++) regions[r](x, n);
  return 0;
}
"""


def test_offloaded_functions_in_a_table_of_the_same_file(tmp_path: Path):
    path = tmp_path / "main.cpp"
    path.write_text(OMP)
    found = reports(OMP, path=path, options=AnalysisOptions(argv=("40",)))
    assert [trips(r) for r in found] == [{"i": 40_000}, {"i": 40_000}]
    assert all(unknown_trips(r) == [] for r in found)


# a wrapper handed to a timing harness, which calls it through its parameter -------------------

HARNESS = """
#define TILE 16
__global__ void scale_k(float *y, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < n; j++) y[i] *= 0.5f;
}
void run(float *y, int N, int M) {
  dim3 block(TILE, TILE);
  dim3 grid(M / block.x, N / block.y);
  scale_k<<<grid, block>>>(y, N, M);
}
void timed(void (*op)(float *, int, int), float *y, int N, int M) {
  for (int r = 0; r < 10; r++)
    (*op)(y, N, M);
}
int main() {
  float *y;
  int N, M;
  N = M = 2048;
  cudaMalloc((void **)&y, N * M * sizeof(float));
  timed(run, y, N, M);
}
"""


def test_a_wrapper_called_through_the_parameter_of_a_harness_gets_that_calls_arguments():
    from perflsp.kernels.pointer_tables import calls_through_callbacks
    from perflsp.kernels.definitions import function_definitions

    data = HARNESS.encode()
    root = parse(data).root_node
    (call,) = calls_through_callbacks(data, root, "run", function_definitions(root, data))
    assert data[call.start_byte:call.end_byte] == b"(*op)(y, N, M)"
    (report,) = reports(HARNESS)
    assert report.facts.work_items == 2048 * 2048  # the grid from M and N, not the production guess
    assert trips(report) == {"j": 2048}


def test_parameter_names_skip_types_defaults_brackets_and_pointer_signatures():
    from perflsp.kernels.definitions import parameter_names

    data = b"void f(int n = SIZE, const float *__restrict__ a, float b[][4], void (*run)(int), double) {}\n"
    (fn,) = parse(data).root_node.named_children
    assert parameter_names(fn, data) == ["n", "a", "b", "run", None]
