"""A template kernel or an OpenMP region in a function template judged for the instantiation named
from outside (an evaluation row's signature: `void k<double, 8>(const T1 *, T1 *, int)`): its
types and values are that instantiation's, not those of the first launch or call of the file.
Small programs of our own."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.models import KernelReport
from perflsp.compiled.names import instantiation_arguments
from perflsp.evaluation.labels import read_labels
from tests.engine_reports import reports


@pytest.mark.parametrize(("name", "expected"), [
    ("void k<float, 256>(T1 *, int)", ("float", "256")),
    ("void pool<Grad<float>, float, 11>(int, const T2 *)", ("Grad<float>", "float", "11")),
    ("void gen<int, unsigned long, int>(T1 *, T2 *)", ("int", "unsigned long", "int")),
    ("void k<(char)1, true>(int)", ("1", "true")),
    ("add<double>@l104", ("double",)),
    ("resize<unsigned char, 8ul>@l65", ("unsigned char", "8ul")),
    ("void k(float *, int)", None),  # no template
    ("main@l57", None),
    ("Stream<double>::add@l30", None),  # a method of a class template: the class's arguments
])
def test_the_instantiation_is_read_from_a_signature_or_a_region_s_name(name, expected):
    assert instantiation_arguments(name) == expected


def test_a_labels_row_names_its_instantiation(tmp_path: Path):
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "target,language,kernel,kernel_signature,file,line,label\n"
        'a-cuda,cuda,k,"void k<double, 8>(const T1 *, T1 *, int)",a-cuda/main.cu,3,compute\n'
        "a-cuda,cuda,plain,\"plain(float *, int)\",a-cuda/main.cu,9,bandwidth\n"
        "a-omp,omp,\"smooth<8, double>@l4\",__omp_offloading_x,a-omp/main.cpp,4,bandwidth\n")
    rows = [row for row, _ in read_labels(labels)]
    assert [row.instantiation for row in rows] == [("double", "8"), None, ("8", "double")]


CUDA_SRC = """
template <typename T, int R>
__global__ void k(const T *x, T *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T acc = 0;
  for (int j = 0; j < R; j++) acc += x[i] * x[(i + j) % n];
  y[i] = acc;
}
int main() {
  const int n = 1 << 20;
  float *xf, *yf; double *xd, *yd;
  cudaMalloc(&xf, n * sizeof(float)); cudaMalloc(&yf, n * sizeof(float));
  cudaMalloc(&xd, n * sizeof(double)); cudaMalloc(&yd, n * sizeof(double));
  k<float, 4><<<n / 256, 256>>>(xf, yf, n);
  k<double, 8><<<n / 256, 256>>>(xd, yd, n);
}
"""


def _trips(report: KernelReport) -> dict[str, float]:
    return {loop.variable: loop.trip_count for loop in report.facts.loops}


def test_a_template_kernel_is_judged_for_the_instantiation_named():
    first = reports(CUDA_SRC)[0]  # nothing named: the first launch's
    assert _trips(first)["j"] == 4
    assert first.facts.per_item.fp32 > 0 and first.facts.per_item.fp64 == 0
    named = reports(CUDA_SRC, options=AnalysisOptions(instantiation=("double", "8")))[0]
    assert _trips(named)["j"] == 8
    assert named.facts.per_item.fp64 > 0 and named.facts.per_item.fp32 == 0
    # double elements: twice the bytes of the float instantiation per element moved
    assert named.facts.total.global_load_bytes > first.facts.total.global_load_bytes


def test_a_named_instantiation_that_does_not_fit_the_template_is_not_used():
    report = reports(CUDA_SRC, options=AnalysisOptions(instantiation=("double",)))[0]  # one argument of two
    assert _trips(report)["j"] == 4  # the first launch's, as without a name


OMP_SRC = """
template <int R, typename T>
void smooth(const T *in, T *out, int n) {
  #pragma omp target teams distribute parallel for thread_limit(256)
  for (int i = 0; i < n; i++) {
    T sum = 0;
    for (int j = -R; j <= R; j++) sum += in[(i + j + n) % n] * (T)0.5;
    out[i] = sum;
  }
}
int main() {
  const int n = 1 << 20;
  float *in = new float[n], *out = new float[n];
  double *din = new double[n], *dout = new double[n];
  #pragma omp target data map(to: in[0:n], din[0:n]) map(from: out[0:n], dout[0:n])
  {
    smooth<4, float>(in, out, n);
    smooth<8, double>(din, dout, n);
  }
}
"""


def test_a_region_in_a_function_template_is_judged_for_the_instantiation_named():
    first = reports(OMP_SRC)[0]
    assert _trips(first)["j"] == 9
    assert first.facts.per_item.fp32 > 0 and first.facts.per_item.fp64 == 0
    named = reports(OMP_SRC, options=AnalysisOptions(instantiation=("8", "double")))[0]
    assert _trips(named)["j"] == 17
    assert named.facts.per_item.fp64 > 0 and named.facts.per_item.fp32 == 0
    assert not any("instantiations" in a.text for a in named.facts.assumptions)
