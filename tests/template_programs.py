"""Small template programs of our own, judged per instantiation (`tests/test_instantiations.py`,
`tests/server/test_lsp_compiled.py`)."""

# the same loop in each precision: 128 FLOP per element loaded, compute-bound in FP64 on a
# GeForce (ridge under 1 FLOP/B), bandwidth-bound in FP32 (ridge near 40)
SCALE_TEMPLATE = """\
template <typename T>
__global__ void scale(const T *x, T *y, T a, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    T v = x[i];
    for (int k = 0; k < 64; k++) v = v * a + (T)1;
    y[i] = v;
  }
}
template <typename T>
void run(int n)
{
  T *x, *y;
  cudaMalloc(&x, n * sizeof(T));
  cudaMalloc(&y, n * sizeof(T));
  scale<T><<<(n + 255) / 256, 256>>>(x, y, (T)0.5, n);
}
int main() {
  run<float>(1 << 24);
  run<double>(1 << 24);
}
"""

SCALE_REGION = """\
template <typename T>
void scale(int n, const T *x, T *y, T a)
{
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(from: y[0:n])
  for (int i = 0; i < n; i++) {
    T v = x[i];
    for (int k = 0; k < 64; k++) v = v * a + (T)1;
    y[i] = v;
  }
}
int main() {
  static float xf[1 << 22], yf[1 << 22];
  static double xd[1 << 22], yd[1 << 22];
  scale(1 << 22, xf, yf, 0.5f);
  scale(1 << 22, xd, yd, 0.5);
}
"""
