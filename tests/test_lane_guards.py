"""Guards on the thread index against a number the walk knows (`analysis/lane_guards.py`):
`if (threadIdx.x < 32)` in a block of 256 threads runs its arm for an eighth of the threads;
against a size the source does not fix, the comparison stays a bounds guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from perflsp.analysis.notes import texts
from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler
from tests.test_compiled import TOOLCHAIN, analyse, compiled_facts, compiler, needs_cuda  # noqa: F401 - the fixture

WARP = """
#define STEPS 1000
__global__ void lanes(const float *in, float *out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  if (t < 32) {
    float acc = 0.f;
    for (int k = 0; k < STEPS; ++k) acc += s[(t + k) % 256] * 0.5f;
    out[blockIdx.x * 32 + t] = acc;
  }
  if (64 <= threadIdx.x) {
    float acc = 0.f;
    for (int k = 0; k < STEPS; ++k) acc -= s[(t + k) % 256];
    out[n + blockIdx.x * 256 + t] = acc;
  }
}
int main() { float *a, *b; int n = 1 << 20; lanes<<<n / 256, 256>>>(a, b, n); }
"""


def test_a_guard_against_a_number_lets_its_share_of_the_block_through(tmp_path):
    source = tmp_path / "lanes.cu"
    source.write_text(WARP)
    facts = analyse(source, None)["lanes"].facts
    # 1000 FMAs (2 FLOP) for 32 of 256 threads, 1000 subtractions for the 192 from thread 64 on
    assert facts.per_item.fp32 == pytest.approx(2000 * 32 / 256 + 1000 * 192 / 256)


def test_a_guard_against_a_size_the_source_does_not_fix_stays_a_bounds_guard(tmp_path):
    source = tmp_path / "lanes.cu"
    # `m` is no number the walk knows (a value of `rand()`)
    source.write_text(WARP.replace("if (t < 32)", "if (t < m)").replace("int n)", "int n, int m)")
                      .replace("(a, b, n)", "(a, b, n, rand())"))
    facts = analyse(source, None)["lanes"].facts
    assert facts.per_item.fp32 == pytest.approx(2000 + 1000 * 192 / 256)


@needs_cuda
def test_compiled_counts_weight_a_lane_guarded_block_by_its_share(tmp_path):
    source = tmp_path / "lanes.cu"
    source.write_text(WARP)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["lanes"].facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    # the loops' FP32 work at their shares (nvcc unrolls them: the trips carry the unrolling)
    assert facts.per_item.fp32 == pytest.approx(2000 * 32 / 256 + 1000 * 192 / 256, rel=0.02)


TREE = """
__global__ void tree(int *g_in, int *g_out, unsigned int n) {
  unsigned int tid = threadIdx.x;
  int *data = g_in + blockIdx.x * blockDim.x;
  for (int stride = 1; stride < blockDim.x; stride *= 2) {
    if ((tid % (2 * stride)) == 0)
      data[tid] += data[tid + stride];
    __syncthreads();
  }
  if (tid % 4 != 0) g_out[blockIdx.x * blockDim.x + tid] = 1;
}
int main() { int *a, *b; int n = 1 << 24; tree<<<n / 1024, 1024>>>(a, b, n); }
"""


def test_a_remainder_test_lets_one_thread_in_its_modulus_through(tmp_path):
    source = tmp_path / "tree.cu"
    source.write_text(TREE)
    facts = analyse(source, None)["tree"].facts
    # half the threads add in the first of the 10 passes, a quarter in the next, ...: about one
    # pass's worth (two loads and a store) in all; then three threads in four store once
    assert facts.per_item.global_loads == pytest.approx(2.0)
    assert facts.per_item.global_stores == pytest.approx(1.0 + 0.75)
    # every element of the input is read: its footprint is the array's, not a thousandth of it
    assert facts.traffic.footprint_bytes >= 4 * (1 << 24)


@needs_cuda
def test_compiled_counts_weight_a_remainder_test_by_its_share(tmp_path, compiler):  # noqa: F811
    facts = compiled_facts(tmp_path, compiler, "tree.cu", TREE, "tree")
    assert facts.per_item.global_loads == pytest.approx(2.0, rel=0.05)


HALVING = """
#define BLOCK 128
__global__ void sum_while(const double *a, double *out) {
  __shared__ double cache[BLOCK];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  cache[threadIdx.x] = a[t] * a[t];
  __syncthreads();
  int i = BLOCK >> 1;
  while (i != 0) {
    if (threadIdx.x < i)
      cache[threadIdx.x] += cache[threadIdx.x + i];
    __syncthreads();
    i >>= 1;
  }
  if (threadIdx.x == 0) out[blockIdx.x] = cache[0];
}
__global__ void sum_for(const double *a, double *out) {
  __shared__ double cache[BLOCK];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  cache[threadIdx.x] = a[t] * a[t];
  __syncthreads();
  for (int i = BLOCK >> 1; i != 0; i >>= 1) {
    if (threadIdx.x < i)
      cache[threadIdx.x] += cache[threadIdx.x + i];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = cache[0];
}
int main() { double *a, *o; sum_while<<<1024, BLOCK>>>(a, o); sum_for<<<1024, BLOCK>>>(a, o); }
"""


def test_a_while_loop_halving_its_counter_lets_the_guard_s_share_through_each_pass(tmp_path):
    source = tmp_path / "halving.cu"
    source.write_text(HALVING)
    reports = analyse(source, None)
    # the tree reduction adds 64 + 32 + ... + 1 = 127 values a block of 128 threads: about one
    # FP64 add a thread, beside its multiply; written as a `while`, as a `for`
    for kernel in ("sum_while", "sum_for"):
        assert reports[kernel].facts.per_item.fp64 == pytest.approx(1 + 127 / 128, rel=0.02)


TWO_D_LOCAL_ID = """
#define LS 128
__global__ void team_sum(float *out, const float *in) {
  __shared__ float local_sum[LS];
  const int lid = threadIdx.x;
  int local_idi = lid % LS;
  int local_idj = lid / LS;
  local_sum[local_idi] = in[blockIdx.x * LS + lid] * 2.0f;
  __syncthreads();
  if (local_idi == 0 && local_idj == 0) {
    float sum = 0.0f;
    for (int i = 0; i < LS; i++) sum += local_sum[i];
    out[blockIdx.x] = sum;
  }
}
int main() { float *a, *b; team_sum<<<512, LS>>>(b, a); }
"""


def test_two_tests_of_one_thread_index_let_through_the_threads_that_pass_both(tmp_path):
    # a 2D local id made of a 1D one (`lid % 128`, `lid / 128`): thread 0 of the 128 passes
    # both; the sum's 128 adds, once a block, are one a thread (an even branch read 64)
    source = tmp_path / "team.cu"
    source.write_text(TWO_D_LOCAL_ID)
    facts = analyse(source, None)["team_sum"].facts
    assert facts.per_item.fp32 == pytest.approx(1 + 128 / 128)
    assert facts.per_item.global_stores == pytest.approx(1 / 128)


def test_an_equality_on_a_thread_index_divided_lets_through_the_threads_it_holds_for(tmp_path):
    # `threadIdx.x / 128 == 0` of 128 threads holds for all of them (it was read as one thread
    # of 128), `/ 64 == 1` for half
    shares = {}
    for test in ("threadIdx.x / 128 == 0", "threadIdx.x / 64 == 1"):
        source = tmp_path / "divided.cu"
        source.write_text(TWO_D_LOCAL_ID.replace("local_idi == 0 && local_idj == 0", test))
        shares[test] = analyse(source, None)["team_sum"].facts.per_item.global_stores
    assert shares == {"threadIdx.x / 128 == 0": pytest.approx(1.0), "threadIdx.x / 64 == 1": pytest.approx(0.5)}


SCAN = """
__global__ void scan(const float *d, float *out, float *sums) {
  unsigned int t = threadIdx.x;
  float sum = d[blockIdx.x * 32 + t];
  for (int j = 1; j < 32; j *= 2) {
    float v = __shfl_up_sync(0xffffffff, sum, j, 32);
    if (t >= j) sum += v;
  }
  out[blockIdx.x * 32 + t] = sum;
  __shared__ float s[32];
  s[t] = sum * sum;
  __syncthreads();
  for (unsigned int h = 16; h > 0; h /= 2) {
    if (t < h) s[t] += s[t + h];
    __syncwarp();
  }
  if (t == 0) sums[blockIdx.x] = s[0];
}
int main() { float *d, *o, *s; scan<<<4096, 32>>>(d, o, s); }
"""
# a warp's scan adds for the lanes at or above the doubling distance (31 + 30 + 28 + 24 + 16 of
# 32); the halving tree after it for the lanes below (16 + 8 + 4 + 2 + 1); one multiply between
SCAN_FP32 = (31 + 30 + 28 + 24 + 16) / 32 + 1 + (16 + 8 + 4 + 2 + 1) / 32


def test_the_lanes_above_a_doubling_distance_add_in_a_scan_those_below_a_halving_one_in_a_tree(tmp_path):
    source = tmp_path / "scan.cu"
    source.write_text(SCAN)
    facts = analyse(source, None)["scan"].facts
    assert facts.per_item.fp32 == pytest.approx(SCAN_FP32, rel=0.05)


@needs_cuda
def test_a_one_line_guard_if_converted_runs_its_predicated_body_at_the_body_share(tmp_path):
    source = tmp_path / "scan.cu"
    source.write_text(SCAN)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["scan"].facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    # nvcc's SASS: each guard's test (ISETP) and its body (`@P0 FADD`, `@!P1 LDS`...) on the one
    # line; the test runs every pass, the predicated body for the lanes it lets through
    assert facts.per_item.fp32 == pytest.approx(SCAN_FP32, rel=0.05)


INTERLEAVED = """
__global__ void interleaved(const float *in, float *out) {
  extern __shared__ float s[];
  s[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
    int index = 2 * stride * threadIdx.x;
    if (index < blockDim.x)
      s[index] += s[index + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
int main() { float *a, *b; interleaved<<<4096, 256, 1024>>>(a, b); }
"""


def test_a_doubling_distance_times_the_thread_index_lets_the_threads_below_through(tmp_path):
    source = tmp_path / "interleaved.cu"
    source.write_text(INTERLEAVED)
    facts = analyse(source, None)["interleaved"].facts
    # `2 * stride * tid < 256`: 128 threads add, then 64, ... 1: 255 adds a block of 256
    assert facts.per_item.fp32 == pytest.approx(255 / 256, rel=0.05)


BUTTERFLY = """
__global__ void butterfly(unsigned *d, unsigned *e, unsigned n) {
  unsigned t = threadIdx.x;
  for (unsigned k = 2; k <= 1024; k *= 2)
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      if (t < k / j) e[t] += d[t];
      __syncthreads();
    }
}
int main() { unsigned *d, *e; butterfly<<<1024, 1024>>>(d, e, 1 << 20); }
"""


def test_a_guard_on_two_doubling_and_halving_loops_is_weighted_alike_in_every_process(tmp_path):
    # the loops a condition names were a set's first: which one set the guard's share changed
    # with Python's hash seed (a bitonic sort's loads 80 or 2,064 a thread, run to run)
    source = tmp_path / "butterfly.cu"
    source.write_text(BUTTERFLY)
    loads = set()
    for seed in range(6):
        done = subprocess.run([sys.executable, "-m", "perflsp", "check", str(source), "--json", "--no-compile",
                               "--fail-on", "none"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)})
        (kernel,) = json.loads(done.stdout)["files"][0]["kernels"]
        loads.add(kernel["facts"]["per_item"]["global_loads"])
    assert len(loads) == 1
