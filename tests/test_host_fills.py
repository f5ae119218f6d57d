"""What the host stores in an array (perflsp.kernels.host_fills), and the trip counts of the
kernel loops bounded by it. Small programs of our own."""

from __future__ import annotations

import pytest

from perflsp.analysis.notes import texts
from perflsp.kernels.extract import extract
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse
from tests.engine_reports import kernel_reports, reports


def model_of(src: str) -> ProgramModel:
    data = src.encode()
    tree = parse(data)
    return ProgramModel(data, tree, extract(data, tree))


FILLS = """
#include <random>
#include <cstdlib>
#define TYPES 40
int main(int argc, char **argv) {
  const int n = 1000, cols = 8;
  std::mt19937 g(7);
  std::uniform_int_distribution<int> pick(0, TYPES);
  std::normal_distribution<float> noise(3.0f, 0.5f);
  int *bonds = (int *)malloc(n * sizeof(int));
  int *sizes = (int *)malloc(n * sizeof(int));
  int *offsets = (int *)malloc((n + 1) * sizeof(int));
  int *starts = (int *)malloc((n + 1) * sizeof(int));
  int *ids = (int *)malloc(n * sizeof(int));
  float *w = (float *)malloc(n * sizeof(float));
  int *once = (int *)malloc(n * sizeof(int));
  offsets[0] = 0;
  once[0] = 0;
  for (int i = 0; i < n; i++) {
    bonds[i] = pick(g);
    sizes[i] = rand() % 10 + 1;
    w[i] = noise(g) * 2.0f;
    ids[i] = i % 7;
  }
  for (int i = 1; i <= n; i++) offsets[i] = offsets[i - 1] + (rand() % n + 1) * cols;
  size_t total = 0;
  int k;
  for (k = 0; k < n; k++) {
    starts[k] = total;
    total += (rand() % 10 + 1) * 100;
  }
  starts[k] = total;
  return 0;
}
"""


@pytest.mark.parametrize(("array", "mean", "step"), [
    ("bonds", 20.0, None),             # uniform over 0..40
    ("sizes", 5.5, None),              # 1..10
    ("w", 6.0, None),                  # a normal distribution's mean, doubled
    ("offsets", None, 500.5 * 8),      # a running sum of (1..n) * cols
    ("starts", None, 550.0),           # a running total stored as each row's start
])
def test_the_mean_of_what_the_host_stores(array, mean, step):
    fill = model_of(FILLS).host_fill(array)
    assert fill is not None
    assert (fill.mean, fill.step) == (pytest.approx(mean) if mean is not None else None,
                                      pytest.approx(step) if step is not None else None)


def test_values_with_no_known_mean_say_nothing():
    model = model_of(FILLS)
    # `i % 7` depends on the loop's index (its first value is not its mean); `once[0] = 0` is
    # one element, not the array's values; nothing stores into `missing`
    assert model.host_fill("ids") is None
    assert model.host_fill("once") is None
    assert model.host_fill("missing") is None


KERNELS = """
#include <random>
#include <cstdlib>
__device__ double sweep(const double *h, const int len) {
  double s = 0.0;
  for (int i = 1; i < len - 1; i++)
    s += h[i] * h[i + 1];
  return s;
}
__global__ void pairs(const int *__restrict__ links, const float *__restrict__ x, float *__restrict__ f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.f;
  int m = links[i];
  for (int p = 0; p < m; p++)
    s += x[(i + p) % n] * 0.5f;
  f[i] = s;
}
__global__ void rows(const double *__restrict__ h, const int *__restrict__ starts, double *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int offset = starts[i];
  const int len = starts[i + 1] - offset;
  out[i] = sweep(h + offset, len);
}
template <typename T>
void upload(T *dst, const T *src, int count) { cudaMemcpy(dst, src, count * sizeof(T), cudaMemcpyHostToDevice); }
int main() {
  const int n = 1 << 16;
  std::mt19937 g(1);
  std::uniform_int_distribution<int> pick(0, 40);
  int *links = (int *)malloc(n * sizeof(int));
  int *starts = (int *)malloc((n + 1) * sizeof(int));
  for (int i = 0; i < n; i++) links[i] = pick(g);
  size_t total = 0;
  int k;
  for (k = 0; k < n; k++) {
    starts[k] = total;
    total += (rand() % 10 + 1) * 100;
  }
  starts[k] = total;
  int *d_links, *d_starts; float *x, *f; double *h, *out;
  cudaMalloc(&d_links, n * sizeof(int)); cudaMalloc(&d_starts, (n + 1) * sizeof(int));
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&f, n * sizeof(float));
  cudaMalloc(&h, total * sizeof(double)); cudaMalloc(&out, n * sizeof(double));
  upload(d_links, links, n);
  cudaMemcpy(d_starts, starts, (n + 1) * sizeof(int), cudaMemcpyHostToDevice);
  pairs<<<n / 256, 256>>>(d_links, x, f, n);
  rows<<<n / 256, 256>>>(h, d_starts, out, n);
}
"""


def test_a_loop_over_a_count_the_host_draws_runs_its_mean():
    found = kernel_reports(KERNELS)
    # the count copied (through a function of the program's own) from `links`, uniform over 0..40
    pairs = found["pairs"].facts
    assert next(loop for loop in pairs.loops if loop.variable == "p").trip_count == pytest.approx(20.0)
    assert pairs.per_item.fp32 == pytest.approx(2 * 20.0, rel=0.01)
    assert any("what the host stores in `links` (`links[i] = pick(g)`): the count, 20 on average" in a
               for a in texts(pairs.assumptions))
    # a row of offsets stored as a running total of (1..10) * 100, passed to a function that
    # leaves out its first and last elements: 550 - 2 passes
    rows = found["rows"].facts
    assert next(loop for loop in rows.loops if loop.variable == "i").trip_count == pytest.approx(548.0)
    assert rows.per_item.fp64 == pytest.approx(2 * 548.0, rel=0.01)


OMP = """
#include <random>
void run(const int *count, const float *x, float *y, int n) {
  #pragma omp target teams distribute parallel for map(to: count[0:n], x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) {
    float s = 0.f;
    for (int k = 0; k < count[i]; k++) s += x[(i + k) % n];
    y[i] = s;
  }
}
int main() {
  const int n = 1 << 16;
  int *count = new int[n];
  float *x = new float[n], *y = new float[n];
  for (int i = 0; i < n; i++) count[i] = rand() % 9;
  run(count, x, y, n);
}
"""


def test_an_openmp_region_reads_the_host_s_array_by_its_name():
    (region,) = [r for r in reports(OMP) if r.kernel.name != "main"]
    assert next(loop for loop in region.facts.loops if loop.variable == "k").trip_count == pytest.approx(4.0)


LANES = """
#include <cstdlib>
__global__ void shift(const float *__restrict__ in, float *__restrict__ out, const int *__restrict__ offset, int dim) {
  const int b = blockIdx.x;
  const int range = offset[b + 1] - offset[b];
  for (int idx = threadIdx.x; idx < dim; idx += blockDim.x)
    for (int k = idx; k < range; k += dim)
      out[offset[b] + k] = in[offset[b] + k] + 1.0f;
}
int main() {
  const int rows = 512, dim = 128;
  int *offset = (int *)malloc((rows + 1) * sizeof(int));
  offset[0] = 0;
  for (int i = 1; i <= rows; i++) offset[i] = offset[i - 1] + (rand() % 64 + 1) * dim;
  int *d_offset; float *in, *out;
  cudaMalloc(&d_offset, (rows + 1) * sizeof(int));
  cudaMalloc(&in, rows * 64 * dim * sizeof(float)); cudaMalloc(&out, rows * 64 * dim * sizeof(float));
  cudaMemcpy(d_offset, offset, (rows + 1) * sizeof(int), cudaMemcpyHostToDevice);
  shift<<<rows, dim>>>(in, out, d_offset, dim);
}
"""


def test_lanes_that_share_a_row_from_their_own_positions_split_it():
    # the threads of a block start at their own positions in the row and step by the block:
    # each runs the row's average length (32.5 x 128) over 128 lanes, not an assumed 32 passes
    facts = kernel_reports(LANES)["shift"].facts
    assert next(loop for loop in facts.loops if loop.variable == "k").trip_count == pytest.approx(32.5)
    assert facts.per_item.fp32 == pytest.approx(32.5, rel=0.01)


BROKEN = """
#include <random>
__global__ void k(const int *c, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int p = 0; p < c[i]; p++) y[i] += 1.0f;
}
int main() {
  int n = 1000;
  std::uniform_int_distribution<int> d(;
  int *c = (int *)malloc(n * 4);
  for (int i = 0; i < n; i++) c[i] = () + d(g) % 0 / (rand() % 0) + c[i];
  for (int i = 0; i < n; i++) c[i] = c[i - 1] + ;
  for (int i = 0; i < n; i++) c[i] = rand() % ((((((((((((((((((((((((7)))))))))))))))))))))))) + 0 * 0 * 0 * 0 * 0;
  int *d_c; float *y;
  cudaMemcpy(d_c, c, n * 4, cudaMemcpyHostToDevice);
  k<<<4, 256>>>(d_c, y, n);
}
"""


def test_fills_the_parser_recovers_from_are_skipped_and_the_first_readable_one_counts():
    # a distribution declared with no arguments, a remainder by 0, an empty operand: no mean;
    # the last loop's fill is read (7 remainders: 3 on average), the statement quoted shortened
    facts = kernel_reports(BROKEN)["k"].facts
    assert next(loop for loop in facts.loops if loop.variable == "p").trip_count == pytest.approx(3.0)
    (note,) = [a for a in texts(facts.assumptions) if "what the host stores" in a]
    assert "…" in note and len(note) < 200
