"""A thread index split into tiles (`tx % 32`, `tx / 32`, `tx & 31`, `tx >> 5`, and tiles of those)
reads as a tile's column and row, each over its own values (`linear.tile_atom`): a block of
1,024 threads reading 32 rows of 32 consecutive elements moves those rows' sectors, and
`lane == 0` lets one thread of each warp through."""

from __future__ import annotations

import math

import pytest

from perflsp.analysis.engine import analyze
from perflsp.analysis.linear import tile_atom, tile_parts, tile_value
from perflsp.analysis.options import DEFAULT_OPTIONS
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

RTX3080 = load_database().get("RTX 3080")


def kernel(src: str, name: str):
    data = src.encode()
    tree = parse(data)
    return next(k for k in analyze(data, tree, extract(data, tree), [RTX3080], DEFAULT_OPTIONS).kernels if k.name == name)


def test_tile_atoms_name_their_column_and_row():
    assert tile_parts(tile_atom("tx", 1, 32)) == ("tx", 1, 32.0)
    assert tile_parts(tile_atom("tx", 32, math.inf)) == ("tx", 32, math.inf)
    assert tile_parts(tile_atom("ty", 4, 8)) == ("ty", 4, 8.0)
    assert tile_parts("tx") is None and tile_parts("L3") is None
    assert [tile_value(tile_atom("tx", 4, 8), i) for i in (0, 3, 4, 31, 32, 37)] == [0, 0, 1, 7, 0, 1]


ROWS = """
__global__ void tile_rows(const float *A, float *out, int K) {
  const unsigned col = threadIdx.x % 32, row = threadIdx.x / 32;
  out[blockIdx.x * 1024 + threadIdx.x] = A[(blockIdx.x * 32 + row) * K + col];
}
int main() { float *a, *o; tile_rows<<<256, 1024>>>(a, o, 4096); }
"""


@pytest.mark.parametrize("split", ["% 32, row = threadIdx.x / 32", "& 31, row = threadIdx.x >> 5"])
def test_a_block_reading_rows_of_a_tile_moves_those_rows(split):
    src = ROWS.replace("% 32, row = threadIdx.x / 32", split)
    traffic = kernel(src, "tile_rows").facts.traffic
    (read,) = [g for g in traffic.groups if g.array == "A"]
    # 256 blocks x 32 rows x 32 consecutive floats (128 B, four whole sectors): 1 MiB; as one
    # opaque index each thread's float would move its own 32-byte sector (8 MiB)
    assert read.footprint_bytes == pytest.approx(256 * 32 * 32 * 4)
    assert read.streamed_bytes == pytest.approx(256 * 32 * 32 * 4)


def test_rows_of_a_tile_apart_by_an_unknown_stride_stay_whole_rows():
    src = ROWS.replace("tile_rows<<<256, 1024>>>(a, o, 4096)", "tile_rows<<<256, 1024>>>(a, o, rand())")
    (read,) = [g for g in kernel(src, "tile_rows").facts.traffic.groups if g.array == "A"]
    assert read.footprint_bytes == pytest.approx(256 * 32 * 32 * 4)


LANES = """
__global__ void per_warp(const float *in, float *out) {
  int lane = threadIdx.x & 31;
  float v = in[blockIdx.x * 256 + threadIdx.x];
  if (lane == 0) {
    for (int k = 0; k < 100; ++k) v = v * 1.5f + 0.5f;
    out[blockIdx.x * 8 + (threadIdx.x >> 5)] = v;
  }
}
int main() { float *a, *b; per_warp<<<4096, 256>>>(a, b); }
"""


def test_the_first_lane_of_each_warp_is_one_thread_in_32():
    facts = kernel(LANES, "per_warp").facts
    # 100 FMAs (2 FLOP each) in one thread of each warp, not one of the block
    assert facts.per_item.fp32 == pytest.approx(200 / 32)


def test_a_guard_on_a_tile_column_lets_its_share_through():
    src = LANES.replace("if (lane == 0)", "if (lane < 8)")
    assert kernel(src, "per_warp").facts.per_item.fp32 == pytest.approx(200 * 8 / 32)


def test_a_tile_of_a_tile_nests():
    src = """
__global__ void sub(const float *A, float *out, int n) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned group = lane / 8, member = lane % 8;   // four groups of 8 in each warp
  out[blockIdx.x * 128 + threadIdx.x] = A[(blockIdx.x * 16 + (threadIdx.x / 32) * 4 + group) * 4096 + member];
}
int main() { float *a, *o; sub<<<1024, 128>>>(a, o, 0); }
"""
    (read,) = [g for g in kernel(src, "sub").facts.traffic.groups if g.array == "A"]
    # each warp reads 4 rows of 8 floats: one sector each; 1024 blocks x 16 rows
    assert read.footprint_bytes == pytest.approx(1024 * 16 * 32)
    assert read.streamed_bytes == pytest.approx(1024 * 4 * 4 * 32)


# an index over the launch split at a multiple of the block size (`walk_expressions.split_at`)

CHANNELS = """
__global__ void channels(const unsigned char *in, unsigned char *out, int width, int height, int groups) {
  int image = width * height;
  for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < groups * image; it += blockDim.x * gridDim.x) {
    int c0 = (it / image) * 8;
    int y = (it % image) / width;
    int x = it % width;
    int idx = c0 * image + y * width + x;
    for (int c = 0; c < 8; c++) { out[idx] = in[idx]; idx += image; }
  }
}
int main() {
  unsigned char *in, *out;
  channels<<<16384, 256>>>(in, out, 256, 256, 64);
}
"""


def test_an_index_split_into_image_and_pixel_keeps_neighbouring_threads_on_neighbouring_pixels():
    # 64 groups of 8 channels of a 256 x 256 image: `it / image` is the block's group, `it % image`
    # the pixel; read as `8 * it`, each thread's pixel looked 8 bytes from its neighbour's
    facts = kernel(CHANNELS, "channels").facts
    for group in facts.traffic.groups:
        assert group.footprint_bytes == pytest.approx(64 * 8 * 256 * 256)
        assert group.streamed_bytes == pytest.approx(64 * 8 * 256 * 256)


def test_a_split_that_carries_into_the_quotient_is_read_as_before():
    # a row of 100 pixels: blocks of 256 threads straddle rows, no term of the index splits at 100
    src = CHANNELS.replace("channels<<<16384, 256>>>(in, out, 256, 256, 64)", "channels<<<2500, 256>>>(in, out, 100, 100, 64)")
    facts = kernel(src, "channels").facts
    assert all(group.footprint_bytes > 0 for group in facts.traffic.groups)
    assert not any(a.startswith("bx/") or a.startswith("bx%") for g in facts.traffic.groups for a in g.form.atoms)


WARP_TILES = """
#include <mma.h>
using namespace nvcuda;
__global__ void tiles(const half *a, float *d, int lda) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a + warp * 16 * lda, lda);
  wmma::fill_fragment(acc, 0.0f);
  wmma::store_matrix_sync(d + warp * 256, acc, 16, wmma::mem_row_major);
}
int main() { half *a; float *d; tiles<<<64, 128>>>(a, d, 16); }
"""


def test_the_lanes_of_a_warp_move_the_whole_tile_it_loads():
    # 256 warps each load a 16 x 16 tile of halves (512 B) and store one of floats (1 KiB): the
    # warp's address is the same in its 32 lanes, each of which moves its share of the tile
    groups = kernel(WARP_TILES, "tiles").facts.traffic.groups
    (load,) = [g for g in groups if g.array == "a"]
    (store,) = [g for g in groups if g.array == "d"]
    assert load.footprint_bytes == pytest.approx(256 * 16 * 16 * 2)
    assert store.footprint_bytes == pytest.approx(256 * 16 * 16 * 4)


RED_BLACK = """
__global__ void sweep(double *u, const double *p) {
  int gid = blockIdx.x * 128 + threadIdx.x;
  int row = gid % 256 + 1;
  int col = gid / 256 + 1;
  if (col != 512) {
    u[col * 514 + 2 * row - (col & 1)] = p[col * 512 + row] * 2.0;
    u[col * 514 + 2 * row - ((col + 1) & 1)] = p[col * 512 + row] * 3.0;
  }
  if (row < 129) u[row] = 0.0;
}
int main() { double *u, *p; sweep<<<1024, 128>>>(u, p); }
"""


def test_tests_on_a_tile_of_the_block_index_count_the_threads_that_pass():
    # `col` is `blockIdx.x / 2 + 1`, 1 to 512: `col != 512` lets 511 of 512 through, not half;
    # `row` is `(blockIdx.x % 2) * 128 + threadIdx.x + 1`: `row < 129` half of the threads
    facts = kernel(RED_BLACK, "sweep").facts
    assert facts.per_item.fp64 == pytest.approx(2 * 511 / 512)
    assert facts.per_item.global_stores == pytest.approx(2 * 511 / 512 + 0.5)
