// Two double-precision kernels with very different FP64 work per byte.
//   polyval_fp64: Horner evaluation of a degree-16 polynomial, 32 FP64 FLOP per 16 bytes:
//                 compute-bound on GPUs with weak FP64 units, bandwidth-bound on HPC parts.
//   ddot:         dot product, 2 FP64 FLOP per 16 bytes: bandwidth-bound everywhere.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256
#define DEGREE 16

__constant__ double coeffs[DEGREE + 1];

__global__ void __launch_bounds__(BLOCK) polyval_fp64(int n, const double *__restrict__ x, double *__restrict__ y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const double xi = x[i];
    double p = coeffs[DEGREE];
#pragma unroll
    for (int k = DEGREE - 1; k >= 0; --k)
        p = p * xi + coeffs[k];
    y[i] = p;
}

__device__ __forceinline__ double warp_sum_fp64(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(BLOCK) ddot(int n, const double *__restrict__ x, const double *__restrict__ y, double *__restrict__ result)
{
    __shared__ double warp_sums[BLOCK / 32];
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        acc += x[i] * y[i];

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    acc = warp_sum_fp64(acc);
    if (lane == 0)
        warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < BLOCK / 32 ? warp_sums[lane] : 0.0;
        acc = warp_sum_fp64(acc);
        if (lane == 0)
            atomicAdd(result, acc);
    }
}

int main()
{
    const int n = 1 << 22;
    const int dot_blocks = 256;

    // Truncated exp(x) series: c_k = 1 / k!.
    double hc[DEGREE + 1];
    hc[0] = 1.0;
    for (int k = 1; k <= DEGREE; ++k)
        hc[k] = hc[k - 1] / k;
    CUDA_CHECK(cudaMemcpyToSymbol(coeffs, hc, sizeof(hc)));

    std::vector<double> hx(n), hy(n);
    for (int i = 0; i < n; ++i)
        hx[i] = -1.0 + 2.0 * i / n;

    double *dx, *dy, *dres;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dy, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dres, sizeof(double)));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dres, 0, sizeof(double)));

    polyval_fp64<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, dx, dy);
    CUDA_CHECK(cudaGetLastError());
    ddot<<<dot_blocks, BLOCK>>>(n, dx, dy, dres);
    CUDA_CHECK(cudaGetLastError());

    double dot = 0.0;
    CUDA_CHECK(cudaMemcpy(hy.data(), dy, n * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&dot, dres, sizeof(double), cudaMemcpyDeviceToHost));

    double max_err = 0.0, want_dot = 0.0;
    for (int i = 0; i < n; ++i) {
        max_err = std::fmax(max_err, std::fabs(hy[i] - std::exp(hx[i])));
        want_dot += hx[i] * hy[i];
    }
    const bool ok = max_err < 1e-12 && std::fabs(dot - want_dot) <= 1e-8 * std::fabs(want_dot);
    std::printf("fp64: polyval max_err=%.1e dot=%.9f want=%.9f %s\n", max_err, dot, want_dot, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    CUDA_CHECK(cudaFree(dres));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
