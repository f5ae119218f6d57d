// SAXPY offloaded with OpenMP: the combined `target teams distribute parallel for` with
// explicit maps and a launch shape (num_teams x thread_limit) that covers n exactly.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define THREADS 256

static void saxpy(int n, float a, const float *x, float *y)
{
#pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n]) num_teams((n + THREADS - 1) / THREADS) thread_limit(THREADS)
    for (int i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}

int main()
{
    const int n = 1 << 20;
    const float a = 2.0f;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = 1.0f + (i % 7);
        y[i] = 0.5f * (i % 5);
    }

    saxpy(n, a, x.data(), y.data());

    int errors = 0;
    for (int i = 0; i < n; ++i) {
        const float want = a * (1.0f + (i % 7)) + 0.5f * (i % 5);
        if (std::fabs(y[i] - want) > 1e-6f * std::fabs(want))
            ++errors;
    }
    std::printf("saxpy_omp: n=%d errors=%d\n", n, errors);
    return errors == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
