"""An array allocated with the `sizeof` of a host array (`cudaMalloc(&d_table, sizeof(table))`,
`float table[26];`) is that array's bytes: a lookup table read at data-dependent positions can
never bring more from DRAM than the table holds. A small program of our own: each pixel looks
its sixteen counts up in a 26-entry table."""

from perflsp.analysis.extents import cuda_extent
from tests.engine_reports import kernel_reports, unit_for

TABLE_SRC = """
#include <cuda_runtime.h>
#define N (1 << 24)
#define BINS 26

__global__ void lookup(float *out, const unsigned char *counts, const float *table, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int k = 0; k < 16; k++)
    s += table[counts[16 * i + k]];
  out[i] = s;
}

int main() {
  float table[BINS];
  for (int b = 0; b < BINS; b++) table[b] = b * 0.5f;
  float *d_table, *d_out;
  unsigned char *d_counts;
  cudaMalloc((void **)&d_table, sizeof(table));
  cudaMalloc((void **)&d_counts, 16 * N);
  cudaMalloc((void **)&d_out, N * sizeof(float));
  cudaMemcpy(d_table, table, sizeof table, cudaMemcpyHostToDevice);
  lookup<<<N / 256, 256>>>(d_out, d_counts, d_table, N);
}
"""


def test_the_sizeof_of_a_host_array_is_its_bytes():
    unit = unit_for(TABLE_SRC)
    assert cuda_extent(unit, "d_table").bytes == 26 * 4
    assert cuda_extent(unit, "d_out").bytes == (1 << 24) * 4  # a type's sizeof, as before


def test_a_table_read_at_data_dependent_positions_brings_no_more_than_the_table():
    facts = kernel_reports(TABLE_SRC)["lookup"].facts
    table = [g for g in facts.traffic.groups if g.array == "table"]
    assert table and max(g.footprint_bytes for g in table) <= 26 * 4
    # counts (256 MiB) and out (64 MiB) are the traffic; the table's 2^28 data-placed reads
    # were 1 GiB of distinct bytes without its size
    assert facts.dram_bytes < 1.1 * (16 * (1 << 24) + 4 * (1 << 24))
