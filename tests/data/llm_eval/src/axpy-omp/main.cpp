// Synthetic sources for the LLM evaluation tests (written for perflsp).
#include <cstdio>
#include <cstdlib>
#include <vector>

static void axpy(int n, float a, const float *x, float *y)
{
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n]) thread_limit(256)
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    axpy(n, 2.0f, x.data(), y.data());
    printf("%f\n", y[0]);
    return 0;
}
