// INTENTIONAL PERFLSP LINT TARGETS: precision slips in single-precision kernels.
// Do not "fix" this file: tests and the README demo expect every line marked `LINT:` to be
// reported (examples/EXPECTED.md lists the line and rule of each). Apart from the marked
// slips the code is correct, compiles and runs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../cuda/check.cuh"

#define BLOCK 256

// `0.5` is a double literal: x[i] is widened to double, multiplied in FP64, narrowed back.
__global__ void __launch_bounds__(BLOCK) halve(int n, const float *__restrict__ x, float *__restrict__ y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 0.5;  // LINT: double literal in float code (use 0.5f)
}

// pow(float, double) resolves to the double pow; x * x stays in FP32 and needs no call at all.
__global__ void __launch_bounds__(BLOCK) square_pow(int n, const float *__restrict__ x, float *__restrict__ y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = pow(x[i], 2.0);  // LINT: double pow with a constant exponent (use x * x)
}

// Unsuffixed literals and the double exp() promote every expression they touch to FP64.
__global__ void __launch_bounds__(BLOCK) damped_wave(int n, float t, const float *__restrict__ x, float *__restrict__ y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float phase = 3.14159 * x[i] + t;              // LINT: double literal in float code
        y[i] = sinf(phase) * exp(-2.5e-3 * t) + 1.0;          // LINT: double exp() and double literals
    }
}

int main()
{
    const int n = 1 << 20;
    const float t = 2.0f;
    std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; ++i)
        hx[i] = (i % 100) * 0.01f;

    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    const int grid = (n + BLOCK - 1) / BLOCK;
    halve<<<grid, BLOCK>>>(n, dx, dy);
    square_pow<<<grid, BLOCK>>>(n, dy, dx);
    damped_wave<<<grid, BLOCK>>>(n, t, dx, dy);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));

    double checksum = 0.0;
    for (int i = 0; i < n; ++i)
        checksum += hy[i];
    std::printf("precision_slips: checksum=%.3f\n", checksum);

    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    return EXIT_SUCCESS;
}
