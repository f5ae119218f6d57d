// Synthetic test program for `perflsp eval`: OpenMP offload vector add, bandwidth-bound.
#include <cstdlib>

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    float *a = (float *)malloc(n * sizeof(float));
    float *b = (float *)malloc(n * sizeof(float));
    float *c = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) {
        a[i] = 1.0f;
        b[i] = 2.0f;
    }
#pragma omp target teams distribute parallel for map(to: a[0:n], b[0:n]) map(from: c[0:n])
    for (int i = 0; i < n; ++i)
        c[i] = a[i] + b[i];
    free(a);
    free(b);
    free(c);
    return 0;
}
