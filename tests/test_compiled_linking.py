"""Device functions of another translation unit (`compiled/linking.py`): a kernel calling a
`__device__` function, or an OpenMP target region calling a `declare target` function, that
another source of its folder defines (separate compilation) counts that function's compiled code
at the call, and says so; without such a source it counts the call alone, as before."""

from __future__ import annotations

import json

import pytest

from perflsp.analysis.notes import texts
from perflsp.compiled.build import CompileCache
from perflsp.compiled.linking import defining_sources, simple_name
from perflsp.compiled.service import Compiler
from tests.test_compiled import TOOLCHAIN, analyse, needs_clang_cuda, needs_cuda, needs_omp

KERNEL = """
__device__ unsigned mix(unsigned x);

__global__ void hash(const unsigned *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = mix(in[i]);
}
int main() { unsigned *a, *b; int n = 1 << 20; hash<<<n / 256, 256>>>(a, b, n); }
"""

MIX = """
__device__ unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
"""


def test_a_symbols_own_name():
    assert simple_name("_Z3mixj") == "mix"
    assert simple_name("_ZN2ff3mulEmm") == "mul"
    assert simple_name("_Z5applyIfEvPT_") == "apply"


def test_sources_defining_a_called_function_are_those_of_the_folder_with_it(tmp_path):
    (tmp_path / "main.cu").write_text(KERNEL)
    (tmp_path / "mix.cu").write_text(MIX)
    (tmp_path / "other.cu").write_text("__device__ int unrelated(int x) { return x; }\n")
    (tmp_path / "host.cpp").write_text("unsigned mix(unsigned x) { return x; }\n")  # no device code
    candidates = sorted(tmp_path.iterdir())
    assert defining_sources(tmp_path / "main.cu", {"mix"}, lambda p: None, candidates) == [tmp_path / "mix.cu"]
    # a source the build does not compile itself defines nothing it links
    assert defining_sources(tmp_path / "main.cu", {"mix"}, lambda p: p.name != "mix.cu", candidates) == []


@needs_cuda
def test_a_device_function_of_another_unit_is_counted_at_its_call(tmp_path):
    (tmp_path / "main.cu").write_text(KERNEL)
    (tmp_path / "mix.cu").write_text(MIX)
    facts = analyse(tmp_path / "main.cu", Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["hash"].facts
    # SASS (nvcc -rdc=true), the kernel: IMAD, ISETP, 2 × IMAD.WIDE around `CALL.ABS.NOINC mix`;
    # mix.cu compiled relocatable: 3 × (SHF.R.U32.HI, LOP3.LUT) and 2 × IMAD before its RET
    assert facts.per_item.int32 == pytest.approx(4 + 8)
    assert ("calls device code of other units of the build (separate compilation): `mix` (mix.cu), counted from "
            "their compiled code at the calls' weight") in texts(facts.evidence)


@needs_cuda
def test_without_the_other_unit_the_call_is_counted_alone(tmp_path):
    (tmp_path / "main.cu").write_text(KERNEL)
    facts = analyse(tmp_path / "main.cu", Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["hash"].facts
    assert facts.per_item.int32 == pytest.approx(4)
    assert not any("other units of the build" in t for t in texts(facts.evidence))


@needs_cuda
@needs_clang_cuda
def test_a_clang_build_links_the_other_unit_compiled_by_clang(tmp_path):
    from perflsp.kernels.compile_db import CompileDatabase

    (tmp_path / "main.cu").write_text(KERNEL)
    (tmp_path / "mix.cu").write_text(MIX)
    (tmp_path / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": str(tmp_path / name),
         "command": f"clang++ -O3 --cuda-gpu-arch=sm_86 -x cuda -fgpu-rdc -c {tmp_path / name}"}
        for name in ("main.cu", "mix.cu")]))
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"),
                        flags=CompileDatabase.load(tmp_path / "compile_commands.json"))
    facts = analyse(tmp_path / "main.cu", compiler)["hash"].facts
    assert "clang" in texts(facts.evidence)[0]
    assert "`mix` (mix.cu)" in next(t for t in texts(facts.evidence) if "other units of the build" in t)
    # clang's SASS (ptxas -c for the call, mix.cu with -fgpu-rdc): the same 4 + 8 as nvcc's
    assert facts.per_item.int32 == pytest.approx(4 + 8)


REGION = """
#pragma omp declare target
double poly(double x);
#pragma omp end declare target

void apply(int n, const double *x, double *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++)
    y[i] = poly(x[i]);
}
int main() { static double x[1 << 20], y[1 << 20]; apply(1 << 20, x, y); }
"""

POLY = """
#pragma omp declare target
double poly(double x) { return ((0.25 * x + 0.5) * x + 1.5) * x + 3.0; }
#pragma omp end declare target
"""


@needs_omp
def test_an_openmp_region_counts_the_declare_target_function_another_source_defines(tmp_path):
    (tmp_path / "main.cpp").write_text(REGION)
    (tmp_path / "poly.cpp").write_text(POLY)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    (report,) = analyse(tmp_path / "main.cpp", compiler).values()
    facts = report.facts
    # poly.cpp compiled relocatable by clang's device pass: Horner's three DFMAs, 2 operations each
    assert facts.per_item.fp64 == pytest.approx(6.0, rel=0.05)
    assert "`poly` (poly.cpp)" in next(t for t in texts(facts.evidence) if "other units of the build" in t)


@needs_omp
def test_without_the_defining_source_an_openmp_region_counts_the_call_alone(tmp_path):
    (tmp_path / "main.cpp").write_text(REGION)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    (report,) = analyse(tmp_path / "main.cpp", compiler).values()
    assert report.facts.per_item.fp64 == 0.0
    assert not any("other units of the build" in t for t in texts(report.facts.evidence))


MIX_ROUNDS = """
__device__ __forceinline__ unsigned rounds(unsigned x, int m) {
#pragma unroll 1
  for (int r = 0; r < m; r++) {
    x ^= x >> 16;
    x *= 0x7feb352du;
  }
  return x;
}

__device__ unsigned mix(unsigned x) {
  x = rounds(x, 3);
  return rounds(x, 7);
}
"""


@needs_cuda
def test_copies_of_a_loop_inlined_with_different_constants_each_run_the_trips_their_code_fixes(tmp_path):
    # mix.cu's SASS (nvcc -rdc=true): two loops, each `MOV R0, RZ` before it and `IADD3 R0, R0,
    # 0x1, RZ`, SHF.R.U32.HI, `ISETP.NE.AND P0, PT, R0, 0x3 (0x7), PT`, LOP3.LUT, IMAD, `@P0 BRA`
    # back: 3 and 7 trips of 5 integer instructions (the MOVs are moves), after the kernel's 4.
    # Tied to the one source loop they were counted as a main loop and its remainder: 4 + 3 x 5.
    (tmp_path / "main.cu").write_text(KERNEL)
    (tmp_path / "mix.cu").write_text(MIX_ROUNDS)
    facts = analyse(tmp_path / "main.cu", Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["hash"].facts
    assert facts.per_item.int32 == pytest.approx(4 + (3 + 7) * 5)
