// Synthetic sources for the LLM evaluation tests (written for perflsp).
#include <cstdio>
#include <cstdlib>

#define BLOCK 256
#define TERMS 256

__device__ float step(float acc, float x) { return acc * x + 1.0f; }

__global__ void axpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

__global__ void poly(int n, const float *x, float *y)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i], acc = 0.0f;
    for (int k = 0; k < TERMS; ++k)
        acc = step(acc, v);
    y[i] = acc;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    axpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, 2.0f, x, y);
    poly<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, x, y);
    cudaDeviceSynchronize();
    printf("done\n");
    return 0;
}
