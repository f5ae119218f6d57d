"""A bounds guard against a size the walk knows (`walk_branches.guard_share`): a launch larger
than the size leaves its extra threads idle, and only the rest do the guarded work."""

from __future__ import annotations

import pytest

from tests.engine_reports import reports

GUARDED = """
#define N 500000
__global__ void axpy(float *x, float *y) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) y[idx] = 2.0f * x[idx] + y[idx];
}
__global__ void early_exit(float *x, float *y) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= N) return;
  y[idx] = x[idx];
}
__global__ void plane(float *a, int nx, int ny) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < nx && y < ny) a[y * nx + x] = 0.0f;
}
__global__ void pairs(const float *p, float *score, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (j > i && i < n && j < n) score[i * n + j] = p[i] * p[j];
}
__global__ void lower(float *a, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col <= row) a[row * n + col] = 1.0f;
}
int main() {
  float *x, *y;
  cudaMalloc(&x, N * sizeof(float)); cudaMalloc(&y, N * sizeof(float));
  axpy<<<2000, 500>>>(x, y);
  early_exit<<<4000, 250>>>(x, y);
  plane<<<dim3(64, 64), dim3(16, 16)>>>(x, 512, 256);
  pairs<<<dim3(64, 64), dim3(16, 16)>>>(x, y, 1024);
  lower<<<dim3(64, 64), dim3(16, 16)>>>(x, 1024);
}
"""


def _facts(name):
    return next(r for r in reports(GUARDED) if r.name == name).facts


def test_threads_beyond_a_known_size_skip_the_guarded_work():
    # 1,000,000 threads over 500,000 elements: half of them load, add and store
    facts = _facts("axpy")
    assert facts.work_items == 1_000_000
    assert facts.per_item.global_loads == pytest.approx(1.0, rel=0.01)
    assert facts.per_item.global_stores == pytest.approx(0.5, rel=0.01)
    assert facts.total.fp32 == pytest.approx(2 * 500_000, rel=0.01)


def test_an_early_return_leaves_the_threads_inside_the_size():
    facts = _facts("early_exit")
    assert facts.per_item.global_stores == pytest.approx(0.5, rel=0.01)


def test_guards_joined_by_and_multiply_over_their_axes():
    # 1024 x 1024 threads over a 512 x 256 plane: an eighth of them store
    facts = _facts("plane")
    assert facts.per_item.global_stores == pytest.approx(512 * 256 / (1024 * 1024), rel=0.01)


def test_a_comparison_of_two_thread_indices_passes_the_pairs_on_its_side():
    # `j > i` over a 1024 x 1024 grid of pairs: the upper triangle without its diagonal
    # (1024 * 1023 / 2 pairs), not every thread; `col <= row`: the lower one with it
    upper = _facts("pairs")
    assert upper.total.fp32 == pytest.approx(1024 * 1023 / 2, rel=0.01)
    lower = _facts("lower")
    assert lower.per_item.global_stores == pytest.approx(1025 / 2048, rel=0.01)


def test_a_guard_against_an_unknown_size_beside_a_known_share_keeps_that_share():
    # `j > i && j < *n`, the size read from memory: the pairs' share of the threads, the unknown
    # size letting every thread through as it does alone
    src = """
    __global__ void pairs(const float *p, float *score, const int *n) {
      int j = blockIdx.x * blockDim.x + threadIdx.x;
      int i = blockIdx.y * blockDim.y + threadIdx.y;
      if (j > i && j < *n) score[i * 1024 + j] = p[i] * p[j];
    }
    int main() {
      float *x, *y; int *n;
      pairs<<<dim3(64, 64), dim3(16, 16)>>>(x, y, n);
    }
    """
    facts = next(r for r in reports(src) if r.name == "pairs").facts
    assert facts.total.fp32 == pytest.approx(1024 * 1023 / 2, rel=0.01)


def test_a_collapsed_openmp_nest_over_pairs_runs_the_triangle_its_guard_keeps():
    src = """
    void pairs(const float *p, float *score, int n) {
      #pragma omp target teams distribute parallel for collapse(2)
      for (int i = 0; i < 1024; i++)
        for (int j = 0; j < 1024; j++)
          if (j > i && j < n) score[i * 1024 + j] = p[i] * p[j];
    }
    """
    (region,) = reports(src)
    assert region.facts.total.fp32 == pytest.approx(1024 * 1023 / 2, rel=0.01)


def test_under_an_assumed_launch_a_known_size_does_not_idle_the_guessed_threads():
    # no launch in the file: the production-size guess is not a launch larger than `N`
    src = GUARDED.split("int main()")[0]
    facts = next(r for r in reports(src) if r.name == "axpy").facts
    assert facts.per_item.global_stores == pytest.approx(1.0)


def test_an_openmp_region_of_an_assumed_team_count_keeps_its_threads_busy():
    # a CUDA-style region whose `num_teams` the source does not fold: the guessed teams are not a
    # launch larger than the particles
    src = """
    #include <omp.h>
    void bounds(const unsigned *hash, unsigned *out, int work, int n) {
      #pragma omp target teams num_teams(work / 64) thread_limit(64)
      {
        #pragma omp parallel
        {
          int index = omp_get_team_num() * 64 + omp_get_thread_num();
          if (index < 4096) out[index] = hash[index];
        }
      }
    }
    """
    (region,) = reports(src)
    assert region.facts.per_item.global_stores == pytest.approx(1.0)


# (also compiled: `test_compiled_weights`)
ELIMINATE = """\
__global__ void eliminate(float *a, const float *pivot) {
  int row = threadIdx.x;
  for (int k = 0; k < 256; k++) {
    if (row > k) a[row] -= pivot[k] * a[k];
    __syncthreads();
  }
}
int main() { float *a, *p; eliminate<<<1, 256>>>(a, p); }
"""


def test_a_thread_index_against_a_loop_counter_takes_its_share_over_the_passes():
    # `if (row > k)` in `for (k = 0; k < 256; k++)` over 256 threads: each pass the rows below
    # the pivot, a triangle over the passes (255 * 256 / 2 of 256 * 256), not every thread
    facts = next(r for r in reports(ELIMINATE) if r.name == "eliminate").facts
    assert facts.total.fp32 == pytest.approx(2 * 255 * 256 / 2, rel=0.01)


def test_a_loop_of_a_guessed_trip_count_gives_its_counter_no_range_to_compare_with():
    # `for (k = 0; k < *n; k++)`: the trip count is assumed, and so would be any share of the
    # threads below `k`; the guard keeps the reading of a bound the walk does not know (in bounds)
    src = """
    __global__ void below(float *a, const float *pivot, const int *n) {
      int row = threadIdx.x;
      for (int k = 0; k < *n; k++) {
        if (row < k) a[row] -= pivot[k] * a[k];
      }
    }
    int main() { float *a, *p; int *n; below<<<1, 256>>>(a, p, n); }
    """
    facts = next(r for r in reports(src) if r.name == "below").facts
    (loop,) = facts.loops
    assert loop.origin in ("assumed", "data-dependent")
    assert facts.per_item.fp32 == pytest.approx(2 * loop.trip_count)


WINDOW = """\
__global__ void window(const float *x, const int *marks, float *y, int w, int h) {
  int row = blockIdx.y * 16 + threadIdx.y;
  int column = blockIdx.x * 16 + threadIdx.x;
  if (row < h && column < w) {
    int s = marks[row];
    if (column >= s - 2 && column <= s + 1) {
      y[row * w + column] = x[row * w + column] * 2.0f + 1.0f;
    }
  }
}
int main() {
  int w = 1024, h = 1024;
  float *x, *y; int *marks;
  cudaMalloc(&x, w * h * 4); cudaMalloc(&y, w * h * 4); cudaMalloc(&marks, h * 4);
  window<<<dim3(w / 16, h / 16), dim3(16, 16)>>>(x, marks, y, w, h);
}
"""


def test_a_thread_index_within_a_window_about_a_value_read_from_memory_passes_the_window_s_width():
    # `column >= s - 2 && column <= s + 1`, `s` read from memory: 4 of the row's 1,024 columns
    # wherever the window lies, not every thread (nor half of them, a data-dependent test's split)
    facts = next(r for r in reports(WINDOW) if r.name == "window").facts
    assert facts.total.fp32 == pytest.approx(1024 * 4 * 2, rel=0.01)
    assert facts.total.global_stores == pytest.approx(1024 * 4, rel=0.01)


def test_bounds_of_two_values_or_of_a_value_the_thread_moves_are_no_window():
    # the two sides bound the index by different values, or by one that moves with the thread:
    # no window of known width (every thread passes, as before)
    for guard in ("column >= s - 2 && column <= t + 1", "column >= s - 2 && column <= column + 1"):
        src = WINDOW.replace("column >= s - 2 && column <= s + 1", guard).replace(
            "int s = marks[row];", "int s = marks[row], t = marks[row + 1];")
        facts = next(r for r in reports(src) if r.name == "window").facts
        assert facts.total.fp32 == pytest.approx(1024 * 1024 * 2, rel=0.01), guard
