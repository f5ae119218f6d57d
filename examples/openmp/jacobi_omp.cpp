// Jacobi sweeps for Laplace's equation offloaded with OpenMP. A `target data` region keeps both
// grids on the device for all sweeps; it is not a kernel itself. The two collapsed target loops
// inside it are the kernels (u -> v, then v -> u), and `target update from` copies u back to the
// host now and then to report progress without ending the data region.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

static void sweep_host(int nx, int ny, const std::vector<float> &in, std::vector<float> &out)
{
    for (int j = 1; j < ny - 1; ++j)
        for (int i = 1; i < nx - 1; ++i)
            out[j * nx + i] = 0.25f * (in[j * nx + i - 1] + in[j * nx + i + 1] + in[(j - 1) * nx + i] + in[(j + 1) * nx + i]);
}

int main()
{
    const int nx = 512, ny = 512, n = nx * ny, sweeps = 200;
    std::vector<float> ubuf(n, 0.0f);
    for (int i = 0; i < nx; ++i)
        ubuf[i] = 1.0f;  // hot top edge, held fixed
    std::vector<float> vbuf = ubuf, init = ubuf;
    float *u = ubuf.data(), *v = vbuf.data();

#pragma omp target data map(tofrom: u[0:n]) map(to: v[0:n])
    {
        for (int it = 0; it < sweeps; it += 2) {
#pragma omp target teams distribute parallel for collapse(2) thread_limit(256)
            for (int j = 1; j < ny - 1; ++j)
                for (int i = 1; i < nx - 1; ++i)
                    v[j * nx + i] = 0.25f * (u[j * nx + i - 1] + u[j * nx + i + 1] + u[(j - 1) * nx + i] + u[(j + 1) * nx + i]);

#pragma omp target teams distribute parallel for collapse(2) thread_limit(256)
            for (int j = 1; j < ny - 1; ++j)
                for (int i = 1; i < nx - 1; ++i)
                    u[j * nx + i] = 0.25f * (v[j * nx + i - 1] + v[j * nx + i + 1] + v[(j - 1) * nx + i] + v[(j + 1) * nx + i]);

            if ((it + 2) % 100 == 0) {
#pragma omp target update from(u[0:n])
                std::printf("sweep %d: u(row 1, centre) = %.5f\n", it + 2, u[nx + nx / 2]);
            }
        }
    }

    std::vector<float> ref = init, tmp = init;
    for (int it = 0; it < sweeps; ++it) {
        sweep_host(nx, ny, ref, tmp);
        std::swap(ref, tmp);
    }
    float max_err = 0.0f;
    for (int i = 0; i < n; ++i)
        max_err = std::fmax(max_err, std::fabs(u[i] - ref[i]));
    const bool ok = max_err < 1e-5f;
    std::printf("jacobi_omp: %dx%d, %d sweeps, max_err=%.1e %s\n", nx, ny, sweeps, max_err, ok ? "ok" : "MISMATCH");
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
