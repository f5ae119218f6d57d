// Jacobi sweeps for Laplace's equation on a 2-D grid: the 5-point stencil
// u'(x, y) = (u(x-1, y) + u(x+1, y) + u(x, y-1) + u(x, y+1)) / 4, boundary held fixed.
// 4 FLOP per point against 8 bytes of compulsory traffic: bandwidth-bound.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "check.cuh"

#define BX 32
#define BY 8

__global__ void __launch_bounds__(BX * BY) jacobi2d(int nx, int ny, const float *__restrict__ u, float *__restrict__ unew)
{
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y = blockIdx.y * BY + threadIdx.y;
    if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1)
        return;
    const int c = y * nx + x;
    unew[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx]);
}

static void jacobi2d_host(int nx, int ny, const std::vector<float> &u, std::vector<float> &unew)
{
    for (int y = 1; y < ny - 1; ++y)
        for (int x = 1; x < nx - 1; ++x) {
            const int c = y * nx + x;
            unew[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx]);
        }
}

int main()
{
    const int nx = 1024, ny = 1024, sweeps = 100;
    const size_t bytes = (size_t)nx * ny * sizeof(float);

    // Hot top edge (u = 1), everything else starts at 0; both buffers carry the boundary.
    std::vector<float> h(nx * ny, 0.0f);
    for (int x = 0; x < nx; ++x)
        h[x] = 1.0f;

    float *du, *dv;
    CUDA_CHECK(cudaMalloc(&du, bytes));
    CUDA_CHECK(cudaMalloc(&dv, bytes));
    CUDA_CHECK(cudaMemcpy(du, h.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, h.data(), bytes, cudaMemcpyHostToDevice));

    dim3 block(BX, BY);
    dim3 grid((nx + BX - 1) / BX, (ny + BY - 1) / BY);
    for (int it = 0; it < sweeps; ++it) {
        jacobi2d<<<grid, block>>>(nx, ny, du, dv);
        std::swap(du, dv);
    }
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> got(nx * ny);
    CUDA_CHECK(cudaMemcpy(got.data(), du, bytes, cudaMemcpyDeviceToHost));

    std::vector<float> ref = h, tmp = h;
    for (int it = 0; it < sweeps; ++it) {
        jacobi2d_host(nx, ny, ref, tmp);
        std::swap(ref, tmp);
    }
    float max_err = 0.0f;
    for (int i = 0; i < nx * ny; ++i)
        max_err = std::fmax(max_err, std::fabs(got[i] - ref[i]));
    const bool ok = max_err < 1e-5f;
    std::printf("jacobi2d: %dx%d, %d sweeps, u(1,nx/2)=%.4f max_err=%.1e %s\n", nx, ny, sweeps,
                got[nx + nx / 2], max_err, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(du));
    CUDA_CHECK(cudaFree(dv));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
