"""Floating-point operations counted per work item on small kernels of our own whose exact count
is known by hand, through `perflsp check FILE --json` as a user runs it: with the source engine
alone (`--no-compile`), compiled by nvcc, and compiled by clang (a compile_commands.json naming
clang++, as a CMake build with clang writes it). Each kernel is one loop idiom: a grid-stride
loop over `size_t`, a `long` or `unsigned long long` counter, a step of 2, `#pragma unroll 4`, a
do-while, a loop counting down, a triangular nest, a loop nest the compiler unrolls whole, a
trip count the compiler unrolls by a divisor of, loops written on one line, OpenMP regions.

What it checks is how the compiled code's loops are read (which source loop each is, how far it
is unrolled, which copies are the remainder's): the ratio of the count to the exact one is 1.00
when every source iteration is counted once.

    python benchmarks/loop_idioms.py [--gpu ID] [--json] [--only NAME]

Needs nvcc (and clang with a CUDA install, and clang with the OpenMP offload runtime, for those
columns; a missing compiler's column says so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perflsp.compiled.toolchain import find_toolchain


@dataclass(frozen=True)
class Idiom:
    name: str
    source: str
    kernel: str
    fp_per_item: float  # FP32 + FP64 operations (FMA = 2) one work item does, by hand
    openmp: bool = False


IDIOMS = [
    Idiom("grid-stride size_t", """
__global__ void k(const float *x, float *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    y[i] = 2.0f * x[i] + y[i];
}
int main() { float *a, *b; k<<<256, 256>>>(a, b, 1 << 24); }
""", "k", 2 * (1 << 24) / 65536),
    Idiom("long counter", """
__global__ void k(const double *m, const double *x, double *y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { double t = 0; for (long j = 0; j < n; ++j) t += m[i * n + j] * x[j]; y[i] = t; }
}
int main() { double *a, *b, *c; k<<<8, 256>>>(a, b, c, 2048); }
""", "k", 2 * 2048),
    Idiom("step of 2", """
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < n; j += 2) t += x[j] * x[j + 1];
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 4096); }
""", "k", 2 * 2048),
    Idiom("unsigned long long, no loads", """
__global__ void k(const float *x, float *y, unsigned long long n) {
  unsigned long long i = blockIdx.x * 256ull + threadIdx.x;
  float t = x[i];
  for (unsigned long long j = 0; j < n; ++j) t = t * 1.0001f + 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 1000); }
""", "k", 2 * 1000),
    Idiom("#pragma unroll 4", """
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  #pragma unroll 4
  for (int j = 0; j < n; ++j) t += x[i + j * 16384];
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 1000); }
""", "k", 1000),
    Idiom("do-while", """
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = x[i]; int j = 0;
  do { t = t * t + 0.25f; ++j; } while (j < n);
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 500); }
""", "k", 2 * 500),
    Idiom("counting down", """
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = n - 1; j >= 0; --j) t += x[j] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 777); }
""", "k", 2 * 777),
    Idiom("triangular nest", """
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < a; ++b) t += x[a * n + b] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b, 100); }
""", "k", 2 * 4950),
    Idiom("nest unrolled whole", """
__global__ void k(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int a = 0; a < 40; ++a)
    for (int b = 0; b < 5; ++b) t += x[i + a * 7 + b] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b); }
""", "k", 2 * 200),
    Idiom("template trip count", """
template <int N>
__global__ void k(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (int j = 0; j < N; ++j) t += x[i + j * 16384] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<300><<<64, 256>>>(a, b); }
""", "k", 2 * 300),
    Idiom("short counter", """
__global__ void k(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float t = 0.f;
  for (short j = 0; j < 1000; ++j) t += x[i + j * 16384] * 0.5f;
  y[i] = t;
}
int main() { float *a, *b; k<<<64, 256>>>(a, b); }
""", "k", 2 * 1000),
    Idiom("tiled matrix multiply", """
#define TILE 16
__global__ void k(const float *A, const float *B, float *C, int n) {
  __shared__ float As[TILE][TILE], Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float s = 0.f;
  for (int t = 0; t < n / TILE; ++t) {
    As[ty][tx] = A[row * n + t * TILE + tx];
    Bs[ty][tx] = B[(t * TILE + ty) * n + col];
    __syncthreads();
    for (int e = 0; e < TILE; ++e) s += As[ty][e] * Bs[e][tx];
    __syncthreads();
  }
  C[row * n + col] = s;
}
int main() { float *a, *b, *c; dim3 blk(16, 16), grd(64, 64); k<<<grd, blk>>>(a, b, c, 1024); }
""", "k", 2 * 1024),
    Idiom("tree reduction, one-line guard", """
__global__ void k(const float *d, float *out) {
  __shared__ float s[256];
  unsigned int t = threadIdx.x;
  s[t] = d[blockIdx.x * 256 + t] * 2.0f;
  __syncthreads();
  for (unsigned int h = 128; h > 0; h /= 2) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
int main() { float *d, *o; k<<<4096, 256>>>(d, o); }
""", "k", 1 + 255 / 256),
    Idiom("OpenMP inner loop on one line", """
void f(const float *x, float *y, int n, int m) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 0; i < n; i++) { float t = 0.f; for (int j = 0; j < m; j++) t += x[i * m + j] * 0.5f; y[i] = t; }
}
int main() { float *x, *y; f(x, y, 1 << 16, 64); }
""", "omp", 128.0, openmp=True),
    Idiom("OpenMP collapse(2)", """
void f(const double *x, double *y, int n) {
  #pragma omp target teams distribute parallel for collapse(2)
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) y[i * n + j] = x[i * n + j] * 3.0 + 1.0;
}
int main() { double *x, *y; f(x, y, 2048); }
""", "omp", 2.0, openmp=True),
    Idiom("OpenMP reduction", """
float f(const float *x, int n) {
  float s = 0.f;
  #pragma omp target teams distribute parallel for reduction(+: s) map(to: x[0:n])
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
int main() { float *x; f(x, 1 << 24); }
""", "omp", 2.0, openmp=True),
]

BUILDS = ("source", "nvcc", "clang")


def count(idiom: Idiom, build: str, folder: Path, gpu: str) -> float | str:
    """FP operations per work item `perflsp check` reports for the idiom's kernel, or why none."""
    source = folder / ("k.cpp" if idiom.openmp else "k.cu")
    source.write_text(idiom.source)
    command = [sys.executable, "-m", "perflsp", "check", str(source), "--gpu", gpu, "--json", "--no-progress",
               "--fail-on", "none"]
    if build == "source":
        command.append("--no-compile")
    elif build == "clang" and not idiom.openmp:
        database = folder / "compile_commands.json"
        database.write_text(json.dumps([{"directory": str(folder), "file": str(source),
                                         "command": f"clang++ -O3 --cuda-gpu-arch=sm_86 -x cuda -c {source}"}]))
        command += ["--compile-commands", str(database)]
    env = dict(os.environ, XDG_CACHE_HOME=str(folder / "cache"))
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder, env=env, timeout=300)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"check failed: {done.stderr.strip()[-120:]}"
    for file in report["files"]:
        for kernel in file["kernels"]:
            if kernel["name"] == idiom.kernel or (idiom.openmp and kernel["name"].endswith(("@l3", "@l4"))):
                compiled = any("compiled code" in e for e in kernel["facts"].get("evidence", []))
                if build != "source" and not compiled:
                    return "not compiled"
                per_item = kernel["facts"]["per_item"]
                return float(per_item.get("fp32", 0.0)) + float(per_item.get("fp64", 0.0))
    return "kernel not found"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--only", help="run the idioms whose name contains this")
    parser.add_argument("--gpu", default="rtx-3080-10gb",
                        help="the GPU whose architecture the code is compiled for (default: rtx-3080-10gb, sm_86)")
    args = parser.parse_args(argv)
    toolchain = find_toolchain()
    missing = {"nvcc": toolchain.missing("cuda"),
               "clang": None if toolchain.clang_cuda_ready else "no clang with a CUDA install"}
    results: dict[str, dict[str, float | str]] = {}
    for idiom in IDIOMS:
        if args.only and args.only not in idiom.name:
            continue
        row: dict[str, float | str] = {}
        for build in BUILDS:
            if idiom.openmp and build == "nvcc":
                row[build] = "-"
                continue
            if build in missing and missing[build] and not (idiom.openmp and build == "clang"):
                row[build] = f"no compiler ({missing[build]})"
                continue
            with tempfile.TemporaryDirectory() as folder:
                found = count(idiom, build, Path(folder), args.gpu)
            row[build] = round(found / idiom.fp_per_item, 3) if isinstance(found, float) else found
        results[idiom.name] = row
    if args.json:
        print(json.dumps({"ratio_to_exact": results}, indent=2))
        return 0
    print("| idiom | exact FP ops per item | source engine | nvcc | clang |")
    print("| --- | --- | --- | --- | --- |")
    exact = {i.name: i.fp_per_item for i in IDIOMS}
    for name, row in results.items():
        cells = [f"{v:.2f}" if isinstance(v, float) else str(v) for v in (row[b] for b in BUILDS)]
        print(f"| {name} | {exact[name]:g} | " + " | ".join(cells) + " |")
    print("\n(count over the exact one; 1.00: every source iteration counted once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
