"""The allocation behind a kernel argument that is a struct's member (`model->m_memory`) is that
member's own `cudaMalloc`, not the first one of another member of the same struct. A small
program of our own, in the shape of a training step's optimizer kernel."""

from perflsp.analysis.extents import leading_name
from tests.engine_reports import kernel_reports, reports

MODEL_SRC = """
#include <cuda_runtime.h>
typedef struct { int *inputs; float *params; float *m; long n; } Model;

__global__ void update(float *params, float *m, long n, float lr) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  m[i] = 0.9f * m[i] + 0.1f * params[i];
  params[i] -= lr * m[i];
}

int main() {
  Model model;
  model.n = 1 << 24;
  cudaMalloc((void **)&model.inputs, 64 * sizeof(int));
  cudaMalloc((void **)&model.params, model.n * sizeof(float));
  cudaMalloc((void **)&model.m, model.n * sizeof(float));
  update<<<(model.n + 255) / 256, 256>>>(model.params, model.m, model.n, 0.01f);
}
"""


def test_a_member_argument_names_the_member_not_its_struct():
    assert leading_name("model->m_memory") == "model->m_memory"
    assert leading_name("(float *)p.a -> b + 4") == "p.a->b"
    assert leading_name("v.data()") == "v"  # a call on the object: the object's storage
    assert leading_name("thrust::raw_pointer_cast(v.data())") == "v"


def test_each_member_argument_takes_its_own_allocation():
    facts = kernel_reports(MODEL_SRC)["update"].facts
    footprints = {g.array: g.footprint_bytes for g in facts.traffic.groups}
    # 2^24 floats each; read as the 64 ints of `model.inputs` they were 256 bytes and the kernel
    # (a stream over 128 MiB) read compute-bound
    assert footprints["params"] == footprints["m"] == (1 << 24) * 4


TREES_SRC = """
#include <stdlib.h>
#define TREE_NUM 4096
#define TREE_SIZE 4096
struct Tree { int apples[TREE_SIZE]; };
struct Orchard { int trees[TREE_NUM]; };
int main() {
  const int elements = TREE_SIZE * TREE_NUM;
  int *data = (int *) malloc(elements * sizeof(int));
  int *output = (int *) malloc(TREE_NUM * sizeof(int));
  #pragma omp target data map(to: data[0:elements]) map(from: output[0:TREE_NUM])
  {
    Tree *trees = (Tree *) data;
    #pragma omp target teams distribute parallel for thread_limit(256)
    for (int gid = 0; gid < TREE_NUM; gid++) {
      int sum = 0;
      for (int i = 0; i < TREE_SIZE; i++) sum += trees[gid].apples[i];
      output[gid] = sum;
    }
  }
}
"""


def test_a_pointer_named_like_another_structs_array_member_keeps_its_own_extent():
    (region,) = reports(TREES_SRC)
    footprints = {g.array: g.footprint_bytes for g in region.facts.traffic.groups if g.footprint_bytes}
    # 4096 trees of 4096 ints each (64 MiB); read as `Orchard::trees`, 4096 ints, they were 16 KiB
    # and a kernel streaming 64 MiB compute-bound
    assert footprints["trees"] == 4096 * 4096 * 4
