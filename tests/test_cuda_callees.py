"""The `__device__` functions a CUDA kernel calls when they are defined in another translation
unit of its folder (compiled with `-rdc`, declared in a shared header). Small programs of our own."""

from dataclasses import replace
from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.source.parser import parse

H100 = load_database().get("H100")


def analyse(src: str, path: Path | None = None) -> dict[str, KernelReport]:
    """Reports of every kernel of `src`, as `perflsp check` reads a file at `path`."""
    data = src.encode()
    env = IncludeResolver().env_for(path, data)
    tree = parse(data)
    kernels = extract(data, tree, path=str(path) if path else None, env=env)
    unit = AnalysisUnit(data, tree, kernels, replace(AnalysisOptions(), include_env=env))
    return {k.name: analyze_kernel(unit, k, [H100]) for k in kernels.kernels}


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
    assert not any("`mix` not analysed" in e for e in facts.evidence)
    # an unsaved buffer has no folder: the call stays unknown, says so, and the kernel is uncertain
    alone = analyse(KERNEL)["hash_pairs"]
    assert any("`mix` not analysed" in e for e in alone.facts.evidence)
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
