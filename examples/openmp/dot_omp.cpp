// Double-precision dot product offloaded with OpenMP: a `reduction(+:sum)` across all teams
// and threads, the result mapped back with `map(tofrom: sum)`. The directive is long enough to
// be continued over several lines with backslashes.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static double dot(int n, const double *x, const double *y)
{
    double sum = 0.0;
#pragma omp target teams distribute parallel for \
        map(to: x[0:n], y[0:n]) map(tofrom: sum) \
        reduction(+:sum) thread_limit(256)
    for (int i = 0; i < n; ++i)
        sum += x[i] * y[i];
    return sum;
}

int main()
{
    const int n = 1 << 22;
    std::vector<double> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = (i % 10) * 0.5;
        y[i] = 2.0 - (i % 4);
    }

    const double got = dot(n, x.data(), y.data());
    double want = 0.0;
    for (int i = 0; i < n; ++i)
        want += x[i] * y[i];

    const bool ok = std::fabs(got - want) <= 1e-12 * std::fabs(want) + 1e-9;
    std::printf("dot_omp: n=%d dot=%.3f want=%.3f %s\n", n, got, want, ok ? "ok" : "MISMATCH");
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
