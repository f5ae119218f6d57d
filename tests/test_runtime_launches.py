"""Kernels launched through the runtime API (`cudaLaunchKernel`, `cudaLaunchCooperativeKernel`,
HIP's `hipLaunchKernelGGL`): launch sites like `k<<<...>>>`, their arguments read from the array
of pointers the call passes, found as the user types them."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflsp.analysis.notes import texts
from perflsp.analysis.report import CheckSettings
from perflsp.checking import check_file
from perflsp.hardware import load_database
from perflsp.kernels import extract
from perflsp.kernels.context import API_LAUNCHES
from perflsp.kernels.includes import IncludeResolver

H100 = load_database().get("H100")

PROGRAM = """
namespace cg = cooperative_groups;
__global__ void partial_sums(const float *in, float *out, int n) {
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template <typename T>
__global__ void fill(T *p, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}
int main() {
  float *a, *b;
  int n = 1 << 24;
  int blocks = 1024;
  void *args[] = {(void *)&a, &b, &n};
  cudaLaunchCooperativeKernel((void *)partial_sums, blocks, 256, args, 0, 0);
  cudaLaunchKernel(reinterpret_cast<const void *>(&partial_sums), dim3(blocks), dim3(256), args, 0, 0);
  hipLaunchKernelGGL(fill<float>, dim3(n / 128), dim3(128), 0, 0, a, 1.0f, n);
}
"""


def test_runtime_launch_calls_are_launch_sites():
    cooperative, runtime, hip = extract(PROGRAM.encode()).launches
    for site in (cooperative, runtime):
        assert site.kernel == "partial_sums"
        assert site.grid.value == (1024, 1, 1) and site.block.value == (256, 1, 1)
        # the kernel's arguments: what `args` points to (the addresses listed do not make `n` unknown)
        assert [a.text for a in site.args] == ["a", "b", "n"] and site.args[2].value == 1 << 24
    assert cooperative.shared_mem_bytes is not None and cooperative.shared_mem_bytes.value == 0
    assert hip.kernel == "fill" and hip.template_args == ("float",)
    assert hip.grid.value == ((1 << 24) // 128, 1, 1) and hip.block.value == (128, 1, 1)
    assert [a.text for a in hip.args] == ["a", "1.0f", "n"]
    # what the launch's code actions and hints edit: the launch's own arguments
    text = PROGRAM.encode()
    assert text[cooperative.config_span.start_byte:cooperative.config_span.end_byte] == b"blocks, 256, args, 0, 0"
    assert text[hip.block.span.start_byte:hip.block.span.end_byte] == b"dim3(128)"


def test_the_grammar_names_the_runtime_launches_the_extractor_reads():
    scm = (Path(__file__).parent.parent / "grammars" / "launches.scm").read_text()
    assert all(f'"{name}"' in scm for name in API_LAUNCHES)


def test_a_kernel_launched_through_the_runtime_api_is_judged_at_that_launch(tmp_path):
    source = tmp_path / "sums.cu"
    source.write_text(PROGRAM)
    check = check_file(source, [H100], CheckSettings(), IncludeResolver())
    sums = next(k for k in check.kernels if k.name == "partial_sums")
    assert sums.facts.work_items == 1024 * 256  # the cooperative launch's grid, not 2^24 threads assumed
    (loop,) = sums.facts.loops
    assert loop.trip_count == pytest.approx((1 << 24) / (1024 * 256))  # n over the launch's threads
    assert sums.estimates[0].verdict == "bandwidth"


def test_a_runtime_launch_is_found_as_the_user_types_it():
    from lsprotocol.types import Position

    from perflsp.server.text import Change, TextState

    line = "  hipLaunchKernelGGL(fill<float>, dim3(n / 128), dim3(128), 0, 0, a, 1.0f, n);\n"
    state = TextState(PROGRAM.replace(line, ""), 0, None)
    assert [s.name for s in state.extracted.kernels.launches] == ["partial_sums", "partial_sums"]
    row = PROGRAM.splitlines().index(line.rstrip("\n"))
    state.apply([Change(line, Position(row, 0), Position(row, 0))], 1)
    assert [s.name for s in state.extracted.kernels.launches] == ["partial_sums", "partial_sums", "fill"]


def test_a_block_folded_to_zero_is_no_launch_shape(tmp_path):
    # a count whose default the program replaces at run time (`threads = 0` until set from the
    # command line): the block is unknown, not a shape of no threads
    source = tmp_path / "zero.cu"
    source.write_text(PROGRAM.replace("int blocks = 1024;", "int blocks = 1024, threads = 0;")
                      .replace("(void *)partial_sums, blocks, 256", "(void *)partial_sums, blocks, threads"))
    check = check_file(source, [H100], CheckSettings(), IncludeResolver())
    sums = next(k for k in check.kernels if k.name == "partial_sums")
    assert sums.estimates[0].verdict == "bandwidth"
    assert not any("engine error" in e for e in texts(sums.facts.evidence))
    assert sums.facts.work_items == 1024 * 256  # the grid kept, the block assumed (256)


def test_the_block_size_fix_edits_a_runtime_launch_and_its_grid():
    from perflsp.analysis.fixes import set_block_size
    from tests.test_fixes import Doc

    doc = Doc("""
__global__ void fill(float *p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}
int main() {
  float *a; int n = 1 << 24;
  hipLaunchKernelGGL(fill, dim3((n + 255) / 256), dim3(256), 0, 0, a, 1.0f, n);
}
""")
    after = doc.applied(set_block_size(doc.model, doc.site("fill"), 128))
    assert "hipLaunchKernelGGL(fill, dim3((n + 127) / 128), dim3(128), 0, 0, a, 1.0f, n);" in after.text
    assert after.site("fill").grid.value == (1 << 17, 1, 1)


def test_the_argument_array_a_launch_passes_is_the_nearest_declared_before_it():
    src = """
__global__ void axpy(const float *x, float *y, int n) { y[threadIdx.x] += x[threadIdx.x]; }
int main() {
  float *a, *b; int n = 1 << 20, m = 1 << 10;
  { void *args[] = {&a, &b, &n}; cudaLaunchKernel((void *)axpy, n / 256, 256, args, 0, 0); }
  { void *args[] = {&b, &a, &m}; cudaLaunchKernel((void *)axpy, m / 256, 256, args, 0, 0); }
}
"""
    first, second = extract(src.encode()).launches
    assert [a.text for a in first.args] == ["a", "b", "n"]
    assert [a.text for a in second.args] == ["b", "a", "m"] and second.args[2].value == 1 << 10
