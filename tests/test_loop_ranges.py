"""Loops whose bound is read from an offsets or counts array: their average trip count from the
sizes of the arrays around them (`analysis.walk_ranges`), stated as an assumption, and today's
fixed guess where the sizes are not known. Small programs of our own."""

import pytest

from perflsp.analysis.costs import CostModel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import NoteKind, texts
from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler
from perflsp.kernels.models import OmpRegion
from tests.engine_reports import kernel_reports, reports
from tests.test_compiled import TOOLCHAIN, analyse, needs_cuda

ROW_GUESS = CostModel().assumed_row_trip  # a loop over a row read from memory, its size unknown

HOST = """
int main() {
  int rows = 1000, nnz = 8000;
  int *ptr, *col; float *val, *x, *y;
  cudaMalloc(&ptr, (rows + 1) * sizeof(int));
  cudaMalloc(&col, nnz * sizeof(int));
  cudaMalloc(&val, nnz * sizeof(float));
  cudaMalloc(&x, rows * sizeof(float));
  cudaMalloc(&y, rows * sizeof(float));
  LAUNCH;
}
"""

SCALAR_CSR = """
__global__ void spmv(const int *ptr, const int *col, const float *val, const float *x, float *y, int rows) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) {
    float sum = 0.0f;
    for (int j = ptr[i]; j < ptr[i + 1]; j++) sum += val[j] * x[col[j]];
    y[i] = sum;
  }
}
"""


def only(src: str, launch: str) -> KernelReport:
    found = kernel_reports(src + HOST.replace("LAUNCH", launch))
    assert len(found) == 1
    return next(iter(found.values()))


def loop_trips(report: KernelReport) -> list[float]:
    return [loop.trip_count for loop in report.facts.loops]


def test_a_row_of_offsets_runs_the_indexed_elements_over_the_rows():
    report = only(SCALAR_CSR, "spmv<<<(rows + 255) / 256, 256>>>(ptr, col, val, x, y, rows)")
    assert loop_trips(report) == [pytest.approx(8.0)]
    notes = [n for n in report.facts.assumptions if n.kind == NoteKind.LOOP_TRIP]
    assert texts(notes) == ["line 6: average trip of the `j` loop from the sizes: 8,000 elements of `col` over "
                            "1,000 rows (`ptr` has 1,001 offsets) = 8"]
    assert notes[0].value == pytest.approx(8.0)
    # one multiply-add per stored element: the launch's FP32 work is 2 * nnz (of its 1024 threads,
    # the 1000 inside `i < rows`)
    assert report.facts.total.fp32 == pytest.approx(2 * 8000, rel=0.01)


def test_offsets_read_into_variables_before_the_loop():
    src = """
__global__ void spmv(const int *ptr, const int *col, const float *val, const float *x, float *y, int rows) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  int start = ptr[i];
  int end;
  end = ptr[i + 1];
  float sum = 0.0f;
  for (int k = start; k < end; ++k) sum += val[k] * x[col[k]];
  y[i] = sum;
}
"""
    report = only(src, "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")
    assert loop_trips(report) == [pytest.approx(8.0)]
    assert "average trip of the `k` loop from the sizes: 8,000 elements of `col` over 1,000 rows" in texts(report.facts.assumptions)[0]


def test_a_count_read_as_the_difference_of_a_rows_offsets():
    # the row's elements through a pointer to its first (`list = col + ptr[i]`), counted from 0
    src = """
__global__ void spmv(const int *ptr, const int *col, const float *val, const float *x, float *y, int rows) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const int count = ptr[i + 1] - ptr[i];
  const int *list = col + ptr[i];
  float sum = 0.0f;
  for (int k = 0; k < count; ++k) sum += x[list[k]];
  y[i] = sum;
}
"""
    report = only(src, "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")
    assert loop_trips(report) == [pytest.approx(8.0)]
    assert "average trip of the `k` loop from the sizes: 8,000 elements of `col` over 1,000 rows" in texts(report.facts.assumptions)[0]
    # a count of two different rows, or from another start, is no row of offsets
    for other in ("ptr[i + 2] - ptr[i]", "ptr[i + 1] - col[i]"):
        unsized = only(src.replace("ptr[i + 1] - ptr[i]", other), "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")
        assert not any("from the sizes" in a for a in texts(unsized.facts.assumptions))
        assert loop_trips(unsized) == [ROW_GUESS]  # a count read from memory, unknown
    # from 1, or up to one less than the count: the row less what the loop leaves of it
    assert loop_trips(only(src.replace("int k = 0;", "int k = 1;"), "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")) == [7.0]
    assert loop_trips(only(src.replace("int k = 0;", "int k = 1;").replace("k < count;", "k < count - 1;"),
                           "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")) == [6.0]


def test_a_warp_per_row_shares_the_row_among_its_lanes():
    src = """
__global__ void spmv(const int *ptr, const int *col, const float *val, const float *x, float *y, int rows) {
  int m = blockIdx.x * blockDim.y + threadIdx.y;
  if (m < rows) {
    int s = ptr[m], e = ptr[m + 1];
    float t = 0.0f;
    for (int n = s + threadIdx.x; n < e; n += 32) t += val[n] * x[col[n]];
    y[m] = t;
  }
}
"""
    report = only(src, "spmv<<<rows / 4, dim3(32, 4)>>>(ptr, col, val, x, y, rows)")
    # not a grid-stride loop over a production size: 8 elements a row, over 32 lanes
    assert loop_trips(report) == [pytest.approx(8.0 / 32)]
    assert texts(report.facts.assumptions)[0].endswith("= 8, 0.25 per work item (step 32)")


def test_a_range_from_two_arrays_of_the_same_rows():
    src = """
__global__ void cells(const int *first, const int *last, const float *val, float *y, int rows) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= rows) return;
  int b = first[c];
  int e = last[c];
  float s = 0.0f;
  for (int j = b; j < e; j++) s += val[j];
  y[c] = s;
}
"""
    # the row's first element in `ptr` (now of 1,000 entries), its end in `x` (1,000 entries)
    host = HOST.replace("cudaMalloc(&ptr, (rows + 1)", "cudaMalloc(&ptr, rows")
    report = kernel_reports(src + host.replace("LAUNCH", "cells<<<4, 256>>>(ptr, (const int *)x, val, y, rows)"))["cells"]
    assert loop_trips(report) == [pytest.approx(8.0)]
    assert "8,000 elements of `val` over 1,000 rows (`first` and `last` have 1,000 entries)" in texts(report.facts.assumptions)[0]


def test_a_range_from_two_arrays_of_different_sizes_keeps_the_fixed_guess():
    src = SCALAR_CSR.replace("for (int j = ptr[i]; j < ptr[i + 1]; j++)", "for (int j = ptr[i]; j < x2[i]; j++)").replace(
        "float *y, int rows", "float *y, const int *x2, int rows")
    report = only(src, "spmv<<<4, 256>>>(ptr, col, val, x, y, (const int *)y, rows)")
    assert loop_trips(report) == [ROW_GUESS]


NEIGHBOURS = """
__global__ void sum(const int *count, const int *list, const float *v, float *out, int N, int M) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float s = 0.0f;
  for (int k = 0; k < count[n]; ++k) { int m = list[INDEX]; s += v[m]; }
  out[n] = s;
}
int main() {
  int N = 4096, M = 20;
  int *count, *list; float *v, *out;
  cudaMalloc(&count, N * sizeof(int));
  cudaMalloc(&list, N * M * sizeof(int));
  cudaMalloc(&v, N * sizeof(float));
  cudaMalloc(&out, N * sizeof(float));
  sum<<<N / 128, 128>>>(count, list, v, out, N, M);
}
"""


@pytest.mark.parametrize(("index", "over"), [("n + k * N", "stride 4096"), ("n * M + k", "4,096 rows")])
def test_a_count_is_at_most_the_listed_elements_over_the_rows(index, over):
    report = kernel_reports(NEIGHBOURS.replace("INDEX", index))["sum"]
    assert loop_trips(report) == [pytest.approx(20.0)]
    text = texts(report.facts.assumptions)[0]
    assert f"average trip of the `k` loop from the sizes: at most 81,920 elements of `list` over {over} = 20" in text


@pytest.mark.parametrize("index", ["at(n, k, N)", "p++"])
def test_an_index_that_calls_or_steps_is_not_read_ahead(index):
    # reading `list[at(n, k, N)]` or `list[p++]` ahead of the walk would inline a call or step `p`
    # before the loop: such an index bounds nothing, and the fixed guess stays
    src = NEIGHBOURS.replace("int m = list[INDEX];", f"int m = list[{index}];").replace(
        "float s = 0.0f;", "float s = 0.0f; int p = n;").replace(
        "__global__ void sum", "__device__ int at(int n, int k, int N) { return n + k * N; }\n__global__ void sum")
    report = kernel_reports(src)["sum"]
    assert loop_trips(report) == [ROW_GUESS]
    assert f"trip count of the `k` loop unknown (`count[n]`): assumed {ROW_GUESS:g}" in texts(report.facts.assumptions)[0]


def test_a_count_over_rows_that_may_overlap_keeps_the_fixed_guess():
    # `list[n + k]`: row n's elements are row n + 1's shifted by one, so the sizes bound nothing
    report = kernel_reports(NEIGHBOURS.replace("INDEX", "n + k"))["sum"]
    assert loop_trips(report) == [ROW_GUESS]
    assert f"trip count of the `k` loop unknown (`count[n]`): assumed {ROW_GUESS:g}" in texts(report.facts.assumptions)[0]


def test_a_count_whose_stride_exceeds_the_rows_is_bounded_by_the_stride():
    src = NEIGHBOURS.replace("INDEX", "n + k * 8192").replace("N * M * sizeof(int)", "8192 * M * sizeof(int)")
    report = kernel_reports(src)["sum"]
    assert loop_trips(report) == [pytest.approx(20.0)]
    assert "at most 163,840 elements of `list` over stride 8192 = 20" in texts(report.facts.assumptions)[0]


def test_without_the_sizes_the_fixed_guess_stays():
    src = SCALAR_CSR + """
void run(int *ptr, int *col, float *val, float *x, float *y, int rows) {
  spmv<<<(rows + 255) / 256, 256>>>(ptr, col, val, x, y, rows);
}
"""
    report = kernel_reports(src)["spmv"]
    assert loop_trips(report) == [ROW_GUESS]
    assert any(f"trip count of the `j` loop unknown (`ptr[i + 1]`): assumed {ROW_GUESS:g}" in t for t in texts(report.facts.assumptions))


def test_offsets_not_of_one_row_keep_the_fixed_guess():
    # `ptr[i]` to `ptr[i + 2]` spans two rows: not the average of one
    report = only(SCALAR_CSR.replace("ptr[i + 1]", "ptr[i + 2]"), "spmv<<<4, 256>>>(ptr, col, val, x, y, rows)")
    assert loop_trips(report) == [ROW_GUESS]


def test_an_openmp_region_of_the_same_shape_reads_its_map_sections():
    src = """
void spmv(int rows, int nnz, const int *ptr, const int *col, const float *val, const float *x, float *y) {
  #pragma omp target teams distribute parallel for map(to: ptr[0:rows+1], col[0:nnz], val[0:nnz], x[0:rows]) map(from: y[0:rows])
  for (int i = 0; i < rows; i++) {
    float sum = 0.0f;
    for (int j = ptr[i]; j < ptr[i + 1]; j++) sum += val[j] * x[col[j]];
    y[i] = sum;
  }
}
int main() {
  int *ptr, *col; float *val, *x, *y;
  spmv(2000, 50000, ptr, col, val, x, y);
}
"""
    region = next(r for r in reports(src) if isinstance(r.kernel, OmpRegion))
    inner = [loop for loop in region.facts.loops if not loop.parallel]
    assert [loop.trip_count for loop in inner] == [pytest.approx(25.0)]
    assert "average trip of the `j` loop from the sizes: 50,000 elements of `col` over 2,000 rows" in " ".join(
        texts(region.facts.assumptions))


@needs_cuda
def test_the_compiled_counts_weigh_the_loop_by_the_average_trip(tmp_path):
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    program = "#include <cuda_runtime.h>\n" + SCALAR_CSR + HOST.replace(
        "LAUNCH", "spmv<<<(rows + 255) / 256, 256>>>(ptr, col, val, x, y, rows)").replace("nnz = 8000", "nnz = 24000")
    sized = tmp_path / "sized.cu"
    sized.write_text(program)
    # the same program, the elements' arrays not allocated where the analysis can see them
    unsized = tmp_path / "unsized.cu"
    unsized.write_text(program.replace("cudaMalloc(&col, nnz * sizeof(int));", "").replace(
        "cudaMalloc(&val, nnz * sizeof(float));", ""))
    with_sizes = analyse(sized, compiler)["spmv"].facts
    without = analyse(unsized, compiler)["spmv"].facts
    assert "operations counted in the compiled code" in texts(with_sizes.evidence)[0]
    # (per launched thread: 1000 of the 1024 are inside `i < rows`)
    inside = 1000 / 1024
    assert with_sizes.per_item.loop_iterations == pytest.approx(24.0 * inside)
    assert without.per_item.loop_iterations == pytest.approx(ROW_GUESS * inside)
    # one FFMA (2 FLOP) a stored element: the trips the sizes add to the guess, per thread inside
    assert with_sizes.per_item.fp32 - without.per_item.fp32 == pytest.approx(2 * (24 - ROW_GUESS) * inside)
