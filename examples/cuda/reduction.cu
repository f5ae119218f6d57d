// Sum of a float array, two classic ways.
//   reduce_tree: each block loads 2 * BLOCK elements and halves them in shared memory with a
//                __syncthreads between steps; one partial sum per block, the host adds them.
//   reduce_warp: grid-stride accumulation in registers, __shfl_down_sync inside each warp, one
//                shared slot per warp, then one atomicAdd per block.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256
#define WARP 32

__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = WARP / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(BLOCK) reduce_tree(const float *__restrict__ in, float *__restrict__ partial, int n)
{
    __shared__ float sdata[BLOCK];
    const int tid = threadIdx.x;
    const int i = blockIdx.x * (2 * BLOCK) + tid;

    float v = 0.0f;
    if (i < n)
        v = in[i];
    if (i + BLOCK < n)
        v += in[i + BLOCK];
    sdata[tid] = v;
    __syncthreads();

    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0)
        partial[blockIdx.x] = sdata[0];
}

__global__ void __launch_bounds__(BLOCK) reduce_warp(const float *__restrict__ in, float *__restrict__ result, int n)
{
    __shared__ float warp_sums[BLOCK / WARP];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];

    const int lane = threadIdx.x % WARP;
    const int warp = threadIdx.x / WARP;
    v = warp_sum(v);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();

    if (warp == 0) {
        v = lane < BLOCK / WARP ? warp_sums[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0)
            atomicAdd(result, v);
    }
}

int main()
{
    const int n = 1 << 24;
    const int tree_blocks = (n + 2 * BLOCK - 1) / (2 * BLOCK);
    const int warp_blocks = 1024;

    std::vector<float> h(n);
    double want = 0.0;
    for (int i = 0; i < n; ++i) {
        h[i] = (i % 17) * 0.25f;
        want += h[i];
    }

    float *d_in, *d_partial, *d_result;
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partial, tree_blocks * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_result, sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_result, 0, sizeof(float)));

    reduce_tree<<<tree_blocks, BLOCK>>>(d_in, d_partial, n);
    CUDA_CHECK(cudaGetLastError());
    reduce_warp<<<warp_blocks, BLOCK>>>(d_in, d_result, n);
    CUDA_CHECK(cudaGetLastError());

    std::vector<float> partial(tree_blocks);
    float warp_result = 0.0f;
    CUDA_CHECK(cudaMemcpy(partial.data(), d_partial, tree_blocks * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&warp_result, d_result, sizeof(float), cudaMemcpyDeviceToHost));
    double tree_result = 0.0;
    for (float p : partial)
        tree_result += p;

    const bool ok = std::fabs(tree_result - want) <= 1e-6 * want && std::fabs(warp_result - want) <= 1e-4 * want;
    std::printf("reduction: want=%.1f tree=%.1f warp=%.1f %s\n", want, tree_result, (double)warp_result, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_partial));
    CUDA_CHECK(cudaFree(d_result));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
