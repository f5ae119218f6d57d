// Sum of squares with a kernel templated on the element type and the block size.
// BLOCK sizes the shared array and unrolls the tree at compile time; the same source is
// instantiated for float (FP32 work) and double (FP64 work) at the launch sites.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) sum_squares(const T *__restrict__ x, int n, T *__restrict__ partial)
{
    __shared__ T sdata[BLOCK];
    const int tid = threadIdx.x;
    T acc = T(0);
    for (int i = blockIdx.x * BLOCK + tid; i < n; i += BLOCK * gridDim.x) {
        const T v = x[i];
        acc += v * v;
    }
    sdata[tid] = acc;
    __syncthreads();
#pragma unroll
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0)
        partial[blockIdx.x] = sdata[0];
}

template <typename T>
static double sum_partials(const T *d_partial, int count)
{
    std::vector<T> partial(count);
    CUDA_CHECK(cudaMemcpy(partial.data(), d_partial, count * sizeof(T), cudaMemcpyDeviceToHost));
    double total = 0.0;
    for (T p : partial)
        total += p;
    return total;
}

int main()
{
    const int n = 1 << 22;
    const int grid = 512;

    std::vector<float> hf(n);
    std::vector<double> hd(n);
    double want = 0.0;
    for (int i = 0; i < n; ++i) {
        hf[i] = (i % 9) * 0.5f;
        hd[i] = hf[i];
        want += hd[i] * hd[i];
    }

    float *df, *df_partial;
    double *dd, *dd_partial;
    CUDA_CHECK(cudaMalloc(&df, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dd, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&df_partial, grid * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dd_partial, grid * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(df, hf.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dd, hd.data(), n * sizeof(double), cudaMemcpyHostToDevice));

    // The two instantiations: <float, 256> and <double, 128>.
    sum_squares<float, 256><<<grid, 256>>>(df, n, df_partial);
    CUDA_CHECK(cudaGetLastError());
    sum_squares<double, 128><<<grid, 128>>>(dd, n, dd_partial);
    CUDA_CHECK(cudaGetLastError());

    const double got_f = sum_partials(df_partial, grid);
    const double got_d = sum_partials(dd_partial, grid);
    const bool ok = std::fabs(got_f - want) <= 1e-5 * want && got_d == want;
    std::printf("sum_squares: want=%.1f float=%.1f double=%.1f %s\n", want, got_f, got_d, ok ? "ok" : "MISMATCH");

    CUDA_CHECK(cudaFree(df));
    CUDA_CHECK(cudaFree(dd));
    CUDA_CHECK(cudaFree(df_partial));
    CUDA_CHECK(cudaFree(dd_partial));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
