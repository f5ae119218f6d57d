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


def test_the_short_integer_names_and_every_cuda_vector_type_have_their_sizes():
    from perflsp.kernels.consteval import ConstEnv, try_evaluate

    # <sys/types.h>'s `uint`, `ulong`, `uchar` and CUDA's `uchar3`, `long4`: a `cudaMalloc` sized
    # with them folds (before, their `sizeof` did not, and the array had no size)
    value, _ = try_evaluate("sizeof(uint) * (1L << 14) + sizeof(ulong) + sizeof(uchar3) + sizeof(long4)", ConstEnv())
    assert value == 4 * (1 << 14) + 8 + 3 + 32
    assert try_evaluate("(uint)(7.9) + (ushort)2", ConstEnv())[0] == 9


SHORT_NAMES_SRC = """
#include <cuda_runtime.h>
#define BLOOM 14
__global__ void member(const uint *filter, const uint *words, uint *hits, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) hits[i] = (filter[words[i] >> 5] >> (words[i] & 31)) & 1;
}
int main() {
  uint *filter, *words, *hits;
  int n = 1 << 24;
  cudaMalloc((void **)&filter, sizeof(uint) * (1L << BLOOM));
  cudaMalloc((void **)&words, sizeof(uint) * n);
  cudaMalloc((void **)&hits, sizeof(uint) * n);
  member<<<n / 256, 256>>>(filter, words, hits, n);
}
"""


def test_a_filter_sized_with_a_short_type_name_caps_its_data_dependent_reads():
    unit = unit_for(SHORT_NAMES_SRC)
    assert cuda_extent(unit, "filter").bytes == 4 * (1 << 14)
    facts = kernel_reports(SHORT_NAMES_SRC)["member"].facts
    filter_bytes = max(g.footprint_bytes for g in facts.traffic.groups if g.array == "filter")
    assert filter_bytes <= 4 * (1 << 14)  # 64 KiB, not a distinct word per thread (64 MiB)


def test_the_sizeof_of_a_macro_naming_a_type_is_that_type_s():
    from perflsp.kernels.consteval import ConstEnv, try_evaluate

    env = ConstEnv(macros={"REAL": "float", "FP": "double", "WORD": "unsigned int", "N": "1024"})
    assert try_evaluate("N * sizeof(REAL) + sizeof(FP) + sizeof(WORD)", env)[0] == 4096 + 8 + 4
    # a macro that is a number or an expression is no type
    assert try_evaluate("sizeof(N)", env)[0] is None


MACRO_TYPE_SRC = """
#include <cuda_runtime.h>
#define REAL float
#define ROWS 4096
__global__ void scale(const REAL *x, const int *perm, REAL *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[perm[i]];
}
int main() {
  REAL *x, *y;
  int *perm;
  cudaMalloc((void **)&x, ROWS * sizeof(REAL));
  cudaMalloc((void **)&y, (1 << 24) * sizeof(REAL));
  cudaMalloc((void **)&perm, (1 << 24) * sizeof(int));
  scale<<<(1 << 24) / 256, 256>>>(x, perm, y, 1 << 24);
}
"""


def test_an_array_sized_with_a_macro_type_caps_its_gathered_reads():
    unit = unit_for(MACRO_TYPE_SRC)
    assert cuda_extent(unit, "x").bytes == 4096 * 4
    facts = kernel_reports(MACRO_TYPE_SRC)["scale"].facts
    assert max(g.footprint_bytes for g in facts.traffic.groups if g.array == "x") <= 4096 * 4


STRUCT_SRC = """
#include <cuda_runtime.h>
#include <stdint.h>
struct KeyValue { uint32_t key; uint32_t value; };
const uint32_t kCapacity = 1 << 20;
__global__ void probe(const KeyValue *table, const uint32_t *keys, uint32_t *found, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) found[i] = table[keys[i] & (kCapacity - 1)].value;
}
int main() {
  KeyValue *table;
  uint32_t *keys, *found;
  int n = 1 << 24;
  cudaMalloc((void **)&table, sizeof(KeyValue) * kCapacity);
  cudaMalloc((void **)&keys, sizeof(uint32_t) * n);
  cudaMalloc((void **)&found, sizeof(uint32_t) * n);
  probe<<<n / 256, 256>>>(table, keys, found, n);
}
"""


def test_the_sizeof_of_a_struct_the_source_lays_out_is_its_layout_s():
    unit = unit_for(STRUCT_SRC)
    assert cuda_extent(unit, "table").bytes == 8 * (1 << 20)  # two 4-byte members
    facts = kernel_reports(STRUCT_SRC)["probe"].facts
    # 2^24 probes at data-dependent slots read no more than the table's 8 MiB
    assert max(g.footprint_bytes for g in facts.traffic.groups if g.array == "table") <= 8 * (1 << 20)


def test_host_arrays_of_a_struct_or_a_macro_type_have_their_sizes():
    from perflsp.analysis.extents import host_extent

    unit = unit_for("""
struct KeyValue { unsigned key; unsigned value; };
#define REAL double
int main() { KeyValue *h = new KeyValue[1024]; REAL *r = new REAL[10]; std::vector<KeyValue> v(8); }
""")
    assert host_extent(unit, "h").bytes == 8 * 1024
    assert host_extent(unit, "r").bytes == 8 * 10
    assert host_extent(unit, "v").bytes == 8 * 8
