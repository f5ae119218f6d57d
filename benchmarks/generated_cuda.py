"""Generated CUDA files for the latency and size benchmarks: many small kernels in varied forms.

A generated file is a sequence of small kernels (saxpy, 1-D and 2-D stencils, a shared-memory
reduction, n-body, a grid-stride scale, a histogram), each with its own name, constants and
parameter names, so that no two kernels share their text. Host code follows: helper functions
that allocate with `cudaMalloc` and launch some kernels (`launch_every`), and `main`, which
allocates and launches exactly one kernel (`GeneratedFile.launched`).

The generator is deterministic (a seeded RNG), so two runs measure the same file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

HEADER = "#include <cstdio>\n#include <cuda_runtime.h>\n\n#define BLOCK 256\n#define RADIUS 2\n\n"


@dataclass(frozen=True, slots=True)
class KernelShape:
    name: str
    signature: str  # parameter list of the kernel
    arguments: str  # arguments of a launch from host code, in terms of `d_x`, `d_y`, `n`
    body: str  # the lines between the braces


@dataclass
class GeneratedFile:
    text: str
    kernels: list[str] = field(default_factory=list)  # every kernel name, in file order
    launched: str = ""  # the kernel `main` launches
    launched_by_helpers: list[str] = field(default_factory=list)  # kernels host helpers launch

    def line_of(self, needle: str) -> int:
        """0-based line of the first line containing `needle`."""
        for number, line in enumerate(self.text.splitlines()):
            if needle in line:
                return number
        raise ValueError(f"{needle!r} not in the generated file")

    def body_line(self, kernel: str) -> int:
        """0-based line just after the opening brace of `kernel` (where an edit goes)."""
        return self.line_of(f"__global__ void {kernel}(") + 2

    @property
    def host_line(self) -> int:
        """0-based line inside `main`, after its declarations."""
        return self.line_of("int main(") + 3


def _saxpy(name: str, rng: random.Random) -> KernelShape:
    a, x, y = rng.choice([("a", "x", "y"), ("alpha", "src", "dst"), ("s", "in", "out")])
    body = (f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {{\n"
            f"        {y}[i] = {a} * {x}[i] + {y}[i];\n"
            f"    }}\n")
    return KernelShape(name, f"int n, float {a}, const float *{x}, float *{y}", "n, 2.0f, d_x, d_y", body)


def _stencil_1d(name: str, rng: random.Random) -> KernelShape:
    weight = rng.choice(["0.2f", "0.25f", "0.125f"])
    body = (f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < RADIUS || i >= n - RADIUS) return;\n"
            f"    float acc = 0.0f;\n"
            f"    for (int k = -RADIUS; k <= RADIUS; ++k) {{\n"
            f"        acc += {weight} * in[i + k];\n"
            f"    }}\n"
            f"    out[i] = acc;\n")
    return KernelShape(name, "const float *in, float *out, int n", "d_x, d_y, n", body)


def _stencil_2d(name: str, rng: random.Random) -> KernelShape:
    width = rng.choice([512, 1024, 2048])
    body = (f"    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
            f"    const int w = {width};\n"
            f"    if (x < 1 || y < 1 || x >= w - 1 || y >= rows - 1) return;\n"
            f"    out[y * w + x] = 0.25f * (in[y * w + x - 1] + in[y * w + x + 1]\n"
            f"                            + in[(y - 1) * w + x] + in[(y + 1) * w + x]);\n")
    return KernelShape(name, "const float *in, float *out, int rows", "d_x, d_y, n / 1024", body)


def _reduction(name: str, rng: random.Random) -> KernelShape:
    body = ("    __shared__ float cache[BLOCK];\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    cache[threadIdx.x] = i < n ? in[i] : 0.0f;\n"
            "    __syncthreads();\n"
            "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
            "        if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (threadIdx.x == 0) atomicAdd(total, cache[0]);\n")
    return KernelShape(name, "const float *in, float *total, int n", "d_x, d_y, n", body)


def _nbody(name: str, rng: random.Random) -> KernelShape:
    soft = rng.choice(["1e-9f", "1e-6f", "0.01f"])
    body = (f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i >= n) return;\n"
            f"    float4 me = pos[i];\n"
            f"    float3 f = make_float3(0.0f, 0.0f, 0.0f);\n"
            f"    for (int j = 0; j < n; ++j) {{\n"
            f"        float4 other = pos[j];\n"
            f"        float dx = other.x - me.x, dy = other.y - me.y, dz = other.z - me.z;\n"
            f"        float inv = rsqrtf(dx * dx + dy * dy + dz * dz + {soft});\n"
            f"        float s = other.w * inv * inv * inv;\n"
            f"        f.x += dx * s; f.y += dy * s; f.z += dz * s;\n"
            f"    }}\n"
            f"    acc[i] = make_float4(f.x, f.y, f.z, 0.0f);\n")
    return KernelShape(name, "const float4 *pos, float4 *acc, int n",
                       "(const float4 *)d_x, (float4 *)d_y, n / 4", body)


def _grid_stride(name: str, rng: random.Random) -> KernelShape:
    factor = rng.choice(["2.0f", "0.5f", "3.0f"])
    body = (f"    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {{\n"
            f"        data[i] = data[i] * {factor} + 1.0f;\n"
            f"    }}\n")
    return KernelShape(name, "float *data, int n", "d_y, n", body)


def _histogram(name: str, rng: random.Random) -> KernelShape:
    bins = rng.choice([64, 128, 256])
    body = (f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {{\n"
            f"        int b = (int)(values[i] * {bins}) & ({bins} - 1);\n"
            f"        atomicAdd(&counts[b], 1u);\n"
            f"    }}\n")
    return KernelShape(name, "const float *values, unsigned *counts, int n", "d_x, (unsigned *)d_y, n", body)


SHAPES: tuple[Callable[[str, random.Random], KernelShape], ...] = (
    _saxpy, _stencil_1d, _stencil_2d, _reduction, _nbody, _grid_stride, _histogram)


def _kernel_text(shape: KernelShape) -> str:
    return f"__global__ void {shape.name}({shape.signature})\n{{\n{shape.body}}}\n\n"


def _helper_text(shape: KernelShape, number: int) -> str:
    """A host function that allocates two device arrays and launches `shape`."""
    return (f"void run_{shape.name}(int n)\n{{\n"
            f"    float *d_x, *d_y;\n"
            f"    cudaMalloc(&d_x, n * sizeof(float));\n"
            f"    cudaMalloc(&d_y, n * sizeof(float));\n"
            f"    {shape.name}<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>({shape.arguments});\n"
            f"    cudaFree(d_x);\n    cudaFree(d_y);\n}}\n\n")


def _main_text(shape: KernelShape) -> str:
    return ("int main()\n{\n"
            "    const int n = 1 << 22;\n"
            "    float *d_x, *d_y;\n"
            "    cudaMalloc(&d_x, n * sizeof(float));\n"
            "    cudaMalloc(&d_y, n * sizeof(float));\n"
            f"    {shape.name}<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>({shape.arguments});\n"
            "    cudaDeviceSynchronize();\n"
            "    cudaFree(d_x);\n    cudaFree(d_y);\n"
            "    printf(\"done\\n\");\n"
            "    return 0;\n}\n")


def generate(*, lines: int | None = None, size_bytes: int | None = None, min_kernels: int = 0,
             launch_every: int = 0, seed: int = 13) -> GeneratedFile:
    """A file of at least `lines` lines / `size_bytes` bytes / `min_kernels` kernels.

    `launch_every` > 0 adds a host helper launching every n-th kernel; `main` launches one kernel
    from the middle of the file either way."""
    rng = random.Random(seed)
    shapes: list[KernelShape] = []
    parts: list[str] = [HEADER]
    line_count, byte_count = HEADER.count("\n"), len(HEADER)

    def wanted() -> bool:
        return ((lines is not None and line_count < lines) or (size_bytes is not None and byte_count < size_bytes)
                or len(shapes) < min_kernels)

    helpers: list[str] = []
    while wanted():
        make = SHAPES[len(shapes) % len(SHAPES)]
        shape = make(f"{make.__name__.strip('_')}_{len(shapes)}", rng)
        shapes.append(shape)
        text = _kernel_text(shape)
        if launch_every and len(shapes) % launch_every == 0:
            text += _helper_text(shape, len(shapes))
            helpers.append(shape.name)
        parts.append(text)
        line_count += text.count("\n")
        byte_count += len(text)
    launched = shapes[len(shapes) // 2]
    parts.append(_main_text(launched))
    return GeneratedFile("".join(parts), [s.name for s in shapes], launched.name, helpers)


def unlaunched_kernel(generated: GeneratedFile) -> str:
    """A kernel no host code launches, a quarter of the way into the file."""
    launched = {generated.launched, *generated.launched_by_helpers}
    candidates = [k for k in generated.kernels[len(generated.kernels) // 4:] if k not in launched]
    return candidates[0]
