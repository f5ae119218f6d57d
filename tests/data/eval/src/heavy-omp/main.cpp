// Synthetic test program for `perflsp eval`: many FP32 operations per element loaded, compute-bound.
#include <cstdlib>

int main()
{
    const int n = 1 << 20;
    const int steps = 4096;
    float *x = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i)
        x[i] = 0.5f;
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])
    for (int i = 0; i < n; ++i) {
        float v = x[i];
        for (int s = 0; s < steps; ++s)
            v = v * 0.999f + 0.001f;
        x[i] = v;
    }
    free(x);
    return 0;
}
