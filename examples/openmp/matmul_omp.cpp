// Single-precision matrix multiply offloaded with OpenMP: the (i, j) loops are collapsed into
// one iteration space of n * n device iterations, each running the whole k loop (2n FLOP).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static void matmul(int n, const float *A, const float *B, float *C)
{
#pragma omp target teams distribute parallel for collapse(2) \
        map(to: A[0:n * n], B[0:n * n]) map(from: C[0:n * n]) \
        num_teams(n * n / 256) thread_limit(256)
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < n; ++k)
                acc += A[i * n + k] * B[k * n + j];
            C[i * n + j] = acc;
        }
}

int main()
{
    const int n = 256;
    std::vector<float> A(n * n), B(n * n), C(n * n);
    for (int i = 0; i < n * n; ++i) {
        A[i] = ((i * 7) % 13) * 0.125f - 0.75f;
        B[i] = ((i * 5) % 11) * 0.125f - 0.625f;
    }

    matmul(n, A.data(), B.data(), C.data());

    double max_err = 0.0;
    for (int s = 0; s < 64; ++s) {
        const int r = (s * 37) % n, c = (s * 91) % n;
        double ref = 0.0;
        for (int k = 0; k < n; ++k)
            ref += (double)A[r * n + k] * B[k * n + c];
        max_err = std::fmax(max_err, std::fabs(ref - C[r * n + c]));
    }
    const bool ok = max_err < 1e-3;
    std::printf("matmul_omp: n=%d max_err=%.1e %s\n", n, max_err, ok ? "ok" : "MISMATCH");
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
