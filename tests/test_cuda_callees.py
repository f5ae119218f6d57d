"""The `__device__` functions a CUDA kernel calls when they are defined in another translation
unit of its folder (compiled with `-rdc`, declared in a shared header). Small programs of our own."""

from pathlib import Path

from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import texts
from tests.engine_reports import kernel_reports


def analyse(src: str, path: Path | None = None) -> dict[str, KernelReport]:
    """Reports of every kernel of `src`, as `perflsp check` reads a file at `path`."""
    return kernel_reports(src, path)


HEADER = """
#pragma once
__device__ void mix(const unsigned *in, unsigned *out);
"""

DEFINITION = """
#include "mix.h"
__device__ unsigned rotl(unsigned v, int s) { return (v << s) | (v >> (32 - s)); }
__device__ void mix(const unsigned *in, unsigned *out) {
  unsigned a = in[0], b = in[1];
  for (int r = 0; r < 64; r++) { a += b; b = rotl(b ^ a, 7); a = rotl(a, 13) * 5u; }
  out[0] = a; out[1] = b;
}
__global__ void not_a_helper(unsigned *out) { out[threadIdx.x] = 0; }
"""

KERNEL = """
#include "mix.h"
__global__ void hash_pairs(const unsigned *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) mix(in + 2 * i, out + 2 * i);
}
"""


def test_device_function_of_another_translation_unit_is_inlined(tmp_path):
    (tmp_path / "mix.h").write_text(HEADER)
    (tmp_path / "mix.cu").write_text(DEFINITION)
    source = tmp_path / "main.cu"
    source.write_text(KERNEL)
    report = analyse(KERNEL, source)["hash_pairs"]
    facts = report.facts
    # the loads and stores of the callee are found, and its 64 rounds of integer work with them
    assert facts.per_item.global_loads == 2 and facts.per_item.global_stores == 2
    assert facts.per_item.int32 > 64 * 5
    assert report.estimates[0].verdict == "compute"
    assert not any("`mix` not analysed" in e for e in texts(facts.evidence))
    # an unsaved buffer has no folder: the call stays unknown, says so, and the kernel is uncertain
    alone = analyse(KERNEL)["hash_pairs"]
    assert any("`mix` not analysed" in e for e in texts(alone.facts.evidence))
    assert alone.estimates[0].verdict == "uncertain"


def test_kernels_of_other_sources_are_not_callees(tmp_path):
    (tmp_path / "mix.cu").write_text(DEFINITION)
    caller = """
__global__ void not_a_helper(unsigned *out);
__global__ void wrapper(unsigned *out) { not_a_helper(out); }
"""
    source = tmp_path / "main.cu"
    source.write_text(caller)
    facts = analyse(caller, source)["wrapper"].facts
    assert facts.per_item.global_stores == 0


PORTABLE_MACROS = """
#if defined(__CUDACC__)
#define HD __host__ __device__
#else
#define HD
#endif
#include "steps.h"
#include "kernels.h"
"""

PORTABLE_STEPS = """
HD inline unsigned step(unsigned v) {
  for (int r = 0; r < 32; r++) v = (v * 1664525u + 1013904223u) ^ (v >> 7);
  return v;
}
"""

# the kernel file is included by `main.cu` after the header that says `HD`: on its own it sees
# neither the macro nor the header, only the call
PORTABLE_KERNEL = """
__global__ void scramble(const unsigned *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = step(in[i]);
}
"""


def test_helper_marked_through_a_macro_the_kernel_file_does_not_see_is_inlined(tmp_path):
    (tmp_path / "main.cu").write_text(PORTABLE_MACROS)
    (tmp_path / "steps.h").write_text(PORTABLE_STEPS)
    source = tmp_path / "kernels.h"
    source.write_text(PORTABLE_KERNEL)
    facts = analyse(PORTABLE_KERNEL, source)["scramble"].facts
    assert not any("`step` not analysed" in e for e in texts(facts.evidence))
    assert facts.per_item.int32 > 32  # 32 rounds of a multiply-add, a shift and an xor
    alone = analyse(PORTABLE_KERNEL)["scramble"].facts
    assert any("`step` not analysed" in e for e in texts(alone.evidence))
    assert alone.per_item.int32 < 16


def test_a_source_of_the_folder_is_parsed_only_when_it_may_define_the_name(tmp_path, monkeypatch):
    """Every call a kernel makes is looked up (built-ins too); another source of the folder is
    parsed only if its text may define that name, and the kernel's own name is never looked up:
    parsing every sibling for each built-in cost seconds on a folder of large files."""
    from perflsp.kernels import program

    (tmp_path / "mix.h").write_text(HEADER)
    (tmp_path / "mix.cu").write_text(DEFINITION)
    bystander = "".join(f"__global__ void scale_{n}(float *x) {{ x[threadIdx.x] *= sqrtf(2.0f); }}\n"
                        for n in range(50))
    (tmp_path / "a_other.cu").write_text(bystander)  # (listed before mix.cu)
    parsed: list[str] = []
    real = program.parsed_header

    def recording(path, mtime_ns, size):
        parsed.append(path.name)
        return real(path, mtime_ns, size)

    monkeypatch.setattr(program, "parsed_header", recording)
    program._sibling_device_definition.cache_clear()
    kernel = KERNEL.replace("mix(in + 2 * i", "if (sqrtf(2.0f) > 1.0f) mix(in + 2 * i")
    source = tmp_path / "main.cu"
    source.write_text(kernel)
    report = analyse(kernel, source)["hash_pairs"]
    assert report.facts.per_item.global_loads == 2  # `mix` found in mix.cu
    assert "a_other.cu" not in parsed  # it defines neither `mix` nor `sqrtf` nor `hash_pairs`


def test_a_device_function_right_after_a_parenthesised_macro_is_found(tmp_path):
    # `#define SCALE (0.5f)` looks like a call head up to the function's brace: the function
    # after it is still a definition of that file
    (tmp_path / "scale.cu").write_text("#define SCALE (0.5f)\n"
                                       "__device__ float scale_it(float x) { return x * SCALE + 1.0f; }\n")
    kernel = """
__device__ float scale_it(float x);
__global__ void apply(const float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = scale_it(a[i]);
}
"""
    source = tmp_path / "main.cu"
    source.write_text(kernel)
    facts = analyse(kernel, source)["apply"].facts
    assert not any("`scale_it` not analysed" in e for e in texts(facts.evidence))
    assert facts.per_item.fp32 >= 2  # the callee's multiply-add


REFERENCE_COUNT = """
__device__ void peaks(const double *h, int n, double *out, int &count) {
  int k = 0;
  for (int i = 1; i < n - 1; i++)
    if (h[i] > h[i - 1] && h[i] > h[i + 1]) out[k++] = h[i];
  count = k;
}
__device__ void fixed(int &count) { count = 5; }
__global__ void cycles(const double *h, double *out, double *sum, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int count = 0;
  peaks(h + t * n, n, out + t * n, count);
  double s = 0.0;
  for (int i = 0; i < count; i++) s += out[t * n + i] * 0.5;
  int five = 0;
  fixed(five);
  for (int j = 0; j < five; j++) s += 1.0;
  sum[t] = s;
}
"""


def test_a_variable_passed_to_a_reference_parameter_takes_what_the_callee_sets():
    loops = {loop.variable: loop for loop in kernel_reports(REFERENCE_COUNT)["cycles"].facts.loops
             if loop.line > 10}
    # `count` is what `peaks` counted (data-dependent: an assumed trip), not the caller's 0;
    # `five` is the constant `fixed` stores
    assert loops["i"].trip_count > 0 and loops["i"].origin == "assumed"
    assert loops["j"].trip_count == 5
