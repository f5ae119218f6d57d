// All-pairs gravitational n-body step. Positions are float4 (x, y, z, mass); each block
// stages BLOCK bodies at a time in shared memory and every thread accumulates the pull of
// all n bodies on its own body: ~18 FLOP + 1 rsqrtf per interaction, compute-bound.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 256
#define SOFTENING2 1e-4f

// Acceleration of body `bi` due to body `bj`, added to `acc`.
__device__ __forceinline__ float3 body_body_accel(float4 bi, float4 bj, float3 acc)
{
    const float dx = bj.x - bi.x;
    const float dy = bj.y - bi.y;
    const float dz = bj.z - bi.z;
    const float d2 = SOFTENING2 + dx * dx + dy * dy + dz * dz;
    const float inv = rsqrtf(d2);
    const float s = bj.w * inv * inv * inv;
    acc.x += dx * s;
    acc.y += dy * s;
    acc.z += dz * s;
    return acc;
}

// Requires n to be a multiple of BLOCK (the host pads).
__global__ void __launch_bounds__(BLOCK) nbody_accel(int n, float dt, const float4 *__restrict__ pos, float4 *__restrict__ vel)
{
    __shared__ float4 tile[BLOCK];
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    const float4 bi = pos[i];
    float3 acc = make_float3(0.0f, 0.0f, 0.0f);
    for (int base = 0; base < n; base += BLOCK) {
        tile[threadIdx.x] = pos[base + threadIdx.x];
        __syncthreads();
#pragma unroll 8
        for (int j = 0; j < BLOCK; ++j)
            acc = body_body_accel(bi, tile[j], acc);
        __syncthreads();
    }
    float4 v = vel[i];
    v.x += acc.x * dt;
    v.y += acc.y * dt;
    v.z += acc.z * dt;
    vel[i] = v;
}

__global__ void __launch_bounds__(BLOCK) nbody_integrate(int n, float dt, float4 *__restrict__ pos, const float4 *__restrict__ vel)
{
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    float4 p = pos[i];
    const float4 v = vel[i];
    p.x += v.x * dt;
    p.y += v.y * dt;
    p.z += v.z * dt;
    pos[i] = p;
}

int main()
{
    const int n = 65536;  // a multiple of BLOCK
    const float dt = 0.01f;
    static_assert(65536 % BLOCK == 0, "n must be a multiple of BLOCK");

    std::vector<float4> hpos(n), hvel(n, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    for (int i = 0; i < n; ++i)
        hpos[i] = make_float4((i % 32) * 0.5f, ((i / 32) % 32) * 0.5f, (i / 1024) * 0.25f, 1.0f / n);

    float4 *dpos, *dvel;
    CUDA_CHECK(cudaMalloc(&dpos, n * sizeof(float4)));
    CUDA_CHECK(cudaMalloc(&dvel, n * sizeof(float4)));
    CUDA_CHECK(cudaMemcpy(dpos, hpos.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dvel, hvel.data(), n * sizeof(float4), cudaMemcpyHostToDevice));

    nbody_accel<<<n / BLOCK, BLOCK>>>(n, dt, dpos, dvel);
    CUDA_CHECK(cudaGetLastError());
    nbody_integrate<<<n / BLOCK, BLOCK>>>(n, dt, dpos, dvel);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(hvel.data(), dvel, n * sizeof(float4), cudaMemcpyDeviceToHost));

    // Velocities started at zero, so vel = dt * acceleration: compare a few bodies in double.
    double max_rel = 0.0;
    for (int i = 0; i < n; i += n / 8) {
        double ax = 0.0, ay = 0.0, az = 0.0;
        for (int j = 0; j < n; ++j) {
            const double dx = hpos[j].x - hpos[i].x, dy = hpos[j].y - hpos[i].y, dz = hpos[j].z - hpos[i].z;
            const double d2 = 1e-4 + dx * dx + dy * dy + dz * dz;
            const double s = hpos[j].w / (d2 * std::sqrt(d2));
            ax += dx * s, ay += dy * s, az += dz * s;
        }
        const double norm = std::sqrt(ax * ax + ay * ay + az * az) * dt;
        const double ex = hvel[i].x - ax * dt, ey = hvel[i].y - ay * dt, ez = hvel[i].z - az * dt;
        const double err = std::sqrt(ex * ex + ey * ey + ez * ez);
        max_rel = std::fmax(max_rel, err / norm);
    }
    const bool ok = max_rel < 1e-3;
    std::printf("nbody: n=%d max_rel_err=%.2e %s\n", n, max_rel, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(dpos));
    CUDA_CHECK(cudaFree(dvel));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
