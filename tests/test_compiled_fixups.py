"""Compiled counts of the code the compiler adds for special operands (`compiled.special`).

A double division (or a 64-bit integer one) compiles to an inline fast path whose result is
checked; operands it cannot handle (denormals, huge quotients, 64-bit operands beyond 32 bits)
branch to a subroutine of the function. The subroutine's 60-odd instructions run for those
operands only: counted per call, they tripled the integer count of kernels that divide.
Instructions predicated on a test against the smallest normal float (a denormal scaled before
`MUFU.RCP`) or the infinities' exponent are predicated off for ordinary operands likewise.
"""

from __future__ import annotations

import dataclasses

import pytest

from perflsp.analysis.notes import texts
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.compiled.build import CompileCache
from perflsp.compiled.cfg import build_function
from perflsp.compiled.counts import dynamic_counts
from perflsp.compiled.model import CompiledUnit
from perflsp.compiled.profile import SourceProfile
from perflsp.compiled.sass import parse_sass
from perflsp.compiled.service import Compiler
from perflsp.compiled.special import special_operand_instructions
from perflsp.hardware import load_database
from perflsp.kernels.includes import IncludeResolver
from tests.test_compiled import TOOLCHAIN, needs_cuda

RTX3080 = load_database().get("rtx3080")


def _kernel(test_line: int) -> str:
    """A kernel whose fast path's test is on `test_line` and whose division (the call of the
    subroutine `$div`, three integer instructions) is on line 4."""
    return f"""\
\t.section\t.text._Z1kPd,"ax",@progbits
        .other          _Z1kPd,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPd:
.text._Z1kPd:
\t//## File "/src/k.cu", line {test_line}
        /*0000*/                   FSETP.GT.AND P0, PT, |R8|, 1.469367938527859385e-39, PT ;
        /*0010*/               @P0 BRA `(.L_x_1) ;
\t//## File "/src/k.cu", line 4
        /*0020*/                   MOV R8, 0x40 ;
        /*0030*/                   CALL.REL.NOINC `($div) ;
.L_x_1:
        /*0040*/                   IMAD.WIDE R4, R0, R5, c[0x0][0x170] ;
        /*0050*/                   STG.E.64 [R4.64], R2 ;
        /*0060*/                   EXIT ;
$div:
        /*0070*/                   LOP3.LUT R2, R5, 0x800fffff, RZ, 0xc0, !PT ;
        /*0080*/                   ISETP.GE.U32.AND P1, PT, R9, R20, PT ;
        /*0090*/                   IMAD.MOV.U32 R21, RZ, RZ, R9 ;
        /*00a0*/                   RET.REL.NODEC R8 `(_Z1kPd) ;
.L_x_2:
        /*00b0*/                   BRA `(.L_x_2);
"""


def _integers(text: str) -> float:
    fn = build_function(parse_sass(text)[0])
    unit = CompiledUnit("/src/k.cu", "sm_86", "nvcc", {fn.name: fn})
    return dynamic_counts(unit, fn, SourceProfile()).get("integer")


def test_a_subroutine_on_the_arm_of_its_own_statements_test_is_not_counted():
    # the test and the call are the division's (line 4): the fast path's IMAD.WIDE only
    assert _integers(_kernel(4)) == 1.0


def test_a_subroutine_behind_a_test_the_source_writes_is_counted():
    # the test is the source's (`if` on line 3): its arm's share is the source walk's guard
    # weight, and the call runs the subroutine's three integer instructions
    assert _integers(_kernel(3)) == 4.0


PREDICATED = """\
\t.section\t.text._Z1kPf,"ax",@progbits
        .other          _Z1kPf,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPf:
.text._Z1kPf:
\t//## File "/src/k.cu", line 3
        /*0000*/                   FSETP.GEU.AND P0, PT, |R0|, 1.175494350822287508e-38, PT ;
        /*0010*/              @!P0 FMUL R0, R0, 16777216 ;
        /*0020*/               @P0 FADD R5, R5, 1 ;
        /*0030*/                   ISETP.GE.U32.AND P1, PT, R8, 0x7f800000, PT ;
        /*0040*/               @P1 FFMA R4, R8, R5, +INF ;
        /*0050*/                   ISETP.GT.AND P2, PT, R15, 0xfffff, PT ;
        /*0060*/              @!P2 DMUL R20, R20, 1.80143985094819840000e+16 ;
        /*0070*/                   ISETP.GE.AND P2, PT, R3, 0x10, PT ;
        /*0080*/              @!P2 IADD3 R2, R2, 0x1, RZ ;
        /*0090*/                   IADD3 R7, P1, R7, 0x4, RZ ;
        /*00a0*/               @P1 FADD R6, R6, 1 ;
        /*00b0*/                   EXIT ;
"""


def test_instructions_predicated_on_a_special_operand_test_are_found():
    (fn,) = parse_sass(PREDICATED)
    # the denormal scaling (@!P0 after |x| >= FLT_MIN), the infinity case (@P1 after the bits
    # >= 0x7f800000); not the ordinary arm of a test (@P0), a test that reads as `i >= 1 << 20`
    # as well as a double's denormal high word (0xfffff), a source test (0x10), nor a predicate
    # written since (the carry)
    assert special_operand_instructions(fn.instructions) == {1, 4}


def test_predicated_special_operand_code_is_not_counted():
    fn = build_function(parse_sass(PREDICATED)[0])
    unit = CompiledUnit("/src/k.cu", "sm_86", "nvcc", {fn.name: fn})
    counts = dynamic_counts(unit, fn, SourceProfile())
    assert counts.get("fp32") == 2.0  # the two FADD (at the ordinary operands' predicates)
    assert counts.get("fp64") == 1.0  # the DMUL of the 0xfffff test, counted
    assert counts.get("integer") == 5.0  # the tests, the predicated IADD3 and the carry's
    assert counts.get("instructions") == 12.0  # every instruction is issued


DIVIDE = """\
__global__ void ratio(const double *a, const double *b, double *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a[i] / b[i];
}
__global__ void normalize(float *img, const float *norm, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) img[i] = __fdividef(img[i], norm[i]);
}
int main() {
  double *a, *b, *y; float *img, *norm; int n = 1 << 20;
  ratio<<<n / 256, 256>>>(a, b, y, n);
  normalize<<<n / 256, 256>>>(img, norm, n);
}
"""


@needs_cuda
def test_divisions_count_their_fast_path(tmp_path):
    source = tmp_path / "ratio.cu"
    source.write_text(DIVIDE)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]))
    reports = {report.name: report for report in FileAnalysis.of(prepared, options).reports([RTX3080])}
    facts = reports["ratio"].facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    # SASS (nvcc, sm_86): IMAD.MOV, IMAD, ISETP, 3 × IMAD.MOV, 3 × IMAD.WIDE; MUFU.RCP64H then 7
    # DFMA and a DMUL (15 FP64), an FFMA (2 FP32) checking the result; `@P0 BRA P1` over
    # `CALL $__internal_0_$__cuda_sm20_div_rn_f64_full`, not counted
    assert facts.per_item.int32 == pytest.approx(9.0)
    assert facts.per_item.fp64 == pytest.approx(15.0)
    assert facts.per_item.fp32 == pytest.approx(2.0)
    # SASS: FSETP.GEU |norm| against FLT_MIN, `@!P0 FMUL` × 2 scaling denormals, MUFU.RCP, FMUL:
    # one FP32 operation for ordinary operands
    fast = reports["normalize"].facts
    assert fast.per_item.fp32 == pytest.approx(1.0)
    assert fast.per_item.int32 == pytest.approx(4.0)  # IMAD, ISETP, 2 × IMAD.WIDE
