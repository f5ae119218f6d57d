#include <cstdlib>
#include <cuda_runtime.h>
#include "kernels.h"

int main(int argc, char **argv)
{
    int n = 1 << 22;
    int degree = argc > 1 ? atoi(argv[1]) : 4;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    poly<<<n / 128, 128>>>(x, y, n, degree);
    cudaDeviceSynchronize();
    return 0;
}
