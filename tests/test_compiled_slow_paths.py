"""The slow paths of library math functions (`compiled/slow_paths.py`): the Payne-Hanek
argument reduction that `sinf`/`cosf`/`sincosf` run for |x| >= 105615 is inlined by both
compilers, but no thread takes it in practice, so it is cut off the control-flow graph."""

from __future__ import annotations

import pytest

from perflsp.analysis.notes import texts
from perflsp.compiled.build import CompileCache
from perflsp.compiled.cfg import build_function
from perflsp.compiled.model import INDEX
from perflsp.compiled.sass import parse_sass
from perflsp.compiled.service import Compiler
from perflsp.compiled.slow_paths import huge_argument_arms
from tests.test_compiled import TOOLCHAIN, _clang_database, analyse, needs_clang_cuda, needs_cuda

TRIG = """
__global__ void spin(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s, c;
    sincosf(x[i], &s, &c);
    y[i] = s * c;
  }
}
int main() { float *x, *y; int n = 1 << 20; spin<<<n / 256, 256>>>(x, y, n); }
"""

# the shape both compilers give the reduction: the range test, the fast path's FMAs, a branch
# around the slow path (here a stand-in loop of two instructions), the join
SASS = """\
\t.section\t.text._Z1kPf,"ax",@progbits
        .other          _Z1kPf,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPf:
.text._Z1kPf:
        /*0000*/                   FSETP.GE.AND P0, PT, |R4|, 105615, PT ;
        /*0010*/                   FFMA R0, R7, -1.5707962512969970703, R4 ;
        /*0020*/              @!P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0030*/                   IADD3 R11, R11, 0x4, RZ ;
        /*0040*/                   ISETP.NE.AND P6, PT, R11, 0x18, PT ;
        /*0050*/               @P6 BRA `(.L_x_2) ;
.L_x_1:
        /*0060*/                   FMUL R6, R0, R0 ;
        /*0070*/                   EXIT ;
"""


def test_the_huge_argument_arm_of_a_trigonometric_reduction_is_cut_off():
    (fn,) = parse_sass(SASS)
    compiled = build_function(fn)
    assert compiled.slow_paths == 1
    assert compiled.loops == []  # the reduction's loop went with its arm
    total = {name: sum(lc.counts[INDEX[name]] for b in compiled.blocks for lc in b.lines) for name in ("integer", "fp32")}
    assert total == {"integer": 0, "fp32": 3}  # FFMA + FMUL; the loop's IADD3 and ISETP are gone


SAVED = """\
\t.section\t.text._Z1kPf,"ax",@progbits
        .other          _Z1kPf,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPf:
.text._Z1kPf:
        /*0000*/                   FSETP.GE.AND P2, PT, |R14|, 105615, PT ;
        /*0010*/                   P2R R82, PR, RZ, 0x4 ;
        /*0020*/              @!P2 BRA `(.L_x_1) ;
        /*0030*/                   IADD3 R11, R11, 0x4, RZ ;
.L_x_1:
        /*0040*/                   FSETP.GE.AND P2, PT, R3, RZ, PT ;
        /*0050*/                   ISETP.NE.AND P3, PT, R82, RZ, PT ;
        /*0060*/              @!P3 BRA `(.L_x_2) ;
        /*0070*/                   IADD3 R12, R12, 0x4, RZ ;
        /*0080*/                   IADD3 R13, R13, 0x4, RZ ;
.L_x_2:
        /*0090*/                   FMUL R6, R0, R0 ;
        /*00a0*/                   EXIT ;
"""


def test_a_range_test_saved_in_a_register_and_tested_again_cuts_both_slow_paths():
    # `sinf(x)` and `cosf(x)` of one argument: ptxas keeps the range test in a register
    # (`P2R`) while the predicate is reused, and tests the register again for the second call
    (fn,) = parse_sass(SAVED)
    compiled = build_function(fn)
    assert compiled.slow_paths == 2
    integers = sum(lc.counts[INDEX["integer"]] for b in compiled.blocks for lc in b.lines)
    assert integers == 1  # the ISETP; the three IADD3 of the slow arms are gone


def test_a_branch_on_another_bound_is_no_slow_path():
    (fn,) = parse_sass(SASS.replace("105615", "1000"))
    compiled = build_function(fn)
    assert compiled.slow_paths == 0 and len(compiled.loops) == 1
    assert huge_argument_arms(fn.instructions, [0, 3, 6], [[2, 1], [1, 2], []]) == {}


def _fast_path_only(facts):
    # SASS (nvcc and clang-19 alike, read by hand): the index and bounds test (3 integer), the
    # address (2), the reduction's fast path (FMUL by 2/pi, F2I, 3 FFMA), the sign of the index
    # (SHF), the sine and cosine polynomials (FMUL, 8 FFMA), quadrant selects (5 integer), the
    # product (FMUL) and the store's address (2 LEA): 15 integer instructions, 25 FP32 operations.
    # The Payne-Hanek arm (a loop of six trips over a table of 2/pi, ~110 integer instructions)
    # is not counted, and the evidence says so.
    assert facts.per_item.int32 == pytest.approx(15.0)
    assert facts.per_item.fp32 == pytest.approx(25.0)
    assert "1 slow path of library trigonometric functions not counted (the argument reduction for |x| ≥ 105615, " \
           "2^31 for doubles): no thread runs it in practice" in texts(facts.evidence)


@needs_cuda
def test_nvcc_sincosf_counts_its_fast_path_only(tmp_path):
    source = tmp_path / "trig.cu"
    source.write_text(TRIG)
    _fast_path_only(analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["spin"].facts)


@needs_cuda
@needs_clang_cuda
def test_clang_sincosf_counts_its_fast_path_only(tmp_path):
    source = tmp_path / "trig.cu"
    source.write_text(TRIG)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    facts = analyse(source, compiler)["spin"].facts
    assert "clang" in texts(facts.evidence)[0]
    _fast_path_only(facts)
