"""DRAM bytes of arrays of structs: small programs of our own."""

from __future__ import annotations

from tests.test_engine_unknown_sizes import RTX3080, kernel

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
    _, note = _traffic(LAYOUTS, "padded")
    assert "`p`: elements of `Padded`, 16 B" in note  # `char` then `double` at offset 8
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
