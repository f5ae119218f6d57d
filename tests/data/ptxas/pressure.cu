// Kernels that spill registers and use a stack frame, for the ptxas resource-usage tests.
#include "pressure_config.h"

// 1024 threads per block caps registers at 64; LIVE_VALUES live floats do not fit.
__global__ void __launch_bounds__(1024, 1) spills(float* out, const float* in, int n) {
  float acc[LIVE_VALUES];
#pragma unroll
  for (int j = 0; j < LIVE_VALUES; j++) acc[j] = in[threadIdx.x + j * n];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int j = 0; j < LIVE_VALUES; j++) acc[j] = acc[j] * acc[(j * 7 + r) % LIVE_VALUES] + in[j];
  float s = 0;
#pragma unroll
  for (int j = 0; j < LIVE_VALUES; j++) s += acc[j] * acc[LIVE_VALUES - 1 - j];
  out[threadIdx.x] = s;
}

// A dynamically indexed local array lives on the stack of a non-inlined function.
__device__ __noinline__ float pick(const float* a, int k) {
  float local[64];
  for (int i = 0; i < 64; i++) local[i] = a[i] * i;
  return local[k & 63];
}

__global__ void uses_stack(float* a, int k) { a[threadIdx.x] = pick(a, k + threadIdx.x); }

#ifdef WIDE_TILE
#define TILE 2048
#else
#define TILE 256
#endif
__global__ void tiled_copy(float* out, const float* in) {
  __shared__ float tile[TILE];
  for (int i = threadIdx.x; i < TILE; i += blockDim.x) tile[i] = in[blockIdx.x * TILE + i];
  __syncthreads();
  for (int i = threadIdx.x; i < TILE; i += blockDim.x) out[blockIdx.x * TILE + i] = tile[TILE - 1 - i];
}
