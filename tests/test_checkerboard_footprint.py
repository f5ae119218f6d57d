"""A part of an index that is a function of a thread index the index already ranges over
(`(col & 1)` beside `col`, a red-black checkerboard's parity) takes one value per value of it:
the distinct elements are no more than the indices' combinations. Before, the parity multiplied
the count by every value of `col` again, and the footprint rose to every access (a red-black
solver's arrays counted 2-4x over)."""

from perflsp.analysis.linear import Linear, distinct_values
from tests.engine_reports import kernel_reports


def test_a_function_of_an_atom_already_ranged_over_adds_no_values():
    col, row = Linear.atom("col"), Linear.atom("row")
    parity = col.opaque()  # `(col & 1)`: col, used non-linearly
    form = col.scale(514).add(row.scale(2)).add(parity, -1.0)
    cardinality = {"col": 512.0, "row": 256.0}
    assert distinct_values(form, cardinality, accesses=1e9) == 512 * 256
    # a non-linear part over an atom of its own still multiplies (`a[k + i * i]`)
    other = Linear.atom("k").add(Linear.atom("i").opaque())
    assert distinct_values(other, {"k": 100.0, "i": 10.0}, accesses=1e9) == 100 * 10


RED_BLACK_SRC = """
#include <cuda_runtime.h>
#include <stdlib.h>
#define NUM 1024
#define F(i, j) f[(i) * (NUM + 2) + (j)]

__global__ void residual(const double *f, double *out) {
  int row = blockIdx.x * blockDim.x + threadIdx.x + 1;
  int col = blockIdx.y * blockDim.y + threadIdx.y + 1;
  // the red cell, then the black one, of each pair of row `col`: every other element from the
  // row's parity, then from the other
  double red = F(col, 2 * row - (col & 1)) - F(col - 1, 2 * row - (col & 1));
  double black = F(col, 2 * row - ((col + 1) & 1)) - F(col - 1, 2 * row - ((col + 1) & 1));
  out[col * (NUM / 2 + 2) + row] = red * red + black * black;
}

int main(int argc, char **argv) {
  double *f, *out;
  size_t bytes = atol(argv[1]);  // (a size the file does not say: no allocation caps the reads)
  cudaMalloc((void **)&f, bytes);
  cudaMalloc((void **)&out, (NUM + 2) * (NUM / 2 + 2) * sizeof(double));
  dim3 block(128, 1), grid(NUM / 2 / 128, NUM);
  residual<<<grid, block>>>(f, out);
}
"""


def test_a_checkerboard_half_reads_no_more_than_the_array():
    facts = kernel_reports(RED_BLACK_SRC)["residual"].facts
    f_bytes = max(g.footprint_bytes for g in facts.traffic.groups if g.array == "f")
    # both parities of every row: the array once (its four reads were counted apart, 2x over)
    assert f_bytes <= (1024 + 2) * (1024 + 2) * 8
    assert facts.dram_bytes <= 1.1 * ((1024 + 2) * (1024 + 2) * 8 + (1024 + 2) * (512 + 2) * 8)
