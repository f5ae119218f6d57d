"""Loop forms whose trip count the source states or implies although the condition is not a
counter against a plain bound: GNU statement-expression bounds (min/max macros), bounds that
vary with the block index (averaged over the grid), retry loops around a compare-and-swap,
binary searches and halving loops."""

import pytest

from perflsp.analysis.block_bounds import index_points
from perflsp.analysis.engine import analyze
from perflsp.analysis.fragment_elements import elements_per_lane
from perflsp.analysis.notes import NoteSource, texts
from perflsp.analysis.options import DEFAULT_OPTIONS
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

RTX3080 = load_database().get("RTX 3080")

MIN_MACRO = "#define tile_min(x,y) ({ __typeof__(x) _x = (x); __typeof__(y) _y = (y); _x < _y ? _x : _y; })\n"


def kernel(src: str, name: str):
    data = src.encode()
    tree = parse(data)
    return next(k for k in analyze(data, tree, extract(data, tree), [RTX3080], DEFAULT_OPTIONS).kernels if k.name == name)


def only_loop(k):
    assert len(k.facts.loops) == 1
    return k.facts.loops[0]


def test_a_statement_expression_bound_folds_to_its_last_expression():
    src = MIN_MACRO + """
__global__ void tiles(float *a, const float *b) {
  int t = threadIdx.x;
  for (int c = 0; c <= tile_min(200, 7 * 10 + 30); c += 32)
    a[c + t] = b[c + t] * 2.0f;
}
int main() { float *a, *b; tiles<<<4, 32>>>(a, b); }
"""
    loop = only_loop(kernel(src, "tiles"))
    assert loop.trip_count == 4  # c = 0, 32, 64, 96 (<= min(200, 100))
    assert loop.origin == "constant"
    assert not any("unknown" in t for t in texts(kernel(src, "tiles").facts.assumptions))


def test_a_bound_varying_with_the_block_index_runs_its_average_over_the_grid():
    src = MIN_MACRO + """
__global__ void tiles(float *a, const float *b) {
  int b0 = blockIdx.x, t0 = threadIdx.x;
  for (int c1 = 0; c1 <= tile_min(368, 32 * b0 + 30); c1 += 32)
    a[c1 + t0] += b[c1] * 2.0f;
}
int main() { float *a, *b; tiles<<<12, 32>>>(a, b); }
"""
    k = kernel(src, "tiles")
    loop = only_loop(k)
    # block b runs b + 1 passes up to block 10 (bound 32 b + 30), block 11 runs 12 (bound 368)
    assert loop.trip_count == pytest.approx((sum(range(1, 12)) + 12) / 12)
    assert loop.origin == "launch"
    assert "line 5: the `c1` loop's bounds depend on the block index: 6.5 iterations on average (1 to 12)" \
        in texts(k.facts.evidence)
    assert not any("c1" in t for t in texts(k.facts.assumptions))


def test_a_block_stride_loop_up_to_the_blocks_own_position_runs_its_average_over_the_grid():
    # a triangular (causal) loop: block t's threads stride over 0..t; the block's position is no
    # size the loop strides over (the grid's 48 rows of heads are narrower than the stride), so it
    # is not read as a grid-stride loop over the production size
    src = """
__global__ void causal(float *out, const float *att, int T) {
  int t = blockIdx.x, head = blockIdx.y;
  float s = 0.0f;
  for (int t2 = threadIdx.x; t2 <= t; t2 += 256) s += att[(head * T + t) * T + t2];
  out[(head * T + t) * 256 + threadIdx.x] = s;
}
int main() { float *o, *a; causal<<<dim3(1024, 48), 256>>>(o, a, 1024); }
"""
    loop = only_loop(kernel(src, "causal"))
    # block t: threads 0..t pass once, each pass 256 wide: (t + 1) / 256 per thread on average
    assert loop.trip_count == pytest.approx(sum(range(1, 1025)) / 1024 / 256, rel=0.05)
    assert loop.origin == "launch"


def test_a_block_dependent_start_is_folded_with_the_bound():
    src = """
__global__ void rows(float *a) {
  for (int i = 4 * blockIdx.x; i < 4 * blockIdx.x + 2 + blockIdx.x; i++)
    a[i] = 0.0f;
}
int main() { float *a; rows<<<4, 64>>>(a); }
"""
    loop = only_loop(kernel(src, "rows"))
    assert loop.trip_count == pytest.approx((2 + 3 + 4 + 5) / 4)


def test_a_block_dependent_bound_without_a_launch_stays_an_assumption():
    src = MIN_MACRO + """
__global__ void tiles(float *a, int n) {
  for (int c1 = 0; c1 <= tile_min(n, 32 * blockIdx.x + 30); c1 += 32)
    a[c1] = 0.0f;
}
"""
    k = kernel(src, "tiles")
    assert only_loop(k).origin == "assumed"
    assert any("trip count of the `c1` loop unknown" in t for t in texts(k.facts.assumptions))


def test_index_points_cover_small_extents_and_sample_large_ones_evenly():
    assert index_points({"bx": 3.0}) == [{"bx": 0.0}, {"bx": 1.0}, {"bx": 2.0}]
    sampled = index_points({"bx": 10000.0})
    assert len(sampled) == 512 and sampled[0] == {"bx": 0.0} and sampled[-1] == {"bx": 9999.0}
    assert len(index_points({"bx": 1000.0, "tx": 1000.0})) == 22 * 22


def test_a_band_of_a_tile_per_thread_runs_its_average_over_the_threads_and_the_outer_loop():
    src = MIN_MACRO + """
#define tile_max(x,y) ({ __typeof__(x) _x = (x); __typeof__(y) _y = (y); _x > _y ? _x : _y; })
__global__ void band(float *a, const float *b) {
  int b0 = blockIdx.x, t0 = threadIdx.x;
  for (int c1 = 64 * b0; c1 <= 64 * b0 + 63; c1 += 8)
    for (int c3 = tile_max(0, 2 * t0 - c1 + 64 * b0); c3 <= tile_min(7, 2 * t0 - c1 + 64 * b0 + 1); c3 += 1)
      a[c1 + c3] += b[t0];
}
int main() { float *a, *b; band<<<2, 32>>>(a, b); }
"""
    k = kernel(src, "band")
    outer, inner = k.facts.loops
    assert outer.trip_count == 8
    # each thread's band is the two columns 2 t0, 2 t0 + 1 of the block's 64: 2 of 64 per pass
    assert inner.trip_count == pytest.approx(2 / 8, rel=0.05)
    assert inner.origin == "launch"
    # (the block's offset cancels: `c1 - 64 * b0` is the pass of the outer loop)
    assert "line 7: the `c3` loop's bounds depend on the thread index and the enclosing loops' counters: " \
           "0.25 iterations on average (0 to 2)" in texts(k.facts.evidence)
    assert not any("c3" in t for t in texts(k.facts.assumptions))


def test_a_triangular_loop_over_the_thread_index_runs_half_the_block_on_average():
    src = """
__global__ void prefix(float *a) {
  float s = 0.0f;
  for (int j = 0; j < threadIdx.x; j++) s += a[j];
  a[threadIdx.x] = s;
}
int main() { float *a; prefix<<<1, 64>>>(a); }
"""
    assert only_loop(kernel(src, "prefix")).trip_count == pytest.approx(63 / 2)



def test_a_loop_starting_at_an_enclosing_loop_s_counter_runs_its_mean():
    src = """
__global__ void pick(const double *weights, double *out) {
  double s = 0.0;
  for (int i = 0; i < 12; i++) {
    double running = 0.0;
    for (int j = i; j > 0; j--) running += weights[j];
    for (int k = 2 * i + 1; k < 30; k++) s += weights[k];
    s += running;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
int main() { double *w, *o; pick<<<64, 256>>>(w, o); }
"""
    outer, down, up = kernel(src, "pick").facts.loops
    # `j` from `i` down to 1: i passes, 5.5 over i = 0..11 (not the 0 of the first pass);
    # `k` from 2i + 1 to 29: 29 - 2i passes, 18 on average
    assert outer.trip_count == 12
    assert down.trip_count == pytest.approx(5.5)
    assert up.trip_count == pytest.approx(18.0)


CAS = """
__device__ double add_double(double *address, double val) {
  unsigned long long *a = (unsigned long long *)address;
  unsigned long long old = *a, seen;
  do {
    seen = old;
    old = atomicCAS(a, seen, __double_as_longlong(val + __longlong_as_double(seen)));
  } while (seen != old);
  return __longlong_as_double(old);
}
__global__ void accumulate(double *sum, const double *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  add_double(sum, x[i]);
}
int main() { double *s, *x; accumulate<<<64, 256>>>(s, x); }
"""


def test_a_compare_and_swap_retry_loop_runs_once_when_uncontended():
    k = kernel(CAS, "accumulate")
    assert only_loop(k).trip_count == 1
    assert "line 5: retry loop around a compare-and-swap: one pass assumed (the swap succeeds the first time " \
           "when the address is not contended)" in texts(k.facts.assumptions)
    assert not any("data-dependent" in t for t in texts(k.facts.assumptions))


SEARCH = """
__device__ int position(const float *table, float x) {
  int low = 0;
  int high = 255;
  while (low < high) {
    int mid = (low + high) >> 1;
    if (table[mid] <= x) low = mid + 1; else high = mid;
  }
  return low;
}
__global__ void lookup(int *out, const float *table, const float *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = position(table, x[i]);
}
int main() { int *o; float *t, *x; lookup<<<64, 256>>>(o, t, x); }
"""


def test_a_binary_search_over_a_known_range_takes_log2_of_it():
    k = kernel(SEARCH, "lookup")
    assert only_loop(k).trip_count == 8  # 256 candidates
    note = next(n for n in k.facts.evidence if "binary search" in n.text)
    assert note.source == NoteSource.SOURCE
    assert note.text == "line 5: binary search over `low`..`high` (255): 8 passes"


def test_a_binary_search_over_an_unknown_range_searches_the_assumed_range():
    src = """
__global__ void find(int *out, const int *keys, const int *starts, int key) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int left = starts[i], right = starts[i + 1] - 1;
  while (left <= right) {
    int middle = (left + right) / 2;
    if (keys[middle] < key) left = middle + 1; else right = middle - 1;
  }
  out[i] = left;
}
int main() { int *o, *k, *s; find<<<64, 256>>>(o, k, s, 3); }
"""
    k = kernel(src, "find")
    assert only_loop(k).trip_count == 5
    assert "line 5: binary search over `left`..`right`, range unknown: assumed 5 passes (log2 of 32)" \
        in texts(k.facts.assumptions)


def test_a_bisection_on_a_length_takes_log2_of_the_length():
    src = """
__global__ void grid_search(int *out, const double *grid, const double *q) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long lower = 0, upper = 1000, length = upper - lower, point;
  while (length > 1) {
    point = lower + (length / 2);
    if (grid[point] > q[i]) upper = point; else lower = point;
    length = upper - lower;
  }
  out[i] = lower;
}
int main() { int *o; double *g, *q; grid_search<<<64, 256>>>(o, g, q); }
"""
    k = kernel(src, "grid_search")
    assert only_loop(k).trip_count == 10
    assert "line 5: binary search over a range of `length` (1000): 10 passes" in texts(k.facts.evidence)


@pytest.mark.parametrize("condition, passes", [("m >>= 1", 10), ("(m >>= 2) > 0", 5), ("m /= 2", 10)])
def test_a_loop_halving_a_variable_in_its_condition_takes_its_log(condition, passes):
    src = f"""
__global__ void lg(int *out) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int m = 1024, r = 0;
  while ({condition}) r++;
  out[i] = r;
}}
int main() {{ int *o; lg<<<64, 256>>>(o); }}
"""
    k = kernel(src, "lg")
    assert only_loop(k).trip_count == passes
    assert any("`m` halved until zero (1024)" in t for t in texts(k.facts.evidence))


def test_a_halved_value_the_walk_cannot_fold_is_read_at_production_scale():
    # a value halved until zero (an exponent, a key, a size) is no loop's trip count: read at
    # the production scale an unknown size is read at (2^24), 24 passes, not log2 of 32
    src = """
__global__ void powmod(const unsigned *e, unsigned *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned b = e[i], r = 1, x = 3;
  do { if (b & 1) r *= x; x *= x; } while (b >>= 1);
  out[i] = r;
}
int main() { unsigned *e, *o; powmod<<<64, 256>>>(e, o); }
"""
    k = kernel(src, "powmod")
    assert only_loop(k).trip_count == 24
    assert "line 5: `b` halved until zero, range unknown: assumed 24 passes (log2 of 1.67772e+07)" \
        in texts(k.facts.assumptions)


def test_a_search_over_an_unknown_range_takes_log2_of_an_unknown_loops_trips():
    src = """
__global__ void find(const int *keys, const int *q, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lo = 0, hi = n;
  while (lo < hi) { int mid = (lo + hi) >> 1; if (keys[mid] < q[i]) lo = mid + 1; else hi = mid; }
  out[i] = lo;
}
int main() { int *k, *q, *o; int n; find<<<64, 256>>>(k, q, o, n); }
"""
    k = kernel(src, "find")
    assert only_loop(k).trip_count == 5  # log2 of the 32 trips an unknown loop is assumed to take


def test_other_data_dependent_while_loops_keep_the_assumed_passes():
    src = """
__global__ void chase(int *out, const int *next) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int node = i;
  while (next[node] >= 0) node = next[node];
  out[i] = node;
}
int main() { int *o, *n; chase<<<64, 256>>>(o, n); }
"""
    k = kernel(src, "chase")
    assert only_loop(k).trip_count == 8
    assert "line 5: `while` loop with a data-dependent condition: assumed 8 iterations" in texts(k.facts.assumptions)



DO_TILES = """
__global__ void tiles(const float *a, float *c, int K) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  int k = 0;
  do {
    k += 8;
    if (k < K) acc += a[i + k];
  } while (k < K);
  c[i] = acc;
}
int main() { float *a, *c; tiles<<<64, 256>>>(a, c, KSIZE); }
"""


def test_a_do_while_stepping_its_counter_is_counted_like_the_for_loop():
    # the counter is stepped by the body's first statement: ceil(1000 / 8) passes (the last one
    # sees k = 1000 and stops), as `for (k = 0; k < K; k += 8)` runs
    loop = only_loop(kernel(DO_TILES.replace("KSIZE", "1000"), "tiles"))
    assert loop.trip_count == 125
    # over an unknown size: the trip count any loop over an unknown bound is given, not the
    # passes assumed for a data-dependent condition
    k = kernel(DO_TILES.replace("KSIZE", "K_FROM_FILE"), "tiles")
    assert only_loop(k).trip_count == 32
    assert not any("data-dependent condition" in t for t in texts(k.facts.assumptions))


def test_a_do_while_whose_counter_is_also_set_elsewhere_is_not_counted():
    src = DO_TILES.replace("KSIZE", "1000").replace("if (k < K) acc += a[i + k];", "if (a[k] < 0) k = K;")
    assert only_loop(kernel(src, "tiles")).trip_count == 8

WMMA = """
#include <mma.h>
using namespace nvcuda;
__global__ void scale_tile(const half *a, const half *b, float *c, float alpha) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; i++) acc.x[i] = alpha * acc.x[i];
  for (int i = 0; i < fa.num_elements; i++) fa.x[i] = fa.x[i];
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}
int main() { half *a, *b; float *c; scale_tile<<<1, 32>>>(a, b, c, 2.0f); }
"""


def test_a_loop_over_a_fragments_elements_runs_its_share_of_the_tile():
    k = kernel(WMMA, "scale_tile")
    assert [loop.trip_count for loop in k.facts.loops] == [8, 16]
    assert all(loop.origin == "constant" for loop in k.facts.loops)
    evidence = texts(k.facts.evidence)
    assert "`acc.num_elements`: 8 per thread (a 16×16×16 accumulator fragment of float, as the WMMA API fixes it)" \
        in evidence
    assert "`fa.num_elements`: 16 per thread (a 16×16×16 matrix_a fragment of half, as the WMMA API fixes it)" \
        in evidence


@pytest.mark.parametrize("use, shape, element, count", [
    ("accumulator", (16.0, 16.0, 16.0), "float", 8), ("matrix_a", (32.0, 8.0, 16.0), "half", 16),
    ("matrix_a", (32.0, 8.0, 16.0), "signed char", 16), ("matrix_b", (32.0, 8.0, 16.0), "__nv_bfloat16", 4),
    ("matrix_a", (16.0, 16.0, 8.0), "wmma::precision::tf32", 4), ("accumulator", (8.0, 8.0, 4.0), "double", 2),
    ("matrix_b", (8.0, 8.0, 4.0), "double", 1), ("matrix_a", (16.0, None, 16.0), "half", None)])
def test_fragment_elements_per_lane_follow_the_wmma_types(use, shape, element, count):
    assert elements_per_lane(use, shape, element) == count


def test_a_for_loop_counting_its_second_declared_variable_reads_that_counter():
    src = """
__global__ void window(float *out, const float *in) {
  int t = threadIdx.x;
  for (int i = 64, k = 0; k < 16; i++, k++)
    out[t + k] = in[t + i];
}
int main() { float *o, *i; window<<<1, 32>>>(o, i); }
"""
    k = kernel(src, "window")
    loop = only_loop(k)
    assert (loop.variable, loop.trip_count, loop.origin) == ("k", 16, "constant")
    assert not any("not understood" in t for t in texts(k.facts.assumptions))
    # both counters step: 32 threads reading 16 consecutive floats each, overlapping
    assert k.facts.traffic.footprint_bytes == pytest.approx(2 * 4 * (32 + 15))


GROUPS = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void rows(float *dest, const float *src) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float sum = 0.0f;
  for (int j = warp.thread_rank(); j < 1024; j += warp.size())
    sum += src[blockIdx.x * 1024 + j];
  for (int j = block.thread_rank(); j < 4096; j += block.size())
    dest[j] = sum;
}
int main() { float *d, *s; rows<<<128, 256>>>(d, s); }
"""


def test_loops_striding_by_a_cooperative_groups_size_read_the_group_from_its_type():
    k = kernel(GROUPS, "rows")
    tile_loop, block_loop = k.facts.loops
    assert tile_loop.trip_count == 1024 / 32  # a 32-thread tile strides by 32
    assert block_loop.trip_count == 4096 / 256  # the block strides by its 256 threads
    assert not any("not understood" in t for t in texts(k.facts.assumptions))


GRID_GROUP = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void total(const float *in, float *partial, int n) {
  cg::grid_group grid = cg::this_grid();
  float s = 0.0f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) s += in[i];
  partial[blockIdx.x * blockDim.x + threadIdx.x] = s;
  cg::sync(grid);
  if (grid.thread_rank() == 0)
    for (int b = 1; b < gridDim.x; b++) partial[0] += partial[b];
}
int main() { float *i, *p; total<<<64, 256>>>(i, p, 1 << 22); }
"""


def test_a_grid_group_strides_by_the_grids_threads_and_ranks_them_in_the_grid():
    k = kernel(GRID_GROUP, "total")
    stride_loop, sum_loop = k.facts.loops
    assert stride_loop.trip_count == (1 << 22) / (64 * 256)  # 256 passes of the whole grid
    assert sum_loop.trip_count == 63
    assert not any("not understood" in t or "unknown" in t for t in texts(k.facts.assumptions))
    # the final sum runs in one thread of the grid: 63 loads of `partial` in all, not 63 a thread
    assert k.facts.per_item.global_loads == pytest.approx(256 + 2 * 63 / (64 * 256), rel=0.01)


def test_a_group_whose_type_is_not_visible_is_not_guessed():
    src = GROUPS.replace("cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);",
                         "auto warp = make_group(block);")
    k = kernel(src, "rows")
    assert "line 8: step of the `j` loop not understood: assumed 32 iterations" in texts(k.facts.assumptions)


@pytest.mark.parametrize("header, passes", [
    ("int mb = 0; 2 * mb <= 9; mb++", 5), ("int mb = 0; 2 * mb < 9; mb++", 5), ("int mb = 0; (4 * mb) < 16; mb++", 4),
    ("int i = 1; i + 3 <= 20; i++", 17), ("int i = 20; i - 2 >= 5; i--", 14), ("int i = 0; mb * 2 < 10; i++", None)])
def test_a_condition_on_a_multiple_or_an_offset_of_the_counter_is_solved_for_it(header, passes):
    src = f"""
__global__ void sums(float *a) {{
  float s = 0.0f;
  int mb = 0;
  for ({header}) s += a[threadIdx.x];
  a[threadIdx.x] = s;
}}
int main() {{ float *a; sums<<<1, 32>>>(a); }}
"""
    k = kernel(src, "sums")
    if passes is None:  # the condition does not read the loop's counter: not solved
        assert any("not understood" in t or "unknown" in t for t in texts(k.facts.assumptions))
    else:
        assert only_loop(k).trip_count == passes
        assert not any("loop" in t for t in texts(k.facts.assumptions))


@pytest.mark.parametrize("header, passes", [
    ("int s = 256 / 2; s > 0; s >>= 1", 8),  # 128 .. 1: a tree reduction over 256 threads
    ("int s = 128; s > 1; s /= 2", 7), ("int s = 100; s >= 10; s /= 3", 3),  # 100, 33, 11
    ("int x = 1; x < 1000; x *= 2", 10), ("int x = 1; x <= 1024; x <<= 1", 11), ("int x = 3; x <= 1000; x *= 2", 9)])
def test_loops_halving_or_doubling_their_counter_take_the_passes_the_values_allow(header, passes):
    src = f"""
__global__ void tree(float *a) {{
  float s0 = 0.0f;
  for ({header}) s0 += a[threadIdx.x];
  a[threadIdx.x] = s0;
}}
int main() {{ float *a; tree<<<1, 32>>>(a); }}
"""
    assert only_loop(kernel(src, "tree")).trip_count == passes


SERIES = """
#include "series.h"
#define NUM_TERMS 35
__device__ double series(double x) {
  double s = 0.0;
  for (int i = 1; i < NUM_TERMS; i++) s += x / i;
  return s;
}
"""

SERIES_KERNEL = """
#include "series.h"
__global__ void apply(double *y, const double *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = series(x[i]);
}
int main() { double *y, *x; apply<<<64, 256>>>(y, x); }
"""


def test_a_callee_of_another_source_reads_the_number_macros_of_its_own_file(tmp_path):
    from tests.engine_reports import kernel_reports
    (tmp_path / "series.h").write_text("#pragma once\n__device__ double series(double x);\n")
    (tmp_path / "series.cu").write_text(SERIES)
    source = tmp_path / "main.cu"
    source.write_text(SERIES_KERNEL)
    facts = kernel_reports(SERIES_KERNEL, source)["apply"].facts
    assert [(loop.trip_count, loop.origin) for loop in facts.loops] == [(34, "constant")]
    assert not any("NUM_TERMS" in t for t in texts(facts.assumptions))


def test_a_callee_of_another_source_is_expanded_with_its_own_file_s_macros(tmp_path):
    # expressions, function-like macros and conditional definitions of the callee's file: its
    # translation unit's preprocessor view, not the kernel file's
    from tests.engine_reports import kernel_reports
    (tmp_path / "series.h").write_text("#pragma once\n__device__ double series(double x);\n")
    (tmp_path / "series.cu").write_text(
        "#define BASE 5\n#ifdef WIDE\n#define TERMS 99\n#else\n#define TERMS (BASE * 7)\n#endif\n"
        "#define SQ(v) ((v) * (v))\n"
        "__device__ double series(double x) {\n  double s = 0.0;\n"
        "  for (int i = 1; i < TERMS; i++) s += SQ(x) / i;\n  return s;\n}\n")
    source = tmp_path / "main.cu"
    source.write_text(SERIES_KERNEL)
    facts = kernel_reports(SERIES_KERNEL, source)["apply"].facts
    assert [(loop.trip_count, loop.origin) for loop in facts.loops] == [(34, "constant")]
    assert not any("TERMS" in t for t in texts(facts.assumptions))
    assert not any("`SQ` not analysed" in e for e in texts(facts.evidence))


def test_a_halving_loop_from_an_unknown_start_halves_the_assumed_range():
    src = """
__global__ void reduce(float *a, int size) {
  __shared__ float s[1024];
  int t = threadIdx.x;
  for (unsigned int stride = size / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  for (int x = size; x < 4096; x *= 2) a[t] += 1.0f;
  a[t] = s[0];
}
int main() { float *a; int n; reduce<<<1, 256>>>(a, n); }
"""
    k = kernel(src, "reduce")
    halving, doubling = k.facts.loops
    assert halving.trip_count == 6  # 32, 16, .., 1 (was no pass at all from an assumed 0)
    assert doubling.trip_count == 12  # 1, 2, .., 2048
    assumptions = texts(k.facts.assumptions)
    assert "line 5: start of the `stride` loop unknown: assumed 32" in assumptions
    assert "line 9: start of the `x` loop unknown: assumed 1" in assumptions


def test_a_range_written_with_mul24_cancels_its_base():
    # `__mul24(a, b)` is a product the walker reads as `a * b`: a loop from base + i to
    # base + N (the base unknown to the walker) runs (N - i) / step passes
    src = """
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define ACC 1024
__global__ void dots(float *c, const float *a, const float *b, int vectors, int n) {
  cg::thread_block cta = cg::this_thread_block();
  for (int v = blockIdx.x; v < vectors; v += gridDim.x) {
    int base = __mul24(n, v);
    int end = base + n;
    float sum = 0;
    for (int pos = base + threadIdx.x; pos < end; pos += ACC) sum += a[pos] * b[pos];
    cg::sync(cta);
    c[v * ACC + threadIdx.x] = sum;
  }
}
int main() { float *a, *b, *c; dots<<<128, 1024>>>(c, a, b, 256, 4096); }
"""
    k = kernel(src, "dots")
    pos = next(loop for loop in k.facts.loops if loop.variable == "pos")
    assert pos.trip_count == pytest.approx(4.0)  # 4096 / 1024
    assert not any("unknown" in a for a in texts(k.facts.assumptions) if "`pos`" in a)
    # the group handle is a view of the launch, no call left unread
    assert not any("this_thread_block" in e for e in texts(k.facts.evidence))


TILED = """
#define MIN(x, y) ((x) < (y) ? (x) : (y))
__global__ void band(const float *a, float *b, int n) {
  int it = (blockIdx.x * blockDim.x + threadIdx.x) * 16;
  float s = 0.0f;
  for (int i = it; i < min(n, it + 16); i++) s += a[i];
  for (int i = it; i < MIN(n, it + 8); i++) s += a[i];
  b[it] = s;
}
void transpose(int order, int tile, const double *A, double *B) {
  #pragma omp target teams distribute parallel for collapse(2) map(to: A[0:order*order]) map(tofrom: B[0:order*order])
  for (int it = 0; it < order; it += tile)
    for (int jt = 0; jt < order; jt += tile)
      for (int i = it; i < MIN(order, it + tile); i++)
        for (int j = jt; j < MIN(order, jt + tile); j++)
          B[i * order + j] += A[j * order + i];
}
"""


def test_a_bound_clipped_by_a_size_runs_the_tile_the_other_bound_spans():
    band = kernel(TILED, "band")
    assert [loop.trip_count for loop in band.facts.loops] == [16, 8]
    assert any("nearer of two bounds: 16 iterations" in e for e in texts(band.facts.evidence))
    assert not any(a.kind == "loop-trip" for a in band.facts.assumptions)


def test_tile_loops_of_an_unknown_step_cover_the_nest_once():
    data = TILED.encode()
    tree = parse(data)
    (tiles,) = [k for k in analyze(data, tree, extract(data, tree), [RTX3080], DEFAULT_OPTIONS).kernels
                if k.name.startswith("transpose")]
    # the tile `tile` is assumed once (32), for the step and for the loops inside alike
    assert any("step of the `it` loop unknown (`tile`): assumed 32" in a for a in texts(tiles.facts.assumptions))
    assert [loop.trip_count for loop in tiles.facts.loops[2:]] == [32, 32]
    # each element moves once: a load of A and B and a store of B, 8 B each, per element of the tile
    assert tiles.facts.dram_bytes == pytest.approx(tiles.facts.work_items * 32 * 32 * 24, rel=0.05)
    assert tiles.estimates[0].verdict == "bandwidth"


def test_a_bound_offset_by_a_named_constant_is_solved_for_the_counter():
    src = """
template <const int BM, const int STRIDE>
__device__ void load(const float *A, float *As, int K, int row, int col) {
  for (unsigned offset = 0; offset + STRIDE <= BM; offset += STRIDE)
    As[row + offset] = A[(row + offset) * K + col];
}
template <const int BM, const int NT>
__global__ void tiles(const float *A, float *out, int K) {
  __shared__ float As[BM];
  constexpr unsigned stride = NT / 8;
  load<BM, stride>(A, As, K, threadIdx.x / 8, threadIdx.x % 8);
  out[threadIdx.x] = As[threadIdx.x];
}
int main() { float *a, *o; tiles<128, 256><<<64, 256>>>(a, o, 1024); }
"""
    loop = only_loop(kernel(src, "tiles"))
    assert loop.trip_count == 4  # offset = 0, 32, 64, 96 (offset + 32 <= 128)
    assert loop.origin == "constant"


def test_a_call_whose_template_arguments_span_lines_is_inlined():
    src = """
template <const int TM,
          const int TN>
__device__ void multiply(float *acc, const float *a, const float *b) {
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i * TN + j] += a[i] * b[j];
}
__global__ void tiles(const float *a, const float *b, float *out) {
  float acc[64] = {0.f};
  multiply<8,
           8>(acc, a + threadIdx.x * 8, b + threadIdx.x * 8);
  out[threadIdx.x] = acc[0];
}
int main() { float *a, *b, *o; tiles<<<64, 256>>>(a, b, o); }
"""
    k = kernel(src, "tiles")
    assert k.facts.per_item.fp32 == pytest.approx(2 * 64)  # 64 FMAs
    assert not any("not analysed" in t for t in texts(k.facts.evidence))


def test_a_remainder_loop_starts_past_the_rounded_down_length():
    # `V & ~7`: the last multiple of 8 under V (a known V), where the vector loop stopped
    src = """
__global__ void rem(float *out, const float *in, int V) {
  int start = V & ~(8 - 1);
  for (int i = threadIdx.x + start; i < V; i++) out[blockIdx.x * V + i] = expf(in[blockIdx.x * V + i]);
}
int main() { float *a, *b; rem<<<8192, 256>>>(a, b, 50257); }
"""
    loop = only_loop(kernel(src, "rem"))
    assert loop.trip_count <= 1  # 50257 - 50256, not 50257 from a start read as 0


def test_a_bound_and_start_that_differ_by_a_constant_count_that_many_passes():
    # `nk`, `w` and `last` are never known here: what the loop covers is, as the compiler sees it
    src = """
__global__ void stencil(float *x, const float *y, int nk, int w, int last) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int q = nk - 7; q <= nk; q++) acc += y[i + q];
  for (int j = w; j < w + 4; j++) acc *= y[j];
  for (int j = last; j > last - 5; j -= 2) acc -= y[j];
  for (int j = 0; j < nk; j++) acc += 2.0f;
  for (int j = 0; j < nk - j; j++) acc += 3.0f;
  x[i] = acc;
}
int main(int argc, char **argv) {
  float *x, *y;
  stencil<<<64, 256>>>(x, y, atoi(argv[1]), atoi(argv[2]), atoi(argv[3]));
}
"""
    k = kernel(src, "stencil")
    assert [loop.trip_count for loop in k.facts.loops] == [8, 4, 3, 32, 32]
    unknown = [t for t in texts(k.facts.assumptions) if "trip count of the" in t]
    assert unknown == ["line 8: trip count of the `j` loop unknown (`nk`): assumed 32"]


def test_a_pointer_run_to_the_end_of_its_row_counts_the_row():
    src = """
__global__ void sum_rows(const float *x, float *y, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  const float *row = x + (size_t)i * m;
  for (const float *p = row; p != row + m; ++p) s += *p;
  for (const float *p = row; p != row + m; p += 3) s += *p;
  y[i] = s;
}
int main() {
  float *x, *y;
  sum_rows<<<256, 256>>>(x, y, 1 << 16, 64);
}
"""
    k = kernel(src, "sum_rows")
    # 64 elements one by one; by threes the pointer steps over `row + 64` and never meets it:
    # no count follows from the source (the fixed guess)
    assert [loop.trip_count for loop in k.facts.loops] == [64, 32]
    assert k.facts.per_item.global_load_bytes == (64 + 32) * 4


POOL_GRAD = """
__global__ void avg_pool_grad(const float *grad_out, float *grad_in, int height, int width, int pooled_h, int pooled_w,
                              int kh, int kw, int sh, int sw, int total) {
  int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < total) {
    int w = index % width;
    int h = (index / width) % height;
    int c = index / (width * height);
    int phstart = (h < kh) ? 0 : (h - kh) / sh + 1;
    int pwstart = (w < kw) ? 0 : (w - kw) / sw + 1;
    int phend = min(h / sh + 1, pooled_h);
    int pwend = min(w / sw + 1, pooled_w);
    float g = 0.f;
    for (int ph = phstart; ph < phend; ++ph)
      for (int pw = pwstart; pw < pwend; ++pw)
        g += grad_out[(c * pooled_h + ph) * pooled_w + pw];
    grad_in[index] = g;
  }
}
int main() {
  const int height = 512, width = 512, channels = 64, kh = KERNEL, kw = KERNEL, sh = 2, sw = 2;
  const int pooled_h = (height - kh) / sh + 1, pooled_w = (width - kw) / sw + 1;
  const int total = channels * height * width;
  float *go, *gi;
  cudaMalloc(&go, channels * pooled_h * pooled_w * sizeof(float));
  cudaMalloc(&gi, total * sizeof(float));
  avg_pool_grad<<<(total + 255) / 256, 256>>>(go, gi, height, width, pooled_h, pooled_w, kh, kw, sh, sw, total);
}
"""


@pytest.mark.parametrize(("window", "trips"), [(3, 1.5), (4, 2.0)])
def test_a_loop_between_clamped_ends_of_an_index_runs_the_window_over_its_stride(window, trips):
    # a pooling gradient: each input pixel sums the outputs whose windows hold it, between a start
    # and an end clamped at the image's edges; away from them the window over the stride (3 over
    # 2: one or two passes), not an unknown loop's 32
    k = kernel(POOL_GRAD.replace("KERNEL", str(window)), "avg_pool_grad")
    loops = k.facts.loops
    assert [loop.trip_count for loop in loops] == [pytest.approx(trips), pytest.approx(trips)]
    assert any("between clamped ends" in t for t in texts(k.facts.assumptions))
    assert k.facts.per_item.fp32 == pytest.approx(trips * trips)


def test_a_loop_between_clamped_ends_of_an_unknown_window_stays_an_assumption():
    # the window's size is a parameter no launch states: its span could be anything
    src = POOL_GRAD.split("int main()")[0]
    k = kernel(src, "avg_pool_grad")
    assert all(loop.origin == "assumed" for loop in k.facts.loops)


SKIP_AHEAD = """
#include <cstdint>
__device__ uint64_t skip_ahead(uint64_t seed, uint64_t n) {
  const uint64_t m = 9223372036854775808ULL;
  uint64_t a = 2806196910506780709ULL, a_new = 1;
  n = n % m;
  while (n > 0) {
    if (n & 1) a_new *= a;
    a *= a;
    n >>= 1;
  }
  return a_new * seed;
}
__global__ void draw(uint64_t *out, int n) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i >= n) return;
  out[i] = skip_ahead(1, i);
}
int main() { uint64_t *o; draw<<<4096, 256>>>(o, 1 << 20); }
"""


def test_a_loop_halving_a_counter_that_starts_at_the_thread_s_index_runs_log2_of_each():
    k = kernel(SKIP_AHEAD, "draw")
    (loop,) = k.facts.loops
    # thread i halves i until zero: floor(log2 i) + 1 passes, 18.9 on average over 0 .. 2^20 - 1
    # (`i % 2^63` is `i`); its constant part, 0, gave no pass at all
    mean = sum(v.bit_length() for v in range(1 << 20)) / (1 << 20)
    assert loop.trip_count == pytest.approx(mean, rel=0.01)
    assert any("starts at each thread's (or pass's) own value (0 to 1,048,575)" in t for t in texts(k.facts.evidence))


def test_spread_geometric_passes_average_the_passes_of_each_start():
    from perflsp.analysis.counter_forms import spread_geometric_passes
    # halving 0 .. 7 until zero: 0, 1, 2, 2, 3, 3, 3, 3 passes
    assert spread_geometric_passes(0, 7, 0, 2.0, "div", ">") == pytest.approx(17 / 8)
    # doubling 1 .. 4 while below 16: 4 (1, 2, 4, 8), 3 (2, 4, 8), 3 (3, 6, 12), 2 (4, 8) passes
    assert spread_geometric_passes(1, 4, 16, 2.0, "mul", "<") == pytest.approx(3.0)


COUNTDOWN = """
__global__ void down(float *d, const int len, const int N) {
  int tid = threadIdx.x + blockIdx.x * blockDim.x;
  for (int j = len - 1; j > 0; j--) d[j * N + tid] = 0.0f;
  int k = len;
  while (k > 0) { d[k * N + tid] = 1.0f; k--; }
}
"""


def test_a_loop_counting_down_from_a_start_not_known_takes_an_unknown_bound_s_passes():
    k = kernel(COUNTDOWN, "down")
    # a start of 0 gave them no pass at all
    assert [(loop.trip_count, loop.origin) for loop in k.facts.loops] == [(32, "assumed"), (32, "assumed")]
    assert "line 4: start of the `j` loop unknown (`len - 1`), counting down: assumed 32 iterations" \
        in texts(k.facts.assumptions)
    launched = kernel(COUNTDOWN + "int main() { float *d; down<<<4, 256>>>(d, 100, 1024); }", "down")
    assert [loop.trip_count for loop in launched.facts.loops] == [99, 100]


HIGHEST_BIT = """
__device__ int highest_bit(int n) {
  for (int i = 31; i >= 0; --i)
    if ((1 << i) & n) return i;
  return 0;
}
__global__ void ladder(int *out, const int *keys) {
  int t = threadIdx.x + blockIdx.x * blockDim.x;
  int x = 0;
  for (int i = highest_bit(keys[t]) - 1; i >= 0; --i) x = 2 * x + 1;
  out[t] = x;
}
"""


def test_a_call_returning_from_inside_a_loop_and_after_it_returns_no_known_value():
    k = kernel(HIGHEST_BIT, "ladder")
    # `return i;` in the loop and `return 0;` after it: the result is not 0 (which left the
    # caller's loop from -1 with no pass), so that loop's start is unknown
    ladder = next(loop for loop in k.facts.loops if loop.line == 10)
    assert (ladder.trip_count, ladder.origin) == (32, "assumed")


def test_a_loop_counting_down_from_the_thread_s_index_runs_its_mean():
    src = """
__global__ void tri(float *a) {
  int t = threadIdx.x;
  float s = 0.0f;
  for (int j = t; j > 0; j--) s += a[j];
  for (int j = 0; j < t; j++) s += a[j];
  a[t] = s;
}
int main() { float *a; tri<<<64, 256>>>(a); }
"""
    down, up = kernel(src, "tri").facts.loops
    # thread t takes t passes either way: 127.5 on average over a block of 256 (from the start's
    # constant part, 0, the countdown ran none)
    assert down.trip_count == up.trip_count == 127.5


def test_a_counter_after_its_loop_holds_its_exit_value_unless_the_loop_may_leave_early():
    src = """
__global__ void k(int *p, float *out) {
  int t = threadIdx.x + blockIdx.x * blockDim.x;
  int n;
  for (n = 0; n < 4; n++) { if (p[t * 4 + n] < 0) break; }
  float s = 0.0f;
  for (int j = n; j > 0; j--) s += out[j];
  int m;
  for (m = 0; m < 6; m++) s += 1.0f;
  for (int j = 0; j < m; j++) s += out[j + 8];
  out[t] = s;
}
int main() { int *p; float *o; k<<<64, 256>>>(p, o); }
"""
    loops = {loop.line: loop for loop in kernel(src, "k").facts.loops}
    assert (loops[10].trip_count, loops[10].origin) == (6, "constant")  # `m` is 6 after its loop
    assert loops[7].origin == "assumed"  # `n` may be anything up to 4: not read as 4


def test_a_loop_declaring_two_names_counts_with_the_one_its_update_steps():
    # `idx` (declared first) moves in the body; `i`, stepped by the update, bounds the passes
    src = """
template <int N>
__global__ void rows(float *out, const float *in, int n) {
  float s = 0.f;
  for (int idx = threadIdx.x, i = 0; idx < n && i < N; ++i) {
    s += in[blockIdx.x * n + idx];
    idx += blockDim.x;
  }
  for (int p = 0, q = threadIdx.x; p < 6 && q < n; ++p, q += 2) s += in[q];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
void run(float *out, const float *in, int n) { rows<4><<<4096, 256>>>(out, in, n); }
"""
    stepped, both = kernel(src, "rows").facts.loops
    assert (stepped.variable, stepped.trip_count, stepped.origin) == ("i", 4, "constant")
    # (the first declared is kept where the update steps it too)
    assert (both.variable, both.trip_count) == ("p", 6)


def test_a_counter_stepped_inside_the_update_s_assignment_counts_its_passes():
    # a polygon's edges: `k = j++` keeps the previous vertex as the counter steps
    src = """
#define CORNERS 600
__global__ void inside(const float2 *pt, const float2 *v, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 p = pt[i];
  int c = 0;
  int k = CORNERS - 1;
  for (int j = 0; j < CORNERS; k = j++)
    if ((v[j].y > p.y) != (v[k].y > p.y) && p.x < v[k].x - v[j].x) c = !c;
  out[i] = c;
}
void run(const float2 *pt, const float2 *v, int *out) { inside<<<4096, 256>>>(pt, v, out, 1 << 20); }
"""
    loop = only_loop(kernel(src, "inside"))
    assert (loop.variable, loop.trip_count, loop.origin) == ("j", 600, "constant")


def test_a_loop_up_to_the_least_of_a_constant_and_an_unknown_runs_no_more_than_the_constant():
    # `Horizon` (a filter's causal initialisation) is at most 12 whatever the data length; a
    # `max` of the same has no such bound
    src = """
#define LEAST(a, b) ((a) < (b) ? (a) : (b))
__global__ void horizon(float *x, unsigned length, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned Horizon = 12 < length ? 12 : length;
  float s = 0.f;
  for (unsigned h = 0; h < Horizon; h++) s += x[i + h];
  const int m = min(n, 7);
  for (int j = 0; j < m; j++) s += x[i + j];
  for (int j = 0; j < LEAST(n, 5); j += 2) s += x[i + j];
  for (int j = 0; j < max(n, 7); j++) s += x[i + j];
  x[i] = s;
}
void run(float *x, unsigned length, int n) { horizon<<<4096, 256>>>(x, length, n); }
"""
    facts = kernel(src, "horizon").facts
    assert [loop.trip_count for loop in facts.loops] == [12, 7, 3, 32]
    assert any("at most 12" in a.text for a in facts.assumptions)
