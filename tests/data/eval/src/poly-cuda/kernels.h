// Synthetic test kernel defined in a header and launched from main.cu: a long polynomial per
// element, compute-bound.
#pragma once

__global__ void poly(const float *x, float *y, int n, int degree)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    float acc = 0.0f;
    for (int d = 0; d < degree; ++d)
        acc = acc * v + 1.0f;
    y[i] = acc;
}
