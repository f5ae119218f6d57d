"""What the engine makes of OpenMP target regions: the functions they call, their iteration
space. Small programs of our own."""

from pathlib import Path

import pytest

from perflsp.analysis.costs import CostModel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import texts
from perflsp.kernels.models import OmpRegion
from tests.engine_reports import reports

EACH_AT_THE_LIMIT = CostModel().assumed_capped_iterations  # iterations per thread at the team limit


def analyse(src: str, path: Path | None = None) -> list[KernelReport]:
    """Reports of every OpenMP region of `src`, as `perflsp check` reads a file at `path`."""
    return [r for r in reports(src, path) if isinstance(r.kernel, OmpRegion)]


# functions a region calls are plain C/C++ functions ----------------------------------------------

DECLARE_TARGET_SRC = """
#include <math.h>
#define SCALE 0.5
typedef double real;
#pragma omp declare target
real rate(real density, real t) {
  real a = 8.4e-11 / sqrt(t) * pow(t / 1e3, -0.2);
  return a * density * SCALE + t;
}
#pragma omp end declare target
static inline float clampf(float v) { return v < 0.0f ? 0.0f : v; }
void run(int n, real density, const real *t, real *r) {
  #pragma omp target teams distribute parallel for map(to: t[0:n]) map(from: r[0:n])
  for (int i = 0; i < n; i++) r[i] = rate(density, t[i]);
}
void run_implicit(int n, const float *x, float *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = clampf(x[i] * 3.0f + 1.0f);
}
"""


def test_regions_inline_the_plain_functions_they_call():
    declared, implicit = analyse(DECLARE_TARGET_SRC)
    # `rate`: sqrt, pow, a division and the multiplies, all in double; its macro folded
    assert declared.facts.per_item.fp64 > 100
    assert not any("not analysed" in e for e in texts(declared.facts.evidence))
    assert declared.estimates[0].verdict == "compute"  # FP64 math per 16 bytes streamed
    # `clampf`, implicitly a device function (no declare target): one FMA, a compare
    assert implicit.facts.per_item.fp32 == 2
    assert not any("not analysed" in e for e in texts(implicit.facts.evidence))
    assert implicit.estimates[0].verdict == "bandwidth"


MEMBER_SRC = """
#include <cstddef>
template <int W> class Docking {
  static inline void score(size_t g, size_t n, const float *pose, float *energy) {
    float e = 0.0f;
    for (int k = 0; k < 64; k++) e += pose[g] * (1.5f + k) / (pose[g] + 2.0f);
    energy[g] = e;
  }
public:
  void run(size_t n, const float *pose, float *energy) {
    #pragma omp target teams distribute parallel for map(to: pose[:n]) map(from: energy[:n])
    for (size_t g = 0; g < n; g++) score(g, n, pose, energy);
  }
};
"""


def test_regions_inline_the_static_member_functions_of_their_class():
    (report,) = analyse(MEMBER_SRC)
    # `score`, a static sibling member: its loop of divisions is the work, its load and store the traffic
    assert not any("not analysed" in e for e in texts(report.facts.evidence))
    assert report.facts.per_item.fp32 >= 64 * 3
    assert report.facts.per_item.global_store_bytes == 4
    assert report.estimates[0].verdict == "compute"


HEADER_HELPER = """
#pragma once
inline float smooth(float a, float b) { return 0.25f * a + 0.75f * b; }
"""

HEADER_USER = """
#include "helpers.h"
void blend(int n, const float *a, const float *b, float *c) {
  #pragma omp target teams distribute parallel for map(to: a[0:n], b[0:n]) map(from: c[0:n])
  for (int i = 0; i < n; i++) c[i] = smooth(a[i], b[i]);
}
"""


def test_regions_inline_functions_of_local_headers(tmp_path):
    (tmp_path / "helpers.h").write_text(HEADER_HELPER)
    source = tmp_path / "blend.cpp"
    source.write_text(HEADER_USER)
    (report,) = analyse(HEADER_USER, source)
    assert report.facts.per_item.fp32 == 3  # a multiply and an FMA
    assert not any("not analysed" in e for e in texts(report.facts.evidence))


SIBLING_DEFINITION = """
#include <math.h>
#pragma omp declare target
double attenuation(double x) {
  double s = 0.0;
  for (int k = 1; k <= 8; k++) s += exp(-x * k) / k;
  return s;
}
#pragma omp end declare target
"""

SIBLING_USER = """
#pragma omp declare target
double attenuation(double);
#pragma omp end declare target
void apply(int n, const double *x, double *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = attenuation(x[i]);
}
"""


def test_regions_inline_declare_target_functions_of_other_sources_of_the_folder(tmp_path):
    (tmp_path / "attenuation.cpp").write_text(SIBLING_DEFINITION)
    source = tmp_path / "main.cpp"
    source.write_text(SIBLING_USER)
    (report,) = analyse(SIBLING_USER, source)
    assert report.facts.per_item.fp64 > 8 * 36  # eight exp() calls in double, and their sum
    assert report.estimates[0].verdict == "compute"
    # an unsaved buffer has no folder: the call stays unknown, and says so
    (alone,) = analyse(SIBLING_USER)
    assert alone.facts.per_item.fp64 == 0
    assert any("`attenuation` not analysed" in e for e in texts(alone.facts.evidence))


# regions without a worksharing loop ------------------------------------------------------------

REGION_SHAPES_SRC = """
#define TEAMS 4096
#define THREADS 128
struct Args { char bytes[64]; };
#pragma omp declare target
void touch(Args args, char *out) { if (out) *out = args.bytes[0]; }
#pragma omp end declare target
void launch_only(Args args) {
  #pragma omp target map(to: args)
  touch(args, nullptr);
}
void hidden(const float *x, float *y) {
  #pragma omp target map(to: x[0:1]) map(from: y[0:1])
  opaque_update(x, y);
}
void blocks(const float *x, float *y) {
  #pragma omp target teams num_teams(TEAMS) thread_limit(THREADS) map(to: x[0:TEAMS * THREADS]) map(from: y[0:TEAMS * THREADS])
  {
    #pragma omp parallel
    {
      int t = omp_get_num_threads() * 0 + omp_get_thread_num();
      y[t] = 2.0f * x[t];
    }
  }
}
void scale_block(const float *u, float *v) {
  int t = omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num();
  v[t] = 3.0f * u[t];
}
void blocks_by_size(const float *u, float *v, int n) {
  #pragma omp target teams num_teams(n / THREADS) thread_limit(THREADS)
  {
    #pragma omp parallel
    {
      scale_block(u, v);
    }
  }
}
"""


def test_a_serial_region_that_touches_no_memory_is_the_launch_alone():
    launch_only, hidden, _, _ = analyse(REGION_SHAPES_SRC)
    assert launch_only.facts.uncertain is None
    assert launch_only.facts.work_items == 1
    assert launch_only.estimates[0].verdict == "bandwidth"
    assert "no global-memory access" in launch_only.facts.dram_note
    # a call the engine could not read may hide the region's memory: still no verdict
    assert hidden.estimates[0].verdict == "uncertain"


def test_every_thread_of_every_team_runs_a_parallel_block():
    _, _, blocks, by_size = analyse(REGION_SHAPES_SRC)
    # `teams` + `#pragma omp parallel`: 4096 teams × 128 threads, each one element
    assert blocks.facts.work_items == 4096 * 128
    assert (blocks.facts.per_item.global_loads, blocks.facts.per_item.global_stores) == (1, 1)
    # the same shape when the thread indexes itself in a function it calls, the team count
    # unknown: production size
    assert by_size.facts.uncertain is None
    assert by_size.facts.work_items == 1 << 24
    assert (by_size.facts.per_item.global_loads, by_size.facts.per_item.global_stores) == (1, 1)
    assert texts(by_size.facts.assumptions)[0].startswith("problem size unknown")
    assert by_size.estimates[0].verdict == "bandwidth"


# the extent of an array a region's function receives from its caller ---------------------------

PASSED_POINTS_SRC = """
#include <stdlib.h>
#define POINTS 4096
void accumulate(const int *pos, const float *weight, float *out, int n, int step) {
  #pragma omp target teams distribute parallel for
  for (int i = 0; i < step * n; i++) {
    const int p = i / step;
    float s = 0.f;
    for (int j = i % step; j < n; j += step) s += weight[j] * abs(pos[j] - pos[p]);
    if (i % step == 0) out[p] = s;
  }
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int *pos_h = (int *)malloc(POINTS * sizeof(int));
  float *weight_h = (float *)malloc(POINTS * sizeof(float));
  float *out_h = (float *)malloc(POINTS * sizeof(float));
  #pragma omp target data map(to: pos_h[0:POINTS], weight_h[0:POINTS]) map(from: out_h[0:POINTS])
  {
    for (int r = 0; r < 2; r++) {
      accumulate(pos_h, weight_h, out_h, n, 4);
    }
  }
  return 0;
}
"""


def test_array_parameter_takes_the_extent_its_caller_maps():
    (report,) = analyse(PASSED_POINTS_SRC)
    facts = report.facts
    assert facts.traffic is not None
    # `pos`, `weight` and `out` are what `main` maps as `pos_h[0:POINTS]`, ...: 16 KiB each,
    # however long the (unknown) loops run
    footprints: dict[str, float] = {}
    for group in facts.traffic.groups:
        footprints[group.array] = max(footprints.get(group.array, 0.0), group.footprint_bytes)
    assert footprints == {"pos": 4096 * 4, "weight": 4096 * 4, "out": 4096 * 4}
    assert facts.dram_bytes <= max(3 * 4096 * 4, 1e5)


# a launch given from outside (a profile): LLVM's runtime caps the teams of a long loop ------------

CAPPED_SRC = """
void scale(float *a, int n) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:n])
  for (int i = 0; i < n; i++) a[i] *= 2.0f;
}
"""


def test_a_launch_at_the_runtime_s_team_limit_bounds_the_iterations_from_below_only():
    from perflsp.analysis.engine import AnalysisOptions

    # (each thread reads as taking a few: the study's measured counts put the loops at 3-5x the
    # launch's threads, 0.2-0.3x with one each)
    capped = reports(CAPPED_SRC, options=AnalysisOptions(launch_override=((3200, 1, 1), (256, 1, 1))))[0]
    assert capped.facts.work_items == 3200 * 256 * EACH_AT_THE_LIMIT
    assert any("3200 teams is the LLVM offload runtime's default team limit" in a
               for a in texts(capped.facts.assumptions))
    below = reports(CAPPED_SRC, options=AnalysisOptions(launch_override=((100, 1, 1), (256, 1, 1))))[0]
    assert below.facts.work_items == 100 * 256  # fewer teams than the limit: one iteration per thread
    assert not any("team limit" in a for a in texts(below.facts.assumptions))


# a region the build compiles only with a macro defined ---------------------------------------------

GATED_SRC = """
#ifdef OMP_TARGET
#define ISTART omp_get_team_num()
#define IINC omp_get_num_teams()
#else
#define ISTART 0
#define IINC 1
#endif

void scale(int n, const float *__restrict x, float *__restrict y) {
#ifdef OMP_TARGET
  #pragma omp target teams num_teams(n) thread_limit(128)
  {
  #pragma omp parallel
  {
#endif
  for (int i = ISTART; i < n; i += IINC) {
#ifdef OMP_TARGET
    const int jstart = omp_get_thread_num();
    const int jinc = omp_get_num_threads();
#else
    const int jstart = 0;
    const int jinc = 1;
#endif
    for (int j = jstart; j < n; j += jinc)
      y[i * n + j] = 2.0f * x[i * n + j];
  }
#ifdef OMP_TARGET
  }
  }
#endif
}
"""


def test_without_build_flags_a_region_is_read_as_its_offload_build_reads_it():
    from perflsp.kernels.includes import offload_gates as gates_of, scan_directives

    def offload_gates(text: bytes) -> dict[str, str]:
        return gates_of(scan_directives(text))

    # `#ifdef OMP_TARGET` around the directive (and the braces it opens): the offload build
    # defines it; `#ifndef`, `#else` arms and macros the file defines itself are no such gate
    assert offload_gates(GATED_SRC.encode()) == {"OMP_TARGET": "1"}
    assert offload_gates(b"#ifndef CPU\n#pragma omp target\n#endif\n") == {}
    # a macro choosing between two target directives gates nothing
    assert offload_gates(b"#ifdef SIMD\n#pragma omp target simd\n#else\n#pragma omp target\n#endif\n") == {}
    assert offload_gates(b"#define GPU 1\n#if GPU\n#pragma omp target\n#endif\n") == {}
    assert offload_gates(b"#if defined(USE_GPU) \n#pragma omp target teams\n#else\n#pragma omp parallel\n#endif\n") \
        == {"USE_GPU": "1"}
    (region,) = analyse(GATED_SRC)
    # without the gate, the `#else` arms were read and the braces the `#ifdef` opens did not
    # close: "the offloaded statement could not be parsed"
    assert region.facts.uncertain is None
    assert region.estimates[0].verdict == "bandwidth"
    assert region.facts.per_item.fp32 > 0


LAUNCH_SIZED_SRC = """
#include <stdlib.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *pos = (float *)malloc(n * sizeof(float)), *force = (float *)malloc(n * sizeof(float));
  #pragma omp target teams distribute parallel for map(to: pos[0:n]) map(from: force[0:n])
  for (int i = 0; i < n; i++) {
    float f = 0.0f;
    for (int j = 0; j < n; j++) f += pos[j] - pos[i];
    force[i] = f;
  }
  return 0;
}
"""


def test_the_size_of_a_parallel_loop_is_read_from_a_given_launch_in_its_body():
    from perflsp.analysis.engine import AnalysisOptions

    # the runtime sized 40 teams of 256 threads from `n`: the inner loop over `n` runs as far
    sized = reports(LAUNCH_SIZED_SRC, options=AnalysisOptions(launch_override=((40, 1, 1), (256, 1, 1))))[0]
    inner = next(loop for loop in sized.facts.loops if loop.variable == "j")
    assert inner.trip_count == 40 * 256
    assert any("`n` bounds the parallel loop" in a for a in texts(sized.facts.assumptions))
    # at the runtime's team limit the launch bounds `n` from below only: read as a few iterations
    # per thread (not as an unknown size, whose loops would run an arbitrary 32 passes)
    capped = reports(LAUNCH_SIZED_SRC, options=AnalysisOptions(launch_override=((3200, 1, 1), (256, 1, 1))))[0]
    least = 3200 * 256
    assert next(loop for loop in capped.facts.loops if loop.variable == "j").trip_count == least * EACH_AT_THE_LIMIT
    assert any(f"`n` bounds the parallel loop: at least the iterations the launch has threads for; read as "
               f"{least * EACH_AT_THE_LIMIT:,.0f} ({EACH_AT_THE_LIMIT:g} per thread)" in a
               for a in texts(capped.facts.assumptions))
    assert capped.facts.work_items == least * EACH_AT_THE_LIMIT


STREAMS_SRC = """
void split(const float *in, float *out, int n) {
  #pragma omp target teams distribute parallel for thread_limit(256) map(to: in[0:3*n]) map(from: out[0:n])
  for (int i = 0; i < n; i++)
    out[i] = in[i] + in[i + n] + in[i + 2 * n];
}
"""


def test_rows_a_parallel_loop_s_size_apart_are_apart_at_a_launch_at_the_team_limit():
    from perflsp.analysis.engine import AnalysisOptions

    # `n` unknown but at least the launch's 819,200 threads: `in[i]`, `in[i + n]`, `in[i + 2n]`
    # are three streams, not one (read as one row, `n` unknown, DRAM came out a third)
    capped = reports(STREAMS_SRC, options=AnalysisOptions(launch_override=((3200, 1, 1), (256, 1, 1))))[0]
    assert capped.facts.traffic is not None
    n = 3200 * 256 * EACH_AT_THE_LIMIT
    footprints = {group.array: group.footprint_bytes for group in capped.facts.traffic.groups}
    assert footprints == {"in": 3 * 4 * n, "out": 4 * n}
    assert capped.facts.dram_bytes >= 3 * 4 * n


AUTO_SRC = """
#include <cstdlib>
int main() {
  const int n = 1 << 20;
  auto x = static_cast<float *>(std::malloc(sizeof(float) * n));
  auto y = (float *)malloc(sizeof(float) * n);
  auto z = new double[n];
  #pragma omp target teams distribute parallel for map(to: x[:n], z[:n]) map(tofrom: y[:n])
  for (int i = 0; i < n; i++) y[i] += 2.0f * x[i] + (float)z[i];
}
"""


def test_auto_pointers_take_the_type_their_initialiser_casts_to():
    (report,) = reports(AUTO_SRC)
    # `x`, `y` floats and `z` doubles: 4 + 4 + 8 bytes loaded, 4 stored, per iteration (read as
    # unknown, `auto` arrays were no global memory at all)
    assert report.facts.per_item.global_load_bytes == 16
    assert report.facts.per_item.global_store_bytes == 4


# a worksharing directive inside a `target` block -------------------------------------------------

NESTED_COLLAPSE_SRC = """
#define W 512
#define H 256
void shade(float *img, const float *light) {
  #pragma omp target map(from: img[0:W*H]) map(to: light[0:W*H])
  {
    #pragma omp teams distribute parallel for simd collapse(2) thread_limit(256)
    for (int x = 0; x < W; x++)
      for (int y = 0; y < H; y++)
        img[y * W + x] = 0.5f * light[y * W + x];
  }
}
void shade_rows(float *img, const float *light) {
  #pragma omp target map(from: img[0:W*H]) map(to: light[0:W*H])
  {
    #pragma omp teams distribute parallel for
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        img[y * W + x] = 0.5f * light[y * W + x];
  }
}
"""


def test_a_nested_worksharing_directive_collapses_the_loops_it_names():
    collapsed, rows = analyse(NESTED_COLLAPSE_SRC)
    # `collapse(2)` on the directive inside the `target` block: every pixel is a work item
    assert collapsed.facts.work_items == 512 * 256
    assert collapsed.facts.per_item.fp32 == 1
    # without it, the rows are the work items and each walks its row
    assert rows.facts.work_items == 256
    assert rows.facts.per_item.fp32 == 512


FRAGMENT = """\
#pragma omp target teams distribute parallel for thread_limit(256)
for (int i = 0; i < count; i++)
  histogram[i % bins] += scale * values[i];
"""

FRAGMENT_INCLUDER = """\
void tally(const float *values, float *histogram, int count, int bins, float scale) {
  #pragma omp target data map(to: values[0:count]) map(tofrom: histogram[0:bins])
  {
    #include "tally_kernel.h"
  }
}
"""

FRAGMENT_MAIN = """\
void tally(const float *values, float *histogram, int count, int bins, float scale);
int main() {
  static float values[1 << 20], histogram[64];
  tally(values, histogram, 1 << 20, 64, 0.5f);
}
"""


def test_a_region_included_inside_a_function_takes_that_function_s_values(tmp_path):
    # the region's file is a fragment `{ #include "tally_kernel.h" }` inside `tally`, whose
    # caller (another source) passes `count`: 2^20 iterations, not an assumed size
    (tmp_path / "tally.cpp").write_text(FRAGMENT_INCLUDER)
    (tmp_path / "main.cpp").write_text(FRAGMENT_MAIN)
    fragment = tmp_path / "tally_kernel.h"
    fragment.write_text(FRAGMENT)
    (report,) = analyse(FRAGMENT, fragment)
    assert report.facts.work_items == 1 << 20
    assert not any("unknown" in a or "production" in a for a in texts(report.facts.assumptions)), \
        texts(report.facts.assumptions)


RUNTIME_LAUNCH_SRC = """
void run(const float *x, float *y) {
  const int n = 1 << 20;
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = x[i];
  #pragma omp target teams distribute parallel for num_threads(64) map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = x[i];
  #pragma omp target parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = x[i];
  #pragma omp target teams distribute parallel for num_teams(8) thread_limit(32) map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) y[i] = x[i];
}
"""


def test_a_launch_the_source_leaves_open_is_the_one_llvms_runtime_makes():
    # (what a thread does once is spread over the iterations it takes: see tests/test_compiled.py)
    default, threads, one_team, stated = analyse(RUNTIME_LAUNCH_SRC)
    assert "3200 teams × 128 threads as LLVM's offload runtime launches them, 2.56 iterations per thread" \
        in default.facts.work_items_note
    assert "3200 teams × 64 threads as LLVM's offload runtime launches them, 5.12 iterations per thread" \
        in threads.facts.work_items_note
    assert "1 team × 128 threads as LLVM's offload runtime launches them, 8.19e+03 iterations per thread" \
        in one_team.facts.work_items_note
    assert "offload runtime" not in stated.facts.work_items_note  # the source says it all


# a flattened iteration index split with `/` and `%` -------------------------------------------

CHANNEL_PLANES_SRC = """
void first_quarter(const float *in, float *out) {
  const int n = 64 * 65536;
  #pragma omp target teams distribute parallel for map(to: in[0:64 * 262144]) map(from: out[0:n])
  for (int i = 0; i < n; i++) {
    int c = i / 65536;
    int p = i % 65536;
    out[i] = in[c * 262144 + p];
  }
}
"""


def test_a_flattened_index_split_by_division_keeps_neighbouring_iterations_on_neighbouring_elements():
    # each of 64 channels reads the first quarter of its plane, one float per iteration: a dense
    # 4 bytes an iteration read, 4 written; read as `i * (262144 / 65536)`, iterations 4 elements
    # apart, every plane's whole length moved (16 bytes an iteration read, 4x)
    (report,) = analyse(CHANNEL_PLANES_SRC)
    facts = report.facts
    assert facts.work_items == 64 * 65536
    read = [g for g in facts.traffic.groups if g.array == "in"]
    assert sum(g.footprint_bytes for g in read) == pytest.approx(4 * 64 * 65536)
    assert facts.dram_bytes <= 8 * 64 * 65536
