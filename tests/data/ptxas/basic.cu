// Small kernels for the ptxas resource-usage tests: plain, templated (static shared memory and
// a barrier), extern "C", and namespaced.
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void reverse_tile(T* out, const T* in) {
  __shared__ T tile[256];
  tile[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 256 + threadIdx.x] = tile[255 - threadIdx.x];
}
template __global__ void reverse_tile<float>(float*, const float*);
template __global__ void reverse_tile<double>(double*, const double*);

extern "C" __global__ void fill_ones(float* p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

namespace solver {
__global__ void axpby(float a, const float* x, float b, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = a * x[i] + b * y[i];
}
}  // namespace solver
