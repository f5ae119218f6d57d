"""Source constructs of real code that the engine must find and read (issue 12): each on a
small program written for the test."""

from pathlib import Path

import pytest

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.notes import texts
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse
from tests.engine_reports import reports

DB = load_database()
H100 = DB.get("H100")


def analyse(src: str, path: Path | None = None, options: AnalysisOptions | None = None):
    """Reports of every kernel and region of `src` (as `perflsp check` reads a file at `path`)."""
    return reports(src, path, options)


# 1. declarations through macros ---------------------------------------------------------------

RESTRICT_SRC = """
#define RESTRICT __restrict__
#define CONSTANT const
#define REAL double
__global__ void scale(REAL * RESTRICT out, CONSTANT REAL * RESTRICT in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0 * in[i];
}
int main() {
  double *a, *b;
  cudaMalloc(&a, (1 << 24) * sizeof(double));
  cudaMalloc(&b, (1 << 24) * sizeof(double));
  scale<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
}
"""


def test_restrict_macro_keeps_pointer_parameters():
    data = RESTRICT_SRC.encode()
    (kernel,) = extract(data, parse(data)).kernels
    assert [p.name for p in kernel.params] == ["out", "in", "n"]
    out, inp, _ = kernel.params
    assert out.pointer_depth == 1 and out.is_restrict and inp.is_const
    (report,) = analyse(RESTRICT_SRC)
    per = report.facts.per_item
    assert (per.global_loads, per.global_stores) == (1, 1)
    assert (per.global_load_bytes, per.global_store_bytes) == (8, 8)
    assert report.estimates[0].verdict == "bandwidth"


# 2. template arguments and sizes from #define, constexpr and const ----------------------------

FOLDED_SIZES_SRC = """
#define BLOCK 256
#define REAL double
constexpr int TILE = 16;
const int n = 1 << 20;
namespace config { constexpr int UNROLL = 4; }
template <int B, int T, typename V = float>
__global__ void tiled(V *x, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  V s = 0;
  for (int j = 0; j < T; j++) s += x[i] * j;
  if (i < n) x[i] = s;
}
__global__ void bounded(float *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < TILE; j++) s += x[i] * j;
  for (int j = 0; j < config::UNROLL; j++) s += x[i] * j;
  if (i < n) x[i] = s;
}
int main() {
  const int m = 1 << 20;
  constexpr int STEPS = TILE / 2;
  float *x;
  cudaMalloc(&x, m * sizeof(double));
  tiled<BLOCK, STEPS * config::UNROLL / 4, REAL><<<m / BLOCK, BLOCK>>>((double *)x, m);
  bounded<<<n / BLOCK, BLOCK>>>(x);
}
"""


def test_template_arguments_fold_through_macros_and_constants():
    tiled, bounded = analyse(FOLDED_SIZES_SRC)
    assert not any("template" in a or "assumed 32" in a for a in texts(tiled.facts.assumptions))
    (loop,) = tiled.facts.loops
    assert loop.trip_count == 8  # STEPS = TILE / 2, a constexpr of the launching function
    assert tiled.facts.per_item.fp64 == 16 and tiled.facts.per_item.fp32 == 0  # V = REAL = double
    assert tiled.facts.work_items == 1 << 20
    first, second = bounded.facts.loops
    assert first.trip_count == 16  # a file-scope constexpr as a loop bound
    assert second.trip_count == 4  # a namespace-scope one, qualified
    assert bounded.facts.per_item.fp32 == 40
    assert bounded.facts.work_items == 1 << 20


FUNCTION_MACRO_SIZES_SRC = """
#define DIV_UP(a, b) (((a) + (b) - 1) / (b))
#define HALF(x) ((x) / 2)
const int OPT_N = 4000000;
__global__ void pairs(float2 *out, const float2 *in, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n / 2) out[i] = make_float2(in[i].x * 2.0f, in[i].y * 2.0f);
}
__global__ void rows(float *x, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < HALF(64); j++) s += x[i] * j;
  x[i] = s;
}
int main() {
  float2 *a, *b;
  cudaMalloc(&a, OPT_N * sizeof(float));
  cudaMalloc(&b, OPT_N * sizeof(float));
  pairs<<<DIV_UP(OPT_N / 2, 128), 128>>>(a, b, OPT_N);
  rows<<<DIV_UP(1 << 20, 256), 256>>>((float *)a, 1 << 20);
}
"""


def test_function_like_macros_in_launch_shapes_fold():
    pairs, rows = analyse(FUNCTION_MACRO_SIZES_SRC)
    assert not any("unknown" in a for a in texts(pairs.facts.assumptions))
    assert pairs.facts.work_items == 15625 * 128  # DIV_UP(2,000,000, 128) blocks of 128
    assert rows.facts.work_items == 1 << 20
    (loop,) = rows.facts.loops
    assert loop.trip_count == 32


SIZEOF_NAMES_SRC = """
template <typename T>
__global__ void widths(T *a, const int4 *b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  T s = 0;
  for (int j = 0; j < (32 * sizeof(int4)) / (4 * sizeof(double)); j++) s += a[i] * j;
  for (int j = 0; j < sizeof(T); j++) s += a[i];
  a[i] = s;
}
int main() { double *a; int4 *b; widths<double><<<4096, 256>>>(a, b); }
"""


def test_sizeof_of_a_parenthesised_name_is_the_size_of_that_type():
    # the grammar reads `sizeof(int4)` and `sizeof(T)` as expressions, not type names
    (widths,) = analyse(SIZEOF_NAMES_SRC)
    assert [loop.trip_count for loop in widths.facts.loops] == [16, 8]


# 3. OpenMP directives through _Pragma, macros, split target/teams pragmas and #if ------------

OMP_FORMS_SRC = """
#define OMP_OFFLOAD _Pragma("omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])")
#define PRAGMA(x) _Pragma(#x)
#define OFFLOAD_LOOP(i, n) _Pragma("omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])") \\
  for (int i = 0; i < n; i++)
#define N (1 << 22)
void by_operator(int n, const float *x, float *y) {
  _Pragma("omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])")
  for (int i = 0; i < n; i++) y[i] = 2.0f * x[i];
}
void by_macro(int n, const float *x, float *y) {
  OMP_OFFLOAD
  for (int i = 0; i < n; i++) y[i] = 3.0f * x[i];
}
void by_stringizing_macro(int n, const float *x, float *y) {
  PRAGMA(omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n]))
  for (int i = 0; i < n; i++) y[i] = 4.0f * x[i];
}
void loop_in_macro(int n, const float *x, float *y) {
  OFFLOAD_LOOP(i, n) {
    y[i] = 8.0f * x[i];
  }
}
void split(int n, const float *x, float *y) {
  #pragma omp target map(to: x[0:n]) map(from: y[0:n])
  #pragma omp teams distribute parallel for thread_limit(128)
  for (int i = 0; i < n; i++) y[i] = 5.0f * x[i];
}
void split_block(int n, const float *x, float *y) {
  #pragma omp target map(to: x[0:n]) map(from: y[0:n])
  {
    #pragma omp teams distribute parallel for
    for (int i = 0; i < n; i++) y[i] = 6.0f * x[i];
  }
}
void conditional(int n, const float *x, float *y) {
#ifdef USE_SIMD
  #pragma omp target teams distribute parallel for simd map(to: x[0:n]) map(from: y[0:n])
#else
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
#endif
  for (int i = 0; i < n; i++) y[i] = 7.0f * x[i];
}
int main() {
  float *x = new float[N], *y = new float[N];
  by_operator(N, x, y); by_macro(N, x, y); by_stringizing_macro(N, x, y); loop_in_macro(N, x, y);
  split(N, x, y); split_block(N, x, y); conditional(N, x, y);
}
"""


def test_openmp_directive_forms_are_regions_over_their_loop():
    data = OMP_FORMS_SRC.encode()
    regions = extract(data, parse(data)).omp_regions
    assert [r.function for r in regions] == ["by_operator", "by_macro", "by_stringizing_macro", "loop_in_macro",
                                              "split", "split_block", "conditional"]
    starts = {"split_block": b"{", "loop_in_macro": b"OFFLOAD_LOOP(i, n) {"}
    for region in regions:
        assert region.body_span is not None
        body = data[region.body_span.start_byte:region.body_span.end_byte]
        assert body.startswith(starts.get(region.function, b"for")), region.function
        assert body.rstrip().endswith(b"}" if region.function in starts else b";")
    split = regions[4]
    assert split.directive == "target teams distribute parallel for"
    assert split.clause("thread_limit").value.value == 128
    assert "simd" not in regions[6].directive  # USE_SIMD is not defined: the #else branch
    for report in analyse(OMP_FORMS_SRC):
        facts = report.facts
        assert facts.work_items == 1 << 22, report.kernel.function
        assert (facts.per_item.fp32, facts.per_item.global_loads, facts.per_item.global_stores) == (1, 1, 1)
        assert not any("assumed" in a for a in texts(facts.assumptions)), (report.kernel.function, texts(facts.assumptions))
        assert report.estimates[0].verdict == "bandwidth"


def test_clause_fix_refuses_directives_it_cannot_edit():
    from perflsp.analysis.fixes import EditError, set_omp_clauses

    data = OMP_FORMS_SRC.encode()
    tree = parse(data)
    model = ProgramModel(data, tree, extract(data, tree))
    regions = model.kernels.omp_regions
    for region in (regions[0], regions[4]):  # `_Pragma`; `teams` on a separate line
        with pytest.raises(EditError):
            set_omp_clauses(model, region, thread_limit=256)


# 4. kernels in a file that another translation unit includes ------------------------------------

INCLUDED_KERNELS = """
__global__ void axpy(Real_type *y, const Real_type *x, Real_type a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template <int UNROLL>
__global__ void copy(float *out, const float *in) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
  for (int u = 0; u < UNROLL; u++) out[i + u] = in[i + u];
}
"""

INCLUDER = """
#include "missing_types.h"
#define LENGTH (1 << 24)
#define UNROLL_BY 4
#include "kernels.h"
int main() {
  Real_type *x, *y;
  float *a, *b;
  cudaMalloc(&x, LENGTH * sizeof(Real_type));
  cudaMalloc(&y, LENGTH * sizeof(Real_type));
  cudaMalloc(&a, LENGTH * sizeof(float));
  cudaMalloc(&b, LENGTH * sizeof(float));
  axpy<<<LENGTH / 256, 256>>>(y, x, 2.0, LENGTH);
  copy<UNROLL_BY><<<LENGTH / 256 / UNROLL_BY, 256>>>(a, b);
}
"""


def test_included_kernels_take_their_includers_launches(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file

    (tmp_path / "kernels.h").write_text(INCLUDED_KERNELS)
    (tmp_path / "main.cu").write_text(INCLUDER)
    check = check_file(tmp_path / "kernels.h", [H100], CheckSettings(), IncludeResolver())
    axpy, copy = check.kernels
    assert axpy.facts.work_items == 1 << 24  # the includer's launch, with its macros
    assert axpy.facts.per_item.fp64 == 2 and axpy.facts.per_item.global_load_bytes == 16
    assert any("`Real_type`" in a and "assumed double" in a for a in texts(axpy.facts.assumptions))
    assert not any("launch" in a for a in texts(axpy.facts.assumptions))
    assert copy.facts.work_items == (1 << 24) // 4
    (loop,) = copy.facts.loops
    assert loop.trip_count == 4  # UNROLL = UNROLL_BY of the includer
    assert axpy.estimates[0].verdict == copy.estimates[0].verdict == "bandwidth"


def test_kernels_of_a_nested_header_take_the_launches_of_the_source_above(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file
    from perflsp.compiled.service import includer_of

    # runner.cu -> kernels.cuh -> kernels/scale.cuh, as a tutorial's kernels are laid out
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cuh").write_text("""
template <int UNROLL>
__global__ void scale(float *out, const float *in) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
  for (int u = 0; u < UNROLL; u++) out[i + u] = 2.0f * in[i + u];
}
""")
    (tmp_path / "kernels.cuh").write_text('#pragma once\n#include "kernels/scale.cuh"\n')
    (tmp_path / "runner.cu").write_text("""
#include "kernels.cuh"
int main() {
  float *a, *b;
  scale<8><<<(1 << 22) / 256 / 8, 256>>>(a, b);
}
""")
    # a header of the same name beside another source is that source's, not this one's
    (tmp_path / "scale.cuh").write_text("__global__ void other(float *p) { p[threadIdx.x] = 0.f; }\n")
    (tmp_path / "other.cu").write_text('#include "scale.cuh"\nint main() { float *p; other<<<1, 32>>>(p); }\n')
    resolver = IncludeResolver()
    assert resolver.includers_of(tmp_path / "kernels" / "scale.cuh") == [tmp_path / "runner.cu"]
    assert includer_of(tmp_path / "kernels" / "scale.cuh") == tmp_path / "runner.cu"
    (scale,) = check_file(tmp_path / "kernels" / "scale.cuh", [H100], CheckSettings(), resolver).kernels
    assert scale.facts.work_items == (1 << 22) // 8  # the launch of runner.cu, two includes up
    (loop,) = scale.facts.loops
    assert loop.trip_count == 8


def test_a_header_reads_the_constants_of_headers_its_includer_reads_before_it(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file

    # `WARPSIZE` is defined by a header that kernels.cuh includes before this one
    (tmp_path / "common.cuh").write_text("#pragma once\nconst int WARPSIZE = 32;\n")
    (tmp_path / "lanes.cuh").write_text("""
__global__ void lanes(float *out, const float *in) {
  float s = 0.f;
  for (int k = 0; k < WARPSIZE; ++k) s += in[(blockIdx.x * blockDim.x + threadIdx.x) * WARPSIZE + k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
""")
    (tmp_path / "kernels.cuh").write_text('#include "common.cuh"\n#include "lanes.cuh"\n')
    (tmp_path / "main.cu").write_text('#include "kernels.cuh"\nint main() { float *a, *b; lanes<<<4096, 256>>>(a, b); }\n')
    (lanes,) = check_file(tmp_path / "lanes.cuh", [H100], CheckSettings(), IncludeResolver()).kernels
    (loop,) = lanes.facts.loops
    assert loop.trip_count == 32 and loop.origin == "constant"


def test_a_header_s_enumerators_are_constants_in_the_branch_the_macros_take(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file

    # enumerators of a header (one chosen by `#ifdef`, one numbered after the one before it),
    # seen by a kernel file its includer reads after that header
    (tmp_path / "sizes.h").write_text("""#pragma once
#ifdef UNKNOWNS_VALUE
enum{ UNKNOWNS = UNKNOWNS_VALUE };
#else
enum{ UNKNOWNS = 4 }; /* default */
#endif
typedef enum Axis { AXIS_X, AXIS_Y, AXIS_Z, AXES /* count */ } Axis;
enum class Mode { FAST = 64 };
""")
    (tmp_path / "kernels.cu").write_text("""
__global__ void sweep(float *out, const float *in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.f;
  for (int u = 0; u < UNKNOWNS; ++u) s += in[i * UNKNOWNS + u];
  for (int a = 0; a < AXES; ++a) s += in[i * AXES + a];
  for (int m = 0; m < FAST; ++m) s += in[i + m];
  out[i] = s;
}
""")
    (tmp_path / "main.cu").write_text('#include "sizes.h"\n#include "kernels.cu"\n'
                                      "int main() { float *a, *b; sweep<<<4096, 256>>>(a, b); }\n")
    (sweep,) = check_file(tmp_path / "kernels.cu", [H100], CheckSettings(), IncludeResolver()).kernels
    unknowns, axes, scoped = sweep.facts.loops
    assert (unknowns.trip_count, unknowns.origin) == (4, "constant")
    assert (axes.trip_count, axes.origin) == (3, "constant")
    # a scoped enumerator is `Mode::FAST`, not `FAST`: the bare name stays unknown
    assert scoped.origin == "assumed"
    (defined,) = check_file(tmp_path / "kernels.cu", [H100], CheckSettings(),
                            IncludeResolver(defines={"UNKNOWNS_VALUE": "8"})).kernels
    assert defined.facts.loops[0].trip_count == 8


def test_a_header_calls_the_functions_of_headers_its_includer_reads_before_it(tmp_path):
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file

    # kernels.h calls `mix` (a device function) and `steps` (a plain function a target region
    # calls) that it does not include: its includer read common/helpers.h first, as the compiler
    # does (no sibling of kernels.h defines them)
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "helpers.h").write_text("""#pragma once
__device__ inline float mix(float a, float b) { float s = 0.f; for (int k = 0; k < 16; ++k) s += a * b + k; return s; }
inline int steps(unsigned v) { int n = 0; for (int k = 0; k < 32; ++k) n += (v >> k) & 1; return n; }
""")
    # (a header the includer reads after it is none the compiler lets it call)
    (tmp_path / "common" / "later.h").write_text("__device__ inline float late(float a) { return a * 2.f; }\n")
    (tmp_path / "kernels.h").write_text("""
__global__ void blend(float *out, const float *a, const float *b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = mix(a[i], b[i]);
}
__global__ void doubled(float *out, const float *a) { out[threadIdx.x] = late(a[threadIdx.x]); }
void count(const unsigned *v, int *out, int n) {
  #pragma omp target teams distribute parallel for map(to: v[0:n]) map(from: out[0:n])
  for (int i = 0; i < n; i++) out[i] = steps(v[i]);
}
""")
    (tmp_path / "main.cu").write_text('#include "common/helpers.h"\n#include "kernels.h"\n#include "common/later.h"\n'
                                      "int main() { float *o, *a, *b; blend<<<4096, 256>>>(o, a, b); }\n")
    blend, doubled, count = check_file(tmp_path / "kernels.h", [H100], CheckSettings(), IncludeResolver()).kernels
    assert "call to `late` not analysed (definition not visible)" in texts(doubled.facts.evidence)
    for report in (blend, count):
        assert not any("not analysed" in t for t in texts(report.facts.evidence)), report.name
    # the helpers' loops, inlined
    assert [loop.trip_count for loop in blend.facts.loops] == [16]
    assert 32 in [loop.trip_count for loop in count.facts.loops]


def test_unresolved_type_names_are_guessed_from_their_name():
    from perflsp.analysis.ctype import F32, F64, guessed_float_type

    assert guessed_float_type("Real_type") == F64 and guessed_float_type("real8") == F64
    assert guessed_float_type("dfloat") == F64 and guessed_float_type("FP") == F32
    assert guessed_float_type("real4") == F32 and guessed_float_type("float_t") == F32
    assert guessed_float_type("RealVector") is None and guessed_float_type("Particle") is None


# 5. tensor-core work in its own precision -------------------------------------------------------

WMMA_SRC = """
#include <mma.h>
using namespace nvcuda;
#define TILE_K 16
template <typename In, typename Acc, int M, int N, int K>
__global__ void repeat_mma(const In *a, const In *b, Acc *c) {
  wmma::fragment<wmma::matrix_a, M, N, K, In, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, M, N, K, In, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, M, N, K, Acc> acc;
  wmma::fill_fragment(acc, 0);
  int tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  wmma::load_matrix_sync(fa, a + tile * M * K, K);
  wmma::load_matrix_sync(fb, b + tile * K * N, K);
  for (int r = 0; r < 1024; r++)
    wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c + tile * M * N, acc, N, wmma::mem_row_major);
}
__global__ void half_tiles(const half *a, const half *b, float *c) {
  wmma::fragment<wmma::matrix_a, 16, 16, TILE_K, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, TILE_K, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, TILE_K, float> acc;
  int tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  wmma::load_matrix_sync(fa, a + tile * 256, 16);
  wmma::load_matrix_sync(fb, b + tile * 256, 16);
  for (int r = 0; r < 1024; r++) wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c + tile * 256, acc, 16, wmma::mem_row_major);
}
__global__ void ptx_mma(float *out, const unsigned *a, const unsigned *b) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  unsigned a0 = a[blockIdx.x * blockDim.x + threadIdx.x], b0 = b[blockIdx.x * blockDim.x + threadIdx.x];
  for (int r = 0; r < 1024; r++)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(b0));
  out[blockIdx.x * blockDim.x + threadIdx.x] = d0 + d1 + d2 + d3;
}
int main() {
  half *ha, *hb; float *fc; double *da, *db, *dc; unsigned *ua, *ub;
  repeat_mma<double, double, 8, 8, 4><<<4096, 256>>>(da, db, dc);
  repeat_mma<half, half, 16, 16, 16><<<4096, 256>>>(ha, hb, (half *)fc);
  half_tiles<<<4096, 256>>>(ha, hb, fc);
  ptx_mma<<<4096, 256>>>(fc, ua, ub);
}
"""


def test_tensor_core_operations_count_in_their_precision():
    from perflsp.hardware.precision import Precision

    reports = analyse(WMMA_SRC)
    by_name = {r.kernel.name: r for r in reports}
    half_tiles = by_name["half_tiles"]
    per = half_tiles.facts.per_item
    assert per.tensor_fp16 == pytest.approx(1024 * 2 * 16 * 16 * 16 / 32)
    assert per.global_load_bytes == 2 * 16 * 16 * 2 / 32  # two 16×16 half tiles per warp
    est = half_tiles.estimates[0]
    assert est.verdict == "compute" and est.deciding == Precision.FP16_TENSOR
    ptx = by_name["ptx_mma"]
    assert ptx.facts.per_item.tensor_bf16 == pytest.approx(1024 * 2 * 16 * 8 * 16 / 32)
    assert Precision.BF16_TENSOR in ptx.estimates[0].intensity
    # the template's instantiation decides the shape and the precision
    repeat = by_name["repeat_mma"]
    assert repeat.facts.per_item.tensor_fp64 == pytest.approx(1024 * 2 * 8 * 8 * 4 / 32)
    assert repeat.estimates[0].deciding == Precision.FP64_TENSOR


# 6. compile-time constant expressions cost nothing at run time -----------------------------------

CONSTANT_EXPRESSIONS_SRC = """
#include <math.h>
#define SCALE (1.0 / 3.0)
__global__ void gelu_like(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float c = sqrtf(2.0f / M_PI);
    float v = x[i];
    x[i] = v * c * (float)SCALE + (float)M_PI * 2;
  }
}
__global__ void promoted(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * (1.0 / 3.0);  // float × double: a runtime FP64 multiply
}
int main() {
  float *x;
  cudaMalloc(&x, (1 << 24) * sizeof(float));
  gelu_like<<<(1 << 24) / 256, 256>>>(x, 1 << 24);
  promoted<<<(1 << 24) / 256, 256>>>(x, 1 << 24);
}
"""


def test_constant_expressions_are_folded_at_compile_time():
    gelu_like, promoted = analyse(CONSTANT_EXPRESSIONS_SRC)
    per = gelu_like.facts.per_item
    assert per.fp64 == 0 and per.special == 0
    assert per.fp32 == 3  # v * c, * SCALE, + the folded constant
    assert promoted.facts.per_item.fp64 == 1 and promoted.facts.per_item.fp32 == 0


# 6b. device code guarded by the architecture it is compiled for ----------------------------------

ARCH_GUARD_SRC = """
__global__ void tiled(double *out, const double *in, int n) {
#if __CUDA_ARCH__ >= 800
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3.0 * in[i];
#else
  // older GPUs: nothing to do
#endif
}
__global__ void legacy(float *out, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
  out[i] = in[i] * in[i] * in[i];  // an old-GPU path the device pass of a current GPU drops
#else
  out[i] = in[i];
#endif
}
int main() {
  double *a, *b;
  cudaMalloc(&a, (1 << 24) * sizeof(double));
  cudaMalloc(&b, (1 << 24) * sizeof(double));
  tiled<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
  legacy<<<(1 << 24) / 256, 256>>>((float *)a, (float *)b, 1 << 24);
}
"""


def test_kernel_bodies_are_read_as_the_device_pass_compiles_them():
    tiled, legacy = analyse(ARCH_GUARD_SRC)
    assert tiled.facts.uncertain is None
    assert (tiled.facts.per_item.global_loads, tiled.facts.per_item.global_stores) == (1, 1)
    assert tiled.facts.per_item.fp64 == 1
    assert legacy.facts.per_item.fp32 == 0  # the `< 600` branch is not compiled for sm_80


# 7. macros that expand to __global__, defined in a header on the include path --------------------

SPACE_MACROS_HEADER = """
#pragma once
#define DEVICE_SPACE __global__
#define KERNEL DEVICE_SPACE
#define GLOBAL __global__ void
#define DEFINE_KERNEL(name) __global__ void name
"""

SPACE_MACROS_SRC = """
#include "space_macros.h"
KERNEL void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
GLOBAL sub(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] -= b[i];
}
DEFINE_KERNEL(mul)(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= b[i];
}
int main() {
  float *a, *b;
  cudaMalloc(&a, (1 << 24) * sizeof(float));
  cudaMalloc(&b, (1 << 24) * sizeof(float));
  add<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
  sub<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
  mul<<<(1 << 24) / 256, 256>>>(a, b, 1 << 24);
}
"""


@pytest.mark.parametrize("layout", ["include-dir", "sibling", "conventional-folder"])
def test_global_macros_from_headers_on_the_include_path(tmp_path, layout):
    source_dir = tmp_path / "src"
    header_dir = {"include-dir": tmp_path / "headers", "sibling": source_dir,
                  "conventional-folder": tmp_path / "include"}[layout]
    source_dir.mkdir()
    header_dir.mkdir(exist_ok=True)
    (header_dir / "space_macros.h").write_text(SPACE_MACROS_HEADER)
    main = source_dir / "main.cu"
    main.write_text(SPACE_MACROS_SRC)
    data = main.read_bytes()
    include_dirs = (header_dir,) if layout == "include-dir" else ()
    env = IncludeResolver().env_for(main, data, None, include_dirs)
    kernels = extract(data, parse(data), str(main), env=env)
    assert [k.name for k in kernels.kernels] == ["add", "sub", "mul"]
    assert all(len(k.params) == 3 for k in kernels.kernels)
    assert [s.kernel for s in kernels.launches] == ["add", "sub", "mul"]
    unit = AnalysisUnit(data, parse(data), kernels, AnalysisOptions(include_env=env))
    for kernel in kernels.kernels:
        facts = analyze_kernel(unit, kernel, [H100]).facts
        assert facts.work_items == 1 << 24
        assert (facts.per_item.fp32, facts.per_item.global_loads, facts.per_item.global_stores) == (1, 2, 1)


def test_the_server_takes_the_includers_launches_too(tmp_path):
    from types import SimpleNamespace

    from perflsp.analysis.reader import ReadContext
    from perflsp.server import engine_adapter

    (tmp_path / "kernels.h").write_text(INCLUDED_KERNELS)
    (tmp_path / "main.cu").write_text(INCLUDER)
    data = INCLUDED_KERNELS.encode()
    resolver = IncludeResolver()
    env = resolver.env_for(tmp_path / "kernels.h", data, includers=True)
    assert "LENGTH" in env.all_macros()  # the includer's macros
    kernels = extract(data, parse(data), str(tmp_path / "kernels.h"), env=env)
    text = SimpleNamespace(path=str(tmp_path / "kernels.h"), reading=ReadContext(resolver))
    sites = engine_adapter.with_includer_launches(engine_adapter.options(env), text, kernels).external_launches
    assert sorted(s.name for s in sites) == ["axpy", "copy"]
    assert all(s.grid.value is not None and s.block.value == (256, 1, 1) for s in sites)
    copy = next(s for s in sites if s.name == "copy")
    assert copy.template_args == ("4",)


# a random-access update through a local struct and a pointer to a member of an element

RANDOM_UPDATES = """
struct slot { unsigned long long data; };
__global__ void touch(slot *t, unsigned long long mask) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long *a = (unsigned long long *)&t[i].data;
  *a += 1;
}
__global__ void updates(slot *t, unsigned long long mask) {
  slot r;
  r.data = clock64() + threadIdx.x;
  for (int k = 0; k < 8; k++) {
    r.data = (r.data << 1) ^ 7;
    unsigned long long *a = (unsigned long long *)&t[r.data & mask].data;
    *a = 1;
  }
}
int main() {
  slot *t;
  cudaMalloc(&t, (1 << 26) * sizeof(slot));
  touch<<<(1 << 26) / 256, 256>>>(t, (1 << 26) - 1);
  updates<<<(1 << 20) / 256, 256>>>(t, (1 << 26) - 1);
}
"""


def test_a_pointer_to_a_member_of_an_element_is_where_the_access_happens():
    # `&t[i].data` takes an address (no load); `*a += 1` loads and stores that element
    touch = next(r for r in analyse(RANDOM_UPDATES) if r.name == "touch")
    assert (touch.facts.per_item.global_loads, touch.facts.per_item.global_stores) == (1, 1)
    assert touch.facts.per_item.global_load_bytes == 8
    assert touch.facts.dram_bytes == pytest.approx(16 * (1 << 26), rel=0.01)


def test_a_member_of_a_local_struct_keeps_what_the_kernel_assigns_it():
    # `r.data` varies per thread and iteration (a random index): 8 distinct slots per thread, not
    # one slot for the whole launch
    updates = next(r for r in analyse(RANDOM_UPDATES) if r.name == "updates")
    assert (updates.facts.per_item.global_loads, updates.facts.per_item.global_stores) == (0, 8)
    assert updates.facts.dram_bytes >= 8 * 8 * (1 << 20)
    assert all(e.verdict == "bandwidth" for e in updates.estimates)


JACOBI = """
__global__ void jacobi(const double *in, double *out, int4 bounds, int stride) {
  int2 idx = make_int2(blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y);
  int c = (idx.y + 1) * (stride + 2) + idx.x + 1;
  if (idx.x < bounds.x || idx.x > bounds.z || idx.y < bounds.y || idx.y > bounds.w) return;
  out[c] = 0.25 * (in[c - 1] + in[c + 1] + in[c - stride - 2] + in[c + stride + 2]);
}
"""


def test_the_lanes_of_a_vector_built_lane_by_lane_keep_their_values():
    # `idx.x`, `idx.y` are the thread's coordinates: each thread its own element, a stencil over a
    # production-size grid, not one element for the whole launch
    (jacobi,) = analyse(JACOBI)
    assert jacobi.facts.uncertain is None
    assert jacobi.facts.dram_bytes >= 8 * jacobi.facts.work_items
    assert all(e.verdict == "bandwidth" for e in jacobi.estimates)


def test_a_float_vector_built_from_a_double_keeps_float_lanes():
    # `make_float2(a, d)` with `d` a double: the lanes are floats, so the arithmetic on them is
    # FP32, not FP64
    src = """
    __global__ void shift(float *out, float a, double d, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      float2 v = make_float2(a, d);
      if (i < n) out[i] = v.x * v.y;
    }
    """
    (shift,) = analyse(src)
    assert shift.facts.per_item.fp64 == 0
    assert shift.facts.per_item.fp32 > 0


def test_a_floating_point_member_of_a_local_struct_is_not_given_the_type_of_what_it_is_assigned():
    # `u.f = d` stores a double into a float member: what the kernel computes with `u.f` is not
    # double-precision work
    src = """
    struct box { float f; };
    __global__ void scale(float *out, float a, double d, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      box u;
      u.f = d;
      if (i < n) out[i] = a * u.f;
    }
    """
    (scale,) = analyse(src)
    assert scale.facts.per_item.fp64 == 0


# texture fetches --------------------------------------------------------------------------------

TEXTURES = """
#define DIM 2048
texture<float> heat;
__global__ void blend(float *dst) {
  int x = threadIdx.x + blockIdx.x * blockDim.x;
  int y = threadIdx.y + blockIdx.y * blockDim.y;
  int o = x + y * blockDim.x * gridDim.x;
  float t = tex1Dfetch(heat, o - DIM), b = tex1Dfetch(heat, o + DIM);
  float l = tex1Dfetch(heat, o - 1), r = tex1Dfetch(heat, o + 1), c = tex1Dfetch(heat, o);
  dst[o] = c + 0.25f * (t + b + l + r - 4.0f * c);
}
__global__ void box3(cudaTextureObject_t img, float4 *out, int w) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int dy = -1; dy <= 1; dy++)
    for (int dx = -1; dx <= 1; dx++) {
      float4 v = tex2D<float4>(img, x + dx + 0.5f, y + dy + 0.5f);
      s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
  out[y * w + x] = s;
}
__global__ void window(cudaTextureObject_t img, float *out, int w) {
  int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
  const float x = (float)ix + 0.5f, y = (float)iy + 0.5f;
  float s = 0.0f;
  for (float i = -3; i <= 3; i++)
    for (float j = -3; j <= 3; j++)
      s += __expf(-tex2D<float>(img, x + j, y + i));
  out[w * iy + ix] = s;
}
int main() {
  float *d; float4 *o; cudaTextureObject_t t = 0;
  blend<<<dim3(DIM / 16, DIM / 16), dim3(16, 16)>>>(d);
  box3<<<dim3(DIM / 16, DIM / 16), dim3(16, 16)>>>(t, o, DIM);
  window<<<dim3(DIM / 16, DIM / 16), dim3(16, 16)>>>(t, d, DIM);
}
"""


def test_texture_fetches_are_global_reads_of_the_texels_they_name():
    by_name = {r.name: r for r in analyse(TEXTURES)}
    blend, box = by_name["blend"], by_name["box3"]
    # a reference's fetches read its declared element; neighbours overlap, as in an array
    assert blend.facts.per_item.global_load_bytes == 5 * 4
    heat = [g for g in blend.facts.traffic.groups if g.array == "heat"]
    assert sum(g.footprint_bytes for g in heat) == pytest.approx(2048 * 2048 * 4, rel=0.01)
    # an object's fetch reads the type it names, at the texel its coordinates' integer part picks
    assert box.facts.per_item.global_load_bytes == 9 * 16
    image = [g for g in box.facts.traffic.groups if g.array == "img"]
    assert sum(g.footprint_bytes for g in image) == pytest.approx(2048 * 2048 * 16, rel=0.01)
    assert blend.estimates[0].verdict == box.estimates[0].verdict == "bandwidth"
    # coordinates in floating point (`x + j` of a float `x`): the thread's own texel, each read once
    window = by_name["window"]
    assert window.facts.per_item.global_load_bytes == 49 * 4
    texels = [g for g in window.facts.traffic.groups if g.array == "img"]
    assert sum(g.footprint_bytes for g in texels) == pytest.approx(2048 * 2048 * 4, rel=0.01)


SURFACES = """
__global__ void columns(cudaSurfaceObject_t dst, cudaSurfaceObject_t src, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= width) return;
  unsigned acc = 0;
  for (int y = 0; y < height; y++) {
    unsigned v = surf2Dread<unsigned>(src, x * 4, y);
    acc += v;
    surf2Dwrite(acc, dst, x * 4, y);
  }
}
__global__ void levels(cudaSurfaceObject_t *mips, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  for (int level = 0; level < 4; level++) {
    uchar4 p;
    surf2Dread(&p, mips[level], x * sizeof(uchar4), 0);
    surf2Dwrite(make_uchar4(p.x / 2, p.y / 2, p.z / 2, p.w), mips[level], x * sizeof(uchar4), 0);
  }
}
int main() {
  cudaSurfaceObject_t a, b, *m;
  columns<<<4, 256>>>(b, a, 1024, 512);
  levels<<<4, 256>>>(m, 1024);
}
"""


def test_surface_reads_and_writes_are_global_accesses_of_their_elements():
    by_name = {r.name: r for r in analyse(SURFACES)}
    columns = by_name["columns"].facts
    # x counts bytes: each thread reads and writes its own 4-byte column, 512 rows
    assert columns.per_item.global_load_bytes == 512 * 4
    assert columns.per_item.global_store_bytes == 512 * 4
    src = [g for g in columns.traffic.groups if g.array == "src"]
    assert sum(g.footprint_bytes for g in src) == pytest.approx(1024 * 512 * 4, rel=0.01)
    # a surface picked from an array of them (one per mip level) is a surface of its own; a read
    # into `&p` reads p's type
    levels = by_name["levels"].facts
    assert levels.per_item.global_store_bytes == 4 * 4
    mips = [g for g in levels.traffic.groups if g.array.startswith("mips") and g.is_store]
    assert sum(g.footprint_bytes for g in mips) == pytest.approx(4 * 1024 * 4, rel=0.01)
