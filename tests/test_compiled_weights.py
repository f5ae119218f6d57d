"""How often each piece of compiled code runs: guard weights of `switch` cases and lines, the
source loop a compiled loop is (and how far it is unrolled) when clang says little, and where
inlined library code runs when the line info has no call sites (LLVM 19 and older)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perflsp.compiled.build import CompileCache
from perflsp.compiled.inline_sites import place_library_code
from perflsp.compiled.model import INDEX
from perflsp.compiled.profile import LineTable, SourceProfile, SourceStatement
from perflsp.compiled.sass import Instruction, SassFunction
from perflsp.compiled.service import Compiler
from perflsp.compiled.toolchain import find_toolchain
from tests.test_compiled import _clang_database, analyse, compiled_facts, needs_omp
from tests.test_cuda_branches import EXITS_SRC
from tests.test_guard_share import ELIMINATE, WINDOW

TOOLCHAIN = find_toolchain()
REQUIRED = bool(os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"))
needs_cuda = pytest.mark.skipif(TOOLCHAIN.missing("cuda") is not None and not REQUIRED, reason="no CUDA compiler")
needs_clang_cuda = pytest.mark.skipif(not TOOLCHAIN.clang_cuda_ready and not REQUIRED,
                                      reason="no clang with a CUDA install it can use")


# ------------------------------------------------------------------------------ line weights

def table(*statements: tuple[int, int, float]) -> LineTable:
    return LineTable(SourceProfile([SourceStatement("/src/k.cu", first, last, weight, None)
                                    for first, last, weight in statements], []))


def test_a_line_weighs_what_the_statements_beginning_on_it_weigh():
    lines = table((1, 20, 1.0),   # the kernel's body
                  (3, 12, 1.0),   # switch (m) {
                  (5, 5, 0.25),   #   case 0: v = v * 3.0f;
                  (8, 8, 0.25),   #   case 1: v = v * v;
                  (14, 14, 1.0), (14, 14, 0.5),  # if (c) x = 1;  (test and body on one line)
                  (16, 19, 1.0), (17, 18, 0.5))  # if (c) { y = a +\n b; }
    at = lines.weight_at
    assert at(("/src/k.cu", 5), ()) == 0.25  # not the switch's weight around it
    assert at(("/src/k.cu", 8), ()) == 0.25
    assert at(("/src/k.cu", 14), ()) == 1.0  # the test runs every pass
    assert at(("/src/k.cu", 18), ()) == 0.5  # a statement's second line: the innermost statement
    assert at(("/src/k.cu", 3), ()) == 1.0
    assert at(("/src/k.cu", 40), ()) is None


SWITCH = """\
__global__ void pick(float *a, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = a[i];
  switch (m) {
    case 0:
      v = v * 3.0f;
      break;
    case 1:
      v = v * v * v * v * v;
      break;
    case 2:
    case 3:
      v = v + 5.0f;
      break;
  }
  a[i] = v;
}
int main() { float *a; int n = 1 << 20; pick<<<n / 256, 256>>>(a, n, MODE); }
"""


@pytest.mark.parametrize(("mode", "fp32"), [("1", 4.0), ("0", 1.0), ("3", 1.0), ("2", 1.0), ("9", 0.0)])
def test_a_switch_on_a_known_value_runs_the_case_it_selects(tmp_path, mode, fp32):
    source = tmp_path / "pick.cu"
    source.write_text(SWITCH.replace("MODE", mode))
    assert analyse(source, None)["pick"].facts.per_item.fp32 == pytest.approx(fp32)


def test_a_switch_on_an_unknown_value_gives_each_case_an_equal_share(tmp_path):
    source = tmp_path / "pick.cu"
    source.write_text(SWITCH.replace("MODE", "atoi(getenv(\"M\"))"))
    # (1 + 4 + 0 + 1) FLOP over four cases
    assert analyse(source, None)["pick"].facts.per_item.fp32 == pytest.approx(6.0 / 4)


@needs_cuda
def test_compiled_cases_run_as_often_as_the_source_says(tmp_path):
    source = tmp_path / "pick.cu"
    source.write_text(SWITCH.replace("MODE", "1"))
    compiled = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["pick"].facts
    # SASS (nvcc), case 1: four FMULs; the other cases' FMUL and FADD do not run
    assert compiled.per_item.fp32 == pytest.approx(4.0)


@needs_cuda
def test_compiled_code_after_exits_that_return_constants_runs_for_every_thread(tmp_path):
    facts = compiled_facts(tmp_path, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")), "normals.cu", EXITS_SRC,
                           "normals")
    # SASS (nvcc): the two FADDs and three FMULs after the NaN and neighbour tests, for every
    # thread (a quarter of them, 1.25, were the exits read as even splits)
    assert facts.per_item.fp32 == pytest.approx(5.0)


@needs_cuda
def test_compiled_code_under_a_guard_on_a_loop_counter_runs_its_triangle(tmp_path):
    facts = compiled_facts(tmp_path, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")), "eliminate.cu", ELIMINATE,
                           "eliminate")
    # SASS (nvcc): one FFMA a pass for the rows below the pivot, 255 * 256 / 2 passes of the
    # 256 threads' 65,536. The guard is on one line and its body a block the test branches
    # around in each unrolled copy: the body's weight, not the test's (every pass, 131,072)
    assert facts.total.fp32 == pytest.approx(2 * 255 * 256 / 2, rel=0.02)


@needs_cuda
def test_compiled_code_inside_a_window_about_a_value_from_memory_runs_for_its_width(tmp_path):
    facts = compiled_facts(tmp_path, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")), "window.cu", WINDOW,
                           "window")
    # SASS (nvcc): one FFMA under the window test, for 4 of each row's 1,024 columns
    assert facts.total.fp32 == pytest.approx(1024 * 4 * 2, rel=0.02)


# ------------------------------------------------------------------------------ clang's loops

GRAY = """\
__global__ void gray(float *out, const unsigned *table, unsigned seed, unsigned n) {
  unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned stride = gridDim.x * blockDim.x;
  for (unsigned pos = first; pos < n; pos += stride) {
    unsigned result = 0;
    unsigned data = seed + pos;
    for (int bit = 0; bit < 31; bit++, data >>= 1)
      if (data & 1) result ^= table[bit];
    out[pos] = (float)(result + 1) * 0.5f;
  }
}
int main() { float *o; unsigned *t; gray<<<48, 256>>>(o, t, 7, 1 << 20); }
"""


@needs_cuda
@needs_clang_cuda
def test_a_loop_clang_unrolls_is_tied_and_its_unrolling_read_where_it_closes(tmp_path):
    source = tmp_path / "gray.cu"
    source.write_text(GRAY)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    (fn,) = compiler.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    # clang's SASS, read by hand: the `bit` loop unrolled 4 times (four predicated LDGs of
    # table[bit] ... table[bit + 3] a trip), counted by a 64-bit byte offset stepped 16 bytes,
    # its step and closing branch on line 6 (before the loop), inside the `pos` loop (line 4)
    outer, inner = fn.loops
    assert inner.parent == 0 and [fn.chains[c][0][1] for c in inner.latch_chains] == [6]
    assert [(s.amount, s.wide) for s in inner.steps] == [(16, True)]
    assert inner.own_counts[INDEX["load_bytes"]] == 16
    facts = analyse(source, compiler)["gray"].facts
    assert "2 of 2 loops tied" in next(str(e.detail) for e in facts.evidence if "compiled code" in str(e.detail))
    trips = (1 << 20) / (48 * 256)
    assert facts.per_item.fp32 == pytest.approx(trips)  # one FMUL a pass
    # a byte offset's step is no unrolling: the loads say 4 iterations a trip (16 B over the
    # source's 4 B), so the inner loop runs 31 / 4 trips a pass, not 31 (nor 31 / 16); the
    # predicated xors (`@P0 LOP3.LUT`) are the body of `if (data & 1)`, for half the bits
    integer = INDEX["integer"]
    predicated = sum(lc.predicated[integer] for block in fn.blocks if block.loop == 1 for lc in block.lines)
    assert predicated > 0
    expected = trips * (outer.own_counts[integer] + 31 / 4 * (inner.own_counts[integer] - predicated / 2))
    assert facts.per_item.int32 == pytest.approx(expected, rel=0.1)


SHUFFLE = """
#define NTAB 16
__device__ float ran(int idum, int *iv) {
  int k, tid = threadIdx.x;
  for (int j = NTAB; j >= 0; j--) {
    k = idum / 127773;
    idum = 16807 * (idum - k * 127773) - 2836 * k;
    if (idum < 0) idum += 2147483647;
    if (j < NTAB) iv[NTAB * tid + j] = idum;
  }
  return iv[NTAB * tid] * 4.6566128752457969e-10f;
}
__global__ void noise(const float *in, float *out) {
  __shared__ int iv[NTAB * 256];
  int pos = blockIdx.x * blockDim.x + threadIdx.x;
  out[pos] = ran((int)in[pos], iv);
}
int main() {
  float *in, *out;
  cudaMalloc(&in, 262144 * sizeof(float)); cudaMalloc(&out, 262144 * sizeof(float));
  noise<<<1024, 256>>>(in, out);
}
"""


@needs_clang_cuda
def test_a_counter_that_also_indexes_shared_memory_gives_the_unrolling_with_the_address(tmp_path):
    source = tmp_path / "shuffle.cu"
    source.write_text(SHUFFLE)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    (fn,) = compiler.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    # clang's SASS, read by hand: the 17-pass `j` loop unrolled twice, its exit test between
    # the two copies; `j` steps by 2 a trip and, as it indexes `iv`, counts as an address, as
    # does the store's address stepped by 8 (two 4-byte elements): 2 iterations a trip
    (loop,) = fn.loops
    assert sorted((s.amount, s.address) for s in loop.steps) == [(2, True), (8, True)]
    facts = analyse(source, compiler)["noise"].facts
    per_pass = loop.own_counts[INDEX["integer"]] / 2
    # 17 passes of about 12 integer instructions (predicated ones on data at their share), plus
    # the code around the loop; not 17 trips of both copies (twice as many)
    assert 0.8 * 17 * per_pass <= facts.per_item.int32 <= 17 * per_pass + 40


# ------------------------------------------------------------------------------ inline sites

def ins(offset: int, opcode: str, *chain: tuple[str, int], labels: tuple[str, ...] = ()) -> Instruction:
    return Instruction(offset, opcode, "", None, tuple(chain), labels)


OWN, MATH = "/src/k.cu", "/usr/lib/llvm-19/lib/clang/19/include/__clang_cuda_math.h"


def test_library_code_without_call_sites_is_placed_at_its_callers_statement():
    fn = SassFunction("k", True, 32, [
        ins(0x00, "ISETP.NE.AND", (OWN, 5)),            # switch (m)
        ins(0x10, "BRA", (OWN, 5)),
        ins(0x20, "FMUL", (MATH, 307), labels=(".L_x_1",)),  # case 1: sinf's code ...
        ins(0x30, "FFMA", (MATH, 307)),
        ins(0x40, "FADD", (OWN, 9)),                     # ... then the statement that called it
        ins(0x50, "EXIT", (OWN, 12)),
        ins(0x60, "MUFU.SIN", (MATH, 84), labels=(".L_x_2",)),  # a block of library code alone
        ins(0x70, "BRA", (MATH, 84)),
        ins(0x80, "FMUL", (MATH, 90, ), (OWN, 11)),      # nvcc-style: its call site already said
    ])
    place_library_code([fn], [OWN])
    chains = [i.chain for i in fn.instructions]
    assert chains[2] == chains[3] == ((MATH, 307), (OWN, 9))  # the caller after it, in its block
    # none in its block, none of the program's after it: the nearest before it
    assert chains[6] == chains[7] == ((MATH, 84), (OWN, 12))
    assert chains[8] == ((MATH, 90), (OWN, 11))
    assert chains[0] == ((OWN, 5),)


def test_a_library_function_of_its_own_is_left_as_it_is():
    fn = SassFunction("__internal_trig_reduction", False, 32, [ins(0, "IADD3", (MATH, 10)), ins(16, "RET", (MATH, 12))])
    place_library_code([fn], [OWN])
    assert [i.chain for i in fn.instructions] == [((MATH, 10),), ((MATH, 12),)]


def test_the_unit_s_own_headers_are_the_program_s_code(tmp_path: Path):
    header = str(tmp_path / "helpers.cuh")
    fn = SassFunction("k", True, 32, [ins(0, "FADD", (OWN, 3)), ins(16, "FMUL", (header, 7)), ins(32, "EXIT", (OWN, 4))])
    place_library_code([fn], [OWN, header])
    assert fn.instructions[1].chain == ((header, 7),)


ORCHARDS = """\
struct Orchard { int trees[1024]; };
__global__ void count(const Orchard *__restrict__ orchards, int *__restrict__ out) {
  unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned sum = 0;
  for (int i = 0; i < 512; i++)
    sum += orchards[i].trees[gid];
  out[gid] = sum;
}
int main() { Orchard *o; int *r; count<<<4, 256>>>(o, r); }
"""


@needs_cuda
@needs_clang_cuda
def test_a_loop_counted_by_a_pointer_has_its_unrolling_read_from_its_loads(tmp_path):
    source = tmp_path / "orchards.cu"
    source.write_text(ORCHARDS)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    (fn,) = compiler.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    # clang's SASS: the loop unrolled 8 times (eight LDGs a trip) and counted by a pointer
    # stepped 8 x 4,096 bytes (a 64-bit add)
    (loop,) = fn.loops
    assert [(s.amount, s.wide) for s in loop.steps] == [(8 * 4096, True)]
    assert loop.own_counts[INDEX["load_bytes"]] == 8 * 4
    facts = analyse(source, compiler)["count"].facts
    # not 32,768 iterations a trip, nor one: the loads say 8 (32 B over the source's 4 B)
    expected = 512 / 8 * loop.own_counts[INDEX["integer"]]
    assert facts.per_item.int32 == pytest.approx(expected, rel=0.1)


ROWS = """\
__global__ void rows(const float *m, const float *x, float *y, size_t n) {
  size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float t = 0.0f;
    for (size_t j = 0; j < n; j++)
      t += m[i * n + j] * x[j];
    y[i] = t;
  }
}
int main() { float *m, *x, *y; rows<<<16, 256>>>(m, x, y, 4096); }
"""


@needs_cuda
@needs_clang_cuda
def test_the_high_word_of_a_64_bit_counter_is_no_counter_of_its_own(tmp_path):
    source = tmp_path / "rows.cu"
    source.write_text(ROWS)
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=_clang_database(tmp_path, source))
    (fn,) = compiler.compiled(source, ["sm_86"]).units["sm_86"].functions.values()
    # clang's SASS: a `size_t` counter stepped as two 32-bit halves, `UIADD3 UR4, UP0, UR4, -0x8`
    # then `UIADD3.X UR5, UR5, -0x1, URZ, UP0`: the high word's -1 is the low word's sign, the
    # loop is unrolled 8 times (eight FFMA a trip), not once
    main = max(fn.loops, key=lambda loop: loop.own_counts[INDEX["fp32"]])
    assert main.own_counts[INDEX["fp32"]] == 8 * 2
    assert all(step.wide for step in main.steps)
    facts = analyse(source, compiler)["rows"].facts
    assert facts.per_item.fp32 == pytest.approx(2 * 4096)


STRIDED = """\
__global__ void pairs(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < n; j += 2) t += x[j] * x[j + 1];
  y[i] = t;
}
int main() { float *a, *b; pairs<<<64, 256>>>(a, b, 4096); }
"""

WIDE_COUNTER = """\
__global__ void pairs(const float *x, float *y, unsigned long long n) {
  unsigned long long i = blockIdx.x * 256ull + threadIdx.x;
  float t = x[i];
  for (unsigned long long j = 0; j < n; ++j) t = t * 1.0001f + 0.5f;
  y[i] = t;
}
int main() { float *a, *b; pairs<<<64, 256>>>(a, b, 1000); }
"""


@needs_cuda
@pytest.mark.parametrize("build", ["nvcc", "clang"])
@pytest.mark.parametrize("program, fp32", [(STRIDED, 2 * 2048), (WIDE_COUNTER, 2 * 1000)], ids=["step-2", "64-bit"])
def test_an_unrolled_loop_is_read_from_its_trip_counter_or_its_64_bit_counter(tmp_path, build, program, fp32):
    # `j += 2`: nvcc steps `j` by 32 and its own trip counter by 16 in a trip of 16 iterations
    # (not 8: the trip counter steps by one a source iteration); the `unsigned long long`
    # loop without loads: its 64-bit counter steps by the 16 (nvcc) or 8 (clang) iterations a
    # trip does; the remainder loops' leftovers aside, every source iteration counted once
    assert _compiled_fp32(tmp_path, build, "pairs", program) == pytest.approx(fp32, rel=0.02)


def _compiled_fp32(tmp_path: Path, build: str, kernel: str, program: str) -> float:
    """FP32 operations per item of `kernel` in `program`, compiled by nvcc or by clang (a
    compile database naming clang++)."""
    if build == "clang" and not TOOLCHAIN.clang_cuda_ready and not REQUIRED:
        pytest.skip("no clang with a CUDA install it can use")
    source = tmp_path / f"{kernel}.cu"
    source.write_text(program)
    flags = _clang_database(tmp_path, source) if build == "clang" else None
    compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"), flags=flags)
    return analyse(source, compiler)[kernel].facts.per_item.fp32


DIVISOR_UNROLLED = """\
template <int N>
__global__ void taps(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < N; ++j) t += x[i + j * 16384] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; taps<300><<<64, 256>>>(a, b); }
"""

NEST_UNROLLED = """\
__global__ void taps(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int a = 0; a < 40; ++a) {
    t += x[i + a * 3] * 2.0f;
    for (int b = 0; b < 5; ++b) {
      t += x[i + a * 7 + b + 100] * 0.5f;
    }
  }
  y[i] = t;
}
int main() { float *a, *b; taps<<<64, 256>>>(a, b); }
"""


# the `a` loop loads nothing of its own: its body's loads are the `b` loop's (a source walk that
# read `t += x[...]` for a step before walking the `b` loop once counted them the `a` loop's too)
NEST_ONLY = NEST_UNROLLED.replace("    t += x[i + a * 3] * 2.0f;\n", "")

# a `short` counter: clang steps an index register by 8 x 16384 a trip (eight LDGs), no counter
SHORT_COUNTER = DIVISOR_UNROLLED.replace("template <int N>\n", "").replace("int j = 0; j < N", "short j = 0; j < 1000") \
    .replace("taps<300>", "taps")


@needs_cuda
@pytest.mark.parametrize("build", ["nvcc", "clang"])
@pytest.mark.parametrize("program, fp32", [(DIVISOR_UNROLLED, 2 * 300), (NEST_UNROLLED, 2 * 40 * 6),
                                           (NEST_ONLY, 2 * 40 * 5), (SHORT_COUNTER, 2 * 1000)],
                         ids=["divisor", "nest", "nest-only", "short"])
def test_an_unrolled_loop_is_read_from_the_loads_of_its_trip_and_its_unrolled_nest(tmp_path, build, program, fp32):
    # clang's SASS: the 300-trip loop unrolled 6 times (six LDGs, 24 B a trip: a divisor of
    # 300, not the power of two nearest); the `a` loop around the `b` loop it unrolled
    # completely, twice (48 B a trip: 2 x (4 + 5 x 4)), its indices stepped by 6 and 14
    assert _compiled_fp32(tmp_path, build, "taps", program) == pytest.approx(fp32, rel=0.02)


TRIANGLE = """\
__global__ void triangle(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < a; ++b) t += x[a * n + b] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; triangle<<<64, 256>>>(a, b, 100); }
"""

ROWS_OMP = """\
void rows(const float *x, float *y, int n, int m) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 0; i < n; i++) { float t = 0.f; for (int j = 0; j < m; j++) t += x[i * m + j] * 0.5f; y[i] = t; }
}
int main() { float *x, *y; rows(x, y, 1 << 16, 64); }
"""


@needs_cuda
def test_a_loop_written_on_one_line_does_not_count_the_copies_unrolling_peels_off(tmp_path):
    source = tmp_path / "triangle.cu"
    source.write_text(TRIANGLE)
    # nvcc's SASS: the `b` loop unrolled 4 times beside its remainder copies, all on line 5
    # with its header: the copies' FFMAs are iterations the trip count already counts
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["triangle"].facts
    assert facts.per_item.fp32 == pytest.approx(2 * 100 * 99 / 2, rel=0.02)


@needs_omp
def test_a_region_s_one_line_inner_loop_counts_its_trips_once(tmp_path):
    source = tmp_path / "rows.cpp"
    source.write_text(ROWS_OMP)
    # clang's SASS: the `j` loop unrolled 32 times, an 8x and a 1x loop for what is left, and a
    # 16x copy outside them, all on line 3: 64 iterations a row, not 64 + 16
    (report,) = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))).values()
    assert report.facts.per_item.fp32 == pytest.approx(2 * 64, rel=0.02)


PAIRWISE = """\
inline __device__ void operator+=(float4 &a, const float4 &b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  a.w += b.w;
}
__global__ void moments(const float2 *__restrict__ points, float4 *__restrict__ partial) {
  extern __shared__ float4 acc[];
  unsigned t = threadIdx.x;
  float2 p = points[blockIdx.x * blockDim.x + t];
  acc[t] = make_float4(p.x, p.y, p.x * p.y, p.x * p.x);
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s)
      acc[t] += acc[t + s];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = acc[0];
}
int main() { float2 *p; float4 *r; moments<<<4096, 256, 256 * sizeof(float4)>>>(p, r); }
"""


@needs_cuda
@pytest.mark.parametrize("build", ["nvcc", "clang"])
def test_an_operator_s_body_runs_under_the_guard_of_the_statement_that_calls_it(tmp_path, build):
    # `acc[t] += acc[t + s]` calls the operator, whose four FADDs stand at its own lines 2-5:
    # nvcc says where it was inlined, LLVM 19 does not (and the source walk records no
    # statement there). Either way they run under `t < s` (half the threads, a quarter, ...:
    # about one pass over the 8 halvings), not on every halving for every thread: 2 FMULs + 4
    # FADDs, not 2 + 8 x 4
    assert _compiled_fp32(tmp_path, build, "moments", PAIRWISE) == pytest.approx(2 + 4, rel=0.05)


ESCAPE = """\
__global__ void escape(const float *c, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = c[i], y = c[i + n];
  for (int k = 0; k < 64; k++) {
    if (x * x > 4.0f)
      EXIT;
    x = x * x + y;
  }
  out[i] = (int)x;
}
int main() { float *c; int *o; int n = 1 << 20; escape<<<n / 256, 256>>>(c, o, n); }
"""


def test_a_data_dependent_exit_from_a_loop_is_its_edge_and_the_code_after_it_runs_every_trip(tmp_path):
    def fp32(leave: str) -> float:
        source = tmp_path / f"escape_{leave or 'none'}.cu"
        source.write_text(ESCAPE.replace("EXIT", leave))
        return analyse(source, None)["escape"].facts.per_item.fp32

    # `return` and `break` end the loop once (its trip count says when): the update after them
    # runs on every trip, as if the test never left; `continue` skips a pass: the update keeps
    # the data-dependent half
    assert fp32("return") == fp32("break") == fp32("") > fp32("continue")


def test_a_register_that_addresses_memory_is_a_byte_offset_not_a_counter():
    from perflsp.compiled.cfg import _addresses, _carries

    def i(opcode: str, operands: str) -> Instruction:
        return Instruction(0, opcode, operands, None, ())

    # clang's loop over `data[j]` (16-byte elements in local memory): the offset steps 16 and is
    # added to the frame's base, which addresses the store
    body = [i("UIADD3", "UR11, UR14, UR5, URZ"), i("STL.128", "[UR11+0x10], R12"), i("UIADD3", "UR5, UR5, 0x10, URZ")]
    assert _addresses("UR5", body)
    assert _addresses("R8", [i("LDC", "R4, c[0x3][R8+0x4]")])
    # nvcc's counter: scaled (IMAD.WIDE) before it addresses anything
    counter = [i("IMAD.WIDE", "R2, R7, R9, c[0x0][0x160]"), i("LDG.E", "R4, [R2.64]"), i("IADD3", "R7, R7, 0x4, RZ")]
    assert not _addresses("R7", counter)
    assert not _addresses("R8", [i("LDG.E", "R4, [R80.64]")])
    assert _carries(i("IADD3", "R7, P1, R7, 0x4, RZ")) and not _carries(i("IADD3", "R6, R6, 0x800, RZ"))


LAST_COPY = """\
\t.section\t.text._Z1kPf,"ax",@progbits
        .other          _Z1kPf,@"STO_CUDA_ENTRY STV_DEFAULT"
_Z1kPf:
.text._Z1kPf:
\t//## File "/src/k.cu", line 20
        /*0000*/                   ISETP.GE.U32.AND P0, PT, R0, 0x10, PT ;
\t//## File "/src/k.cu", line 4
        /*0010*/              @!P0 FADD R2, R2, R3 ;
\t//## File "/src/k.cu", line 20
        /*0020*/                   ISETP.NE.AND P1, PT, R0, RZ, PT ;
        /*0030*/               @P1 BRA `(.L_x_1) ;
\t//## File "/src/k.cu", line 4
        /*0040*/                   FADD R2, R2, R4 ;
.L_x_1:
\t//## File "/src/k.cu", line 22
        /*0050*/                   EXIT ;
"""


def test_an_operator_s_copy_alone_in_its_block_runs_as_often_as_its_other_copies():
    from perflsp.compiled.cfg import build_function
    from perflsp.compiled.counts import dynamic_counts
    from perflsp.compiled.model import CompiledUnit
    from perflsp.compiled.sass import parse_sass

    # a tree reduction unrolled whole, its operator's FADD (line 4: no statement of the walk, no
    # call site in LLVM 19's line info) in each pass: predicated beside the pass's test (line
    # 20, a quarter of the threads) in the first block; alone in the last pass's block, where no
    # known code stands beside it: as often as its other copy, not on every thread
    fn = build_function(parse_sass(LAST_COPY)[0])
    unit = CompiledUnit("/src/k.cu", "sm_86", "clang", {fn.name: fn})
    profile = SourceProfile([SourceStatement("/src/k.cu", 20, 21, 0.25, None), SourceStatement("/src/k.cu", 22, 22, 1.0, None)])
    assert dynamic_counts(unit, fn, profile).get("fp32") == pytest.approx(0.25 + 0.25)


# the nest on one line (`for (a ...) for (b ...) t = ...;`): the line holds the code of both loops
NEST_FIXED = """\
__global__ void k(const double *x, double *y) { int i = blockIdx.x * 256 + threadIdx.x; double t = 0;
  for (int a = 0; a < 37; ++a) for (int b = 0; b < 11; ++b) t = t * x[i + a * 11 + b] + 1.0; y[i] = t; }
int main() { double *a, *b; k<<<64, 256>>>(a, b); }
"""


@needs_cuda
def test_a_nest_whose_compiled_loop_fixes_its_trips_runs_them_where_its_unrolling_is_misread(tmp_path):
    # nvcc's SASS: the `b` loop unrolled whole, the first `a` iteration peeled (11 DFMAs), then a
    # loop of 66 DFMAs whose counter goes 0, 6, ..., 36 (`IADD3 R28, R28, 0x6, RZ`,
    # `ISETP.NE.AND P0, PT, R28, 0x24, PT`): 6 trips of 6 iterations. Read from its steps, the
    # unrolling came out near 20 (242 FLOP counted of 814); the 6 trips the code fixes count
    # 792 (the peeled iteration, as ever, not counted again)
    source = tmp_path / "k.cu"
    source.write_text(NEST_FIXED)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["k"].facts
    assert facts.per_item.fp64 == pytest.approx(2 * 37 * 11, rel=0.05)


# a counter stepped by 2 to a bound known only at run time, and the same nest as above with the
# outer bound a parameter
STEPPED_AND_NESTED = """\
__global__ void evens(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  int j = 0;
  do {
    t += x[i + j * 4096] * 1.5f;
    j += 2;
  } while (j < n);
  y[i] = t;
}
__global__ void nest(const double *x, double *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; double t = 0.0;
  for (int a = 0; a < n; ++a) for (int b = 0; b < 11; ++b) t += x[i + (a * 11 + b) * 4096] * 1.5;
  y[i] = t;
}
int main() { float *x, *y; double *p, *q; evens<<<64, 256>>>(x, y, 1000); nest<<<64, 256>>>(p, q, 37); }
"""


@needs_cuda
def test_a_trip_counter_beside_a_counter_stepped_by_two_is_told_apart_by_the_index_register(tmp_path):
    # nvcc's main loop does 16 iterations a trip: its own trip counter steps 16 (`IADD3 R6, R6,
    # 0x10`, one an iteration), `j` steps 32 and the index `i + j * 4096` steps 0x20000 = 16 x
    # 8192. Read as `j` stepped 16 (8 iterations of 2), the loop counted twice its work; the
    # index register's step says 16: 500 FMAs, 2 KB loaded a thread
    source = tmp_path / "k.cu"
    source.write_text(STEPPED_AND_NESTED)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["evens"].facts
    assert facts.operations == "compiled"
    assert facts.per_item.fp32 == pytest.approx(2 * 500, rel=0.02)
    assert facts.per_item.global_load_bytes == pytest.approx(4 * 500, rel=0.02)


@needs_cuda
def test_a_one_line_nest_whose_inner_loop_is_unrolled_whole_ties_its_loop_to_the_outer_one(tmp_path):
    # the `b` loop (11 trips) unrolled whole into the `a` loop, itself unrolled by 2 (counter
    # stepped 2, index 2 x 11 x 4096): both loops' headers on one line, the compiled loop was
    # tied to `b` (5.5 trips of 2: 242 FLOP of 814); no trip of a loop of 11 does 22 iterations
    source = tmp_path / "k.cu"
    source.write_text(STEPPED_AND_NESTED)
    facts = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))["nest"].facts
    assert facts.operations == "compiled"
    assert facts.per_item.fp64 == pytest.approx(2 * 37 * 11, rel=0.02)
    assert facts.per_item.global_load_bytes == pytest.approx(8 * 37 * 11, rel=0.02)
