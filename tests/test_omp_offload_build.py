"""OpenMP offload units compiled as clang's offload driver compiles them (`build._clang_offload`),
and the shapes of that code the counts read: ptxas's helpers as functions of their own
(relocatable code), a counter stepped through a second register, a kernel compiled for two
execution modes, a `while` loop's counter stepped in its body. Each program is our own; each
count was read by hand from the SASS `nvdisasm -c -gi` prints for it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from perflsp.analysis.notes import texts
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.compiled.build import CompileCache, CompileRequest, compile_unit, read_unit
from perflsp.compiled.service import Compiler
from perflsp.compiled.toolchain import omp_device_library
from perflsp.hardware import load_database
from perflsp.kernels.includes import IncludeResolver
from tests.test_compiled import TOOLCHAIN, analyse, needs_omp

MAT_VEC = """\
#include <cstddef>
void mv(size_t n, const float *m, const float *x, float *y) {
  #pragma omp target teams distribute parallel for map(to: m[0:n*n], x[0:n]) map(from: y[0:n])
  for (size_t i = 0; i < n; i++) {
    float t = 0;
    for (size_t j = 0; j < n; j++)
      t += m[i * n + j] * x[j];
    y[i] = t;
  }
}
int main() { static float m[4096 * 4096], x[4096], y[4096]; mv(4096, m, x, y); }
"""


def _facts(tmp_path: Path, name: str, text: str, region: str | None = None):
    source = tmp_path / name
    source.write_text(textwrap.dedent(text))
    reports = analyse(source, Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")))
    report = reports[region] if region else next(iter(reports.values()))
    assert "operations counted in the compiled code" in texts(report.facts.evidence)[0]
    return report.facts


def _embedded_image(source: Path, work: Path) -> str:
    """The SASS of the device image a `clang -fopenmp --offload-arch=sm_86 -O3 -c` build embeds in
    its object (the `.llvm.offloading` section, unpacked by clang-offload-packager)."""
    assert TOOLCHAIN.clang and TOOLCHAIN.omp_device_dir and TOOLCHAIN.nvdisasm and TOOLCHAIN.ptxas
    llvm_bin = Path(os.path.realpath(TOOLCHAIN.clang)).parent
    objcopy, packager = llvm_bin / "llvm-objcopy", llvm_bin / "clang-offload-packager"
    if not (objcopy.is_file() and packager.is_file()):
        pytest.skip("no llvm-objcopy and clang-offload-packager beside clang")
    runtime = omp_device_library(TOOLCHAIN.omp_device_dir, "sm_86")
    cuda = [f"--cuda-path={TOOLCHAIN.libdevice_root}"] if TOOLCHAIN.libdevice_root else ["-nocudalib"]
    subprocess.run([TOOLCHAIN.clang, "-O3", "-fopenmp", "-fopenmp-targets=nvptx64-nvidia-cuda", "--offload-arch=sm_86",
                    "-gline-tables-only", "-w", f"--libomptarget-nvptx-bc-path={runtime}",
                    f"--ptxas-path={TOOLCHAIN.ptxas}", *cuda, "-c", str(source), "-o", str(work / "build.o")],
                   check=True, capture_output=True)
    subprocess.run([str(objcopy), f"--dump-section=.llvm.offloading={work / 'offload.bin'}", str(work / "build.o")],
                   check=True, capture_output=True)
    subprocess.run([str(packager), str(work / "offload.bin"),
                    f"--image=file={work / 'device.o'},triple=nvptx64-nvidia-cuda,arch=sm_86"],
                   check=True, capture_output=True)
    return subprocess.run([TOOLCHAIN.nvdisasm, "-c", "-gi", str(work / "device.o")],
                          check=True, capture_output=True, text=True).stdout


@needs_omp
def test_an_openmp_unit_is_the_device_image_clangs_offload_build_embeds(tmp_path):
    source = tmp_path / "mv.cpp"
    source.write_text(MAT_VEC)
    ours = compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)
    built = read_unit(_embedded_image(source, tmp_path), str(source), str(source), "sm_86", "clang", [], 0.0)
    kernels = [name for name in built.functions if name.startswith("__omp_offloading_")]
    assert kernels and set(kernels) <= set(ours.functions)
    for name in kernels:
        assert [b.lines for b in ours.functions[name].blocks] == [b.lines for b in built.functions[name].blocks]


@needs_omp
def test_an_inner_loop_counts_the_unrolling_the_build_compiles(tmp_path):
    facts = _facts(tmp_path, "mv.cpp", MAT_VEC)
    # the main loop does 8 iterations a trip: 8 FFMAs, and 10 integer instructions (two 64-bit
    # pointers and the 64-bit trip counter stepped, 4 IADD3 + 4 IADD3.X, two ISETP to test it);
    # optimised again after linking the runtime, the loop read 1,088 integer instructions
    assert facts.per_item.fp32 == 2 * 4096
    assert 4096 * 10 / 8 <= facts.per_item.int32 <= 4096 * 10 / 8 * 1.05


@needs_omp
def test_the_division_helpers_of_relocatable_code_count_as_their_inline_forms_do(tmp_path):
    facts = _facts(tmp_path, "ratio.cpp", """\
        void ratio(int n, const float *x, float *y, const double *a, const double *b, double *c) {
          #pragma omp target teams distribute parallel for map(to: x[0:n], a[0:n], b[0:n]) map(from: y[0:n], c[0:n])
          for (int i = 0; i < n; i++) {
            y[i] = x[i] / (1.0f + x[i]);
            c[i] = a[i] / b[i];
          }
        }
        int main() { static float x[1 << 20], y[1 << 20]; static double a[1 << 20], b[1 << 20], c[1 << 20];
                     ratio(1 << 20, x, y, a, b, c); }
        """)
    # float: FADD and the fast path's 5 FFMAs; double: the fast path's 7 DFMAs and a DMUL, and
    # the FFMA that tests its result. The slow path (`__cuda_sm3x_div_rn_noftz_f32_slowpath`)
    # and the full division (`__cuda_sm20_div_rn_f64_full`, on the arm the test branches around)
    # are calls of functions of their own: not counted (they were: 39 FP32, 36 FP64)
    assert facts.per_item.fp32 == 1 + 5 * 2 + 2
    assert facts.per_item.fp64 == 7 * 2 + 1


@needs_omp
def test_a_counter_stepped_through_a_second_register_is_the_loops_counter(tmp_path):
    facts = _facts(tmp_path, "spread.cpp", """\
        #include <math.h>
        double spread(int n, const double *x, int m, const double *at, double *w) {
          double top = 0.0;
          #pragma omp target teams distribute parallel for thread_limit(256) reduction(max:top) \\
              map(to: x[0:n], at[0:m]) map(alloc: w[0:n * m]) map(tofrom: top)
          for (int j = 0; j < m; j++) {
            for (int i = 0; i < n; i++) w[i * m + j] = 1.0;
            for (int i1 = 0; i1 < n; i1++)
              for (int i2 = 0; i2 < n; i2++)
                if (i1 != i2)
                  w[i1 * m + j] = w[i1 * m + j] * (at[j] - x[i2]) / (x[i1] - x[i2]);
            double t = 0.0;
            for (int i = 0; i < n; i++) t += fabs(w[i * m + j]);
            top = fmax(top, t);
          }
          return top;
        }
        int main() { static double x[64], at[10000], w[64 * 10000]; return spread(64, x, 10000, at, w) > 0; }
        """)
    # the `i2` loop, unrolled by 4, steps its counter as `IADD3 R48, R50, 0x4, RZ` then `MOV R50,
    # R48` (R48 is also tested): read as 4 iterations a trip, not 1 (4x the work). Each of the
    # 64 x 63 passes: 2 DADD, 2 DMUL, 7 DFMA (the division's fast path); the last loop, 64 DADD
    assert facts.per_item.fp64 == 64 * 63 * (2 + 2 + 7 * 2) + 64


TWO_MODES = """\
#include <math.h>
#include <omp.h>
#define B 256
void block_max(const double *u, double *out, int n) {
  #pragma omp target teams num_teams(n / B) thread_limit(B) map(to: u[0:n]) map(from: out[0:n / B])
  {
    double cache[B];
    #pragma omp parallel
    {
      int lid = omp_get_thread_num();
      int tid = omp_get_team_num();
      cache[lid] = fabs(u[tid * B + lid]) * 0.5 + 1.0;
      #pragma omp barrier
      int i = B >> 1;
      while (i != 0) {
        if (lid < i) cache[lid] = fmax(cache[lid], cache[lid + i]);
        #pragma omp barrier
        i >>= 1;
      }
      if (lid == 0) out[tid] = cache[0];
    }
  }
}
void pair_edges(double *a, int m) {
  #pragma omp target teams distribute parallel for map(tofrom: a[0:m + 2])
  for (int k = 1; k < m / 2 + 1; k++) {
    k = 2 * k - 1;
    a[k] = a[k + 1];
  }
}
int main() { static double u[1 << 20], out[1 << 12]; block_max(u, out, 1 << 20); pair_edges(out, 1 << 10); }
"""


@needs_omp
@pytest.mark.parametrize("gpu, arch", [("rtx3080", "sm_86"), ("H100", "sm_90")])
def test_a_kernel_compiled_for_two_execution_modes_counts_the_one_it_runs_in(tmp_path, gpu, arch):
    # the unit's other kernel writes its loop's counter and stays generic: the runtime code the
    # two share tests the mode (`LDS R0, [`(IsSPMDMode)]`; on sm_90 through a register holding
    # its address in the cluster's shared memory, `UMOV UR4, `(IsSPMDMode)` then `ULEA`), and the
    # parallel region's body is compiled once for each mode. The entry stores 1 (SPMD; on sm_90
    # `HFMA2.MMA R0, -RZ, RZ, 0, 5.96e-08`, the halves 0 and 1): one DFMA a thread, not two
    source = tmp_path / "blocks.cpp"
    source.write_text(TWO_MODES)
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    compiled = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache")).compiled(source, [arch])
    options = dataclasses.replace(prepared.options, compiled=compiled)
    reports = FileAnalysis.of(prepared, options).reports([load_database().get(gpu)])
    facts = next(r for r in reports if r.name == "block_max@l5").facts
    assert "operations counted in the compiled code" in texts(facts.evidence)[0]
    assert facts.per_item.fp64 == 2.0
    assert facts.per_item.int32 < 100  # (186 on sm_86 with both copies and the generic state machine)


@needs_omp
def test_a_while_loops_counter_stepped_in_its_body_gives_its_unrolling(tmp_path):
    facts = _facts(tmp_path, "forces.cpp", """\
        void forces(int n, int k, const int *nbr, const double *px, double *f) {
          #pragma omp target teams distribute parallel for map(to: nbr[0:n * k], px[0:n]) map(from: f[0:n])
          for (int i = 0; i < n; i++) {
            double xi = px[i], s = 0.0;
            int j = 0;
            while (j < k) {
              double d = xi - px[nbr[j * n + i]];
              s += d * d * 0.5;
              j++;
            }
            f[i] = s;
          }
        }
        int main() { static int nbr[1 << 22]; static double px[1 << 16], f[1 << 16]; forces(1 << 16, 64, nbr, px, f); }
        """)
    # `j++` steps the counters of the unrolled loops on its own line (`IADD3 R59, R59, 0x10, RZ`,
    # 0x8 and 0x4 in the copies), the closing branches sit on the `while` line: 64 iterations of
    # DADD, DMUL and DFMA (read as one iteration a trip: 16 x 64 x 4)
    assert facts.per_item.fp64 == 64 * (1 + 1 + 2)


ROW_SUMS = """\
void row_sums(const float *a, float *s, int rows, int cols) {
  #pragma omp target teams distribute thread_limit(THREADS) map(to: a[0:rows * cols]) map(from: s[0:rows])
  for (int r = 0; r < rows; r++) {
    float t = 0.f;
    #pragma omp parallel for reduction(+: t)
    for (int c = 0; c < cols; c++) t += a[r * cols + c] * a[r * cols + c];
    s[r] = t;
  }
}
int main() { static float a[1 << 22], s[1 << 14]; row_sums(a, s, 1 << 14, 256); }
"""


@needs_omp
def test_a_team_shares_a_nested_parallel_loop_and_each_thread_pays_its_region(tmp_path):
    # `teams distribute` hands each team rows; the team's threads share each row's `parallel for`
    # (256 columns, one FFMA each) and each pays the parallel region's cost every row (the
    # runtime's dispatch, the reduction's shuffles and adds): a row's FP32 work is its 256 FFMAs
    # plus as many reduction adds per thread whatever the team's size, and its integer
    # instructions grow with the team's threads (read as one thread's region, both stayed flat)
    counts = {}
    for threads in (32, 128):
        (tmp_path / str(threads)).mkdir()
        facts = _facts(tmp_path / str(threads), "rows.cpp", ROW_SUMS.replace("THREADS", str(threads)))
        counts[threads] = facts.per_item
    body = 2 * 256
    assert counts[32].fp32 > body
    assert counts[128].fp32 - body == pytest.approx(4 * (counts[32].fp32 - body))
    assert counts[128].int32 > 2.5 * counts[32].int32


@needs_omp
def test_a_launch_of_a_distribute_loop_stands_for_an_iteration_a_team(tmp_path):
    # no `parallel for` shares the loop: the runtime sizes the teams from its trip count, so a
    # launch of 1000 teams of 128 threads says 1000 iterations (not 128,000)
    source = tmp_path / "moments.cpp"
    source.write_text(textwrap.dedent("""\
        void moments(int nm, int g, const double *x, double *out) {
          #pragma omp target teams distribute map(to: x[0:nm * g]) map(from: out[0:nm])
          for (int m = 0; m < nm; ++m) {
            double s = 0.0;
            #pragma omp parallel for reduction(+: s)
            for (int k = 0; k < g; ++k) s += x[m * g + k];
            out[m] = s;
          }
        }
        #include <stdlib.h>
        int main(int argc, char **argv) { double *x, *out; moments(atoi(argv[1]), atoi(argv[2]), x, out); }
        """))
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    options = dataclasses.replace(prepared.options, launch_override=((1000, 1, 1), (128, 1, 1)))
    (report,) = FileAnalysis.of(prepared, options).reports([load_database().get("rtx3080")])
    assert report.facts.work_items == 1000
