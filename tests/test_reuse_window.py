"""Reads that blocks far apart in launch order repeat once L2 has let them go
(`analysis.reuse_window`): small programs of our own, judged on GPUs of different L2 sizes."""

from __future__ import annotations

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.memory import block_axes
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import NoteKind, texts
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.hardware.models import Gpu
from perflsp.kernels.includes import IncludeResolver

DATABASE = load_database()
RTX3080 = DATABASE.get("rtx3080")  # 5 MiB of L2, 68 SMs
H100 = DATABASE.get("H100")  # 50 MiB of L2

MATMUL = """
#define M {m}
#define K {k}
#define N {n}
__global__ void product(const float *a, const float *b, float *c) {{
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {{
    float sum = 0.0f;
    for (int i = 0; i < {bound}; i++) sum += a[row * K + i] * b[i * N + col];
    c[row * N + col] = sum;
  }}
}}
int main(int argc, char **argv) {{
  float *a, *b, *c;
  cudaMalloc(&a, M * K * sizeof(float));
  cudaMalloc(&b, K * N * sizeof(float));
  cudaMalloc(&c, M * N * sizeof(float));
  dim3 block(16, 16);
  dim3 grid(N / 16, M / 16);
  product<<<grid, block>>>(a, b, c);
}}
"""


def _report(src: str, gpus: list[Gpu]) -> KernelReport:
    prepared = read_program(None, src.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (kernel,) = prepared.kernels.kernels
    return analyze_kernel(unit, kernel, gpus)


def _matmul(m: int, k: int, n: int, bound: str = "K") -> str:
    """A naive matrix product c (m x n) = a (m x k) b (k x n), 16 x 16 threads a block, one an element."""
    return MATMUL.format(m=m, k=k, n=n, bound=bound)


def _group(report: KernelReport, array: str):
    """The array's main group of reads (the loop's, not an element read before it)."""
    return max((g for g in report.facts.traffic.groups if g.array == array), key=lambda g: g.footprint_bytes)


def test_a_row_of_blocks_reads_again_what_the_blocks_of_a_column_share():
    # b (1024 x 4096 floats, 16.8 MB) is read by every row of blocks: the blocks that share a strip
    # of it are gridDim.x = 256 blocks apart in launch order, and 5 MiB of L2 holds about 80 blocks'
    # data (a 64 KB strip of b each, the 64 KB of rows of a they share): each of the 64 rows of
    # blocks reads b again. a's rows are shared by neighbours (one block apart): read once.
    report = _report(_matmul(1024, 1024, 4096), [RTX3080])
    b_bytes, a_bytes, c_bytes = 1024 * 4096 * 4, 1024 * 1024 * 4, 1024 * 4096 * 4
    b = _group(report, "b")
    assert b.footprint_bytes == pytest.approx(b_bytes)
    assert b.reread_bytes == pytest.approx(64 * b_bytes)
    assert _group(report, "a").reread_bytes == 0.0
    assert report.facts.dram_bytes == pytest.approx(64 * b_bytes + a_bytes + c_bytes, rel=0.01)
    # the bytes shown are the bytes judged
    assert report.estimates[0].dram_bytes_per_item == pytest.approx(report.facts.dram_bytes / (1024 * 4096))
    note = report.facts.dram_note
    assert "reads again by blocks too far apart to share them in L2" in note
    assert "blocks next to each other along `by` lie further apart in launch order" in note
    assert "`b` 64x the footprint" in note
    assert "assumed blocks start in launch order (x fastest) as earlier ones finish, 408 at a time, each at its own point of its work" in note
    assert any(line.startswith("DRAM: footprint ") and "`b` 64x" in line for line in texts(report.facts.evidence))
    (assumption,) = [a for a in report.facts.assumptions if a.kind == NoteKind.L2_REUSE]
    assert "blocks start in launch order (x fastest) as earlier ones finish, 408 at a time" in assumption.text


def test_each_gpu_is_judged_on_its_own_l2():
    # the whole launch (37.7 MB) fits in the H100's 50 MiB of L2: every byte read once there (and
    # c, written, leaves there the share of L2 the launch does not fill: `l2_writes`)
    report = _report(_matmul(1024, 1024, 4096), [H100, RTX3080])
    footprint = (1024 * 4096 * 2 + 1024 * 1024) * 4
    written = 1024 * 4096 * 4
    assert report.facts.dram_bytes == pytest.approx(footprint - written * (1 - footprint / H100.l2_cache_bytes),
                                                    rel=0.01)
    assert not any(a.kind == NoteKind.L2_REUSE for a in report.facts.assumptions)
    h100, rtx = report.estimates
    assert rtx.dram_bytes_per_item > 25 * h100.dram_bytes_per_item  # (64 |b| + |a| + |c|) / 37.7 MB: 29x


def test_a_launch_whose_data_fits_in_l2_reads_it_once():
    report = _report(_matmul(512, 512, 512), [RTX3080])  # 3 MB in all
    reads, written = 2 * 512 * 512 * 4, 512 * 512 * 4
    share = (reads + written) / RTX3080.l2_cache_bytes  # of its writes reach DRAM (`l2_writes`)
    assert report.facts.dram_bytes == pytest.approx(reads + share * written, rel=0.01)
    assert "reads again" not in report.facts.dram_note


def test_a_launch_of_one_wave_reads_its_shared_data_once():
    # 16 x 16 blocks all fit on the GPU at once (408 of 256 threads): they run together, and the
    # 8 MB of b they share is read once although it exceeds L2
    report = _report(_matmul(256, 8192, 256), [RTX3080])
    assert _group(report, "b").reread_bytes == 0.0
    assert report.facts.dram_bytes == pytest.approx((256 * 8192 * 2 + 256 * 256) * 4, rel=0.01)


def test_a_streaming_launch_keeps_its_footprint():
    src = """
__global__ void add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 1 << 24;
  float *a, *b, *c;
  cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float)); cudaMalloc(&c, n * sizeof(float));
  add<<<n / 256, 256>>>(a, b, c, n);
}
"""
    report = _report(src, [RTX3080])
    assert report.facts.dram_bytes == pytest.approx(3 * 4 * (1 << 24), rel=0.01)
    assert all(g.reread_bytes == 0.0 for g in report.facts.traffic.groups)
    assert not any(a.kind == NoteKind.L2_REUSE for a in report.facts.assumptions)


def test_an_assumed_trip_count_leaves_the_footprint():
    # the loop's bound comes from the program's arguments, not given: each block's bytes, and so
    # the blocks whose data fit in L2, would be a guess
    src = _matmul(1024, 1024, 4096, bound="depth").replace(
        "float *c) {", "float *c, int depth) {").replace(
        "product<<<grid, block>>>(a, b, c);", "product<<<grid, block>>>(a, b, c, atoi(argv[1]));")
    report = _report(src, [RTX3080])
    assert any(loop.origin == "assumed" for loop in report.facts.loops)
    assert all(g.reread_bytes == 0.0 for g in report.facts.traffic.groups)
    assert "reads again" not in report.facts.dram_note


def test_blocks_that_each_sweep_more_than_l2_read_it_each():
    # every block sweeps all of x (8 MB) at its own point of its run: between two neighbours'
    # reads of an element, more than L2 goes through it, so each of the 4096 blocks reads x again
    src = """
#define N (1 << 21)
__global__ void pairs(const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < N; j++) s += x[j] * x[i];
  out[i] = s;
}
int main() {
  float *x, *out;
  cudaMalloc(&x, N * sizeof(float)); cudaMalloc(&out, N * sizeof(float));
  pairs<<<4096, 256>>>(x, out);
}
"""
    report = _report(src, [RTX3080])
    swept = _group(report, "x")
    assert swept.footprint_bytes == pytest.approx(4 * (1 << 21))
    assert swept.reread_bytes == pytest.approx(4096 * 4 * (1 << 21))
    assert "blocks next to each other along `bx` lie further apart in launch order" in report.facts.dram_note
    # the same launch on the H100: 8 MB fits in its L2 (50 MiB), read once
    h100 = _report(src, [H100])
    assert h100.facts.dram_bytes < 3 * 4 * (1 << 21)


OMP_PRODUCT = """
#define M 2048
#define K 2048
#define N {n}
void product(const float *a, const float *b, float *c) {{
  #pragma omp target teams distribute parallel for collapse(2) thread_limit(256) map(to: a[0:M*K], b[0:K*N]) map(from: c[0:M*N])
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {{
      float sum = 0.0f;
      for (int k = 0; k < K; k++) sum += a[i * K + k] * b[k * N + j];
      c[i * N + j] = sum;
    }}
}}
"""


def _omp_report(src: str, gpus: list[Gpu]) -> KernelReport:
    prepared = read_program(None, src.encode(), ReadContext(IncludeResolver()), AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    (region,) = prepared.kernels.omp_regions
    return analyze_kernel(unit, region, gpus)


def test_a_team_takes_consecutive_iterations_of_a_collapsed_nest():
    # 256 iterations a team, innermost loop first: 2048 values of j make 8 teams' blocks, so
    # neighbouring values of i are 8 blocks apart; of a 64-wide j each block takes 4 rows of i
    assert block_axes(("o1", "o0"), {"o0": 2048.0, "o1": 2048.0}, 256.0) == (("o1", 256.0, 8.0), ("o0", 1.0, 2048.0))
    assert block_axes(("o1", "o0"), {"o0": 2048.0, "o1": 64.0}, 256.0) == (("o1", 64.0, 1.0), ("o0", 4.0, 512.0))
    assert block_axes(("bx", "by"), {"bx": 16.0, "by": 4.0}) == (("bx", 1.0, 16.0), ("by", 1.0, 4.0))


def test_an_openmp_nest_reads_again_what_teams_far_apart_share():
    # a team's 256 iterations read a row of a (8 KB) and a 256-wide strip of b (2 MB): about two
    # teams' data fit in the 3080's L2, and the next row's teams are 8 blocks on: each row reads
    # its strips of b again; the 50 MB of H100 hold them
    report = _omp_report(OMP_PRODUCT.format(n=2048), [RTX3080, H100])
    footprint = 3 * 2048 * 2048 * 4
    assert report.facts.dram_bytes > 100 * footprint
    assert _group(report, "b").reread_bytes == pytest.approx(2048 * 2048 * 2048 * 4, rel=0.05)
    h100 = report.estimates[1]
    assert h100.dram_bytes == pytest.approx(footprint, rel=0.05)


def test_an_openmp_nest_whose_rows_share_a_team_keeps_its_footprint():
    # 64 values of j: a team takes 4 whole rows, so neighbouring rows are in the same block
    report = _omp_report(OMP_PRODUCT.format(n=64), [RTX3080])
    assert all(g.reread_bytes == 0.0 for g in report.facts.traffic.groups)


OMP_STENCIL = """
#define N 512
void dz(const double *u, double *f) {
  #pragma omp target teams distribute parallel for collapse(3) thread_limit(256) map(to: u[0:N*N*N]) map(from: f[0:N*N*N])
  for (int k = 2; k < N - 2; k++)
    for (int j = 0; j < N; j++)
      for (int i = 0; i < N; i++)
        f[k * N * N + j * N + i] = u[(k + 2) * N * N + j * N + i] - u[(k - 2) * N * N + j * N + i]
                                 + u[(k + 1) * N * N + j * N + i] - u[(k - 1) * N * N + j * N + i];
}
"""


def test_a_stencil_reads_the_planes_around_each_plane_again_where_they_are_too_far_apart_for_l2():
    # a plane of u (2 MB) is 1,024 teams' blocks of 256 iterations; 5 MiB of L2 holds about 500
    # blocks' data (10 KB each: four reads of u, a write of f an iteration): the planes a block
    # reads above and below its own were read 1,024 and 3,072 blocks before, and L2 let them go.
    # Each plane of k reads its four planes of u again (the footprint alone counted u once);
    # the 50 MB of H100 keep them.
    report = _omp_report(OMP_STENCIL, [RTX3080, H100])
    plane = 512 * 512 * 8
    u = _group(report, "u")
    assert u.footprint_bytes == pytest.approx(512 * plane, rel=0.02)
    assert u.reread_bytes == pytest.approx(4 * 508 * plane, rel=0.02)
    assert "blocks next to each other along `o0` lie further apart in launch order" in report.facts.dram_note
    assert report.estimates[1].dram_bytes < 2 * 512 * plane * 1.05
