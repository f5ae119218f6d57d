"""Which arm of a bounds guard the threads take: nearly all are in bounds, whichever way the
condition is written. Small programs of our own."""


from perflsp.analysis.models import KernelReport
from tests.engine_reports import kernel_reports


def analyse(src: str) -> dict[str, KernelReport]:
    return kernel_reports(src)


GUARDS_SRC = """
__global__ void padded(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v;
  if (i >= n) v = 0.0f;
  else v = in[i] * 2.0f;
  out[i] = v;
}
__global__ void padded_2d(const float *in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  float v = (x >= w || y >= h || x < 0) ? 0.0f : in[y * w + x];
  out[y * w + x] = v + 1.0f;
}
__global__ void in_bounds(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2.0f;
}
__global__ void differences(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0) out[i] = in[i] - in[i - 1];
}
"""


def test_the_in_bounds_arm_is_taken_whichever_way_the_guard_is_written():
    reports = analyse(GUARDS_SRC)
    for name in ("padded", "padded_2d", "in_bounds"):
        per_item = reports[name].facts.per_item
        assert per_item.global_loads == 1, name
        assert per_item.fp32 == 1, name
    # `i > 0` is a low edge: the threads above it do the work
    assert reports["differences"].facts.per_item.global_loads == 2


RESET_SRC = """
__global__ void spread(const unsigned char *bins, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int seen = 0;
  float mean = 0.0f;
  for (int k = 0; k < 8; k++) {
    if (bins[i * 8 + k] > 3) { seen++; mean += 1.0f; }
  }
  if (seen == 0) {
    seen = 1;
  } else {
    for (int k = 0; k < 8; k++) mean = mean * 0.5f + (float)k;
  }
  float width = mean;
  if (width <= 0.001f || width > 1000.0f) width = 1.0f;
  else width = width * width;
  out[i] = mean * (float)seen + width;
}
"""


def test_an_arm_that_only_resets_the_value_it_tests_is_the_rare_case():
    facts = analyse(RESET_SRC)["spread"].facts
    # `seen == 0` resets `seen`: the `else` loop runs (8 x 2 FLOP), as does `width * width`;
    # the first loop's `mean += 1.0f` keeps its even share (4), the product and sum 2
    assert facts.per_item.fp32 == 16 + 1 + 4 + 2
    texts = [note.text for note in facts.assumptions]
    assert any("`if (seen == 0)` only resets the value it tests" in text for text in texts)
    assert any("`if (width <= 0.001f || width > 1000.0f)` only resets" in text for text in texts)


WINDOW_SRC = """
__global__ void gather(const float *img, const int2 *pts, float *out, int w, int h) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  int x0 = pts[n].x, y0 = pts[n].y;
  float s = 0.0f;
  for (int a = -4; a < 4; a++)
    for (int b = -4; b < 4; b++)
      if (x0 + a >= 0 && y0 + b >= 0 && x0 + a < w && y0 + b < h)
        s += img[(y0 + b) * w + x0 + a] * 0.5f;
  float t;
  if (x0 < 0 || x0 >= w) t = 1.0f; else t = s * s;
  float u = 0.0f;
  if (s >= 0.0f && s < 1.0f) u = s * 3.0f;
  out[n] = s + t + u;
}
"""


def test_an_index_read_from_data_is_in_bounds_where_the_test_is_of_its_bounds():
    per_item = analyse(WINDOW_SRC)["gather"].facts.per_item
    # the window's 64 points, each tested `>= 0` and `< w` on the same indices: in bounds (a
    # multiply and an add each); `x0 < 0 || x0 >= w` is out of them: its `else` runs (1);
    # `s >= 0.0f && s < 1.0f` is a value's range, no index's: half (0.5); the sums 2
    assert per_item.fp32 == 128 + 1 + 0.5 + 2
    assert per_item.global_loads == 2 + 64  # (the point's two coordinates)


# (also compiled: `test_compiled_weights`)
EXITS_SRC = """
__device__ float4 normal_at(const float3 *p, int i, int w) {
  float3 q = p[i];
  if (isnan(q.z)) return make_float4(0.f, 0.f, 0.f, 0.f);
  bool left = !isnan(p[i - 1].z), right = !isnan(p[i + 1].z);
  if (!left & !right) return make_float4(0.f, 0.f, 0.f, 1.f);
  float dx = p[i + 1].x - p[i - 1].x, dz = p[i + 1].z - p[i - 1].z;
  return make_float4(dx * q.x, dz * q.y, dx * dz, 1.f);
}
__global__ void normals(const float3 *p, float4 *out, int w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = normal_at(p, i, w);
}
__global__ void shifts(const float *in, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  if (v > 0.5f) { out[i] = v * 2.0f; return; }
  out[i] = v * v + 1.0f;
}
int main() { float3 *p; float4 *n; float *a, *b; normals<<<4096, 256>>>(p, n, 1024); shifts<<<4096, 256>>>(a, b); }
"""


def test_a_test_of_data_returning_a_constant_turns_away_the_exceptions():
    reports = analyse(EXITS_SRC)
    normals = reports["normals"].facts
    # the two exits return constants (a NaN point, no valid neighbour): the exceptions; every
    # thread computes the differences and products after them (2 + 3 FLOP), not a quarter
    assert normals.per_item.fp32 == 5
    texts = [note.text for note in normals.assumptions]
    assert any("returns a constant on a test of data: read as the exception" in text for text in texts)
    # an exit that stores its own result first is work of its own: an even split (1 + 2 halves)
    assert reports["shifts"].facts.per_item.fp32 == 0.5 * 1 + 0.5 * 2
