"""Compiled facts: SASS read into blocks, loops and Nsight Compute's instruction classes, and
weighted by how often the source walk says each block runs.

The pure parts (reading nvdisasm's text, the control-flow graph, the instruction classes) run
on text written here. The rest compile small programs of our own with the real toolchain
(nvcc + nvdisasm; clang with the NVPTX OpenMP runtime) and check the counts against the SASS
read by hand (the comments list the instructions). CI installs the toolchain and sets
$PERFLSP_REQUIRE_TOOLCHAIN, so there these tests must run; elsewhere they skip without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap
from pathlib import Path

import pytest

from perflsp.analysis.notes import texts
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.compiled.build import CompileCache, CompileFailure, CompileRequest, cache_key, compile_unit
from perflsp.compiled.cfg import build_function
from perflsp.compiled.headers import find_header_folder, missing_header
from perflsp.compiled.isa import classify
from perflsp.compiled.model import INDEX
from perflsp.compiled.sass import parse_sass
from perflsp.compiled.service import Compiler, includer_of
from perflsp.compiled.toolchain import Toolchain, find_toolchain
from perflsp.hardware import load_database
from perflsp.kernels.includes import IncludeResolver

TOOLCHAIN = find_toolchain()
RTX3080 = load_database().get("rtx3080")


def _needs(language: str):
    missing = TOOLCHAIN.missing(language)
    # CI installs the compilers (.ci/run sets the variable): a skip there would hide a broken install
    required = bool(os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"))
    return pytest.mark.skipif(missing is not None and not required, reason=missing or "")


needs_cuda = _needs("cuda")
needs_omp = _needs("omp")
needs_clang_cuda = pytest.mark.skipif(not TOOLCHAIN.clang_cuda_ready and not os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"),
                                      reason="no clang with a CUDA install it can use")


# ------------------------------------------------------------------------------ reading SASS

SASS = """\
\t.section\t.text._Z3dotPKfS0_Pfi,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=37"
        .other          _Z3dotPKfS0_Pfi,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z3dotPKfS0_Pfi:
.text._Z3dotPKfS0_Pfi:
\t//## File "/src/k.cu", line 2
        /*0000*/                   S2R R0, SR_CTAID.X ;
        /*0010*/                   IMAD R0, R0, c[0x0][0x0], R3 ;
\t//## File "/src/k.cu", line 4
        /*0020*/                   ISETP.GE.AND P0, PT, R6, 0x1, PT ;
        /*0030*/              @!P0 BRA `(.L_x_1) ;
.L_x_5:
\t//## File "/src/h.cuh", line 9 inlined at "/src/k.cu", line 5
\t//## File "/src/k.cu", line 5
        /*0040*/                   LDG.E.128 R8, [R4.64] ;
        /*0050*/                   FFMA R9, R8, R9, R9 ;
        /*0060*/                   DADD R10, R10, R12 ;
\t//## File "/src/k.cu", line 4
        /*0070*/                   IADD3 R7, R7, 0x4, RZ ;
        /*0080*/                   ISETP.GT.AND P1, PT, R7, 0xc, PT ;
        /*0090*/               @P1 BRA `(.L_x_5) ;
.L_x_1:
\t//## File "/src/k.cu", line 7
        /*00a0*/                   STG.E.64 [R2.64], R10 ;
        /*00b0*/                   EXIT ;
.L_x_2:
        /*00c0*/                   BRA `(.L_x_2);
"""


def test_nvdisasm_text_is_read_with_its_inline_chains():
    (fn,) = parse_sass(SASS)
    assert fn.name == "_Z3dotPKfS0_Pfi" and fn.is_entry and fn.registers == 37
    assert [i.opcode for i in fn.instructions][:3] == ["S2R", "IMAD", "ISETP.GE.AND"]
    load = fn.instructions[4]
    assert load.opcode == "LDG.E.128" and load.chain == (("/src/h.cuh", 9), ("/src/k.cu", 5))
    assert fn.instructions[3].predicate == "!P0" and fn.instructions[3].predicated
    assert fn.instructions[4].labels == (".L_x_5",)


def test_blocks_and_loops_of_the_control_flow_graph():
    cf = build_function(parse_sass(SASS)[0])
    # entry, loop body, exit; the trailing `BRA` to itself is unreachable and dropped
    assert len(cf.blocks) == 3
    (loop,) = cf.loops
    assert loop.parent is None and loop.blocks == [1]
    assert [cf.chains[c][0] for c in loop.latch_chains] == [("/src/k.cu", 4)]
    assert [(s.amount, cf.chains[s.chain][0]) for s in loop.steps] == [(4, ("/src/k.cu", 4))]
    own = loop.own_counts
    assert own[INDEX["fp32"]] == 2 and own[INDEX["fp64"]] == 1 and own[INDEX["integer"]] == 2
    assert own[INDEX["load_bytes"]] == 16 and own[INDEX["loads"]] == 1


LOOP_LEFT_BY_A_CALL = """\
\t.section\t.text.region,"ax",@progbits
        .other          region,@"STO_CUDA_ENTRY STV_DEFAULT"
region:
.text.region:
\t//## File "/src/k.cpp", line 4
        /*0000*/                   MOV R7, RZ ;
.L_x_1:
\t//## File "/src/k.cpp", line 5
        /*0010*/                   FFMA R9, R8, R9, R9 ;
\t//## File "/src/k.cpp", line 4
        /*0020*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0030*/                   ISETP.NE.AND P3, PT, R7, 0x8, PT ;
        /*0040*/              @!P3 CALL.REL.NOINC `(.L_x_2) ;
        /*0050*/                   BRA `(.L_x_1) ;
.L_x_2:
\t//## File "/src/k.cpp", line 7
        /*0060*/                   STG.E [R2.64], R9 ;
        /*0070*/                   RET.REL.NODEC R4 `(region) ;
.L_x_3:
        /*0080*/                   BRA `(.L_x_3);
"""


def test_a_loop_left_through_a_call_of_a_label_ends_there_even_when_a_return_follows():
    # clang's OpenMP regions end in `RET` (the runtime calls the region's body): the code after
    # the label still is the loop's exit, not a subroutine the loop calls on every pass
    cf = build_function(parse_sass(LOOP_LEFT_BY_A_CALL)[0])
    (loop,) = cf.loops
    assert loop.blocks == [1, 2]
    exit_block = next(b for b, block in enumerate(cf.blocks) if any(cf.chains[lc.chain] == (("/src/k.cpp", 7),)
                                                                    for lc in block.lines))
    assert exit_block not in loop.blocks
    assert loop.own_counts[INDEX["stores"]] == 0 and loop.own_counts[INDEX["fp32"]] == 2


JUMP_TABLE = """\
\t.section\t.text.pick,"ax",@progbits
        .other          pick,@"STO_CUDA_ENTRY STV_DEFAULT"
pick:
.text.pick:
\t//## File "/src/k.cu", line 3
        /*0000*/                   LDC R4, c[0x2][R3] ;
        /*0010*/                   BRX R4 -0x20                           (*"BRANCH_TARGETS .L_x_1,.L_x_2"*) ;
.L_x_1:
\t//## File "/src/k.cu", line 4
        /*0020*/                   FMUL R9, R8, R9 ;
        /*0030*/                   BRA `(.L_x_3) ;
.L_x_2:
\t//## File "/src/k.cu", line 5
        /*0040*/                   DADD R10, R10, R12 ;
.L_x_3:
\t//## File "/src/k.cu", line 7
        /*0050*/                   STG.E [R2.64], R9 ;
        /*0060*/                   EXIT ;
.L_x_4:
        /*0070*/                   BRA `(.L_x_4);
"""


def test_the_cases_of_a_jump_table_are_blocks_of_the_function():
    # a `switch` compiled to `BRX`: nvdisasm lists its targets, the cases' blocks (before, they
    # were unreachable, dropped, and their work not counted)
    (fn,) = parse_sass(JUMP_TABLE)
    assert fn.instructions[1].targets == (".L_x_1", ".L_x_2") and fn.instructions[1].operands == "R4 -0x20"
    cf = build_function(fn)
    lines = {cf.chains[lc.chain][0][1] for block in cf.blocks for lc in block.lines}
    assert {4, 5, 7} <= lines
    assert len(cf.blocks[0].successors) == 2


SUBROUTINE_WITH_AN_EXIT = """\
\t.section\t.text.points,"ax",@progbits
        .other          points,@"STO_CUDA_ENTRY STV_DEFAULT"
points:
.text.points:
\t//## File "/src/k.cu", line 14
        /*0000*/                   MOV R7, RZ ;
.L_x_0:
\t//## File "/src/k.cu", line 16
        /*0010*/                   CALL.REL.NOINC `($points$smooth) ;
\t//## File "/src/k.cu", line 15
        /*0020*/                   IADD3 R7, R7, 0x1, RZ ;
        /*0030*/                   ISETP.NE.AND P0, PT, R7, 0x40, PT ;
        /*0040*/              @!P0 EXIT ;
        /*0050*/                   BRA `(.L_x_0) ;
$points$smooth:
\t//## File "/src/k.cu", line 3
        /*0060*/                   MOV R8, RZ ;
.L_x_1:
\t//## File "/src/k.cu", line 5
        /*0070*/                   ISETP.GT.AND P1, PT, R9, 0x3, PT ;
        /*0080*/               @P1 BRA `(.L_x_2) ;
\t//## File "/src/k.cu", line 6
        /*0090*/                   FFMA R9, R8, R9, R9 ;
\t//## File "/src/k.cu", line 3
        /*00a0*/                   IADD3 R8, R8, 0x1, RZ ;
        /*00b0*/                   ISETP.NE.AND P2, PT, R8, 0x64, PT ;
        /*00c0*/               @P2 BRA `(.L_x_1) ;
        /*00d0*/                   BRA `(.L_x_3) ;
.L_x_2:
\t//## File "/src/k.cu", line 10
        /*00e0*/                   EXIT ;
.L_x_3:
\t//## File "/src/k.cu", line 12
        /*00f0*/                   RET.REL.NODEC R4 `(points) ;
.L_x_4:
        /*0100*/                   BRA `(.L_x_4);
"""


def test_a_device_function_that_loops_and_may_end_the_kernel_is_called_on_every_pass():
    # `smooth`, not inlined, loops 100 times, and a path of it ends the kernel (`EXIT`, laid
    # out before its return, as a `switch` with no case for a value compiles): still a function
    # the kernel's 64-pass loop calls (read as a jump into its code, the kernel's loop was lost
    # and the function ran once)
    cf = build_function(parse_sass(SUBROUTINE_WITH_AN_EXIT)[0])
    (loop,) = cf.loops
    assert [cf.chains[c][0] for c in loop.latch_chains] == [("/src/k.cu", 15)]
    calls = [callee for b in loop.blocks for callee in cf.blocks[b].calls]
    assert calls == ["$points$smooth"]
    assert loop.own_counts[INDEX["fp32"]] == 0  # the function's work is its own, counted per call


@pytest.mark.parametrize("opcode, field, amount", [
    ("FFMA", "fp32", 2), ("FADD", "fp32", 1), ("FMUL32I", "fp32", 1), ("DFMA", "fp64", 2), ("DMUL", "fp64", 1),
    ("HFMA2", "fp16", 4), ("IMAD.WIDE.U32", "integer", 1), ("IMAD.MOV.U32", "integer", 1), ("LOP3.LUT", "integer", 1),
    ("ISETP.GE.AND", "integer", 1), ("LEA.HI.X", "integer", 1), ("LDG.E.128.CONSTANT", "load_bytes", 16),
    ("LDG.E.U8", "load_bytes", 1), ("STG.E.64", "store_bytes", 8), ("MUFU.RSQ", "special", 1),
    ("HMMA.16816.F32", "tensor", 128), ("DMMA.8x8x4", "tensor", 16), ("DMMA.884", "tensor", 16),
    ("F2F.F64.F32", "conversion", 1),
])
def test_instruction_classes_follow_nsight_compute(opcode, field, amount):
    from perflsp.compiled.sass import Instruction

    cost = classify(Instruction(0, opcode, "", None, ()))
    assert getattr(cost, field) == amount
    # moves, selects and predicate logic are none of the counted classes
    other = classify(Instruction(0, "SEL", "", None, ()))
    assert other.integer == other.fp32 == 0


def test_a_constant_put_in_a_register_by_an_fma_is_no_arithmetic():
    from perflsp.compiled.sass import Instruction

    # ptxas (sm_80, sm_86) sets a register to 4 this way before an `IMAD.WIDE` by the element size
    move = classify(Instruction(0, "HFMA2.MMA", "R7, -RZ, RZ, 0, 2.384185791015625e-07", None, ()))
    assert move.fp16 == move.fp32 == move.integer == 0
    real = classify(Instruction(0, "HFMA2", "R4, R2, R3, -RZ", None, ()))
    assert real.fp16 == 4


# ------------------------------------------------------------------------------ real compiles

SLIP = """\
__global__ void half_scale(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 0.1;
}
__global__ void chain(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < 64; k++) acc = acc * x[i] + 1.0f;
  y[i] = acc;
}
int main() {
  float *x, *y;
  half_scale<<<4096, 256>>>(x, y, 4096 * 256);
  chain<<<4096, 256>>>(x, y);
}
"""

POLY = """\
__global__ void poly(const float *x, float *y, int n, int degree) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    float acc = 0.0f;
    for (int d = 0; d < degree; ++d)
        acc = acc * v + 1.0f;
    y[i] = acc;
}
int main() { float *x, *y; int n = 1 << 20; poly<<<n / 128, 128>>>(x, y, n, 256); }
"""


def analyse(path: Path, compiler: Compiler | None, gpus=(RTX3080,)):
    data = path.read_bytes()
    prepared = read_program(path, data, ReadContext(IncludeResolver()), AnalysisOptions())
    options = prepared.options
    if compiler is not None:
        options = dataclasses.replace(options, compiled=compiler.compiled(path, ["sm_86"]))
    analysis = FileAnalysis.of(prepared, options)
    return {report.name: report for report in analysis.reports(list(gpus))}


def compiled_facts(tmp_path: Path, compiler: Compiler, name: str, text: str, kernel: str):
    """The facts of `kernel` in `text` (saved as `name`), which must be counted from its compiled code."""
    source = tmp_path / name
    source.write_text(text)
    facts = analyse(source, compiler)[kernel].facts
    assert any("operations counted in the compiled code" in e for e in texts(facts.evidence))
    return facts


@pytest.fixture
def compiler(tmp_path) -> Compiler:
    return Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))


@needs_cuda
def test_the_precision_a_mixed_expression_runs_in_is_the_compiled_one(tmp_path, compiler):
    source = tmp_path / "slip.cu"
    source.write_text(SLIP)
    reports = analyse(source, compiler)
    slip = reports["half_scale"].facts
    # SASS: IMAD, ISETP.GE, @P0 EXIT, IMAD.WIDE, LDG, IMAD.WIDE, F2F.F64.F32, DMUL, F2F.F32.F64, STG:
    # the float times a double literal runs in FP64 (one DMUL), none in FP32
    assert slip.per_item.fp64 == pytest.approx(1.0)
    assert slip.per_item.fp32 == 0.0
    assert slip.per_item.int32 == pytest.approx(4.0)  # IMAD, ISETP, 2 × IMAD.WIDE
    assert "operations counted in the compiled code" in texts(slip.evidence)[0]
    # SASS: the 64-trip loop unrolled completely: 64 FFMA (128 FLOP), IMAD, 2 × IMAD.WIDE
    chain = reports["chain"].facts
    assert chain.per_item.fp32 == pytest.approx(128.0)
    assert chain.per_item.int32 == pytest.approx(3.0)
    assert chain.per_item.global_load_bytes == pytest.approx(4.0) and chain.per_item.global_store_bytes == 4.0


@needs_cuda
def test_an_unrolled_runtime_loop_runs_its_source_trips_at_the_main_loops_cost(tmp_path, compiler):
    source = tmp_path / "poly.cu"
    source.write_text(POLY)
    facts = analyse(source, compiler)["poly"].facts
    # SASS: ptxas unrolls the loop 16 times (16 FFMA, IADD3 R5, R5, -0x10, ISETP per trip) beside
    # 4x and 1x remainder loops; degree 256 from the launch: 16 trips of the main loop
    assert facts.per_item.fp32 == pytest.approx(2 * 256)
    # executed integer instructions read off the SASS: 11 before the loop, 2 per trip (32), 3
    # tests after it, LEA + LEA.HI.X for the store: 48 (one more counted: the 8x copy's step,
    # on the loop's header line)
    assert 46 <= facts.per_item.int32 <= 52
    tied = next(line for line in texts(facts.evidence) if "compiled code" in line)
    assert "1 of 3 loops tied" not in tied and "loops tied to source loops" in tied


SUNK = """\
__constant__ int table[1024];
__global__ void total(int *out) {
    int sum = 0;
    for (int j = 0; j < 1024; j += 4)
        sum += table[j];
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *out = sum;
}
int main() { int *o; total<<<4096, 256>>>(o); }
"""


@needs_cuda
def test_code_sunk_below_a_guards_exit_runs_only_for_the_threads_that_stay(tmp_path, compiler):
    source = tmp_path / "sunk.cu"
    source.write_text(SUNK)
    facts = analyse(source, compiler)["total"].facts
    # SASS: IMAD.MOV (the stack pointer), S2UR, S2R, `LOP3.LUT P0` (line 6), `@P0 EXIT`; below
    # it the sum's 256 IADD3 (lines 4-5) and the store: only thread 0 of block 0 runs them
    assert facts.per_item.int32 == pytest.approx(2.0, abs=0.01)


ONE_LINE_GUARD = """\
#define N 500000
__global__ void axpy(const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = 2.0f * x[i] + y[i];
}
int main() { float *x, *y; axpy<<<N, 512>>>(x, y); }
"""


@needs_cuda
def test_past_a_one_line_guards_exit_only_its_body_runs(tmp_path, compiler):
    source = tmp_path / "guard.cu"
    source.write_text(ONE_LINE_GUARD)
    facts = analyse(source, compiler)["axpy"].facts
    # 500,000 of the 256,000,000 threads pass `i < N` (a grid 512x too large); SASS: the index and
    # its test, `@P0 EXIT`, then on the same line the body: 2 LDG, FFMA, STG. The test's line
    # holds the body too: the body runs at the guard's share, not the test's
    share = 500_000 / (500_000 * 512)
    assert facts.per_item.fp32 == pytest.approx(2 * share)
    assert facts.per_item.global_loads == pytest.approx(2 * share)
    assert 1.5 <= facts.per_item.int32 <= 4.5  # the index and the test, every thread


PIXELS = """\
__global__ void shade(uchar4 *pixels, int width) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int at = x + y * width;
    unsigned char grey = (unsigned char)(128.0f + 127.0f * __cosf(x * 0.1f) * __sinf(y * 0.1f));
    pixels[at].x = grey;
    pixels[at].y = grey;
    pixels[at].z = grey;
    pixels[at].w = 255;
}
int main() { uchar4 *p; cudaMalloc(&p, 1024 * 1024 * sizeof(uchar4)); shade<<<dim3(64, 64), dim3(16, 16)>>>(p, 1024); }
"""


@needs_cuda
def test_member_stores_the_compiler_merges_into_one_keep_the_members_bytes(tmp_path, compiler):
    source = tmp_path / "pixels.cu"
    source.write_text(PIXELS)
    facts = analyse(source, compiler)["shade"].facts
    # SASS: the four byte stores become one 32-bit STG on the last member's line; the pixels are
    # 4 MiB, not 4 bytes per member (16 MiB)
    assert facts.per_item.global_stores == pytest.approx(1.0)
    assert sum(g.footprint_bytes for g in facts.traffic.groups if g.is_store) == pytest.approx(1024 * 1024 * 4)


HISTOGRAM = """\
__global__ void histogram(const float *x, const int *bin, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float t[64];
    for (int q = 0; q < 64; ++q)
        t[q] = 0.0f;
    for (int q = 0; q < 64; ++q)
        t[bin[i + q * n] & 63] += x[i + q * n];
    y[i] = t[i & 63];
}
int main() { float *x, *y; int *b; int n = 1 << 20; histogram<<<n / 256, 256>>>(x, b, y, n); }
"""


@needs_cuda
def test_a_stack_array_indexed_at_run_time_is_local_memory_that_reaches_dram(tmp_path, compiler):
    source = tmp_path / "histogram.cu"
    source.write_text(HISTOGRAM)
    report = analyse(source, compiler)["histogram"]
    facts = report.facts
    # SASS (nvcc -O3, sm_86): `IADD3 R1, R1, -0x100, RZ` (a 256 B frame), 16 × STL.128 zero it,
    # then, unrolled, 64 × (LDL, FADD, STL) of 4 B and one LDL for the result: 772 B a thread
    assert facts.stack is not None and facts.stack.bytes_per_thread == 256
    assert facts.per_item.local_bytes == pytest.approx(772.0)
    # 21 registers: 1,536 threads an SM hold 384 KiB of frames, beyond its L1: each 256 B frame
    # written to DRAM and read back, for 2^20 threads
    assert "of local memory" in facts.dram_note
    (estimate,) = report.estimates
    global_bytes = (64 + 64 + 1) * 4 * float(1 << 20)  # x and bin read once, y written
    assert estimate.dram_bytes == pytest.approx(global_bytes + 2 * 256 * float(1 << 20), rel=0.05)


@needs_cuda
def test_a_header_of_kernels_a_cpp_file_includes_is_compiled_through_it_as_cuda(tmp_path, compiler):
    # `main.cpp` holds no kernel of its own: the build compiles it for the device (`nvcc -x cu`)
    # because the header it includes does
    (tmp_path / "kernels.hpp").write_text("__global__ void twice(float *x) { x[threadIdx.x] *= 2.f; }\n")
    (tmp_path / "main.cpp").write_text('#include "kernels.hpp"\n'
                                       "int main() { float *x = nullptr; twice<<<1, 32>>>(x); }\n")
    source = compiler.compiled(tmp_path / "kernels.hpp", ["sm_86"])
    assert source.failures == {}
    assert source.units["sm_86"].source == str((tmp_path / "main.cpp").resolve())
    assert "_Z5twicePf" in source.units["sm_86"].functions


@needs_cuda
def test_a_header_of_kernels_no_source_includes_is_compiled_on_its_own(tmp_path, compiler):
    # a kernel file NVRTC compiles at run time (`extern "C"`, no includer): compiled alone, as
    # NVRTC does; a header of no kernels still has nothing to compile
    (tmp_path / "scale_kernel.cuh").write_text('extern "C" __global__ void scale(float *x, float a) {\n'
                                               "  x[blockIdx.x * blockDim.x + threadIdx.x] *= a;\n}\n")
    (tmp_path / "constants.h").write_text("#define SCALE 2.0f\n")
    source = compiler.compiled(tmp_path / "scale_kernel.cuh", ["sm_86"])
    assert source.failures == {}
    assert source.units["sm_86"].source == str((tmp_path / "scale_kernel.cuh").resolve())
    assert "scale" in source.units["sm_86"].functions
    assert "no device code" in compiler.compiled(tmp_path / "constants.h", ["sm_86"]).failures["sm_86"]


@needs_cuda
def test_a_source_other_sources_include_is_compiled_through_the_outermost_one(tmp_path, compiler):
    # a unity build: main.cu includes solver.cu, which includes solver_kernels.cu, whose kernel
    # takes a struct main's header declares: alone it does not compile, through main.cu it does
    (tmp_path / "state.h").write_text("typedef struct { int rows; unsigned *pivot; } state_t;\n")
    (tmp_path / "solver_kernels.cu").write_text("__global__ void clear_pivot(state_t s) {\n"
                                                "  s.pivot[blockIdx.x * blockDim.x + threadIdx.x] = 0u;\n}\n")
    (tmp_path / "solver.cu").write_text('#include "solver_kernels.cu"\n'
                                        "void solve(state_t s) { clear_pivot<<<s.rows / 256, 256>>>(s); }\n")
    (tmp_path / "main.cu").write_text('#include "state.h"\n#include "solver.cu"\nint main() { state_t s{}; solve(s); }\n')
    (tmp_path / "other.cu").write_text("__global__ void k(float *x) { x[threadIdx.x] = 0.f; }\n")
    assert compiler.unit_for(tmp_path / "solver_kernels.cu") == tmp_path / "main.cu"
    assert compiler.unit_for(tmp_path / "other.cu") == tmp_path / "other.cu"
    source = compiler.compiled(tmp_path / "solver_kernels.cu", ["sm_86"])
    assert source.failures == {} and "_Z11clear_pivot7state_t" in source.units["sm_86"].functions


@needs_cuda
def test_a_file_the_database_does_not_compile_is_compiled_through_the_unit_that_includes_it(tmp_path):
    # compile_commands.json names main.cu alone; main.cu defines the kernel file's type and
    # includes work.cu, which includes it: work.cu, not a unit either, does not compile on its
    # own ("identifier fp is undefined"); the build compiles the kernel through main.cu
    (tmp_path / "kernels.cu").write_text("__global__ void ecc(fp *x) { x[threadIdx.x] *= (fp)2; }\n")
    (tmp_path / "header.h").write_text('#include "kernels.cu"\n')
    (tmp_path / "work.cu").write_text('#include "header.h"\nvoid work(fp *x) { ecc<<<1, 32>>>(x); }\n')
    (tmp_path / "main.cu").write_text('#define fp float\n#include "work.cu"\nint main() { work(nullptr); }\n')
    database = _database(tmp_path, tmp_path / "main.cu", "nvcc -O3")
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=database)
    assert compiler.unit_for(tmp_path / "kernels.cu") == tmp_path / "main.cu"
    assert compiler.unit_for(tmp_path / "header.h") == tmp_path / "main.cu"
    source = compiler.compiled(tmp_path / "kernels.cu", ["sm_86"])
    assert source.failures == {} and "_Z3eccPf" in source.units["sm_86"].functions


@needs_cuda
def test_a_source_in_a_folder_the_database_does_not_cover_is_compiled_through_the_unit_including_it(tmp_path):
    # main.cu (the database's unit) -> tree.h -> kernels/tree_kernels.cu, a folder no entry names:
    # alone it instantiates no template and emits no code for `fill`; through main.cu it does
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "tree_kernels.cu").write_text(
        "template <typename T> __global__ void fill(T *x, T v) { x[blockIdx.x * blockDim.x + threadIdx.x] = v; }\n")
    (tmp_path / "tree.h").write_text('#include "kernels/tree_kernels.cu"\n')
    (tmp_path / "main.cu").write_text('#include "tree.h"\nint main() { fill<float><<<4, 256>>>(nullptr, 1.f); }\n')
    database = _database(tmp_path, tmp_path / "main.cu", "nvcc -O3")
    assert database.is_unit(tmp_path / "kernels" / "tree_kernels.cu") is None
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=database)
    assert compiler.unit_for(tmp_path / "kernels" / "tree_kernels.cu") == tmp_path / "main.cu"
    source = compiler.compiled(tmp_path / "kernels" / "tree_kernels.cu", ["sm_86"])
    assert source.failures == {} and "_Z4fillIfEvPT_S0_" in source.units["sm_86"].functions


def test_a_copy_another_compile_wrote_beside_its_unit_is_neither_an_includer_nor_a_source(tmp_path):
    # `check DIR` compiles units in parallel; one unit's copy (`.perflsp-*.cu`, written beside it
    # for seconds) includes the same header: taken for the header's includer or for a file to
    # check, it was gone when compiled ("cannot read .perflsp-...cu")
    from perflsp.source.files import TRANSIENT_COPY_PREFIX, iter_source_paths

    (tmp_path / "kernels.cuh").write_text("__global__ void k(float *x) { x[threadIdx.x] = 0.f; }\n")
    (tmp_path / f"{TRANSIENT_COPY_PREFIX}a1b2c3.cu").write_text('#include "kernels.cuh"\n')
    (tmp_path / "main.cu").write_text('#include "kernels.cuh"\nint main() {}\n')
    assert includer_of(tmp_path / "kernels.cuh") == tmp_path / "main.cu"
    assert [p.name for p in iter_source_paths([tmp_path])] == ["kernels.cuh", "main.cu"]


@needs_cuda
def test_a_header_kernel_is_compiled_through_the_source_that_includes_it(tmp_path, compiler):
    (tmp_path / "kernels.cuh").write_text(POLY.split("int main")[0])
    (tmp_path / "main.cu").write_text('#include "kernels.cuh"\n' + "int main" + POLY.split("int main")[1])
    assert includer_of(tmp_path / "kernels.cuh") == tmp_path / "main.cu"
    source = compiler.compiled(tmp_path / "kernels.cuh", ["sm_86"])
    assert source.units["sm_86"].source == str((tmp_path / "main.cu").resolve())
    assert any(fn.name.startswith("_Z4poly") for fn in source.units["sm_86"].functions.values())


@needs_cuda
def test_units_are_cached_by_text_flags_and_headers(tmp_path):
    cache = CompileCache(tmp_path / "cache")
    (tmp_path / "k.cuh").write_text("#define SCALE 0.1f\n")
    source = tmp_path / "k.cu"
    source.write_text('#include "k.cuh"\n__global__ void k(float *y) { y[threadIdx.x] *= SCALE; }\n')
    request = CompileRequest(str(source), "cuda", "sm_86")
    first = compile_unit(request, TOOLCHAIN, cache)
    again = compile_unit(request, TOOLCHAIN, CompileCache(tmp_path / "cache"))  # from disk
    assert again.to_json() == first.to_json()
    # a unit cached by other reader code is read again from its cached disassembly, not compiled
    (meta,) = (tmp_path / "cache").rglob("*.json")
    stale = json.loads(meta.read_text())
    stale["reader"], stale["unit"] = "older", None
    meta.write_text(json.dumps(stale))
    assert CompileCache(tmp_path / "cache").get(cache_key(request, TOOLCHAIN, source.read_bytes())).to_json() \
        == first.to_json()
    (tmp_path / "k.cuh").write_text("#define SCALE 0.1\n")  # a header changed: compiled again, now in FP64
    changed = compile_unit(request, TOOLCHAIN, CompileCache(tmp_path / "cache"))
    fn = next(iter(changed.functions.values()))
    assert sum(lc.counts[INDEX["fp64"]] for b in fn.blocks for lc in b.lines) > 0


@needs_cuda
def test_prefetch_compiles_what_the_cache_lacks_and_leaves_cached_units_to_the_caller(tmp_path):
    sources = []
    for name in ("a", "b"):
        source = tmp_path / f"{name}.cu"
        source.write_text(f"__global__ void {name}(float *y) {{ y[threadIdx.x] *= 2.0f; }}\n")
        sources.append(source)
    (tmp_path / "host.cpp").write_text("int main() { return 0; }\n")  # no device code: not submitted
    calls: list[str] = []

    class Counting(Compiler):
        def _compile(self, request):
            calls.append(Path(request.source).name)
            return super()._compile(request)

    cold = Counting(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    cold.prefetch([*sources, tmp_path / "host.cpp"], ["sm_86"])
    assert not cold._prefetching  # nothing runs ahead before a unit is found missing
    units = [cold.compiled(sources[0], ["sm_86"]).units["sm_86"]]
    assert cold._prefetching  # the first miss started compiling ahead
    units.append(cold.compiled(sources[1], ["sm_86"]).units["sm_86"])
    cold.close()
    assert sorted(calls) == ["a.cu", "b.cu"]  # each compiled once: the caller shared the prefetched one
    assert [fn.name for unit in units for fn in unit.functions.values()] == ["_Z1aPf", "_Z1bPf"]
    # a warm cache: the prefetch submits nothing; the caller loads each unit when it asks
    calls.clear()
    warm = Counting(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    warm.prefetch(sources, ["sm_86"])
    assert warm.compiled(sources[1], ["sm_86"]).units["sm_86"].to_json() == units[1].to_json()
    assert calls == ["b.cu"] and not warm._prefetching
    warm.close()
    assert "closed" in warm.compiled(sources[0], ["sm_86"]).failures["sm_86"]


@needs_omp
def test_an_openmp_region_counts_its_loop_body_per_iteration(tmp_path, compiler):
    source = tmp_path / "saxpy.cpp"
    source.write_text(textwrap.dedent("""\
        void saxpy(int n, float a, const float *x, float *y) {
          #pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n])
          for (int i = 0; i < n; i++)
            y[i] = a * x[i] + y[i];
        }
        int main() { float x[1 << 20], y[1 << 20]; saxpy(1 << 20, 2.0f, x, y); }
        """))
    (report,) = analyse(source, compiler).values()
    facts = report.facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    # one FFMA per iteration; the runtime's set-up is spread over the iterations of a thread
    assert facts.per_item.fp32 == pytest.approx(2.0, rel=0.05)
    assert facts.per_item.fp64 == 0.0


@needs_omp
def test_a_serial_target_region_counts_one_thread_whatever_threads_its_launch_has(tmp_path, compiler):
    # clang runs a plain `target` region in its team's main thread; the launch's other threads
    # (128 of them, as the profiler saw it launched) wait in the runtime's state machine
    source = tmp_path / "total.cpp"
    source.write_text(textwrap.dedent("""\
        void total(float *e, int n) {
          #pragma omp target map(tofrom: e[0:n])
          for (int i = 1; i < n; i++) e[0] += e[i];
        }
        int main() { float e[16000]; total(e, 16000); }
        """))
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    compiled = compiler.compiled(source, ["sm_86"])
    alone, launched = (
        FileAnalysis.of(prepared, dataclasses.replace(prepared.options, compiled=compiled, launch_override=shape))
        .reports([RTX3080])[0].facts
        for shape in (None, ((1, 1, 1), (128, 1, 1))))
    assert "operations counted in the compiled code" in texts(launched.evidence)[0]
    assert launched.work_items == alone.work_items == 1.0
    # (at least the loop's 15,999 additions, in one thread: not 128 times them)
    assert 15999 <= launched.total.fp32 == alone.total.fp32 < 15999 * 16


BYTE_FILL = """\
#include <cstdlib>
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  unsigned char *p = (unsigned char *)malloc(n);
  #pragma omp target teams distribute parallel for map(from: p[0:n])%s
  for (int i = 0; i < n; i++) p[i] = 0;
  return p[0];
}
"""


@needs_omp
def test_only_the_copy_of_a_parallel_loop_doing_an_iteration_a_trip_runs(tmp_path, compiler):
    # clang 19 vectorizes the byte stores inside the distribute loop: a copy storing 16 bytes a
    # trip, 8 unrolled, 4 a trip, and the remainder loop storing 1; a thread runs one iteration
    # of each chunk of the team's threads, so the remainder loop alone runs (all four counted:
    # 29 bytes stored an iteration, with their trip-count division ~60 integer instructions)
    source = tmp_path / "fill.cpp"
    source.write_text(BYTE_FILL % "")
    (report,) = analyse(source, compiler).values()
    assert "operations counted in the compiled code" in texts(report.facts.evidence)[0]
    assert report.facts.per_item.global_store_bytes == pytest.approx(1.0)
    assert report.facts.per_item.int32 < 40
    # a chunk of the directive's own hands a thread many iterations of it: every copy may run
    chunked = compiled_facts(tmp_path, compiler, "chunked.cpp", BYTE_FILL % " dist_schedule(static, 65536)", "main@l5")
    assert chunked.per_item.global_store_bytes > 1.0


UNLAUNCHED_DOT = """\
double dot(const double *a, const double *b) {
  const int n = 1 << 24;
  double sum = 0.0;
  #pragma omp target teams distribute parallel for map(to: a[0:n], b[0:n]) map(tofrom: sum) reduction(+:sum)
  for (int i = 0; i < n; i++)
    sum += a[i] * b[i];
  return sum;
}
int main() { static double a[1 << 24], b[1 << 24]; return dot(a, b) > 0; }
"""


@needs_omp
def test_a_region_without_a_launch_is_counted_on_the_launch_llvms_runtime_makes(tmp_path, compiler):
    # no `num_teams`/`thread_limit`: libomptarget launches 128 threads a team, a team per 128
    # iterations up to 3,200 teams, so each thread takes 41 of the 2^24 iterations and runs the
    # reduction's tail once for them, as a launch of that shape given by a profile counts it
    source = tmp_path / "dot.cpp"
    source.write_text(UNLAUNCHED_DOT)
    (editor,) = analyse(source, compiler).values()
    assert "3200 teams × 128 threads as LLVM's offload runtime launches them, 41 iterations per thread" \
        in editor.facts.work_items_note
    data = source.read_bytes()
    prepared = read_program(source, data, ReadContext(IncludeResolver()), AnalysisOptions())
    options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]),
                                  launch_override=((3200, 1, 1), (128, 1, 1)))
    (given,) = FileAnalysis.of(prepared, options).reports([RTX3080])
    assert editor.facts.per_item.int32 == pytest.approx(given.facts.per_item.int32)
    assert editor.facts.per_item.fp64 == pytest.approx(given.facts.per_item.fp64)


NESTED_COLLAPSE_REGION = """\
void blur(int n, const double *img, const double *w, double *out) {
  #pragma omp target teams distribute map(to: img[0:n * 64 * 64], w[0:64 * 64]) map(from: out[0:n]) thread_limit(128)
  for (int p = 0; p < n; p++) {
    double s = 0.0;
    #pragma omp parallel for collapse(2) reduction(+:s)
    for (int a = 0; a < 64; a++)
      for (int b = 0; b < 64; b++)
        s += img[p * 4096 + a * 64 + b] * w[a * 64 + b];
    out[p] = s;
  }
}
int main() { static double img[1024 * 4096], w[4096], out[1024]; blur(1024, img, w, out); }
"""


@needs_omp
def test_a_collapsed_parallel_loop_inside_a_distribute_loop_runs_the_whole_nest(tmp_path, compiler):
    # clang emits one loop for the `collapse(2)` nest, its team's threads sharing the 4,096
    # iterations: tied to either source loop, it runs the nest's iterations, not the first loop's
    facts = compiled_facts(tmp_path, compiler, "blur.cpp", NESTED_COLLAPSE_REGION, "blur@l2")
    assert facts.work_items == 1024
    # a DFMA per iteration of the nest (2 FP64 operations), plus the reduction's DADDs each of the
    # team's 128 threads runs (5 shuffle steps in its warp, then the team's cross-warp step)
    assert 64 * 64 * 2 + 128 * 5 <= facts.per_item.fp64 <= (64 * 64 * 2 + 128 * 5) * 1.1


COPY_TEMPLATE_REGION = """\
template <class T>
void copy(int n, const T *x, T *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++)
    y[i] = x[i];
}
int main() {
  static unsigned int a[1 << 20], b[1 << 20];
  static unsigned char c[1 << 20], d[1 << 20];
  copy(1 << 20, a, b);
  copy(1 << 20, c, d);
}
"""


@needs_omp
def test_the_offload_entry_of_the_instantiation_named_is_the_one_counted(tmp_path, compiler):
    # three-word types (`unsigned char`) are matched as written in the entry's demangled name
    source = tmp_path / "copy.cpp"
    source.write_text(COPY_TEMPLATE_REGION)
    for named, mangled, element in (("unsigned char", "_Z4copyIhEviPKT_PS0_", 1.0),
                                    ("unsigned int", "_Z4copyIjEviPKT_PS0_", 4.0)):
        prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()),
                                AnalysisOptions(instantiation=(named,)))
        options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]))
        (report,) = FileAnalysis.of(prepared, options).reports([RTX3080])
        assert mangled in texts(report.facts.evidence)[0]
        assert report.facts.per_item.global_load_bytes == pytest.approx(element, rel=0.05)


WINDOW_TEMPLATE_REGION = """\
template <int R>
void smooth(int n, const float *x, float *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n + 2 * R]) map(from: y[0:n])
  for (int i = 0; i < n; i++) {
    float s = 0.f;
    for (int k = -R; k <= R; k++)
      s += x[i + R + k] * 0.5f;
    y[i] = s;
  }
}
int main() {
  static float x[(1 << 20) + 64], y[1 << 20];
  smooth<9>(1 << 20, x, y);
  smooth<1>(1 << 20, x, y);
}
"""


@needs_omp
def test_the_offload_entry_of_the_value_instantiation_named_is_the_one_counted(tmp_path, compiler):
    # `smooth<1>`'s window loop is unrolled into 3 loads and 3 FMAs a point, `smooth<9>`'s 19:
    # the region of the instantiation judged is counted, not the first the unit holds
    source = tmp_path / "smooth.cpp"
    source.write_text(WINDOW_TEMPLATE_REGION)
    for named, mangled, window in (("1", "_Z6smoothILi1EEviPKfPf", 3), ("9", "_Z6smoothILi9EEviPKfPf", 19)):
        prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()),
                                AnalysisOptions(instantiation=(named,)))
        options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]))
        (report,) = FileAnalysis.of(prepared, options).reports([RTX3080])
        assert mangled in texts(report.facts.evidence)[0]
        assert report.facts.per_item.fp32 == pytest.approx(2 * window, rel=0.1)
        assert report.facts.per_item.global_load_bytes == pytest.approx(4 * window, rel=0.1)


COPY_TEMPLATE_KERNEL = """\
template <class T>
__global__ void copy(int n, const T *x, T *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
int main() {
  unsigned int *a, *b;
  unsigned char *c, *d;
  copy<<<4096, 256>>>(1 << 20, a, b);
  copy<<<4096, 256>>>(1 << 20, c, d);
}
"""


@needs_cuda
def test_the_kernel_instantiation_named_is_the_one_counted(tmp_path, compiler):
    source = tmp_path / "copy.cu"
    source.write_text(COPY_TEMPLATE_KERNEL)
    for named, mangled, element in (("unsigned char", "_Z4copyIhEviPKT_PS0_", 1.0),
                                    ("unsigned int", "_Z4copyIjEviPKT_PS0_", 4.0)):
        prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()),
                                AnalysisOptions(instantiation=(named,)))
        options = dataclasses.replace(prepared.options, compiled=compiler.compiled(source, ["sm_86"]))
        (report,) = FileAnalysis.of(prepared, options).reports([RTX3080])
        assert mangled in texts(report.facts.evidence)[0]
        assert report.facts.per_item.global_load_bytes == pytest.approx(element, rel=0.05)


NOINLINE_LOOP = """\
__device__ __noinline__ float fit(const float *x, int n) {
  float r = 0.f;
  for (int i = 0; i < n - 1; i++) r += x[i] * x[i + 1] + 1.5f;
  return r;
}
__global__ void best(const float *a, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 4096)
    out[i] = fit(a + i * n, n);
}
int main() { float *a, *o; best<<<64, 256>>>(a, o, 101); }
"""


@needs_cuda
def test_a_called_subroutine_that_loops_runs_its_loop_on_every_call(tmp_path, compiler):
    # ptxas places the function it did not inline in the kernel (`$_Z4bestPKfPfi$_Z3fitPKfi`);
    # its loop runs 100 trips on each call (FFMA + FADD: 3 FP32 operations each; unrolled 16
    # times, its remainder's copies run too), counted at the call's weight: 4,096 of the 16,384
    # threads call it (the guard's weight is not taken twice). Summed as straight-line code, the
    # loop's copies ran once: 29 of the 100 trips.
    facts = compiled_facts(tmp_path, compiler, "fit.cu", NOINLINE_LOOP, "best")
    assert facts.per_item.fp32 == pytest.approx(100 * 3 * 4096 / 16384, rel=0.15)


def test_the_unrolling_of_a_loop_explains_every_register_it_steps():
    from perflsp.compiled.counts import _consistent_unroll

    # one register stepped by 7 in a loop whose `z += 7` steps by 7: kept whole (clang counted
    # a plane loop by `z`), not 7 iterations of the counter a trip
    assert _consistent_unroll([7.0], (1.0, 7.0)) == 1.0
    # unrolled 4 times: the counter by 4, `j += 4` by 16
    assert _consistent_unroll([4.0, 16.0], (1.0, 4.0)) == 4.0
    assert _consistent_unroll([4.0], (1.0,)) == 4.0
    # a register no step explains (a byte offset): the smallest amount over the counter's step
    assert _consistent_unroll([1.0, 12.0], (1.0,)) == 1.0


TEAM_SUM_REGION = """\
#include <omp.h>
#define LS 128
void run(float *out, const float *in, int teams) {
  #pragma omp target teams num_teams(teams) thread_limit(LS) map(to: in[0:teams*LS]) map(from: out[0:teams])
  {
    float local_sum[LS];
    #pragma omp parallel
    {
      const int lid = omp_get_thread_num();
      const int tid = omp_get_team_num();
      local_sum[lid] = in[LS * tid + lid] * 2.0f;
      #pragma omp barrier
      if (lid == 0) {
        float sum = 0.0f;
        for (int i = 0; i < LS; i++) sum += local_sum[i];
        out[tid] = sum;
      }
    }
  }
}
int main() { static float in[512 * LS], out[512]; run(out, in, 512); }
"""


@needs_omp
def test_a_loop_counted_by_its_address_alone_runs_the_iterations_its_step_covers(tmp_path, compiler):
    # clang unrolls the team's sum 8 times and steps the team-local array's 32-bit address by
    # 32 bytes a trip, with no counter: 8 floats a trip, 16 trips, not 128 (FP32 per thread:
    # the multiply, and the 128 adds of thread 0 shared over the team's 128 threads)
    source = tmp_path / "team.cpp"
    source.write_text(TEAM_SUM_REGION)
    (report,) = analyse(source, compiler).values()
    assert report.facts.per_item.fp32 == pytest.approx(2.0, rel=0.1)


def test_the_unrolling_of_a_loop_without_a_counter_is_read_from_its_address_steps():
    from perflsp.compiled.counts import _unroll_by_addresses

    assert _unroll_by_addresses([32.0], {4.0}) == 8.0
    assert _unroll_by_addresses([32.0, 64.0], {4.0, 8.0}) == 8.0
    assert _unroll_by_addresses([4.0], {4.0}) == 1.0
    assert _unroll_by_addresses([12.0], {8.0}) is None  # no whole number of iterations
    assert _unroll_by_addresses([], {4.0}) is None


INDEX_STEPPED = """\
\t.section\t.text._Z1kPd,"ax",@progbits
        .other          _Z1kPd,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPd:
.text._Z1kPd:
\t//## File "/src/k.cu", line 2
        /*0000*/                   IMAD.MOV.U32 R5, RZ, RZ, -0x1 ;
.L_x_0:
\t//## File "/src/k.cu", line 4
        /*0010*/                   DFMA R2, R2, R2, R2 ;
\t//## File "/src/k.cu", line 3
        /*0020*/                   IADD3 R5, R5, 0x6, RZ ;
        /*0030*/                   ISETP.NE.AND P0, PT, R5, {bound}, PT ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
        /*0050*/                   EXIT ;
"""


# the compiler knows the trip count (the index compared with 47: the code fixes 8 trips), or
# does not (compared with a register)
@pytest.mark.parametrize(("static", "bound", "fp64"), [(True, "0x2f", 16.0), (False, "R7", 16.0 / 6)])
def test_a_register_stepped_by_an_index_s_stride_is_no_counter_of_that_many_iterations(static, bound, fp64):
    from perflsp.compiled.cfg import build_function
    from perflsp.compiled.counts import dynamic_counts
    from perflsp.compiled.model import CompiledUnit
    from perflsp.compiled.profile import SourceLoop, SourceProfile, SourceStatement

    # `for (q = 1; q <= 8; q++) r = fma(r, r, r + acof[k + 6 * q]);` as clang's strength reduction
    # leaves it: one register, the index, stepped 6 a trip and compared with 47, no counter
    fn = build_function(parse_sass(INDEX_STEPPED.format(bound=bound))[0])
    unit = CompiledUnit("/src/k.cu", "sm_86", "clang", {fn.name: fn})
    loop = SourceLoop("/src/k.cu", 3, 4, 4, 8.0, 1.0, 1.0, 0, index_steps={6.0}, static_trip=static)
    profile = SourceProfile([SourceStatement("/src/k.cu", 2, 2, 1.0, None), SourceStatement("/src/k.cu", 3, 4, 1.0, None),
                             SourceStatement("/src/k.cu", 4, 4, 1.0, 0)], [loop])
    # a trip count the compiler knows (8): 6 iterations a trip would not fit it, one does (the
    # index's step): 8 trips of one DFMA; a trip count it does not know: read as a counter
    assert dynamic_counts(unit, fn, profile).get("fp64") == pytest.approx(fp64)


CLANG_INLINED_LOOP = """\
\t.section\t.text._Z1kPd,"ax",@progbits
        .other          _Z1kPd,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPd:
.text._Z1kPd:
\t//## File "/src/k.cu", line 9
        /*0000*/                   IMAD.MOV.U32 R5, RZ, RZ, RZ ;
.L_x_0:
\t//## File "/src/h.cuh", line 2
        /*0010*/                   DFMA R2, R2, R2, R2 ;
        /*0020*/                   DFMA R2, R2, R2, R2 ;
        /*0030*/                   DFMA R2, R2, R2, R2 ;
\t//## File "/src/k.cu", line 10
        /*0040*/                   IADD3 R5, R5, 0x1, RZ ;
        /*0050*/                   ISETP.NE.AND P0, PT, R5, 0x10, PT ;
        /*0060*/               @P0 BRA `(.L_x_0) ;
        /*0070*/                   EXIT ;
"""


def test_a_loop_clang_inlined_without_naming_its_calls_is_tied_through_the_calls_the_walk_inlined():
    from perflsp.compiled.cfg import build_function
    from perflsp.compiled.counts import dynamic_counts
    from perflsp.compiled.model import CompiledUnit
    from perflsp.compiled.profile import SourceLoop, SourceProfile, SourceStatement

    # `scan(x);` on k.cu lines 9-10 inlines a device function whose loop (lines 3-5, 16 trips)
    # calls a helper of h.cuh on line 4. clang's line info names no inline call: the loop closes
    # on the call's line, its body is the helper's line. The walk inlined the helper through
    # k.cu:4 and k.cu:9: through those calls, the body sits in the loop
    fn = build_function(parse_sass(CLANG_INLINED_LOOP)[0])
    unit = CompiledUnit("/src/k.cu", "sm_86", "clang", {fn.name: fn})
    inlined = (("/src/k.cu", 9),)
    loop = SourceLoop("/src/k.cu", 3, 4, 5, 16.0, 1.0, 1.0, 1, callsites=inlined)
    profile = SourceProfile([SourceStatement("/src/k.cu", 9, 10, 1.0, None),
                             SourceStatement("/src/k.cu", 3, 5, 1.0, None, inlined),
                             SourceStatement("/src/k.cu", 4, 4, 1.0, 0, inlined),
                             SourceStatement("/src/h.cuh", 2, 2, 1.0, 0, (("/src/k.cu", 4), *inlined))], [loop])
    counts = dynamic_counts(unit, fn, profile)
    assert counts.matched == 1
    assert counts.get("fp64") == pytest.approx(16 * 3 * 2)
    # nvcc names the calls a line was inlined through: a single location there is the
    # function's own code, read as written (no loop around the helper's line: once)
    by_nvcc = CompiledUnit("/src/k.cu", "sm_86", "nvcc", {fn.name: fn})
    assert dynamic_counts(by_nvcc, fn, profile).matched == 0


def test_an_index_s_stride_explains_a_step_only_where_it_fits_the_known_trip_count():
    from perflsp.compiled.counts import _index_unroll

    assert _index_unroll([192.0], {48.0}, 8.0) == 4.0  # acof[k + 48 * m], unrolled 4 times
    assert _index_unroll([24.0], {6.0}, 8.0) == 4.0
    assert _index_unroll([6.0], {6.0}, 8.0) == 1.0
    assert _index_unroll([18.0], {6.0}, 8.0) is None  # 3 iterations a trip do not fit 8
    assert _index_unroll([192.0], {48.0}, 0.0) is None  # a trip count the compiler does not know
    assert _index_unroll([192.0], set(), 8.0) is None


SWEEP_COEFFICIENTS = """\
__global__ void mix(const double *acof, const double *u, double *out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double r = 0;
  for (int q = 1; q <= 8; q++)
    for (int m = 0; m < n; m++)
      r += acof[k + 6 * q + 48 * m] * u[i];
  out[i] = r;
}
"""


@needs_cuda
def test_the_walk_records_a_loop_s_index_steps_and_whether_the_compiler_knows_its_trips(tmp_path, compiler, monkeypatch):
    import perflsp.analysis.compiled_facts as compiled_facts

    profiles = []
    counted = compiled_facts.dynamic_counts

    def recording(unit, fn, profile, *args, **kwargs):
        profiles.append(profile)
        return counted(unit, fn, profile, *args, **kwargs)

    monkeypatch.setattr(compiled_facts, "dynamic_counts", recording)
    source = tmp_path / "mix.cu"
    source.write_text(SWEEP_COEFFICIENTS)
    analyse(source, compiler)
    q, m = profiles[0].loops
    # `q <= 8`: a trip count the compiler knows; `m < n`: one it does not. The index `k + 6 * q
    # + 48 * m` steps 6 elements a `q` iteration, 48 an `m` one
    assert (q.static_trip, q.index_steps) == (True, {6.0})
    assert (m.static_trip, m.index_steps) == (False, {48.0})


DOT_REGION = """\
double dot(int n, const double *x, const double *y) {
  double s = 0.0;
  #pragma omp target teams distribute parallel for map(to: x[0:n], y[0:n]) map(tofrom: s) reduction(+:s) thread_limit(256)
  for (int i = 0; i < n; i++)
    s += x[i] * y[i];
  return s;
}
int main() { static double x[1 << 22], y[1 << 22]; return dot(1 << 22, x, y) > 0; }
"""


@needs_omp
def test_the_runtime_code_of_a_directive_continued_on_a_second_line_counts_as_on_one(tmp_path, compiler):
    # the reduction's code sits on the line of its clause: written on a continuation line, it is
    # still the runtime's (each of its branches read as even), not the loop body's (every pass)
    counts = []
    for name, text in (("one.cpp", DOT_REGION),
                       ("two.cpp", DOT_REGION.replace("map(tofrom: s) reduction", "map(tofrom: s) \\\n    reduction"))):
        source = tmp_path / name
        source.write_text(text)
        (report,) = analyse(source, compiler).values()
        assert "operations counted in the compiled code" in texts(report.facts.evidence)[0]
        counts.append(report.facts.per_item)
    one, two = counts
    assert two.int32 == pytest.approx(one.int32, rel=0.02)
    assert two.fp64 == pytest.approx(one.fp64, rel=0.02)


def test_without_a_toolchain_the_source_engine_answers_and_says_why(tmp_path):
    source = tmp_path / "slip.cu"
    source.write_text(SLIP)
    bare = Compiler(Toolchain(), CompileCache(None))
    with_none = analyse(source, bare)
    plain = analyse(source, None)
    for name, report in plain.items():
        other = with_none[name]
        assert other.estimates[0].verdict == report.estimates[0].verdict
        assert other.facts.per_item == report.facts.per_item
        assert any(line.startswith("not compiled (no nvcc") for line in texts(other.facts.evidence))


def test_check_names_a_file_s_compile_fallback_once_among_its_notes(tmp_path):
    # `perflsp check` prints a file's notes under its verdicts: the reason its kernels were counted
    # from the source is one of them, once for the file, not once per kernel; a file of no
    # kernels compiles nothing and says nothing about it
    from perflsp.checking.run import check_file, check_settings

    (tmp_path / "slip.cu").write_text(SLIP)
    (tmp_path / "host.cpp").write_text("int main() { return 0; }\n")
    bare = Compiler(Toolchain(), CompileCache(None))
    checked = check_file(tmp_path / "slip.cu", [RTX3080], check_settings(), IncludeResolver(), compiler=bare)
    assert not isinstance(checked, str) and len(checked.kernels) > 1
    fallbacks = [note for note in checked.notes if "operations estimated from the source" in note]
    assert len(fallbacks) == 1 and fallbacks[0].startswith("not compiled for sm_86 (no nvcc")
    host = check_file(tmp_path / "host.cpp", [RTX3080], check_settings(), IncludeResolver(), compiler=bare)
    assert not isinstance(host, str) and not any("not compiled" in note for note in host.notes)


def test_a_compile_error_is_named_and_the_source_engine_answers(tmp_path, compiler):
    if TOOLCHAIN.missing("cuda"):
        pytest.skip("no CUDA toolchain")
    source = tmp_path / "broken.cu"
    source.write_text(SLIP.replace("int main", "#error this unit does not build\nint main"))
    with pytest.raises(CompileFailure, match="this unit does not build"):
        compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    reports = analyse(source, compiler)
    assert reports["half_scale"].estimates[0].verdict in ("compute", "bandwidth")
    assert any("not compiled (nvcc failed" in line for line in texts(reports["half_scale"].facts.evidence))


def test_missing_header_named_by_either_compiler():
    assert missing_header("a.cu:3:10: fatal error: helper_cuda.h: No such file or directory") == "helper_cuda.h"
    assert missing_header("a.cpp:3:10: fatal error: 'util/check.h' file not found") == "util/check.h"
    assert missing_header("a.cu(4): error: identifier \"x\" is undefined") is None


def test_a_header_is_found_in_the_folders_around_the_file(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "Common").mkdir()
    (tmp_path / "Common" / "helper.h").write_text("#define SCALE 2.0f\n")
    sample = tmp_path / "Samples" / "Area" / "sample"
    sample.mkdir(parents=True)
    assert find_header_folder("helper.h", sample) == tmp_path / "Common"
    assert find_header_folder("absent.h", sample) is None
    # the search stops at the repository's root
    assert find_header_folder("helper.h", tmp_path / "Samples") == tmp_path / "Common"
    outside = tmp_path.parent / f"{tmp_path.name}-outside.h"
    assert find_header_folder(outside.name, sample) is None


def test_the_header_search_passes_over_unreadable_folders_and_never_walks_the_root(tmp_path, monkeypatch):
    # a file outside any repository, a few folders below the root: the walk climbs towards `/`,
    # whose `/proc` entries raise PermissionError even for root
    (tmp_path / "locked").mkdir()
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "helper.h").write_text("#define SCALE 2.0f\n")
    sample = tmp_path / "sample"
    sample.mkdir()
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if path.parent.name == "locked" or path.parent == Path(path.anchor):
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    assert find_header_folder("helper.h", sample) == tmp_path / "open"
    assert find_header_folder("absent.h", sample) is None
    assert find_header_folder("absent.h", Path(tmp_path.anchor)) is None


@needs_cuda
def test_a_unit_whose_header_no_flag_names_is_compiled_with_its_folder(tmp_path):
    (tmp_path / "Common").mkdir()
    (tmp_path / "Common" / "helper.h").write_text("#define SCALE 2.0f\n")
    sample = tmp_path / "Samples" / "Area" / "sample"
    sample.mkdir(parents=True)
    source = sample / "scale.cu"
    source.write_text('#include "helper.h"\n__global__ void scale(float *x) { x[threadIdx.x] *= SCALE; }\n')
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), find_toolchain())
    assert "_Z5scalePf" in unit.functions
    assert str((tmp_path / "Common" / "helper.h").resolve()) in unit.dependencies  # (the cache checks it)


def test_shapes_spelled_with_x_are_read_whole():
    """`DMMA.8x8x4` (sm_80+): the opcode keeps its lower-case shape, 2·8·8·4/32 FP64 per thread."""
    fn = parse_sass('\t.section\t.text._Z1kPd,"ax",@progbits\n'
                    "        /*0000*/                   DMMA.8x8x4 R8, R16, R18, R8 ;\n"
                    "        /*0010*/                   EXIT ;\n")[0]
    cost = classify(fn.instructions[0])
    assert fn.instructions[0].opcode == "DMMA.8x8x4"
    assert cost.tensor == 16 and cost.tensor_kind == "fp64"


def test_a_file_of_more_kernels_than_the_ceiling_is_not_compiled(tmp_path):
    from perflsp.compiled.service import MAX_KERNELS

    source = tmp_path / "many.cu"
    source.write_text("".join(f"__global__ void k{i}(float *x) {{ x[{i}] = 1.0f; }}\n"
                              for i in range(MAX_KERNELS + 1)))
    answer = Compiler(TOOLCHAIN, None).request(source, "sm_86")
    assert isinstance(answer, str) and "too many to compile" in answer


def test_the_compile_cache_remembers_units_from_many_threads_at_once():
    """The server's compile thread and a check's result threads remember units together: the
    in-memory cache keeps its bound and never fails while another thread evicts."""
    import threading

    cache = CompileCache(None, memory_entries=4)
    errors: list[BaseException] = []

    def remember(offset: int) -> None:
        try:
            for i in range(3000):
                cache.put_failure(f"{offset}-{i}", CompileFailure("x"), [])
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=remember, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache._memory) <= 4


NORMS = """
__global__ void norms(const float *x, const float *y, float *r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) r[i] = sqrtf(x[i] * x[i] + y[i] * y[i]);
}
int main() {
  int n = 1 << 20; float *x, *y, *r;
  cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4); cudaMalloc(&r, n * 4);
  norms<<<n / 256, 256>>>(x, y, r, n);
}
"""


def test_the_build_s_compiler_is_read_from_the_compile_database(tmp_path):
    from perflsp.compiled.build import codegen_like
    from perflsp.kernels.compile_db import CompileDatabase

    for name in ("a.cu", "b.cu"):
        (tmp_path / name).write_text("__global__ void k() {}\n")
    (tmp_path / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": str(tmp_path / "a.cu"),
         "command": f"/usr/bin/clang++-18 -O3 -std=gnu++14 --cuda-gpu-arch=sm_86 -x cuda -c {tmp_path}/a.cu"},
        {"directory": str(tmp_path), "file": str(tmp_path / "b.cu"),
         "command": f"/usr/local/cuda/bin/nvcc -O3 -c {tmp_path}/b.cu"}]))
    database = CompileDatabase.load(tmp_path / "compile_commands.json")
    clang, nvcc = database.flags_for(tmp_path / "a.cu"), database.flags_for(tmp_path / "b.cu")
    assert clang is not None and clang.compiler == "clang" and clang.language == "cuda"
    assert nvcc is not None and nvcc.compiler == "nvcc"
    from perflsp.kernels.compile_db import _compiler_family
    assert [_compiler_family(n) for n in ("clang++-18", "g++", "ccache", "clang-tidy")] == ["clang", "gcc", None, None]
    assert codegen_like("clang", "cuda") == ("-prec-sqrt=false",)
    assert codegen_like("nvcc", "cuda") == codegen_like("clang", "omp") == codegen_like(None, "cuda") == ()


def _database(folder: Path, source: Path, compiler: str):
    """A compile database of one entry: `source`, built by `compiler` (its command less `-c FILE`)."""
    from perflsp.kernels.compile_db import CompileDatabase

    (folder / "compile_commands.json").write_text(json.dumps([
        {"directory": str(folder), "file": str(source), "command": f"{compiler} -c {source}"}]))
    return CompileDatabase.load(folder / "compile_commands.json")


def _clang_database(folder: Path, source: Path):
    return _database(folder, source, "clang++ -O3 --cuda-gpu-arch=sm_86 -x cuda")


@needs_cuda
def test_without_clang_a_clang_built_cuda_unit_is_compiled_by_nvcc_computing_sqrtf_as_clang_does(tmp_path):
    source = tmp_path / "norms.cu"
    source.write_text(NORMS)
    without_clang = dataclasses.replace(TOOLCHAIN, clang=None)
    assert not without_clang.clang_cuda_ready
    like_clang = analyse(source, Compiler(without_clang, CompileCache(tmp_path / "cache"),
                                          flags=_clang_database(tmp_path, source)))["norms"].facts
    # SASS (nvcc -prec-sqrt=false): FMUL, FFMA, MUFU.SQRT and two FMULs predicated on the
    # denormal test (not counted): 3 FLOP, the square root one special-function instruction
    assert like_clang.per_item.fp32 == pytest.approx(3.0)
    assert "-prec-sqrt=false" in next(e for e in texts(like_clang.evidence) if "compiled code" in e)
    # nvcc's own default: the IEEE square root (MUFU.RSQ refined by FFMAs and FMULs)
    own = analyse(source, Compiler(without_clang, CompileCache(tmp_path / "cache2")))["norms"].facts
    assert own.per_item.fp32 > like_clang.per_item.fp32


BITS = """
__global__ void bits(const unsigned *words, int *counts, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned w = words[i];
  int c = 0;
  while (w) {  // one trip per set bit
    w &= w - 1;
    ++c;
  }
  counts[i] = c;
}
int main() {
  int n = 1 << 20; unsigned *w; int *c;
  cudaMalloc(&w, n * 4); cudaMalloc(&c, n * 4);
  bits<<<n / 256, 256>>>(w, c, n);
}
"""


@needs_cuda
@needs_clang_cuda
def test_a_cuda_unit_the_project_builds_with_clang_is_compiled_by_clang(tmp_path):
    source = tmp_path / "bits.cu"
    source.write_text(BITS)
    database = _clang_database(tmp_path, source)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=database)
    (by_clang,) = compiler.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    nvcc = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache2"))
    (by_nvcc,) = nvcc.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    # nvcc reads the bit-clearing loop as a population count: one POPC, no loop. clang keeps the
    # loop; its SASS, read by hand: IADD3 (w - 1), IADD3 (++c), LOP3.LUT P0 (w &= ..., w != 0), BRA
    assert by_nvcc.loops == []
    (loop,) = by_clang.loops
    assert loop.own_counts[INDEX["integer"]] == 3
    assert loop.own_counts[INDEX["instructions"]] == 4
    facts = analyse(source, compiler)["bits"].facts
    assert "clang" in next(e for e in texts(facts.evidence) if "compiled code" in e)
    # the same build flags, other compiler: another cache entry
    request = compiler.request(source, "sm_86")
    assert not isinstance(request, str) and request.clang_cuda
    assert cache_key(request, TOOLCHAIN, BITS.encode()) != cache_key(
        dataclasses.replace(request, clang_cuda=False), TOOLCHAIN, BITS.encode())


LIBCUXX_UNIT = """\
#include <cuda/std/limits>
__global__ void clamp(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] < cuda::std::numeric_limits<float>::max() ? x[i] : 0.f;
}
"""


@pytest.mark.parametrize("build_compiler", ["nvcc", "clang++"])
@needs_cuda
def test_a_cxx14_build_of_a_unit_using_libcuxx_compiles_where_the_toolkit_needs_cxx17(tmp_path, build_compiler):
    # CUDA 13's libcu++ stops a C++14 compile (`#error libcu++ requires at least C++ 17`): the unit
    # is compiled as C++17, by nvcc and by clang alike (a toolkit that accepts C++14 compiles it so)
    if build_compiler == "clang++" and not TOOLCHAIN.clang_cuda_ready:
        pytest.skip("no clang with a CUDA install")
    from perflsp.kernels.compile_db import CompileDatabase

    source = tmp_path / "clamp.cu"
    source.write_text(LIBCUXX_UNIT)
    arch = "--cuda-gpu-arch=sm_86 -x cuda" if build_compiler == "clang++" else "-arch=sm_86"
    (tmp_path / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": str(source), "command": f"{build_compiler} -std=c++14 {arch} -c {source}"}]))
    database = CompileDatabase.load(tmp_path / "compile_commands.json")
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=database)
    request = compiler.request(source, "sm_86")
    assert not isinstance(request, str) and request.std == "c++14"
    assert request.clang_cuda == (build_compiler == "clang++")
    unit = compile_unit(request, TOOLCHAIN)
    assert any("clamp" in name for name in unit.functions)
    assert "device code alone" not in unit.compiler  # (the unit itself, not a copy without host code)


@needs_clang_cuda
def test_clang_finds_stand_ins_for_the_headers_its_cuda_wrapper_includes_and_a_toolkit_lacks():
    from perflsp.compiled.build import _CLANG_CUDA_SHIMS

    # clang's CUDA wrapper includes both; CUDA 13 removed the first, cuRAND is a separate component
    assert {p.name for p in _CLANG_CUDA_SHIMS.iterdir()} == {"texture_fetch_functions.h", "curand_mtgp32_kernel.h"}
    assert all("#" not in p.read_text() for p in _CLANG_CUDA_SHIMS.iterdir())  # empty: declares nothing


@needs_cuda
@needs_clang_cuda
def test_a_clang_built_unit_clang_cannot_compile_is_compiled_by_nvcc(tmp_path):
    source = tmp_path / "norms.cu"
    # code only nvcc compiles (a check of nvcc's own macro, as some projects write)
    source.write_text("#ifndef __NVCC__\n#error this code needs nvcc\n#endif\n" + NORMS)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    result = compiler.compiled(source, ["sm_86"])
    assert result.failures == {}
    assert result.units["sm_86"].compiler == "nvcc -prec-sqrt=false"


HOST_TROUBLE = """#include <cstdio>
#include "absent_library.h"
#define HD __host__ __device__
HD float twice(float v) { return 2.0f * v; }
constexpr int lanes() { return 32; }
__global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]) + lanes();
}
struct Timer {
  void start() { legacy_timer_start(); }
};
int main() {
  float *x = nullptr;
  scale<<<4, 256>>>(x, 1024);
  cudaThreadSynchronizeLegacy();
  return 0;
}
"""


def test_host_code_aside_blanks_host_bodies_and_missing_includes_and_keeps_every_line():
    from perflsp.compiled.host_aside import host_code_aside

    text = HOST_TROUBLE.encode()
    aside = host_code_aside(text, frozenset({"absent_library.h"}))
    assert aside is not None and len(aside) == len(text)
    assert [i for i, b in enumerate(aside) if b == 0x0A] == [i for i, b in enumerate(text) if b == 0x0A]
    kept = aside.decode()
    assert "absent_library" not in kept and "#include <cstdio>" in kept
    assert "legacy_timer_start" not in kept and "cudaThreadSynchronizeLegacy" not in kept
    assert "scale<<<" not in kept and "int main() {" in kept  # (the signature stays, the body goes)
    # device code, a marker macro that may expand to it, and constexpr keep their text
    for line in ("HD float twice(float v) { return 2.0f * v; }", "constexpr int lanes() { return 32; }",
                 "  if (i < n) x[i] = twice(x[i]) + lanes();"):
        assert line in kept
    assert host_code_aside(b"__global__ void k(float *x) { x[0] = 1.0f; }\n") is None


@needs_cuda
def test_a_unit_whose_host_code_does_not_compile_is_counted_from_its_device_code_alone(tmp_path, compiler):
    source = tmp_path / "legacy.cu"
    source.write_text(HOST_TROUBLE)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z5scalePfi" in unit.functions
    assert "device code alone" in unit.compiler
    # the line info points into the file itself: the kernel's loads and stores sit on its line 8
    report = analyse(source, compiler)["scale"]
    assert any("operations counted in the compiled code" in e and "device code alone" in e
               for e in texts(report.facts.evidence))
    assert report.facts.per_item.global_load_bytes == 4 and report.facts.per_item.global_store_bytes == 4
    # an error in the device code itself still fails, and the build's own errors are named
    source.write_text(HOST_TROUBLE.replace('#include "absent_library.h"', "")
                      .replace("x[i] = twice(x[i])", "x[i] = missing_device_fn(x[i])"))
    with pytest.raises(CompileFailure, match="missing_device_fn"):
        compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)



HOST_SIGNATURES = """#include <cstdio>
#include <absent_blas.h>
#include <absent_mpi.h>
void check_blas(blasStatus_t status, int line) {
  if (status != BLAS_OK) printf("error at %d\\n", line);
}
MPI_Comm world;
namespace io { void report(MPI_Comm comm, float value); }
__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
int main() {
  float *x = nullptr, *y = nullptr;
  axpy<<<4, 256>>>(2.0f, x, y, 1024);
}
"""


@needs_cuda
def test_host_declarations_of_a_missing_header_s_types_are_set_aside_whole(tmp_path):
    from perflsp.compiled.host_aside import host_code_aside

    # a host function's signature, a global and a prototype name types of headers this machine
    # lacks: blanking bodies is not enough, the compiler's rejected lines go whole
    text = HOST_SIGNATURES.encode()
    aside = host_code_aside(text, frozenset({"absent_blas.h", "absent_mpi.h"}), error_lines=frozenset({4, 7, 8}))
    assert aside is not None and len(aside) == len(text)
    kept = aside.decode()
    assert "blasStatus_t" not in kept and "MPI_Comm" not in kept and "namespace io {" in kept
    assert "__global__ void axpy(float a, const float *x, float *y, int n) {" in kept
    source = tmp_path / "library_types.cu"
    source.write_text(HOST_SIGNATURES)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "device code alone" in unit.compiler and "_Z4axpyfPKfPfi" in unit.functions


@needs_cuda
def test_a_missing_library_header_one_of_the_unit_s_headers_includes_is_answered_empty(tmp_path):
    # the unit's header stays as it is: its #include of a header this machine lacks is answered
    # by an empty stand-in, enough where only host code would have used it
    (tmp_path / "common.h").write_text("#pragma once\n#include <absent_blas.h>\n#define SCALE 2.0f\n")
    source = tmp_path / "uses_common.cu"
    source.write_text('#include "common.h"\n'
                      "__global__ void scale(float *x, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) x[i] *= SCALE;\n}\n"
                      "int main() { scale<<<4, 256>>>(nullptr, 1024); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "device code alone" in unit.compiler and "_Z5scalePfi" in unit.functions
    assert unit.dependencies == [str((tmp_path / "common.h").resolve())]  # (no stand-in among them)


@needs_cuda
def test_a_unit_no_copy_can_save_spends_no_compile_on_copies_it_already_tried(tmp_path, monkeypatch):
    import perflsp.compiled.build as build

    compiles: list[str] = []
    real = build._compile_finding_headers

    def counted(request, *args, **kwargs):
        compiles.append(request.source)
        return real(request, *args, **kwargs)

    monkeypatch.setattr(build, "_compile_finding_headers", counted)
    # an error in device code: the copy without host code fails as the unit did, and the later
    # steps (device-qualifier macros, host classes, rejected lines) make no other copy
    source = tmp_path / "device_error.cu"
    source.write_text(HOST_TROUBLE.replace('#include "absent_library.h"', "")
                      .replace("x[i] = twice(x[i])", "x[i] = missing_device_fn(x[i])"))
    with pytest.raises(CompileFailure, match="missing_device_fn"):
        compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert len(compiles) <= 3


OFFLOAD_WITH_MPI = """#include <stdio.h>
#include <stdlib.h>
#include <absent_mpi.h>
#pragma omp declare target
static double twice(double v) { return 2.0 * v; }
#pragma omp end declare target
static void exchange(double *x, int n, MPI_Comm comm) {
  MPI_Sendrecv(x, 1, MPI_DOUBLE, 0, 0, x + n - 1, 1, MPI_DOUBLE, 0, 0, comm, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = 1 << 24;
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
  #pragma omp target teams distribute parallel for map(to: b[0:n]) map(from: a[0:n])
  for (int i = 0; i < n; i++) a[i] = twice(b[i]);
  exchange(a, n, MPI_COMM_WORLD);
  printf("%d %f\\n", rank, a[0]);
  MPI_Finalize();
  return 0;
}
"""


def test_an_openmp_unit_s_rejected_host_statements_are_set_aside_not_its_regions():
    from perflsp.compiled.host_aside import offload_host_aside

    text = OFFLOAD_WITH_MPI.encode()
    # the lines clang rejects once the header is gone (a signature, MPI calls and constants), and
    # lines of the declare target block and the region, as a compiler might point into them
    rejected = frozenset({5, 7, 11, 13, 16, 17, 18, 20})
    aside = offload_host_aside(text, frozenset({"absent_mpi.h"}), rejected)
    assert aside is not None and len(aside) == len(text)
    kept = aside.decode()
    assert "absent_mpi" not in kept and "MPI_" not in kept and "exchange" not in kept
    # the region, its statement, the declare target block, the other includes and the statements
    # the compiler did not reject stay
    for line in ("#include <stdlib.h>", "static double twice(double v) { return 2.0 * v; }",
                 "  #pragma omp target teams distribute parallel for map(to: b[0:n]) map(from: a[0:n])",
                 "  for (int i = 0; i < n; i++) a[i] = twice(b[i]);", "  int rank = 0;",
                 '  printf("%d %f\\n", rank, a[0]);'):
        assert line in kept


@needs_omp
def test_an_openmp_unit_whose_host_code_does_not_compile_is_compiled_from_its_regions(tmp_path):
    source = tmp_path / "with_mpi.c"
    source.write_text(OFFLOAD_WITH_MPI)
    unit = compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)
    assert "did not compile here" in unit.compiler
    assert any(name.startswith("__omp_offloading_") and name.endswith("_main_l16") for name in unit.functions)


HOST_LAUNCHED_TEMPLATES = """#include <cstdio>
#include "absent_library.h"
#define WIDTH 4
namespace ops {
template <typename T> __global__ void twice(T *x, size_t n) {
  size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2;
}
}
template <typename T, int N>
__global__ void scale(T *x, size_t n) {
  size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * (T)N;
}
template <typename T> void run(T *x, size_t n) { scale<T, 2><<<n / 256, 256>>>(x, n); }
int main() {
  float *x = nullptr;
  double *y = nullptr;
  legacy_call();
  scale<float, WIDTH><<<4, 256>>>(x, 1024);
  scale<double, 3><<<4, 256>>>(y, 1024);
  ops::twice<float><<<4, 256>>>(x, 1024);
  run(x, 1024);
}
"""


def test_the_kernel_templates_blanked_host_code_launched_are_instantiated_at_the_end():
    from perflsp.compiled.host_aside import host_code_aside

    text = HOST_LAUNCHED_TEMPLATES.encode()
    aside = host_code_aside(text, frozenset({"absent_library.h"}))
    assert aside is not None
    lines = aside.decode().split("\n")
    assert len(lines) == len(HOST_LAUNCHED_TEMPLATES.split("\n")) + 1  # (one line added at the end)
    # the launches written out with the file's words; `scale<T, 2>` names the host template's own
    # parameter, which the file's scope does not know
    assert lines[-2] == ("static void *const perflsp_instantiated_kernels[] __attribute__((unused)) = {"
                         "(void *)&scale<float, WIDTH>, (void *)&scale<double, 3>, (void *)&ops::twice<float>};")
    assert b"perflsp_instantiated" not in host_code_aside(text, frozenset({"absent_library.h"}), instantiate=False)
    # a type only the host function knows is not named
    local = HOST_LAUNCHED_TEMPLATES.replace("int main() {", "int main() {\n  typedef float Local;").replace(
        "ops::twice<float>", "ops::twice<Local>").encode()
    assert b"twice" not in (host_code_aside(local, frozenset({"absent_library.h"})) or b"").split(b"\n")[-2]


@needs_cuda
def test_a_kernel_template_only_failing_host_code_launched_is_compiled_with_the_device_code(tmp_path, monkeypatch):
    import perflsp.compiled.build as build

    source = tmp_path / "legacy_templates.cu"
    source.write_text(HOST_LAUNCHED_TEMPLATES)
    # first the copy keeping the host statements that compile: every launch instantiates,
    # `run<float>`'s `scale<float, 2>` too
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "host statements" in unit.compiler
    assert {"_Z5scaleIfLi4EEvPT_m", "_Z5scaleIdLi3EEvPT_m", "_ZN3ops5twiceIfEEvPT_m", "_Z5scaleIfLi2EEvPT_m"} <= \
        set(unit.functions)
    # where that copy does not apply, the device code alone names the launches at its end
    monkeypatch.setattr(build, "launches_kernel_templates", lambda text, headers=(): False)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "device code alone" in unit.compiler
    assert {"_Z5scaleIfLi4EEvPT_m", "_Z5scaleIdLi3EEvPT_m", "_ZN3ops5twiceIfEEvPT_m"} <= set(unit.functions)
    # an instantiation that does not compile (a variable of the file for a type) is given up,
    # the unit is not: compiled again without them
    source.write_text(HOST_LAUNCHED_TEMPLATES.replace("int main() {", "int counter;\nint main() {")
                      .replace("ops::twice<float>", "ops::twice<counter>"))
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "device code alone" in unit.compiler
    assert not any(name.startswith("_Z5scale") for name in unit.functions)


LEGACY_SHUFFLE = """\
__global__ void warp_sum(const float *x, float *out) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int lane = 16; lane > 0; lane /= 2)
    v += __shfl_xor(v, lane, 32);
  if (__any(v > 0.f) && threadIdx.x % 32 == 0) out[blockIdx.x] = v;
}
"""


@needs_cuda
def test_legacy_warp_intrinsics_are_read_as_their_sync_forms(tmp_path):
    # `__shfl_xor` and `__any` (before CUDA 9): CUDA 13 declares them no more; the whole warp's
    # `_sync` forms are what they did
    source = tmp_path / "legacy_warp.cu"
    source.write_text(LEGACY_SHUFFLE)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    (fn,) = [f for name, f in unit.functions.items() if "warp_sum" in name]
    assert "legacy warp intrinsics read as their _sync forms" in unit.compiler
    # the butterfly unrolled: five shuffles, each followed by its FADD
    assert sum(lc.counts[INDEX["fp32"]] for block in fn.blocks for lc in block.lines) == 5


LAMBDA_LAUNCHES = """\
template <typename F>
__global__ void for_each_kernel(int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}
template <class T>
struct Stream {
  T *a, *b, *c; int n;
  void copy() {
    T *A = a, *C = c;
    for_each_kernel<<<(n + 255) / 256, 256>>>(n, [=] __device__ (int i) { C[i] = A[i]; });
  }
  void triad(T s) {
    T *A = a, *B = b, *C = c;
    for_each_kernel<<<(n + 255) / 256, 256>>>(n, [=] __device__ (int i) { A[i] = B[i] + s * C[i]; });
  }
};
template struct Stream<float>;
template struct Stream<double>;
"""


@needs_cuda
def test_a_kernel_template_launched_with_a_lambda_is_the_instantiation_of_the_launch_s_lambda(tmp_path, compiler):
    # the Python demangler reads no closure type (`for_each_kernel<Stream<float>::copy()::
    # {lambda(int)#1}>`): without c++filt's reading the kernel had no compiled function at all;
    # of the four, the one of the lambda written where the kernel is first launched (`copy`),
    # in the float instantiation of its class: one load and one store, no FLOP
    facts = compiled_facts(tmp_path, compiler, "lambdas.cu", LAMBDA_LAUNCHES, "for_each_kernel")
    assert "_Z15for_each_kernelIZN6StreamIfE4copyEvEUliE_EviT_" in texts(facts.evidence)[0]
    assert facts.per_item.fp32 == 0.0 and facts.per_item.global_loads == 1.0


LEGACY_VOTE = """\
__global__ void any_hit(const float *x, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool hit = i < n && x[i] > 0.5f;
  if (!__any(hit)) return;
  out[i] = hit;
}
"""


@needs_cuda
def test_a_vote_ptxas_refuses_is_read_as_its_sync_form(tmp_path):
    # CUDA 13 still declares `__any` (deprecated) and compiles it to the PTX `vote.any`, which
    # ptxas refuses for sm_70 and later: the same rewrite as for an undeclared legacy intrinsic
    source = tmp_path / "legacy_vote.cu"
    source.write_text(LEGACY_VOTE)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_90"), TOOLCHAIN)
    assert "legacy warp intrinsics read as their _sync forms" in unit.compiler
    assert any("any_hit" in name for name in unit.functions)


DEDUCED_TEMPLATE_LAUNCHES = """\
#include <absent_blas.h>
template <class T>
__global__ void scale(T *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= (T)2;
}
template <class T>
void run(int n) {
  T *x = nullptr;
  scale<<<(n + 255) / 256, 256>>>(x, n);
}
int main() {
  blas_handle_t handle;
  blas_create(&handle);
  run<float>(1 << 20);
  run<double>(1 << 20);
  blas_destroy(handle);
}
"""


@needs_cuda
def test_host_code_that_instantiates_kernel_templates_keeps_what_compiles(tmp_path):
    # `scale<<<...>>>(x, n)` deduces `scale<T>` from `run<T>`'s types, instantiated by `main`:
    # a copy with the host bodies blanked instantiates neither; the copy that sets aside only
    # what the compiler rejects (the library's include, type and calls) keeps both
    source = tmp_path / "deduced.cu"
    source.write_text(DEDUCED_TEMPLATE_LAUNCHES)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert {"_Z5scaleIfEvPT_i", "_Z5scaleIdEvPT_i"} <= set(unit.functions)
    assert "host statements that did not compile here set aside" in unit.compiler


@needs_cuda
@needs_clang_cuda
def test_a_clang_built_unit_whose_host_code_does_not_compile_here_is_counted_from_its_device_code(tmp_path):
    source = tmp_path / "legacy.cu"
    source.write_text(HOST_TROUBLE)  # (a library header this machine lacks)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    result = compiler.compiled(source, ["sm_86"])
    assert result.failures == {}
    unit = result.units["sm_86"]
    assert "_Z5scalePfi" in unit.functions
    assert unit.compiler.startswith("nvcc") and "device code alone" in unit.compiler



HOST_CLASS = """#include <cstdio>
#include <absent_timer.h>
struct Range { int first, count; };
class Stopwatch {
  LegacyTimer *timer;  // a type of the header this machine lacks
 public:
  Stopwatch();
  float elapsed() const;
};
Stopwatch::Stopwatch() { legacy_create(&timer); }
float Stopwatch::elapsed() const { return legacy_value(timer); }
__global__ void fill(float *x, Range r) {
  int i = r.first + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < r.first + r.count) x[i] = 1.0f;
}
int main() {
  Stopwatch watch;
  float *x = nullptr;
  fill<<<4, 256>>>(x, Range{0, 1024});
  printf("%f\\n", watch.elapsed());
}
"""


@needs_cuda
def test_a_host_class_whose_members_a_missing_header_declares_is_set_aside(tmp_path):
    from perflsp.compiled.host_aside import host_code_aside

    source = tmp_path / "timed.cu"
    source.write_text(HOST_CLASS)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z4fillPf5Range" in unit.functions and "device code alone" in unit.compiler
    aside = host_code_aside(HOST_CLASS.encode(), frozenset({"absent_timer.h"}), frozenset(), host_classes=True)
    assert aside is not None
    kept = aside.decode()
    # the class and its members' definitions go; the struct the kernel takes stays
    assert "LegacyTimer" not in kept and "Stopwatch::" not in kept
    assert "struct Range { int first, count; };" in kept
    assert kept.count("\n") == HOST_CLASS.count("\n")


# reference data stored with Git LFS and never fetched: the header holds the pointer's text
LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:3b8a0a1d288d456b2a40d85300f863ed76428c607cd8945a658102809561ed01\n"
               "size 4652389\n")


@needs_cuda
def test_a_header_that_is_a_git_lfs_pointer_is_left_out_of_the_device_compile(tmp_path):
    (tmp_path / "reference.h").write_text(LFS_POINTER)
    source = tmp_path / "check.cu"
    source.write_text('#include "reference.h"\n'
                      "__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                      "int main() { float *x = nullptr; twice<<<1, 32>>>(x); return reference.count; }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z5twicePf" in unit.functions and "device code alone" in unit.compiler


@needs_omp
def test_an_openmp_unit_leaves_a_git_lfs_pointer_header_out_as_a_cuda_unit_does(tmp_path):
    (tmp_path / "reference.h").write_text(LFS_POINTER)
    source = tmp_path / "check.cpp"
    source.write_text('#include "reference.h"\n'
                      "int main() {\n"
                      "  static float x[1024];\n"
                      "  #pragma omp target teams distribute parallel for map(tofrom: x)\n"
                      "  for (int i = 0; i < 1024; i++) x[i] *= 2.0f;\n"
                      "  return x[0] == reference.first ? 0 : 1;\n"
                      "}\n")
    unit = compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)
    assert any(name.startswith("__omp_offloading_") and name.endswith("_main_l4") for name in unit.functions)
    assert "set aside" in unit.compiler


@needs_omp
def test_a_c_file_its_build_compiles_as_cxx_is_compiled_as_cxx(tmp_path):
    # `-x c++ -std=gnu++14` on a `.c` file: compiled as C, `<cmath>` and `std::` do not exist
    source = tmp_path / "scale.c"
    source.write_text("#include <cmath>\n"
                      "void scale(float *x, int n) {\n"
                      "  #pragma omp target teams distribute parallel for map(tofrom: x[0:n])\n"
                      "  for (int i = 0; i < n; i++) x[i] = std::sqrt(x[i]);\n"
                      "}\n")
    unit = compile_unit(CompileRequest(str(source), "omp", "sm_86", std="c++14"), TOOLCHAIN)
    assert any(name.endswith("_l3") for name in unit.functions)
    with pytest.raises(CompileFailure):  # (the same file as C)
        compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)


@needs_cuda
def test_kernels_a_macro_declares_global_are_compiled_when_the_analysis_found_them(tmp_path):
    (tmp_path / "qualifiers.h").write_text("#ifdef __CUDACC__\n#define GLOBAL __global__\n#else\n#define GLOBAL\n#endif\n")
    source = tmp_path / "fold.cu"
    source.write_text('#include "qualifiers.h"\n'
                      "GLOBAL static void fold(float *x) { x[threadIdx.x] += x[threadIdx.x + 32]; }\n"
                      "void run(float *x) { fold<<<1, 32>>>(x); }\n")
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
    # the file's text names no `__global__`: only the analysis knows it holds a kernel
    assert compiler.compiled(source, ["sm_86"]).failures == {"sm_86": "fold.cu has no device code to compile"}
    found = compiler.compiled(source, ["sm_86"], kernels=True)
    assert found.failures == {} and "_Z4foldPf" in found.units["sm_86"].functions


NESTED_LAUNCH = """
__global__ void child(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
__global__ void parent(float *x, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) child<<<(n + 255) / 256, 256>>>(x, n);
}
int main() { float *x = nullptr; parent<<<1, 32>>>(x, 1 << 20); }
"""


@needs_cuda
def test_a_unit_that_launches_from_device_code_compiles_as_relocatable_code(tmp_path):
    source = tmp_path / "nested.cu"
    source.write_text(NESTED_LAUNCH)  # (nvcc without -rdc: "requires separate compilation mode")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert {"_Z5childPfi", "_Z6parentPfi"} <= set(unit.functions)


MACRO_PRAGMAS = textwrap.dedent("""\
    #include <omp.h>
    #include "offload.h"
    void scale(int n, float *x) {
      OFFLOAD(teams distribute parallel for map(tofrom: x[0:n]))
      for (int i = 0; i < n; i++)
        x[i] = 2.0f * x[i] + 1.0f;
    }
    int main() { float x[1 << 20]; scale(1 << 20, x); }
    """)


@needs_omp
def test_regions_a_macro_writes_are_compiled_when_the_analysis_found_them(tmp_path, compiler):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking.run import check_paths

    (tmp_path / "offload.h").write_text("#define PRAGMA(x) _Pragma(#x)\n#define OFFLOAD(x) PRAGMA(omp target x)\n")
    source = tmp_path / "scale.cpp"
    source.write_text(MACRO_PRAGMAS)
    # no `omp target` in the text: on its own the file looks like host code
    assert compiler.compiled(source, ["sm_86"]).failures == {"sm_86": "scale.cpp has no device code to compile"}
    assert "sm_86" in compiler.compiled(source, ["sm_86"], omp_regions=True).units
    # `check` says the regions it found
    ((_, result),) = check_paths([source], [RTX3080], CheckSettings(), compiler=compiler).files
    (report,) = result.kernels
    assert "operations counted in the compiled code" in texts(report.facts.evidence)[0]
    assert report.facts.per_item.fp32 == pytest.approx(2.0, rel=0.05)


# a suite's host functions spell their array parameters with macros (which might have been device
# qualifiers), its shared header sits in a folder no flag names, and its host code calls an API the
# toolkit removed
SUITE_KERNEL = """#include <suite.h>
#define DATA_TYPE float
#define HD __host__ __device__
#define ARRAY_1D(name, n) name[n]
HD DATA_TYPE twice(DATA_TYPE v) { return 2.0f * v; }
__global__ void scale(DATA_TYPE *x) { x[threadIdx.x] = twice(x[threadIdx.x]) * SUITE_SCALE; }
void run(DATA_TYPE ARRAY_1D(x, 256)) {
  scale<<<1, 256>>>(x);
  cudaThreadSynchronize();
}
int main() { return 0; }
"""


def test_host_functions_whose_signatures_carry_only_other_macros_are_set_aside_on_a_second_try():
    from perflsp.compiled.host_aside import device_qualifier_macros, host_code_aside

    text = SUITE_KERNEL.encode()
    assert device_qualifier_macros([text, b"#define DEV2 HD inline\n"]) == {"HD", "DEV2"}
    first = host_code_aside(text).decode()
    assert "cudaThreadSynchronize" in first  # (any macro may be a device qualifier: kept)
    second = host_code_aside(text, device_macros=device_qualifier_macros([text])).decode()
    assert "cudaThreadSynchronize" not in second and "scale<<<" not in second
    assert "HD DATA_TYPE twice(DATA_TYPE v) { return 2.0f * v; }" in second


@needs_cuda
def test_a_unit_set_aside_still_finds_the_headers_around_it(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "utilities").mkdir()
    (tmp_path / "utilities" / "suite.h").write_text("#define SUITE_SCALE 3.0f\n")
    folder = tmp_path / "kernels" / "scale"
    folder.mkdir(parents=True)
    source = folder / "scale.cu"
    source.write_text(SUITE_KERNEL)
    cache = CompileCache(tmp_path / "cache")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN, cache)
    assert "_Z5scalePf" in unit.functions and "device code alone" in unit.compiler


def test_a_failure_recorded_by_older_retries_is_compiled_again(tmp_path):
    from perflsp.compiled import build

    cache = CompileCache(tmp_path / "cache")
    cache.put_failure("ab" * 32, CompileFailure("nvcc failed: gone"), [])
    with pytest.raises(CompileFailure):
        CompileCache(tmp_path / "cache").get("ab" * 32)
    meta = tmp_path / "cache" / "ab" / f"{'ab' * 32}.json"
    recorded = json.loads(meta.read_text())
    assert recorded["retries"] == build.RETRY_VERSION
    meta.write_text(json.dumps({**recorded, "retries": build.RETRY_VERSION - 1}))
    assert CompileCache(tmp_path / "cache").get("ab" * 32) is None


# covariance: nvcc versions the j2 loop for n <= 0 (the i loop never runs: stores only, unrolled
# four times) beside the general loop holding the i loop
TRIANGLE = """\
__global__ void covar(int m, int n, float *symmat, const float *data) {
  int j1 = blockIdx.x * blockDim.x + threadIdx.x;
  if (j1 < m) {
    for (int j2 = 0; j2 < m; j2++) {
      symmat[j1 * m + j2] = 0.0f;
      for (int i = 0; i < n; i++)
        symmat[j1 * m + j2] += data[i * m + j1] * data[i * m + j2];
      symmat[j2 * m + j1] = symmat[j1 * m + j2];
    }
  }
}
int main() {
  float *s, *d;
  cudaMalloc(&s, 512 * 512 * sizeof(float));
  cudaMalloc(&d, 256 * 512 * sizeof(float));
  covar<<<2, 256>>>(512, 256, s, d);
}
"""


@needs_cuda
def test_the_version_of_a_loop_holding_the_inner_loops_the_source_runs_is_its_main_loop(tmp_path, compiler):
    facts = compiled_facts(tmp_path, compiler, "covar.cu", TRIANGLE, "covar")
    # one FFMA per (j2, i): 512 x 256 of them a thread (2 FLOP each), not the n <= 0 copy's none
    assert facts.per_item.fp32 == pytest.approx(2 * 512 * 256, rel=0.05)


# one device function of the kernel's own file inlined twice: for every thread, then only in
# block 0, over the blocks' partial sums
TWO_CALLS = """\
__device__ void block_sum(float *out, const float *in, float *s, int n, int stride) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) acc += in[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
__global__ void total(float *out, const float *in, int n) {
  __shared__ float s[256];
  block_sum(out, in, s, n, gridDim.x * blockDim.x);
  if (blockIdx.x == 0) block_sum(out, out, s, gridDim.x, blockDim.x);
}
int main() {
  float *o, *i;
  cudaMalloc(&i, (1 << 22) * sizeof(float));
  cudaMalloc(&o, 4096 * sizeof(float));
  total<<<4096, 256>>>(o, i, 1 << 22);
}
"""


@needs_cuda
def test_each_inlined_copy_of_a_device_function_runs_at_its_own_calls_weight(tmp_path, compiler):
    facts = compiled_facts(tmp_path, compiler, "two_calls.cu", TWO_CALLS, "total")
    # every thread loads its 4 elements (2^22 over 2^20 threads); block 0's 256 threads load the
    # 4096 partial sums, 16 each: 4 + 16 / 4096 loads a thread, not 16 more for every thread
    assert facts.per_item.global_loads == pytest.approx(4 + 16 / 4096, abs=1e-4)


@needs_cuda
def test_each_inlined_copy_of_a_multi_line_loop_counts_its_own_body(tmp_path, compiler):
    # the loop's body on lines of its own: each copy's body is in the compiled loop tied to that
    # copy, not a peeled piece of the other copy's loop (a device function called twice kept
    # neither copy's loads)
    text = TWO_CALLS.replace("i += stride) acc += in[i];", "i += stride) {\n    acc += in[i];\n  }")
    facts = compiled_facts(tmp_path, compiler, "two_calls.cu", text, "total")
    assert facts.per_item.global_loads == pytest.approx(4 + 16 / 4096, abs=1e-4)


HOISTED = """\
#define at(i, j) ((i) * cols + (j))
int main() {
  const int rows = 4096, cols = 4096;
  double nu = 0.5, dt = 0.001, dx = 0.01;
  double *u = new double[rows * cols], *v = new double[rows * cols];
  #pragma omp target teams distribute parallel for collapse(2) num_teams(3200) thread_limit(256) map(to: v[0:rows * cols]) map(from: u[0:rows * cols])
  for (int i = 1; i < rows - 1; i++) {
    for (int j = 1; j < cols - 1; j++) {
      u[at(i, j)] = v[at(i, j)] + (nu * dt / (dx * dx)) * (v[at(i, j + 1)] - 2 * v[at(i, j)]) +
                                  (nu * dt / (dx * dx)) * (v[at(i + 1, j)] - 2 * v[at(i, j)]);
    }
  }
  return u[5] > 0;
}
"""


@needs_omp
def test_code_hoisted_out_of_a_loop_runs_once_per_thread(tmp_path, compiler):
    source = tmp_path / "relax.cpp"
    source.write_text(HOISTED)
    (report,) = analyse(source, compiler).values()
    per_thread = report.facts.work_items / (3200 * 256)  # 4094 x 4094 iterations over 819,200 threads
    # SASS (clang 19): the loop-invariant `nu * dt / (dx * dx)` is computed before the
    # work-sharing loop, once per thread: 3 DMUL, MUFU.RCP64H and 7 DFMA (17 FP64) and the FFMA
    # that checks the quotient's range (2 FP32); no load or store, so no copy of the loop's body
    # peeled off it. The body: 4 DFMA (8 FP64 an iteration)
    assert report.facts.per_item.fp32 == pytest.approx(2 / per_thread)
    assert report.facts.per_item.fp64 == pytest.approx(8 + 17 / per_thread)
