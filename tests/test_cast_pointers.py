"""Global accesses through pointers made by casts (`(int4 *)&a[i]`, `reinterpret_cast<float4 *>(p)`)
and through pointer variables: the access is of the array the pointer was made from, at the
index scaled by the element sizes, with the width of the type cast to."""

from __future__ import annotations

import pytest

from perflsp.analysis.notes import texts
from tests.engine_reports import kernel_reports

THREADS = 4096 * 256


def _group(facts, array: str, is_store: bool = False):
    return max((g for g in facts.traffic.groups if g.array == array and g.is_store == is_store),
               key=lambda g: g.footprint_bytes)


HALF_TO_INT4 = """
__global__ void widen(const half *a, int4 *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int4 *p = (const int4 *)(&a[i * 8]);
  out[i] = *p;
}
int main() {
  half *a; int4 *out;
  cudaMalloc(&a, 4096 * 256 * 32 * sizeof(half)); cudaMalloc(&out, 4096 * 256 * sizeof(int4));
  widen<<<4096, 256>>>(a, out);
}
"""


def test_a_pointer_cast_to_a_wider_type_reads_that_width_at_the_scaled_index():
    facts = kernel_reports(HALF_TO_INT4)["widen"].facts
    assert facts.per_item.global_load_bytes == 16
    # `&a[i * 8]` of 2-byte halves is element `i` of 16-byte int4s: one dense 16-byte read per
    # thread, not every other sector
    assert _group(facts, "a").footprint_bytes == pytest.approx(16 * THREADS)
    assert any(line.startswith("DRAM: footprint 33.6 MB") for line in texts(facts.evidence))


OFFSET_AFTER_CAST = """
__global__ void stream(const float *c, float *d) {
  typedef int4 copy_t;
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float *src = &c[(blockIdx.x * 8 + warp) * 128];
  float *dst = d + (blockIdx.x * 8 + warp) * 128;
  *((copy_t *)dst + lane) = *((copy_t *)src + lane);
}
int main() {
  float *c, *d;
  cudaMalloc(&c, 4096 * 256 * 4 * sizeof(float)); cudaMalloc(&d, 4096 * 256 * 4 * sizeof(float));
  stream<<<4096, 256>>>(c, d);
}
"""


def test_an_offset_after_the_cast_counts_in_the_cast_elements():
    facts = kernel_reports(OFFSET_AFTER_CAST)["stream"].facts
    per = facts.per_item
    # the typedef in the body names int4: 16 bytes each way
    assert (per.global_load_bytes, per.global_store_bytes) == (16, 16)
    # a warp reads 32 consecutive int4s of its 128-float row: 16 B a thread, nothing skipped
    assert _group(facts, "c").footprint_bytes == pytest.approx(16 * THREADS)
    assert _group(facts, "d", is_store=True).footprint_bytes == pytest.approx(16 * THREADS)


REINTERPRET = """
__global__ void vec(const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = reinterpret_cast<const float4 *>(x)[i];
  y[i] = v.x + v.y + v.z + v.w;
}
int main() {
  float *x, *y;
  cudaMalloc(&x, 4096 * 256 * 4 * sizeof(float)); cudaMalloc(&y, 4096 * 256 * sizeof(float));
  vec<<<4096, 256>>>(x, y);
}
"""


def test_reinterpret_cast_indexes_in_the_new_elements():
    facts = kernel_reports(REINTERPRET)["vec"].facts
    assert facts.per_item.global_load_bytes == 16
    assert _group(facts, "x").footprint_bytes == pytest.approx(16 * THREADS)


BACK_AND_FORTH = """
__global__ void narrow(const double *a, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const char *bytes = (const char *)(a + i);
  out[i] = *((const float *)(bytes + 4));
}
int main() {
  double *a; float *out;
  cudaMalloc(&a, 4096 * 256 * sizeof(double)); cudaMalloc(&out, 4096 * 256 * sizeof(float));
  narrow<<<4096, 256>>>(a, out);
}
"""


def test_a_byte_offset_between_casts_stays_in_the_array():
    facts = kernel_reports(BACK_AND_FORTH)["narrow"].facts
    assert facts.per_item.global_load_bytes == 4
    # the upper half of each double: floats 2 apart, so a warp's request spans 256 bytes (8 sectors)
    assert _group(facts, "a").streamed_bytes == pytest.approx(THREADS / 32 * 256)


PERSISTENT = """
__global__ void tiles(const float *a, float *b) {
  for (unsigned t = blockIdx.x;; t += gridDim.x) {
    if (t >= 4096) break;
    b[t * 256 + threadIdx.x] = 2.0f * a[t * 256 + threadIdx.x];
  }
}
int main() {
  float *a, *b;
  cudaMalloc(&a, 4096 * 256 * sizeof(float)); cudaMalloc(&b, 4096 * 256 * sizeof(float));
  tiles<<<64, 256>>>(a, b);
}
"""


def test_the_exit_of_a_persistent_loop_is_its_last_pass_not_every_pass():
    facts = kernel_reports(PERSISTENT)["tiles"].facts
    # `if (t >= 4096) break;` compares with a constant: read as the loop's end, the accesses after it run
    assert facts.per_item.global_load_bytes > 0 and facts.per_item.global_store_bytes > 0
    assert _group(facts, "a").footprint_bytes > 0
    assert "line 4: `if (t >= 4096)` leaves the block: read as taken at the edge only (the code after it runs)" \
        in texts(facts.assumptions)
