"""DRAM footprint of one array read or written at several constant offsets of one index form:
the union of the shifted ranges (structure-of-arrays planes, stencil neighbours, boundary rows)."""

import pytest

from perflsp.analysis.engine import analyze
from perflsp.analysis.options import DEFAULT_OPTIONS
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

RTX3080 = load_database().get("RTX 3080")
N = 1 << 20


def facts(src: str, name: str):
    data = src.encode()
    tree = parse(data)
    result = analyze(data, tree, extract(data, tree), [RTX3080], DEFAULT_OPTIONS)
    return next(k for k in result.kernels if k.name == name).facts


def group_bytes(f, array: str, is_store: bool) -> float:
    return sum(g.footprint_bytes for g in f.traffic.groups if g.array == array and g.is_store == is_store)


SOA = """
__global__ void planes(const float* __restrict__ in, float* __restrict__ out, const int n) {
  int tid = blockDim.x * blockIdx.x + threadIdx.x;
  if (tid >= n) return;
  float a = in[tid + 0 * n], b = in[tid + 1 * n], c = in[tid + 2 * n];
  out[tid + 0 * n] = a + b; out[tid + 1 * n] = b * c; out[tid + 2 * n] = a - c;
}
int main() {
  int n = 1 << 20;
  float *in, *out;
  cudaMalloc(&in, 3 * n * sizeof(float)); cudaMalloc(&out, 3 * n * sizeof(float));
  planes<<<n / 256, 256>>>(in, out, n);
}
"""


def test_planes_of_a_structure_of_arrays_each_count_their_own_range():
    f = facts(SOA, "planes")
    # three planes of n floats read, three written: the offsets are known although the pointers' addresses are not
    assert group_bytes(f, "in", False) == pytest.approx(3 * N * 4)
    assert group_bytes(f, "out", True) == pytest.approx(3 * N * 4)
    assert f.dram_bytes == pytest.approx(6 * N * 4)
    assert f.dram_note.startswith("footprint 25.2 MB, 25.2 MB requested by warps")


STENCIL = """
__global__ void smooth(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x + 1;
  b[i] = a[i - 1] + a[i] + a[i + 1];
}
int main() {
  int n = 1 << 20;
  float *a, *b;
  cudaMalloc(&a, (n + 2) * sizeof(float)); cudaMalloc(&b, (n + 2) * sizeof(float));
  smooth<<<n / 256, 256>>>(a, b, n);
}
"""


def test_neighbours_of_a_stencil_add_only_their_shifts():
    f = facts(STENCIL, "smooth")
    assert group_bytes(f, "a", False) == pytest.approx((N + 2) * 4)
    assert group_bytes(f, "b", True) == pytest.approx(N * 4)


EDGES = """
__global__ void edges(float* grid, int w, int h) {
  int x = blockDim.x * blockIdx.x + threadIdx.x;
  if (x < w) {
    grid[x] = 0.0f;
    grid[x + (h - 1) * w] = 0.0f;
  }
}
int main() {
  int w = 4096, h = 4096;
  float *grid;
  cudaMalloc(&grid, w * h * sizeof(float));
  edges<<<w / 256, 256>>>(grid, w, h);
}
"""


def test_first_and_last_rows_move_two_rows_not_the_grid_between():
    f = facts(EDGES, "edges")
    assert group_bytes(f, "grid", True) == pytest.approx(2 * 4096 * 4)
    assert f.dram_note.startswith("footprint 32.8 KB")


LANES = """
__global__ void swap_xy(const float2 *__restrict__ in, float2 *__restrict__ out, float4 *__restrict__ acc) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i].x = in[i].y;
  out[i].y = in[i].x;
  acc[i].w = in[i].x * in[i].y;
}
int main() {
  float2 *in, *out; float4 *acc; int n = 1 << 20;
  cudaMalloc(&in, n * 8); cudaMalloc(&out, n * 8); cudaMalloc(&acc, n * 16);
  swap_xy<<<n / 256, 256>>>(in, out, acc);
}
"""


def test_lanes_of_a_vector_type_are_placed_in_their_element():
    f = facts(LANES, "swap_xy")
    # `.x` and `.y` of a float2 fill its 8 B: the whole array moves, once, and coalesced
    assert group_bytes(f, "in", False) == pytest.approx(8 * N)
    assert group_bytes(f, "out", True) == pytest.approx(8 * N)
    reads = [g for g in f.traffic.groups if g.array == "in"]
    # each float load of a warp spans its 32 lanes' elements, 8 B apart: twice the bytes it reads (not a
    # sector per lane, as when the element's size was unknown)
    assert sum(g.streamed_bytes for g in reads) == pytest.approx(2 * sum(g.accessed_bytes for g in reads))
    # one lane of a float4 in four: every sector of the array is touched
    assert group_bytes(f, "acc", True) == pytest.approx(16 * N)
    assert f.dram_note.endswith("elements apart by less than a sector (`in` 2, `out` 2, `acc` 4 elements): "
                                "the bytes between them move too")
