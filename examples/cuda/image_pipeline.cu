// A small image pipeline on one stream: RGBA -> luma, horizontal box blur, unsharp mask.
// Shows a kernel inside a namespace, a launch with dynamic shared memory and a stream
// (<<<grid, block, smem, stream>>>), and __launch_bounds__ with a minimum-blocks hint.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define BLOCK 128      // box blur: pixels of one row per block
#define PIX_BLOCK 256  // per-pixel kernels

namespace color {

// Rec. 601 luma of an 8-bit RGBA pixel, scaled to [0, 1].
__global__ void __launch_bounds__(PIX_BLOCK) rgba_to_luma(int n, const uchar4 *__restrict__ rgba, float *__restrict__ luma)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const uchar4 p = rgba[i];
        luma[i] = (0.299f * p.x + 0.587f * p.y + 0.114f * p.z) * (1.0f / 255.0f);
    }
}

}  // namespace color

// Horizontal box blur of run-time radius r: a block stages its blockDim.x pixels of one row plus
// r halo pixels on each side in dynamic shared memory, (blockDim.x + 2 * r) floats.
__global__ void __launch_bounds__(BLOCK)
box_blur_rows(int width, int radius, float inv_count, const float *__restrict__ in, float *__restrict__ out)
{
    extern __shared__ float line[];
    const int x0 = blockIdx.x * blockDim.x;
    const float *row = in + (size_t)blockIdx.y * width;
    for (int j = threadIdx.x; j < blockDim.x + 2 * radius; j += blockDim.x)
        line[j] = row[min(max(x0 + j - radius, 0), width - 1)];  // clamp at the image edge
    __syncthreads();

    const int x = x0 + threadIdx.x;
    if (x >= width)
        return;
    float sum = 0.0f;
    for (int k = 0; k <= 2 * radius; ++k)
        sum += line[threadIdx.x + k];
    out[(size_t)blockIdx.y * width + x] = sum * inv_count;
}

// Sharpen: push each pixel away from its blurred neighbourhood, clamped to [0, 1].
__global__ void __launch_bounds__(PIX_BLOCK, 4)
unsharp_mask(int n, float amount, const float *__restrict__ luma, const float *__restrict__ blurred, float *__restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float l = luma[i];
        out[i] = fminf(fmaxf(l + amount * (l - blurred[i]), 0.0f), 1.0f);
    }
}

int main()
{
    const int width = 1920, height = 1080, n = width * height, radius = 4;
    const float amount = 0.6f, inv_count = 1.0f / (2 * radius + 1);

    uchar4 *h_rgba, *d_rgba;
    float *h_out, *d_luma, *d_blur, *d_out;
    CUDA_CHECK(cudaMallocHost(&h_rgba, n * sizeof(uchar4)));
    CUDA_CHECK(cudaMallocHost(&h_out, n * sizeof(float)));
    for (int i = 0; i < n; ++i)
        h_rgba[i] = make_uchar4((i * 3) % 256, (i / width) % 256, (i * 7) % 256, 255);
    CUDA_CHECK(cudaMalloc(&d_rgba, n * sizeof(uchar4)));
    CUDA_CHECK(cudaMalloc(&d_luma, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_blur, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaMemcpyAsync(d_rgba, h_rgba, n * sizeof(uchar4), cudaMemcpyHostToDevice, stream));
    color::rgba_to_luma<<<(n + PIX_BLOCK - 1) / PIX_BLOCK, PIX_BLOCK, 0, stream>>>(n, d_rgba, d_luma);
    const size_t smem_bytes = (BLOCK + 2 * radius) * sizeof(float);
    const dim3 blur_grid((width + BLOCK - 1) / BLOCK, height);
    box_blur_rows<<<blur_grid, BLOCK, smem_bytes, stream>>>(width, radius, inv_count, d_luma, d_blur);
    unsharp_mask<<<(n + PIX_BLOCK - 1) / PIX_BLOCK, PIX_BLOCK, 0, stream>>>(n, amount, d_luma, d_blur, d_out);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // Host reference of the whole pipeline.
    std::vector<float> luma(n), blur(n);
    for (int i = 0; i < n; ++i)
        luma[i] = (0.299f * h_rgba[i].x + 0.587f * h_rgba[i].y + 0.114f * h_rgba[i].z) * (1.0f / 255.0f);
    float max_err = 0.0f;
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            float sum = 0.0f;
            for (int k = -radius; k <= radius; ++k)
                sum += luma[y * width + std::min(std::max(x + k, 0), width - 1)];
            const int i = y * width + x;
            const float want = std::fmin(std::fmax(luma[i] + amount * (luma[i] - sum * inv_count), 0.0f), 1.0f);
            max_err = std::fmax(max_err, std::fabs(h_out[i] - want));
        }
    const bool ok = max_err < 1e-4f;
    std::printf("image_pipeline: %dx%d max_err=%.1e %s\n", width, height, max_err, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFreeHost(h_rgba));
    CUDA_CHECK(cudaFreeHost(h_out));
    CUDA_CHECK(cudaFree(d_rgba));
    CUDA_CHECK(cudaFree(d_luma));
    CUDA_CHECK(cudaFree(d_blur));
    CUDA_CHECK(cudaFree(d_out));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
