// Tiled single-precision GEMM, C = alpha * A * B + beta * C (row-major, M x K times K x N).
// Each block stages TILE x TILE tiles of A and B in shared memory, so every element loaded
// from global memory is reused TILE times: compute-bound for large matrices.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define TILE 16

__global__ void __launch_bounds__(TILE * TILE)
sgemm_tiled(int M, int N, int K, float alpha, const float *__restrict__ A, const float *__restrict__ B, float beta, float *__restrict__ C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = alpha * acc + beta * C[row * N + col];
}

int main()
{
    const int M = 1024, N = 1024, K = 1024;
    const float alpha = 1.0f, beta = 0.5f;

    std::vector<float> hA(M * K), hB(K * N), hC(M * N), hC0;
    for (int i = 0; i < M * K; ++i)
        hA[i] = ((i * 7) % 13) * 0.125f - 0.75f;
    for (int i = 0; i < K * N; ++i)
        hB[i] = ((i * 5) % 11) * 0.125f - 0.625f;
    for (int i = 0; i < M * N; ++i)
        hC[i] = (i % 3) * 1.0f;
    hC0 = hC;

    float *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc(&dA, M * K * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dB, K * N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dC, M * N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dA, hA.data(), M * K * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB.data(), K * N * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dC, hC.data(), M * N * sizeof(float), cudaMemcpyHostToDevice));

    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    sgemm_tiled<<<grid, block>>>(M, N, K, alpha, dA, dB, beta, dC);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hC.data(), dC, M * N * sizeof(float), cudaMemcpyDeviceToHost));

    // Check a spread of entries against a double-precision reference.
    double max_err = 0.0;
    for (int s = 0; s < 256; ++s) {
        const int r = (s * 97) % M, c = (s * 193) % N;
        double ref = 0.0;
        for (int k = 0; k < K; ++k)
            ref += (double)hA[r * K + k] * hB[k * N + c];
        ref = alpha * ref + beta * hC0[r * N + c];
        max_err = std::fmax(max_err, std::fabs(ref - hC[r * N + c]));
    }
    const bool ok = max_err < 1e-2;
    std::printf("sgemm_tiled: %dx%dx%d max_err=%.2e %s\n", M, N, K, max_err, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
