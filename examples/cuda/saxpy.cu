// SAXPY, y = a * x + y, in single precision with one thread per element.
// The textbook bandwidth-bound kernel: 2 FLOP (one FMA) for 12 bytes of DRAM traffic.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256

__global__ void __launch_bounds__(BLOCK) saxpy(int n, float a, const float *__restrict__ x, float *__restrict__ y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

int main()
{
    const int n = 1 << 20;
    const float a = 2.0f;
    const size_t bytes = n * sizeof(float);

    std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; ++i) {
        hx[i] = 1.0f + (i % 7);
        hy[i] = 0.5f * (i % 5);
    }

    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, bytes));
    CUDA_CHECK(cudaMalloc(&dy, bytes));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dy, hy.data(), bytes, cudaMemcpyHostToDevice));

    saxpy<<<(n + 255) / 256, BLOCK>>>(n, a, dx, dy);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hy.data(), dy, bytes, cudaMemcpyDeviceToHost));

    int errors = 0;
    for (int i = 0; i < n; ++i) {
        const float want = a * hx[i] + 0.5f * (i % 5);
        if (std::fabs(hy[i] - want) > 1e-6f * std::fabs(want))
            ++errors;
    }
    std::printf("saxpy: n=%d errors=%d\n", n, errors);

    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    return errors == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
