"""Trips a compiled loop's own code fixes (`compiled/cfg.static_trips`): a counter set to a
constant before the loop, stepped by a constant and tested against one, the loop's only way out.
Such a loop runs those trips per entry whatever the source walk says (a loop of another unit's
function, copies of one loop inlined with different constants)."""

from __future__ import annotations

import pytest

from perflsp.compiled.cfg import build_function
from perflsp.compiled.sass import parse_sass

HEAD = """\
\t.section\t.text._Z1kPm,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=24"
        .other          _Z1kPm,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPm:
.text._Z1kPm:
\t//## File "/src/k.cu", line 4
"""

# clang's 64-bit count-down (`for (ulong i = 0; i < 31; i++)` inlined from a helper): the
# counter set to 31, stepped by -1 with a carry into its high word, tested against zero; the
# way out is a call of the code after the loop (`@!P0 CALL.REL.NOINC`), the way back a branch
COUNT_DOWN = HEAD + """\
        /*0000*/                   UMOV UR8, 0x1f ;
        /*0010*/                   UMOV UR4, URZ ;
.L_x_1:
        /*0020*/                   IMAD.WIDE.U32 R6, R4, R5, RZ ;
        /*0030*/                   UIADD3 UR8, UP0, UR8, -0x1, URZ ;
        /*0040*/                   UIADD3.X UR4, UR4, -0x1, URZ, UP0, !UPT ;
        /*0050*/                   ISETP.NE.U32.AND P0, PT, RZ, UR8, PT ;
        /*0060*/                   ISETP.NE.AND.EX P0, PT, RZ, UR4, PT, P0 ;
        /*0070*/                   LOP3.LUT R4, R6, R7, RZ, 0x3c, !PT ;
        /*0080*/              @!P0 CALL.REL.NOINC `(.L_x_0) ;
        /*0090*/                   BRA `(.L_x_1) ;
.L_x_0:
        /*00a0*/                   STG.E.64 [R2.64], R4 ;
        /*00b0*/                   EXIT ;
"""

COUNT_UP = HEAD + """\
        /*0000*/                   IMAD.MOV.U32 R0, RZ, RZ, 0x2 ;
.L_x_0:
        /*0010*/                   IADD3 R0, R0, 0x3, RZ ;
        /*0020*/                   SHF.R.U32.HI R3, RZ, 0x10, R4 ;
        /*0030*/                   ISETP.{op}.AND P0, PT, R0, 0x{bound:x}, PT ;
        /*0040*/                   IMAD R4, R3, 0x7feb352d, RZ ;
        /*0050*/               @P0 BRA `(.L_x_0) ;
        /*0060*/                   STG.E [R2.64], R4 ;
        /*0070*/                   EXIT ;
"""

# the same counter, and a second way out (a `break` on data): it may end early
TWO_WAYS_OUT = HEAD + """\
        /*0000*/                   MOV R0, RZ ;
.L_x_0:
        /*0010*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0020*/                   ISETP.GT.U32.AND P1, PT, R4, 0x64, PT ;
        /*0030*/               @P1 BRA `(.L_x_1) ;
        /*0040*/                   ISETP.NE.AND P0, PT, R0, 0x8, PT ;
        /*0050*/                   IMAD R4, R4, 0x3, RZ ;
        /*0060*/               @P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0070*/                   STG.E [R2.64], R4 ;
        /*0080*/                   EXIT ;
"""

# a counter that enters the loop from a register, not a constant
FROM_A_REGISTER = HEAD + """\
        /*0000*/                   MOV R0, R9 ;
.L_x_0:
        /*0010*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0020*/                   ISETP.NE.AND P0, PT, R0, 0x8, PT ;
        /*0030*/                   IMAD R4, R4, 0x3, RZ ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
        /*0050*/                   EXIT ;
"""


def _loops(sass: str):
    (fn,) = parse_sass(sass)
    return build_function(fn).loops


def test_a_64_bit_count_down_to_zero_runs_its_start():
    (loop,) = _loops(COUNT_DOWN)
    assert loop.static_trips == 31


@pytest.mark.parametrize("op, bound, trips", [
    ("NE", 29, 9),  # 5, 8, ..., 29: nine trips
    ("LT", 29, 9),  # the ninth step reaches 29, no longer below it
    ("LE", 29, 10),  # 29 still passes: one more
    ("LT", 30, 10),  # ceil(28 / 3)
    ("NE", 30, None),  # the counter steps over 30: never equal, no count
    ("GT", 29, None),  # counting up, tested for being above: not a count of trips
])
def test_a_count_up_to_a_constant(op, bound, trips):
    (loop,) = _loops(COUNT_UP.format(op=op, bound=bound))
    assert loop.static_trips == trips


def test_a_loop_with_a_second_way_out_or_an_unknown_start_has_no_fixed_trips():
    (loop,) = _loops(TWO_WAYS_OUT)
    assert loop.static_trips is None
    (loop,) = _loops(FROM_A_REGISTER)
    assert loop.static_trips is None


def test_the_fixed_trips_survive_the_cache():
    from perflsp.compiled.model import CompiledFunction

    (fn,) = parse_sass(COUNT_DOWN)
    compiled = build_function(fn)
    assert CompiledFunction.from_json(compiled.to_json()).loops[0].static_trips == 31
