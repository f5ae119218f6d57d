"""C++ styles of GPU code the engine must follow (issue 12): kernels and OpenMP regions over a
class's member arrays, templated kernels launched from templated methods, lambdas and
functors applied per element. Each on a small program written for the test; each verdict must
rest on bytes and FLOPs per work item, not on `uncertain`."""

from pathlib import Path

from test_constructs import analyse

from perflsp.analysis.notes import texts

# a CUDA class: members allocated in the constructor, templated kernels launched from methods

CUDA_CLASS_SRC = """
#include <cuda_runtime.h>
#define TBSIZE 1024
#define DOT_NUM_BLOCKS 256

template <class T>
__global__ void copy_kernel(const T * __restrict a, T * __restrict c)
{
  const int i = blockDim.x * blockIdx.x + threadIdx.x;
  c[i] = a[i];
}

template <class T>
__global__ void triad_kernel(T * a, const T * b, const T * c, T scalar, int array_size)
{
  for (int i = (int)(threadIdx.x + blockIdx.x * blockDim.x); i < array_size; i += gridDim.x * blockDim.x)
    a[i] = b[i] + scalar * c[i];
}

template <class T>
__global__ void dot_kernel(const T * a, const T * b, T * sum, int array_size)
{
  __shared__ T tb_sum[TBSIZE];
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  const size_t local_i = threadIdx.x;
  tb_sum[local_i] = 0.0;
  for (; i < array_size; i += blockDim.x*gridDim.x)
    tb_sum[local_i] += a[i] * b[i];
  for (int offset = blockDim.x / 2; offset > 0; offset /= 2)
  {
    __syncthreads();
    if (local_i < offset)
      tb_sum[local_i] += tb_sum[local_i+offset];
  }
  if (local_i == 0)
    sum[blockIdx.x] = tb_sum[local_i];
}

template <class T>
__global__ void poly_kernel(const T * __restrict a, T * __restrict c)
{
  const size_t i = (size_t)blockDim.x * blockIdx.x + threadIdx.x;
  T x = a[i];
  T y = 0;
  for (int k = 0; k < 512; k++) y = y * x + (T)1.0;
  c[i] = y;
}

template <class T>
class Stream
{
  protected:
    int array_size;
    T *sums;
    T *d_a;
    T *d_b;
    T *d_c;
  public:
    Stream(const int ARRAY_SIZE);
    void copy();
    void triad();
    void poly();
    T dot();
};

template <class T>
Stream<T>::Stream(const int ARRAY_SIZE)
{
  array_size = ARRAY_SIZE;
  cudaMalloc(&d_a, array_size*sizeof(T));
  cudaMalloc(&d_b, array_size*sizeof(T));
  cudaMalloc(&d_c, array_size*sizeof(T));
  cudaMalloc(&sums, DOT_NUM_BLOCKS*sizeof(T));
}

template <class T>
void Stream<T>::copy()
{
  copy_kernel<T><<<array_size/TBSIZE, TBSIZE>>>(d_a, d_c);
}

template <class T>
void Stream<T>::triad()
{
  triad_kernel<T><<<array_size/TBSIZE, TBSIZE>>>(this->d_a, this->d_b, this->d_c, (T)0.4, array_size);
}

template <class T>
void Stream<T>::poly()
{
  poly_kernel<T><<<array_size/TBSIZE, TBSIZE>>>(d_a, d_c);
}

template <class T>
T Stream<T>::dot()
{
  dot_kernel<T><<<DOT_NUM_BLOCKS, TBSIZE>>>(d_a, d_b, sums, array_size);
  return 0;
}

template class Stream<float>;
template class Stream<double>;
"""


def _by_name(reports):
    return {r.kernel.name.split("@")[0].split("::")[-1]: r for r in reports}


def test_templated_kernels_launched_from_a_class_read_its_member_arrays():
    reports = _by_name(analyse(CUDA_CLASS_SRC))
    for name in ("copy_kernel", "triad_kernel", "dot_kernel"):
        assert reports[name].estimates[0].verdict == "bandwidth", name
    copy = reports["copy_kernel"].facts.per_item
    assert (copy.global_load_bytes, copy.global_store_bytes) == (4, 4)
    triad = reports["triad_kernel"].facts.per_item
    # `T` is the launching method's own parameter: assumed float, and the FMA is FP32 work
    assert (triad.global_loads, triad.global_stores) == (2, 1)
    assert triad.fp32 == 2 and triad.fp64 == 0
    assert any("template type `T` of the launching code" in a for a in texts(reports["triad_kernel"].facts.assumptions))
    dot = reports["dot_kernel"].facts.per_item
    assert dot.global_loads > 1 and dot.fp32 > 1  # a grid-stride loop over the production size


def test_templated_kernel_doing_many_fmas_per_element_is_compute_bound():
    poly = _by_name(analyse(CUDA_CLASS_SRC))["poly_kernel"]
    assert poly.estimates[0].verdict == "compute"
    assert poly.facts.per_item.fp32 >= 1024 and poly.facts.per_item.global_load_bytes == 4


# an OpenMP-offload class: host/target pragma split, member arrays, a member size

OMP_CLASS_H = """
#pragma once
template <class T>
class OMPStream
{
  protected:
    long array_size;
    T *a;
    T *b;
    T *c;
  public:
    OMPStream(const long, int);
    void copy();
    void mul();
    void triad();
    void poly();
    T dot();
};
"""

OMP_CLASS_SRC = """
#include <cstdlib>
#include "OMPStream.h"

template <class T>
OMPStream<T>::OMPStream(const long ARRAY_SIZE, int device)
{
  array_size = ARRAY_SIZE;
  this->a = (T*)malloc(sizeof(T)*array_size);
  this->b = (T*)malloc(sizeof(T)*array_size);
  this->c = (T*)malloc(sizeof(T)*array_size);
#ifdef OMP_TARGET_GPU
  T *a = this->a;
  T *b = this->b;
  T *c = this->c;
  #pragma omp target enter data map(alloc: a[0:array_size], b[0:array_size], c[0:array_size])
  {}
#endif
}

template <class T>
void OMPStream<T>::copy()
{
#ifdef OMP_TARGET_GPU
  long array_size = this->array_size;
  T *a = this->a;
  T *c = this->c;
  #pragma omp target teams distribute parallel for simd
#else
  #pragma omp parallel for
#endif
  for (long i = 0; i < array_size; i++)
  {
    c[i] = a[i];
  }
}

template <class T>
void OMPStream<T>::mul()
{
  const T scalar = 0.4;
#ifdef OMP_TARGET_GPU
  #pragma omp target teams distribute parallel for simd map(to: c[0:array_size]) map(from: b[0:array_size])
#else
  #pragma omp parallel for
#endif
  for (unsigned i = 0; i < array_size; i++)
  {
    this->b[i] = scalar * this->c[i];
  }
}

template <class T>
void OMPStream<T>::triad()
{
  const T scalar = 0.4;
#ifdef OMP_TARGET_GPU
  #pragma omp target teams distribute parallel for simd
#else
  #pragma omp parallel for
#endif
  for (int i = 0; i < array_size; i++)
  {
    a[i] = b[i] + scalar * c[i];
  }
}

template <class T>
void OMPStream<T>::poly()
{
  #pragma omp target teams distribute parallel for simd
  for (int i = 0; i < array_size; i++)
  {
    T x = a[i];
    T y = 0;
    for (int k = 0; k < 512; k++) y = y * x + (T)1.0;
    c[i] = y;
  }
}

template <class T>
T OMPStream<T>::dot()
{
  T sum{};
#ifdef OMP_TARGET_GPU
  long array_size = this->array_size;
  T *a = this->a;
  T *b = this->b;
  #pragma omp target teams distribute parallel for simd map(tofrom: sum) reduction(+:sum)
#else
  #pragma omp parallel for reduction(+:sum)
#endif
  for (long i = 0; i < array_size; i++)
  {
    sum += a[i] * b[i];
  }
  return sum;
}
template class OMPStream<float>;
template class OMPStream<double>;
"""


def _omp_reports(tmp_path: Path):
    (tmp_path / "OMPStream.h").write_text(OMP_CLASS_H)
    path = tmp_path / "OMPStream.cpp"
    path.write_text(OMP_CLASS_SRC)
    return {r.kernel.name.split("::")[-1].split("@")[0]: r for r in analyse(OMP_CLASS_SRC, path)}


def test_omp_regions_over_member_arrays_of_a_class_declared_in_a_header(tmp_path):
    reports = _omp_reports(tmp_path)
    assert set(reports) == {"copy", "mul", "triad", "poly", "dot"}
    for name in ("copy", "mul", "triad", "dot"):
        report = reports[name]
        assert report.estimates[0].verdict == "bandwidth", name
        # a member size is an unknown problem size: production scale, not one work item
        assert report.facts.work_items >= 1 << 20, name
        assert any(a.startswith("problem size unknown") for a in texts(report.facts.assumptions)), name
    assert any("template type `T` of the enclosing code: assumed float" in a for a in texts(reports["copy"].facts.assumptions))
    copy = reports["copy"].facts.per_item
    assert (copy.global_loads, copy.global_stores) == (1, 1)
    assert (copy.global_load_bytes, copy.global_store_bytes) == (4, 4)  # `T *` of the class template: float
    mul = reports["mul"].facts.per_item  # `this->b[i]`, `this->c[i]`
    assert (mul.global_loads, mul.global_stores, mul.fp32) == (1, 1, 1)
    triad = reports["triad"].facts.per_item  # members used directly
    assert (triad.global_loads, triad.global_stores, triad.fp32) == (2, 1, 2)
    dot = reports["dot"].facts.per_item  # `reduction(+:sum)`: the sum stays in a register
    assert (dot.global_loads, dot.fp32) == (2, 2)


def test_omp_region_doing_many_fmas_per_element_of_a_member_array_is_compute_bound(tmp_path):
    poly = _omp_reports(tmp_path)["poly"]
    assert poly.estimates[0].verdict == "compute"
    assert poly.facts.per_item.fp32 >= 1024


# lambdas and functors applied per element

LAMBDA_SRC = """
#include <vector>
#include <cstdlib>
#include <cuda_runtime.h>
#define TBSIZE 256

template <typename F>
__global__ void for_each(int n, F body)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) body(i);
}

__global__ void scale_vec(const double *in, double *out, size_t n)
{
  auto apply = [=] __device__ (size_t i) { out[i] = 3.0 * in[i]; };
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) apply(i);
}

template <typename F>
__global__ void grid_for_each(size_t n, F f)
{
  for (size_t i = (size_t)threadIdx.x + (size_t)blockDim.x * blockIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    f(i);
}

template <typename F>
void parallel_for(size_t n, F f)
{
  grid_for_each<<<1024, 256>>>(n, f);
}

template <class T>
struct Arrays
{
  size_t array_size;
  T *d_a;
  T *d_b;
  T *d_c;
  void nstream()
  {
    parallel_for(array_size, [=, a = this->d_a, b = this->d_b, c = this->d_c] __device__ (size_t i) {
      a[i] += b[i] + (T)0.4 * c[i];
    });
  }
};

int main(int argc, char **argv)
{
  int n = atoi(argv[1]);
  std::vector<float> hx(n);
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  for_each<<<(n + TBSIZE - 1) / TBSIZE, TBSIZE>>>(n, [=] __device__ (int i) { y[i] = x[i] + y[i]; });
  double *din, *dout;
  cudaMalloc(&din, n * sizeof(double));
  cudaMalloc(&dout, n * sizeof(double));
  scale_vec<<<(n + TBSIZE - 1) / TBSIZE, TBSIZE>>>(din, dout, n);
}
"""


def test_a_lambda_defined_in_the_kernel_is_walked_where_it_is_called():
    scale = _by_name(analyse(LAMBDA_SRC))["scale_vec"]
    assert scale.estimates[0].verdict == "bandwidth"
    per = scale.facts.per_item
    assert (per.global_load_bytes, per.global_store_bytes, per.fp64) == (8, 8, 1)


def test_a_lambda_passed_at_the_launch_reads_the_device_pointers_it_captures():
    report = _by_name(analyse(LAMBDA_SRC))["for_each"]
    assert report.estimates[0].verdict == "bandwidth"
    per = report.facts.per_item
    assert (per.global_loads, per.global_stores, per.fp32) == (2, 1, 1)
    assert per.global_load_bytes == 8


def test_a_lambda_handed_down_to_the_launching_function_reads_the_members_it_captures():
    report = _by_name(analyse(LAMBDA_SRC))["grid_for_each"]
    assert report.estimates[0].verdict == "bandwidth"
    per = report.facts.per_item
    # 3 loads and 1 store of 4-byte elements per iteration of the grid-stride loop
    assert per.global_loads == 3 * per.global_stores > 0
    assert per.global_load_bytes == 4 * per.global_loads
    assert per.fp32 > 0 and per.fp64 == 0



FUNCTOR_SRC = """
#include <vector>
#include <cuda_runtime.h>
struct Saxpy {
  float a;
  __device__ float operator()(float x, float y) const { return a * x + y; }
};
struct Poly {
  __device__ float operator()(float x) const { float y = 0.f; for (int k = 0; k < 256; k++) y = y * x + 1.0f; return y; }
};
template <typename F>
__global__ void apply_kernel(const float *x, float *y, F f, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i], y[i]);
}
template <typename F>
__global__ void map_kernel(const float *x, float *y, F f, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}
void go(std::vector<float> &hx, int n)
{
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  apply_kernel<<<(n + 255) / 256, 256>>>(x, y, Saxpy{2.0f}, n);
  Poly p;
  map_kernel<<<(n + 255) / 256, 256>>>(x, y, p, n);
}
"""


def test_a_functor_passed_to_the_kernel_is_applied_through_its_call_operator():
    reports = _by_name(analyse(FUNCTOR_SRC))
    saxpy = reports["apply_kernel"]  # a temporary `Saxpy{2.0f}`: one FMA per element
    assert saxpy.estimates[0].verdict == "bandwidth"
    assert (saxpy.facts.per_item.global_loads, saxpy.facts.per_item.fp32) == (2, 2)
    poly = reports["map_kernel"]  # a variable `Poly p;`: 256 FMAs per element loaded
    assert poly.estimates[0].verdict == "compute"
    assert poly.facts.per_item.fp32 == 512 and poly.facts.per_item.global_load_bytes == 4


STRUCT_ARGUMENT_SRC = """
struct Scale {
  float *a;
  const float *b;
  float s;
  __device__ void operator()(int i) const { a[i] = s * b[i]; }
};
struct Arrays { float *x; float *y; };
template <class F>
__global__ void run(F f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}
__global__ void by_value(Arrays arr, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) arr.x[i] = arr.y[i] + 1.0f;
}
void go(float *d_a, float *d_b, int n) {
  Scale op{d_a, d_b, 2.0f};
  run<<<(n + 255) / 256, 256>>>(op, n);
  Arrays arr{d_a, d_b};
  by_value<<<(n + 255) / 256, 256>>>(arr, n);
}
"""


def test_pointer_members_of_a_struct_or_functor_passed_by_value_are_global_arrays():
    reports = _by_name(analyse(STRUCT_ARGUMENT_SRC))
    for name in ("run", "by_value"):
        per = reports[name].facts.per_item
        assert reports[name].estimates[0].verdict == "bandwidth", name
        # `arr.y[i]` is a load of its own array, not a row of an accessor of unknown rank
        assert (per.global_loads, per.global_stores, per.fp32) == (1, 1, 1), name
        assert (per.global_load_bytes, per.global_store_bytes) == (4, 4), name


GUARDED_GRID_STRIDE_SRC = """
__global__ void sequence(unsigned n, unsigned *dirs, float *out)
{
    out = out + n * blockIdx.y;          // one row of the output per block row
    int i0 = threadIdx.x + blockIdx.x * blockDim.x;
    int stride = gridDim.x * blockDim.x;
    unsigned x = dirs[blockIdx.y];
    if (i0 < n) out[i0] = (float)x;      // the first point of each thread
    for (unsigned i = i0 + stride; i < n; i += stride) {
        x ^= dirs[i & 31];
        out[i] = (float)x;
    }
}
"""


def test_a_grid_stride_loop_after_a_bounds_guard_runs_over_the_production_size():
    """`if (i0 < n)` would read `n` as what the assumed launch covers; the grid-stride loop on
    `n` after it says that the launch does not cover it (a 2-D grid striding in x)."""
    report = _by_name(analyse(GUARDED_GRID_STRIDE_SRC))["sequence"]
    per = report.facts.per_item
    assert per.global_stores > 4  # the loop runs, not once per thread
    assert any("grid-stride loop over an unknown size" in a for a in texts(report.facts.assumptions))
    assert report.estimates[0].verdict == "bandwidth"
