// Synthetic test program for `perflsp eval`: shared-memory tiled matrix product, compute-bound.
#include <cuda_runtime.h>

#define TILE 16
#define N 2048

__global__ void mmul(const float *a, const float *b, float *c)
{
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < N / TILE; ++t) {
        ta[threadIdx.y][threadIdx.x] = a[row * N + t * TILE + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            sum = fmaf(ta[threadIdx.y][k], tb[k][threadIdx.x], sum);
        __syncthreads();
    }
    c[row * N + col] = sum;
}

int main()
{
    float *a, *b, *c;
    cudaMalloc(&a, sizeof(float) * N * N);
    cudaMalloc(&b, sizeof(float) * N * N);
    cudaMalloc(&c, sizeof(float) * N * N);
    dim3 block(TILE, TILE);
    dim3 grid(N / TILE, N / TILE);
    mmul<<<grid, block>>>(a, b, c);
    cudaDeviceSynchronize();
    return 0;
}
