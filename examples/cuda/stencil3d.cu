// One explicit time step of the 3-D heat equation: the 7-point stencil
// u'(c) = c0 * u(c) + c1 * (sum of the 6 face neighbours), boundary held fixed.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "check.cuh"

#define BX 32
#define BY 4
#define BZ 2

__global__ void __launch_bounds__(BX * BY * BZ)
heat3d(int nx, int ny, int nz, float c0, float c1, const float *__restrict__ u, float *__restrict__ unew)
{
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y = blockIdx.y * BY + threadIdx.y;
    const int z = blockIdx.z * BZ + threadIdx.z;
    if (x < 1 || y < 1 || z < 1 || x >= nx - 1 || y >= ny - 1 || z >= nz - 1)
        return;
    const int sy = nx, sz = nx * ny;
    const int c = z * sz + y * sy + x;
    const float faces = u[c - 1] + u[c + 1] + u[c - sy] + u[c + sy] + u[c - sz] + u[c + sz];
    unew[c] = c0 * u[c] + c1 * faces;
}

int main()
{
    const int nx = 128, ny = 128, nz = 128, steps = 20;
    const int n = nx * ny * nz;
    const float alpha = 0.1f, c0 = 1.0f - 6.0f * alpha, c1 = alpha;

    // A hot cube in the middle of a cold box.
    std::vector<float> h(n, 0.0f);
    for (int z = nz / 4; z < 3 * nz / 4; ++z)
        for (int y = ny / 4; y < 3 * ny / 4; ++y)
            for (int x = nx / 4; x < 3 * nx / 4; ++x)
                h[(z * ny + y) * nx + x] = 1.0f;

    float *du, *dv;
    CUDA_CHECK(cudaMalloc(&du, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dv, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(du, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    const dim3 block(BX, BY, BZ);
    const dim3 grid((nx + BX - 1) / BX, (ny + BY - 1) / BY, (nz + BZ - 1) / BZ);
    for (int s = 0; s < steps; ++s) {
        heat3d<<<grid, block>>>(nx, ny, nz, c0, c1, du, dv);
        std::swap(du, dv);
    }
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> got(n);
    CUDA_CHECK(cudaMemcpy(got.data(), du, n * sizeof(float), cudaMemcpyDeviceToHost));

    // Heat is only redistributed (boundary cells are cold and far away): the total is conserved.
    double before = 0.0, after = 0.0;
    for (int i = 0; i < n; ++i) {
        before += h[i];
        after += got[i];
    }
    const bool ok = std::fabs(after - before) <= 1e-4 * before;
    std::printf("heat3d: %dx%dx%d, %d steps, heat %.3f -> %.3f %s\n", nx, ny, nz, steps, before, after,
                ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(du));
    CUDA_CHECK(cudaFree(dv));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
