// INTENTIONAL PERFLSP LINT TARGETS: launch configuration and memory access slips.
// Do not "fix" this file: tests and the README demo expect every line marked `LINT:` to be
// reported (examples/EXPECTED.md lists the line and rule of each). The kernels are correct;
// only their launch shapes and access pattern are poor.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../cuda/check.cuh"

#define ODD_BLOCK 100  // not a multiple of the 32-thread warp: every 4th warp runs 28 idle lanes
#define TINY_BLOCK 32  // one warp per block: the per-SM block limit caps occupancy

__global__ void __launch_bounds__(ODD_BLOCK) scale(int n, float s, float *__restrict__ x)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}

__global__ void __launch_bounds__(TINY_BLOCK) add_one(int n, float *__restrict__ x)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

// One thread per row of a row-major matrix: neighbouring threads read addresses `stride`
// floats apart, so every warp-wide load touches 32 different cache lines.
__global__ void __launch_bounds__(256) row_sums(int rows, int stride, const float *__restrict__ a, float *__restrict__ sums)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    const float *block_base = a + (size_t)blockIdx.x * blockDim.x * stride;
    float s = 0.0f;
    for (int c = 0; c < stride; ++c)
        s += block_base[threadIdx.x * stride + c];  // LINT: uncoalesced (thread-strided) access
    sums[row] = s;
}

// Always launched with 256 threads, yet no __launch_bounds__ tells the compiler so.
__global__ void negate(int n, float *__restrict__ x)  // LINT: fixed block size, no __launch_bounds__
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = -x[i];
}

int main()
{
    const int rows = 65536, cols = 64, n = rows * cols;
    std::vector<float> h(n);
    for (int i = 0; i < n; ++i)
        h[i] = (i % cols) * 0.001f;

    float *da, *dsums;
    CUDA_CHECK(cudaMalloc(&da, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dsums, rows * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(da, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    scale<<<(n + ODD_BLOCK - 1) / ODD_BLOCK, ODD_BLOCK>>>(n, 2.0f, da);  // LINT: block size 100, not a multiple of 32
    add_one<<<(n + 31) / 32, 32>>>(n, da);                                // LINT: 32 threads per block caps occupancy
    negate<<<(n + 255) / 256, 256>>>(n, da);
    row_sums<<<(rows + 255) / 256, 256>>>(rows, cols, da, dsums);
    CUDA_CHECK(cudaGetLastError());

    std::vector<float> sums(rows);
    CUDA_CHECK(cudaMemcpy(sums.data(), dsums, rows * sizeof(float), cudaMemcpyDeviceToHost));
    // Each row: sum over c of -(2 * 0.001 c + 1) = -(0.001 * cols * (cols - 1) + cols).
    const float want = -(0.001f * cols * (cols - 1) + cols);
    const bool ok = sums[0] < 0.99f * want && sums[0] > 1.01f * want;
    std::printf("launch_slips: row 0 sum=%.3f want=%.3f %s\n", sums[0], want, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(dsums));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
