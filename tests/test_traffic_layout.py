"""DRAM bytes of arrays of structs and of strided accesses: small programs of our own."""

from __future__ import annotations

import pytest

from tests.test_engine_unknown_sizes import RTX3080, kernel, run

N = 1 << 20


def _traffic(src: str, name: str):
    facts = kernel(src, name, gpus=(RTX3080,)).facts
    return facts.dram_bytes, facts.dram_note


COMPLEX = """
typedef struct { double re; double im; } COMPLEX;
__global__ void reset(COMPLEX *u, const int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) u[i] = {0.0, 0.0};
}
__global__ void real_part(const COMPLEX *u, double *re, const int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) re[i] = u[i].re;
}
__global__ void conjugate(COMPLEX *u, const int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) u[i].im = -u[i].im;
}
int main() {
  int n = 1 << 20;
  COMPLEX *u; double *re;
  cudaMalloc(&re, n * sizeof(double));
  reset<<<n / 256, 256>>>(u, n);
  real_part<<<n / 256, 256>>>(u, re, n);
  conjugate<<<n / 256, 256>>>(u, n);
}
"""


def test_a_struct_element_the_source_lays_out_moves_its_whole_size():
    dram, note = _traffic(COMPLEX, "reset")
    assert dram == 16 * N
    assert "`u`: elements of `COMPLEX`, 16 B as the source lays it out" in note


def test_a_member_of_an_array_of_structs_moves_the_sectors_of_the_whole_array():
    # one 8-B member of each 16-B element: neighbours' members are 16 B apart, every sector moves
    dram, note = _traffic(COMPLEX, "real_part")
    assert dram == 16 * N + 8 * N  # the structs read, the doubles written
    assert "elements apart by less than a sector (`u` 2 elements)" in note


def test_a_member_read_and_written_back_moves_the_array_both_ways():
    dram, _ = _traffic(COMPLEX, "conjugate")
    assert dram == 2 * 16 * N


LAYOUTS = """
struct Padded { char tag; double value; };
struct alignas(16) Point { float x, y, z; };
struct Cell { Point centre; float weights[5]; int id; };
struct Unknown { mystery_t m; float f; };
__global__ void padded(Padded *p, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = p[i].value;
}
__global__ void points(const Point *p, Point *q) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  q[i] = p[i];
}
__global__ void cells(Cell *c, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = c[i].weights[2] + c[i].centre.x;
}
__global__ void unknown(Unknown *u, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = u[i].f;
}
int main() {
  padded<<<4096, 256>>>(0, 0);
  points<<<4096, 256>>>(0, 0);
  cells<<<4096, 256>>>(0, 0);
  unknown<<<4096, 256>>>(0, 0);
}
"""


def test_members_are_placed_at_their_alignment_and_a_declared_alignment_pads_the_struct():
    dram, note = _traffic(LAYOUTS, "padded")
    assert dram == 16 * N + 4 * N  # `char` then `double` at offset 8: 16 B
    assert "`p`: elements of `Padded`, 16 B" in note
    dram, note = _traffic(LAYOUTS, "points")
    assert dram == 2 * 16 * N  # three floats padded to the declared 16
    assert "`p`: elements of `Point`, 16 B" in note


def test_nested_structs_and_array_members_count_in_the_layout():
    # Cell: Point (16, aligned 16) + 5 floats + int = 40 B, padded to 48
    _, note = _traffic(LAYOUTS, "cells")
    assert "`c`: elements of `Cell`, 48 B" in note


def test_a_struct_with_a_member_the_source_does_not_size_keeps_the_assumption():
    _, note = _traffic(LAYOUTS, "unknown")
    assert "as the source lays it out" not in note


STRIDED = """
__global__ void xyz_norm(const float *xyz, float *norm, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
    norm[i] = x * x + y * y + z * z;
  }
}
__global__ void even(const float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[2 * i];
}
int main() {
  int n = 1 << 20;
  xyz_norm<<<n / 256, 256>>>(0, 0, n);
  even<<<n / 256, 256>>>(0, 0, n);
}
"""


def test_interleaved_members_move_the_whole_interleaved_array():
    dram, note = _traffic(STRIDED, "xyz_norm")
    assert dram == 12 * N + 4 * N
    assert "(`xyz` 3 elements)" in note


def test_every_other_element_still_moves_every_sector():
    dram, note = _traffic(STRIDED, "even")
    assert dram == 8 * N + 4 * N
    assert "(`a` 2 elements)" in note


FOURS = """
__global__ void fours(float *b, int k) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  b[k + 4 * t] = 1.0f; b[k + 4 * t + 1] = 2.0f; b[k + 4 * t + 2] = 3.0f; b[k + 4 * t + 3] = 4.0f;
}
int main(int argc, char **argv) { fours<<<4096, 256>>>(0, atoi(argv[1])); }
"""


def test_strided_accesses_from_an_unknown_start_move_the_range_they_span_once():
    # four stores per thread, 4 elements apart, from a start the source does not fold: the range
    # of 4 elements per thread moves once, not once per store
    dram, note = _traffic(FOURS, "fours")
    assert dram == 16 * N
    assert "(`b` 4 elements)" in note


PAIRS = """
__global__ void pairs(const float *a, const float *w, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = a[2 * i];
    for (int k = 0; k < 4; k++) s += a[2 * i + 1] * w[k];
    b[i] = s;
  }
}
int main() { int n = 1 << 20; pairs<<<n / 256, 256>>>(0, 0, 0, n); }
"""


def test_the_gaps_one_group_leaves_are_the_elements_of_another_group_of_the_array():
    # `a[2 * i]` and `a[2 * i + 1]` (in a loop: another group) fill each other's gaps: `a` moves once
    dram, _ = _traffic(PAIRS, "pairs")
    assert dram == pytest.approx(8 * N + 4 * N, rel=1e-3)


RUNS = """
__global__ void pairs_from(const int *begin, const float *in, float *out) {
  int s = begin[blockIdx.x];
  int t = threadIdx.x;
  out[s + 2 * t] = in[t];
  out[s + 2 * t + 1] = in[t];
}
__global__ void evens_from(const int *begin, const float *in, float *out) {
  int s = begin[blockIdx.x];
  int t = threadIdx.x;
  out[s + 2 * t] = in[t];
}
int main() { pairs_from<<<4096, 256>>>(0, 0, 0); evens_from<<<4096, 256>>>(0, 0, 0); }
"""


def test_a_run_from_a_data_start_moves_the_gaps_its_offsets_leave():
    pairs = kernel(RUNS, "pairs_from", gpus=(RTX3080,)).facts.traffic
    evens = kernel(RUNS, "evens_from", gpus=(RTX3080,)).facts.traffic
    out_pairs = sum(g.footprint_bytes for g in pairs.groups if g.array == "out")
    out_evens = sum(g.footprint_bytes for g in evens.groups if g.array == "out")
    assert out_pairs == 2 * 4 * N  # two stores per thread fill the run: each element once
    assert out_evens == out_pairs  # every other element: the same sectors move
    assert "(`out` 2 elements)" in evens.note and "(`out`" not in pairs.note


NEIGHBOURS = """
__global__ void forces(const float4 *pos, const int *nbr, float4 *force, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 p = pos[i];
  float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int j = 0; j < m; j++) {
    float4 q = pos[nbr[j * n + i]];
    f.x += q.x - p.x;
  }
  force[i] = f;
}
__global__ void windows(const float *x, const int *start, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = x[i];
  for (int k = 0; k < 32; k++) s += x[start[i] + k];
  y[i] = s;
}
int main() {
  forces<<<4096, 256>>>(0, 0, 0, 1 << 20, 32);
  windows<<<4096, 256>>>(0, 0, 0, 1 << 20);
}
"""


def test_a_gather_into_an_array_read_by_thread_index_is_bounded_by_that_read():
    # pos (16 B x N read by index), nbr (32 x 4 B x N), the gathered pos (at most pos again), force
    dram, note = _traffic(NEIGHBOURS, "forces")
    assert dram == 16 * N + 32 * 4 * N + 16 * N + 16 * N
    assert ("gathered elements of `pos` assumed among those the launch reads by thread index (the array's "
            "size not known): at most as many bytes again") in note


def test_a_gather_with_a_part_the_launch_places_keeps_its_own_elements():
    # `x[start[i] + k]`: a window from a data start, not a pure gather: each access its element
    dram, note = _traffic(NEIGHBOURS, "windows")
    assert "gathered elements" not in note
    assert dram > 32 * 4 * N


OPENMP_STRUCTS = """
typedef struct { float s, x, r, q, v, t; } Option;
void price(int n) {
  Option *opts = new Option[n];
  float *out = new float[n];
  #pragma omp target teams distribute parallel for map(to: opts[0:n]) map(from: out[0:n])
  for (int i = 0; i < n; i++) out[i] = opts[i].s * opts[i].x + opts[i].v;
}
int main() { price(1 << 20); }
"""


def test_an_openmp_region_over_a_host_array_of_structs_moves_and_maps_whole_structs():
    (region,) = run(OPENMP_STRUCTS, gpus=(RTX3080,)).kernels
    facts = region.facts
    # the map section is n structs of 24 B, and three members of each read: all of every struct moves
    assert facts.dram_bytes == 24 * N + 4 * N
    assert "`opts`: elements of `Option`, 24 B as the source lays it out" in facts.dram_note


BY_REFERENCE = """
__device__ void split(float x, float &lo, float &hi, const float &scale, float &seen) {
  lo = x * scale;
  hi = x - lo + seen;
}
__global__ void k(const float *in, float *out, const float *w, float *peek, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  split(in[i], out[i], out[i + n], w[0], peek[i]);
}
int main() { k<<<4096, 256>>>(0, 0, 0, 0, 1 << 20); }
"""


def test_an_element_passed_to_a_reference_parameter_the_callee_assigns_is_stored():
    groups = kernel(BY_REFERENCE, "k", gpus=(RTX3080,)).facts.traffic.groups
    stored = {g.array for g in groups if g.is_store}
    assert stored == {"out"}  # `lo` and `hi` are assigned; `scale` is const, `seen` only read
    # `out[i]` and `out[i + n]`: two ranges of n floats each
    assert sum(g.footprint_bytes for g in groups if g.is_store) == 8 * N
