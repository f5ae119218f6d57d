"""A unit whose own headers use a library this machine lacks in host code: compiled with copies of
those headers, the rejected host code set aside (header_copies.py), line info on the originals."""

from __future__ import annotations

from perflsp.compiled.build import CompileRequest, compile_unit
from perflsp.compiled.header_copies import header_error_lines, write_tree
from tests.test_compiled import TOOLCHAIN, needs_cuda, needs_omp


def test_errors_are_read_per_header_in_either_compiler_s_words(tmp_path):
    header, other = tmp_path / "comm.h", tmp_path / "util.h"
    errors = [f'{header}(12): error: identifier "MPI_Comm" is undefined',
              f"{header}:30:5: error: unknown type name 'MPI_Request'",
              f"{tmp_path / 'unit.cu'}(3): error: something else",
              f"{other}(7): warning: not an error"]
    assert header_error_lines(errors, [header, other]) == {header: frozenset({12, 30})}
    # a folder with a space, a path through `..`, and the one-line message of the failure
    (tmp_path / "my project" / "src").mkdir(parents=True)
    spaced = (tmp_path / "my project" / "comm.h").resolve()
    through = tmp_path / "my project" / "src" / ".." / "comm.h"
    message = f"nvcc failed: {through}(4): error: identifier \"MPI_Comm\" is undefined; {spaced}(9): error: x"
    assert header_error_lines([message], [spaced]) == {spaced: frozenset({4, 9})}


def test_the_tree_keeps_each_header_s_place_and_names_its_original(tmp_path):
    project = tmp_path / "project"
    (project / "include").mkdir(parents=True)
    (project / "src").mkdir()
    header = project / "include" / "comm.h"
    header.write_text("#pragma once\nvoid f(MPI_Comm c);\n")
    helper = project / "src" / "helper.h"
    helper.write_text("#define TWO 2\n")
    source = project / "src" / "unit.cu"
    source.write_text('#include "../include/comm.h"\n#include "helper.h"\n')
    placed = write_tree(source, b"// the copy\n", [header.resolve(), helper.resolve()],
                        {header.resolve(): b"#pragma once\n\n"}, [str(project / "include")], tmp_path / "tree")
    assert placed is not None
    unit, dirs = placed
    tree = tmp_path / "tree"
    assert unit == tree / "src" / "unit.cu" and unit.read_bytes() == b"// the copy\n"
    # every line of a copy is the original's line: the `#line` names the original file
    assert (tree / "include" / "comm.h").read_bytes() == b'#line 1 "' + str(header.resolve()).encode() + b'"\n#pragma once\n\n'
    assert (tree / "src" / "helper.h").read_text().endswith("#define TWO 2\n")
    # the include folder's copy first, then the original, then the unit's own folder
    assert dirs == (str(tree / "include"), str(project / "include"), str(source.resolve().parent))


COMM_HEADER = """\
#ifndef COMM_H
#define COMM_H
#include <absent_mpi.h>
typedef struct { MPI_Comm world; int rank; } context_t;
static double wall_time() { return MPI_Wtime(); }
void report(MPI_Comm comm, int rank);
__device__ inline float twice(float x) {
  return 2.0f * x;
}
#endif
"""

COMM_UNIT = """\
#include "../include/comm.h"
__global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
int main() {
  report(0, 0);
  scale<<<4, 256>>>(nullptr, 1024);
}
"""


@needs_cuda
def test_a_header_whose_host_code_uses_a_missing_library_is_copied_with_that_code_set_aside(tmp_path):
    (tmp_path / "include").mkdir()
    header = tmp_path / "include" / "comm.h"
    header.write_text(COMM_HEADER)
    (tmp_path / "src").mkdir()
    source = tmp_path / "src" / "scale.cu"
    source.write_text(COMM_UNIT)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "device code alone" in unit.compiler
    scale = unit.functions["_Z5scalePfi"]
    # the inlined device function's multiply is placed on the original header's line 8
    assert any((str(header.resolve()), 8) in chain for chain in scale.chains)
    assert header.read_text() == COMM_HEADER  # (the original untouched)
    assert unit.dependencies == [str(header.resolve())]
    assert not any(p.name.startswith(".perflsp-") for p in tmp_path.rglob("*"))


BF16_HEADER = """\
#pragma once
#include <cublas_v2.h>
typedef __nv_bfloat16 floatX;
static cublasHandle_t handle;
static void create_handle() { cublasCreate(&handle); }
"""


@needs_cuda
def test_a_missing_cuda_library_header_brings_the_toolkit_s_number_types(tmp_path):
    # the stand-in for cuBLAS's header includes what the real one does (cuda_bf16.h ...): the
    # project's `floatX` keeps its type, only the handle and the call go
    (tmp_path / "common.h").write_text(BF16_HEADER)
    source = tmp_path / "encode.cu"
    source.write_text('#include "common.h"\n'
                      "__global__ void encode(floatX *out, const floatX *in, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) out[i] = in[i] + in[i];\n}\n"
                      "int main() { create_handle(); encode<<<4, 256>>>(nullptr, nullptr, 1024); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z6encodeP13__nv_bfloat16PKS_i" in unit.functions


COMMS_DECLARATIONS = """\
#pragma once
#include <absent_mpi.h>
void exchange(double *buffer, int n, MPI_Request *request);
"""

HALO_UNIT = """\
#include "comms.h"
void send_halo(double *b, int n, MPI_Request *r) {
#pragma omp target update from(b[0:n])
  exchange(b, n, r);
}
void scale(double *x, int n) {
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; i++) x[i] *= 2.0;
}
int main() {
  double x[64];
  scale(x, 64);
}
"""


@needs_omp
def test_an_openmp_unit_whose_header_declares_a_missing_library_s_types_is_compiled(tmp_path):
    # the header lies in a folder no flag names (found around the file) and declares a function
    # of MPI's types; the unit's host function moving data for it holds no region: it goes whole
    (tmp_path / ".git").mkdir()
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "comms.h").write_text(COMMS_DECLARATIONS)
    (tmp_path / "omp").mkdir()
    source = tmp_path / "omp" / "halo.cpp"
    source.write_text(HALO_UNIT)
    unit = compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)
    assert "set aside" in unit.compiler
    assert any("_Z5scalePdi_l7" in name for name in unit.functions)


MACRO_DIRECTIVES = """\
#include <stdio.h>
#define PRAGMA(x) _Pragma(#x)
#define OMP_TARGET(x) PRAGMA(omp target x)
#define OMP_REQUIRES(x) PRAGMA(omp requires x)

OMP_REQUIRES(unified_address)

int main(void) {
  printf("version %d\\n", BUILD_VERSION);
  double a[64];
  for (int iter = 0; iter < 4; iter++) {
    OMP_TARGET( teams distribute parallel for simd schedule(static) map(tofrom: a[0:64]) )
    for (int i = 0; i < 64; i++) {
      a[i] += 2.0 * i;
    }
  }
  return 0;
}
"""


@needs_omp
def test_a_rejected_statement_in_code_the_parser_misreads_is_set_aside(tmp_path):
    # directives spelled through macros (`OMP_TARGET(...)` then a loop, no `;`) make the parser
    # read the file as an error node: the rejected `printf` (a macro the build defines) is still
    # found and set aside
    source = tmp_path / "triad.c"
    source.write_text(MACRO_DIRECTIVES)
    unit = compile_unit(CompileRequest(str(source), "omp", "sm_86"), TOOLCHAIN)
    assert "set aside" in unit.compiler and any("_main_l12" in name for name in unit.functions)


def test_an_aligned_struct_the_parser_reads_as_a_function_keeps_its_members():
    from perflsp.compiled.host_aside import host_code_aside

    text = (b"struct __align__(8) SumMax {\n  float maxval;\n  float sum;\n};\n"
            b"__device__ SumMax larger(SumMax a, SumMax b) { return a.maxval > b.maxval ? a : b; }\n"
            b"void host_only() { printf(\"x\"); }\n")
    aside = host_code_aside(text)
    assert aside is not None and b"float maxval;" in aside and b'printf("x")' not in aside


def test_a_rejected_data_member_goes_and_its_struct_stays():
    from perflsp.compiled.host_aside import host_code_aside

    # a member of a type set aside (a host class, a missing library's handle): the struct the
    # rest of the file names stays, without it
    text = (b"typedef struct {\n  int batch;\n  TensorSpec specs[4];\n  float *weights;\n} Model;\n"
            b"void allocate(Model *m) { m->weights = 0; }\n")
    aside = host_code_aside(text, error_lines=frozenset({3}))
    assert aside is not None
    assert b"} Model;" in aside and b"int batch;" in aside and b"TensorSpec" not in aside


def test_a_host_function_whose_signature_names_a_host_class_set_aside_goes_too():
    from perflsp.compiled.host_aside import host_code_aside

    text = (b"#include <absent_timer.h>\n"
            b"class Timer {\n  absent_clock_t start;\n public:\n  void begin();\n};\n"
            b"double elapsed(const Timer &t, int reps) { return 0.0; }\n"
            b"__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    aside = host_code_aside(text, frozenset({"absent_timer.h"}), host_classes=True)
    assert aside is not None
    assert b"Timer" not in aside and b"elapsed" not in aside and b"__global__ void scale" in aside


@needs_cuda
def test_legacy_warp_intrinsics_in_a_header_are_read_as_their_sync_forms(tmp_path):
    # the unit first fails on a missing library header; the header's `__shfl_down`, which CUDA 13
    # no longer declares, fails the copy later: the header's copy calls the `_sync` form
    (tmp_path / "warp_reduce.h").write_text(
        "__device__ inline float warp_sum(float v) {\n"
        "  for (int offset = 16; offset > 0; offset /= 2)\n"
        "    v += __shfl_down(v, offset);\n"
        "  return v;\n}\n")
    source = tmp_path / "reduce.cu"
    source.write_text('#include "warp_reduce.h"\n#include "absent/library.cuh"\n'
                      "__global__ void reduce(const float *in, float *out) {\n"
                      "  float v = warp_sum(in[threadIdx.x]);\n"
                      "  if (threadIdx.x == 0) *out = v;\n}\n"
                      "int main() { absent::run(); reduce<<<1, 32>>>(nullptr, nullptr); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "legacy warp intrinsics" in unit.compiler and "_Z6reducePKfPf" in unit.functions
    assert "__shfl_down(v, offset)" in (tmp_path / "warp_reduce.h").read_text()  # (the original untouched)


@needs_cuda
def test_members_the_unit_defines_of_a_class_its_header_s_copy_sets_aside_go_too(tmp_path):
    # the header's class holds a missing library's handle: its copy sets the class aside, and
    # the unit's `Layer::Layer()`, `Layer::~Layer()`, `Layer::forward` go with it
    (tmp_path / "layer.h").write_text("#pragma once\n#include <absent_dnn.h>\n"
                                      "class Layer {\n public:\n  Layer();\n  ~Layer();\n"
                                      "  void forward(float *x, int n);\n private:\n"
                                      "  dnnHandle_t handle_;\n  float *weights_;\n};\n")
    source = tmp_path / "layer.cu"
    source.write_text('#include "layer.h"\n'
                      "__global__ void fill_ones(float *d, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) d[i] = 1.0f;\n}\n"
                      "Layer::Layer() { weights_ = nullptr; }\n"
                      "Layer::~Layer() { dnnDestroy(handle_); }\n"
                      "void Layer::forward(float *x, int n) { fill_ones<<<n / 256, 256>>>(x, n); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z9fill_onesPfi" in unit.functions


@needs_cuda
def test_a_header_s_kernel_template_launched_with_the_host_s_constants_is_instantiated(tmp_path):
    # the unit does not compile here (a missing library); its host code launches the header's
    # kernel template with a local constant: the copy keeping the host statements that compile
    # keeps that instantiation, which the device code alone loses
    (tmp_path / "kernels.cuh").write_text("template <int TILE>\n"
                                          "__global__ void tiled_copy(const float *in, float *out, int n) {\n"
                                          "  int i = blockIdx.x * TILE + threadIdx.x;\n"
                                          "  if (i < n) out[i] = in[i];\n}\n")
    source = tmp_path / "runner.cu"
    source.write_text("#include <absent_blas.h>\n#include \"kernels.cuh\"\n"
                      "void use_blas(blasHandle_t h) { blasSgemm(h); }\n"
                      "void run(const float *in, float *out, int n) {\n"
                      "  const int TILE = 128;\n"
                      "  tiled_copy<TILE><<<n / TILE, TILE>>>(in, out, n);\n}\n"
                      "int main() { run(nullptr, nullptr, 1024); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z10tiled_copyILi128EEvPKfPfi" in unit.functions and "host statements" in unit.compiler


def test_a_unit_compiled_from_an_older_copy_is_compiled_again_where_this_copy_differs(tmp_path):
    from perflsp.compiled.build import ASIDE_VERSION, _stale_copy

    header = tmp_path / "kernels.cuh"
    header.write_text("template <int T> __global__ void k(float *x) { x[threadIdx.x] = T; }\n")
    launches = tmp_path / "runner.cu"
    launches.write_text('#include "kernels.cuh"\nvoid run(float *x) { const int T = 4; k<T><<<1, 32>>>(x); }\n')
    plain = tmp_path / "plain.cu"
    plain.write_text("__global__ void p(float *x) { x[threadIdx.x] = 0.f; }\n")
    meta = {"source": str(launches), "header_paths": [str(header)]}
    assert _stale_copy({**meta, "aside": 3}) and _stale_copy({**meta, "aside": 2})
    assert not _stale_copy({**meta, "aside": ASIDE_VERSION})
    assert not _stale_copy({"source": str(plain), "header_paths": [], "aside": 3})


HIP_STYLE_STREAM = """\
#include <hip/hip_runtime.h>
#define TBSIZE 1024
template <typename T>
class Stream {
 public:
  Stream(int n) : size(n) {
    hipMalloc(&a, n * sizeof(T)); hipMalloc(&b, n * sizeof(T)); hipMalloc(&c, n * sizeof(T));
  }
  void triad();
 private:
  int size;
  T *a, *b, *c;
};
template <typename T>
__global__ void triad_kernel(T *a, const T *b, const T *c) {
  const int i = blockDim.x * blockIdx.x + threadIdx.x;
  a[i] = b[i] + (T)0.4 * c[i];
}
template <typename T>
void Stream<T>::triad() {
  triad_kernel<T><<<size / TBSIZE, TBSIZE>>>(a, b, c);
  hipDeviceSynchronize();
}
template class Stream<float>;
template class Stream<double>;
"""


@needs_cuda
def test_every_rejected_statement_on_a_line_goes_and_the_class_template_s_launches_stay(tmp_path):
    # HIP code through nvcc without HIP's headers: the constructor's three calls on one line are
    # set aside in one round, and the explicit instantiations keep both kernels
    source = tmp_path / "stream.cpp"
    source.write_text(HIP_STYLE_STREAM)
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "host statements" in unit.compiler
    assert {"_Z12triad_kernelIfEvPT_PKS0_S3_", "_Z12triad_kernelIdEvPT_PKS0_S3_"} <= set(unit.functions)


HIP_KERNELS = """\
#include <hip/hip_runtime.h>
template <typename T>
__global__ void scale_kernel(T *x, T a, int n) {
  const int i = hipBlockDim_x * hipBlockIdx_x + hipThreadIdx_x;
  if (i < n) x[i] *= a;
}
__global__ void fill_kernel(float *x, int n) {
  HIP_DYNAMIC_SHARED(float, tile)
  tile[hipThreadIdx_x] = 1.0f;
  const int i = hipBlockDim_x * hipBlockIdx_x + hipThreadIdx_x;
  if (i < n) x[i] = tile[hipThreadIdx_x];
}
"""


@needs_cuda
def test_hip_code_compiles_through_nvcc_as_hip_s_nvidia_platform_does(tmp_path):
    # without HIP's headers, `hip/hip_runtime.h` is answered by a stand-in mapping HIP's names
    # onto CUDA's (HIP's NVIDIA platform): a header of HIP kernels compiles on its own, and a
    # unit launching a kernel template through `hipLaunchKernelGGL` instantiates it
    header = tmp_path / "kernels_hip.hpp"
    header.write_text(HIP_KERNELS)
    unit = compile_unit(CompileRequest(str(header), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z11fill_kernelPfi" in unit.functions
    source = tmp_path / "scale.cpp"
    source.write_text('#include "kernels_hip.hpp"\n'
                      "void run(float *x, int n) {\n"
                      "  hipLaunchKernelGGL(HIP_KERNEL_NAME(scale_kernel<float>), dim3(n / 256), dim3(256), 0, 0,"
                      " x, 2.0f, n);\n"
                      "  hipDeviceSynchronize();\n}\n"
                      "int main() { float *x; hipMalloc(&x, 1024 * sizeof(float)); run(x, 1024); hipFree(x); }\n")
    unit = compile_unit(CompileRequest(str(source), "cuda", "sm_86"), TOOLCHAIN)
    assert "_Z12scale_kernelIfEvPT_S0_i" in unit.functions
