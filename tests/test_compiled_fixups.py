"""Compiled counts of the special-operand arms the compiler adds inside one statement.

A double division (or a 64-bit integer one) compiles to an inline fast path whose result is
checked; operands it cannot handle (denormals, huge quotients, 64-bit operands beyond 32 bits)
branch to a subroutine of the function. The subroutine's 60-odd instructions run for those
operands only: counted per call, they tripled the integer count of kernels that divide.
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


DIVIDE = """\
__global__ void ratio(const double *a, const double *b, double *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a[i] / b[i];
}
int main() { double *a, *b, *y; int n = 1 << 20; ratio<<<n / 256, 256>>>(a, b, y, n); }
"""


@needs_cuda
def test_a_double_division_counts_its_fast_path(tmp_path):
    source = tmp_path / "ratio.cu"
    source.write_text(DIVIDE)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]))
    (report,) = FileAnalysis.of(prepared, options).reports([RTX3080])
    facts = report.facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    # SASS (nvcc, sm_86): IMAD.MOV, IMAD, ISETP, 3 × IMAD.MOV, 3 × IMAD.WIDE; MUFU.RCP64H then 7
    # DFMA and a DMUL (15 FP64), an FFMA (2 FP32) checking the result; `@P0 BRA P1` over
    # `CALL $__internal_0_$__cuda_sm20_div_rn_f64_full`, not counted
    assert facts.per_item.int32 == pytest.approx(9.0)
    assert facts.per_item.fp64 == pytest.approx(15.0)
    assert facts.per_item.fp32 == pytest.approx(2.0)
