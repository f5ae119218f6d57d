"""Local memory (a thread's stack frame) in the DRAM bytes: the frame read off the compiled
code's prologue, and the frames that do not fit in an SM's L1 counted leaving the chip."""

from __future__ import annotations

import pytest

from perflsp.analysis.local_traffic import FRAME_PASSES, MAX_FRAME_PASSES, with_local_traffic
from perflsp.analysis.models import KernelFacts, OpCounts, StackFrames
from perflsp.analysis.notes import NoteKind
from perflsp.compiled.cfg import build_function, frame_bytes
from perflsp.compiled.model import INDEX
from perflsp.compiled.sass import parse_sass
from perflsp.hardware import load_database

RTX3080 = load_database().get("rtx3080")
THREADS = float(1 << 20)

SASS = """\
\t.section\t.text._Z4histPKfPKiPfi,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=21"
        .other          _Z4histPKfPKiPfi,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z4histPKfPKiPfi:
.text._Z4histPKfPKiPfi:
\t//## File "/src/k.cu", line 2
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_CTAID.X ;
        /*0040*/                   {prologue} ;
        /*00a0*/                   STL.128 [R1], RZ ;
        /*0200*/                   LDL R5, [R13] ;
        /*02a0*/                   STL [R13], R0 ;
        /*02b0*/                   EXIT ;
"""


@pytest.mark.parametrize("prologue, frame", [
    ("IADD3 R1, R1, -0x100, RZ", 256),  # sm_80, sm_90
    ("VIADD R1, R1, 0xffffff00", 256),  # the same step in two's complement
    ("IADD3 R2, R1, 0x10, RZ", 0),  # an address on the stack, not the frame
])
def test_the_frame_is_read_off_the_prologue(prologue, frame):
    (fn,) = parse_sass(SASS.format(prologue=prologue))
    assert frame_bytes(fn.instructions) == frame
    compiled = build_function(fn)
    assert compiled.frame_bytes == frame
    counts = compiled.blocks[0].lines[0].counts
    # STL.128, LDL, STL: 16 + 4 + 4 bytes of local memory, three instructions
    assert counts[INDEX["local_bytes"]] == 24 and counts[INDEX["local"]] == 3


def _facts(local_bytes: float, frame: int, registers: int = 21) -> KernelFacts:
    per_item = OpCounts(fp32=64.0, global_load_bytes=512.0, global_store_bytes=4.0, local_bytes=local_bytes)
    dram = 516.0 * THREADS
    return KernelFacts(per_item, THREADS, f"{THREADS:,.0f} threads", per_item.scaled(THREADS), dram,
                       "footprint 516 MB", stack=StackFrames(frame, THREADS, registers), operations="compiled")


H100 = load_database().get("h100-sxm5-80gb")


def test_frames_beyond_l1_but_within_l2_are_written_to_dram_and_read_back():
    # H100, 21 registers: eight 256-thread blocks an SM (2,048 threads), 160 B each = 320 KiB > its
    # 256 KiB of L1, but the 132 SMs' 42 MB of frames fit in its 50 MiB of L2
    before = _facts(local_bytes=772.0, frame=160)
    after = with_local_traffic(before, H100, 256, None, 0)
    assert after.dram_bytes - before.dram_bytes == pytest.approx(FRAME_PASSES * 160 * THREADS)
    assert "of local memory" in after.dram_note and "2,048 threads an SM holds" in after.dram_note
    assert any(note.kind == NoteKind.LOCAL_MEMORY for note in after.assumptions)
    # never more than the local loads and stores move
    few = with_local_traffic(_facts(local_bytes=100.0, frame=160), H100, 256, None, 0)
    assert few.dram_bytes - before.dram_bytes == pytest.approx(100.0 * THREADS)


def test_frames_beyond_l1_and_l2_send_what_l1_misses_to_dram():
    # RTX 3080, 21 registers: six 256-thread blocks an SM (1,536 threads), 256 B each = 384 KiB
    # > 128 KiB of L1; its 68 SMs' 26 MB of frames exceed its 5 MiB of L2: two thirds of the
    # 2,000 B a thread moves miss L1 and reach DRAM (more than the 512 B of a frame written and read back)
    before = _facts(local_bytes=2000.0, frame=256)
    after = with_local_traffic(before, RTX3080, 256, None, 0)
    assert after.dram_bytes - before.dram_bytes == pytest.approx(2000.0 * (1 - 128 / 384) * THREADS)
    assert "1,536 threads an SM holds" in after.dram_note and "67%" in after.dram_note
    # at most eight frames a thread, however much the walk says moves
    heavy = with_local_traffic(_facts(local_bytes=100_000.0, frame=256), RTX3080, 256, None, 0)
    assert heavy.dram_bytes - before.dram_bytes == pytest.approx(MAX_FRAME_PASSES * 256 * THREADS)
    # at least the frame written and read back
    light = with_local_traffic(_facts(local_bytes=700.0, frame=256), RTX3080, 256, None, 0)
    assert light.dram_bytes - before.dram_bytes == pytest.approx(FRAME_PASSES * 256 * THREADS)


def test_a_launch_smaller_than_the_gpu_spreads_its_frames_over_the_sms():
    # 6,800 threads on 68 SMs: 100 an SM, 100 x 1,024 B = 100 KiB within L1: nothing leaves the chip
    small = KernelFacts(OpCounts(local_bytes=8192.0), 6800.0, "6,800 threads", OpCounts(local_bytes=8192.0 * 6800),
                        0.0, "", stack=StackFrames(1024, 6800.0, 21), operations="compiled")
    assert with_local_traffic(small, RTX3080, 256, None, 0) is small


def test_frames_that_fit_in_l1_stay_on_chip():
    # 48 B a thread: 72 KiB for an SM's 1,536 threads, within its 128 KiB of L1 and shared memory
    small = _facts(local_bytes=4000.0, frame=48)
    assert with_local_traffic(small, RTX3080, 256, None, 0) is small
    # shared memory takes L1's room: 4 blocks of 24 KiB (what 100 KiB of shared memory holds)
    # leave 32 KiB, below their 1,024 threads' 48 KiB of frames
    crowded = with_local_traffic(small, RTX3080, 256, None, 24 * 1024)
    assert crowded.dram_bytes - small.dram_bytes == pytest.approx(FRAME_PASSES * 48 * THREADS)


def test_no_stack_or_no_local_traffic_leaves_the_bytes_alone():
    no_frame = _facts(local_bytes=772.0, frame=0)
    assert with_local_traffic(no_frame, RTX3080, 256, None, 0) is no_frame
    unused = _facts(local_bytes=0.0, frame=256)
    assert with_local_traffic(unused, RTX3080, 256, None, 0) is unused


def test_a_callees_frame_adds_to_its_callers_once_even_through_recursion():
    from perflsp.compiled.model import Block, CompiledFunction, CompiledUnit

    def fn(name: str, frame: int, calls: list[str]) -> CompiledFunction:
        return CompiledFunction(name, name == "k", 32, [], [Block(0, [], [], None, calls)], [], frame_bytes=frame)

    unit = CompiledUnit("/src/k.cu", "sm_86", "nvcc", {
        "k": fn("k", 64, ["small", "deep"]), "small": fn("small", 16, []),
        "deep": fn("deep", 32, ["leaf", "deep"]), "leaf": fn("leaf", 128, ["deep"]),
    })
    # k (64) -> deep (32) -> leaf (128); the calls back into `deep` add nothing more
    assert unit.stack_bytes(unit.functions["k"]) == 64 + 32 + 128
    assert unit.stack_bytes(unit.functions["small"]) == 16
