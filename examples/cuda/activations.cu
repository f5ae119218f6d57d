// Bias + SiLU activation, out = silu(in + bias[col]), over a rows x cols matrix, written as a
// grid-stride loop around small inline __device__ helpers. Launched twice: with a fixed grid,
// and with the block/grid the occupancy API picks at run time (unknowable to a static tool).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256
#define FIXED_GRID 1024

__device__ __forceinline__ float sigmoid(float x)
{
    return 1.0f / (1.0f + __expf(-x));
}

__device__ __forceinline__ float silu(float x)
{
    return x * sigmoid(x);
}

__global__ void __launch_bounds__(BLOCK)
bias_silu(int rows, int cols, const float *__restrict__ in, const float *__restrict__ bias, float *__restrict__ out)
{
    const int n = rows * cols;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = silu(in[i] + bias[i % cols]);
}

int main()
{
    const int rows = 4096, cols = 1024, n = rows * cols;

    std::vector<float> hin(n), hbias(cols), hout(n);
    for (int i = 0; i < n; ++i)
        hin[i] = ((i * 37) % 101) * 0.08f - 4.0f;
    for (int c = 0; c < cols; ++c)
        hbias[c] = (c % 5) * 0.25f - 0.5f;

    float *din, *dbias, *dout;
    CUDA_CHECK(cudaMalloc(&din, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dbias, cols * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dout, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(din, hin.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dbias, hbias.data(), cols * sizeof(float), cudaMemcpyHostToDevice));

    int min_grid = 0, block = 0;
    CUDA_CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, bias_silu, 0, BLOCK));

    bool ok = true;
    for (int pass = 0; pass < 2; ++pass) {
        CUDA_CHECK(cudaMemset(dout, 0, n * sizeof(float)));
        if (pass == 0)
            bias_silu<<<FIXED_GRID, BLOCK>>>(rows, cols, din, dbias, dout);
        else
            bias_silu<<<min_grid, block>>>(rows, cols, din, dbias, dout);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpy(hout.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));

        float max_err = 0.0f;
        for (int i = 0; i < n; ++i) {
            const float x = hin[i] + hbias[i % cols];
            max_err = std::fmax(max_err, std::fabs(hout[i] - x / (1.0f + std::exp(-x))));
        }
        std::printf("bias_silu pass %d (grid %d, block %d): max_err=%.1e\n", pass, pass ? min_grid : FIXED_GRID,
                    pass ? block : BLOCK, max_err);
        ok = ok && max_err < 1e-5f;
    }

    CUDA_CHECK(cudaFree(din));
    CUDA_CHECK(cudaFree(dbias));
    CUDA_CHECK(cudaFree(dout));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
