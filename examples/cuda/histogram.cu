// 256-bin histogram of bytes. Each block counts into a private shared-memory histogram
// with shared atomics, then merges it into the global one with one atomicAdd per bin.
// Integer-only: no floating-point work at all.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256
#define NUM_BINS 256

__global__ void __launch_bounds__(BLOCK)
histogram256(const unsigned char *__restrict__ data, int n, unsigned int *__restrict__ bins)
{
    __shared__ unsigned int local[NUM_BINS];
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        atomicAdd(&bins[b], local[b]);
}

int main()
{
    const int n = 1 << 24;
    const int blocks = 512;

    std::vector<unsigned char> h(n);
    unsigned int state = 12345u;
    for (int i = 0; i < n; ++i) {
        state = state * 1664525u + 1013904223u;  // LCG: cheap, deterministic bytes
        h[i] = (unsigned char)(state >> 24);
    }
    std::vector<unsigned int> want(NUM_BINS, 0u);
    for (int i = 0; i < n; ++i)
        ++want[h[i]];

    unsigned char *d_data;
    unsigned int *d_bins;
    CUDA_CHECK(cudaMalloc(&d_data, n));
    CUDA_CHECK(cudaMalloc(&d_bins, NUM_BINS * sizeof(unsigned int)));
    CUDA_CHECK(cudaMemcpy(d_data, h.data(), n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_bins, 0, NUM_BINS * sizeof(unsigned int)));

    histogram256<<<blocks, BLOCK>>>(d_data, n, d_bins);
    CUDA_CHECK(cudaGetLastError());
    std::vector<unsigned int> got(NUM_BINS);
    CUDA_CHECK(cudaMemcpy(got.data(), d_bins, NUM_BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));

    int wrong = 0;
    for (int b = 0; b < NUM_BINS; ++b)
        wrong += got[b] != want[b];
    std::printf("histogram256: n=%d wrong_bins=%d\n", n, wrong);

    CUDA_CHECK(cudaFree(d_data));
    CUDA_CHECK(cudaFree(d_bins));
    return wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
