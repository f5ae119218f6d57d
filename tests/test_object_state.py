"""Sizes held in C++ objects: the members a method that launches a kernel or holds an OpenMP
region reads, as the object's constructor and the setters its caller applies leave them
(`perflsp.kernels.objects`). Small programs of our own, one per rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import texts
from perflsp.kernels.consteval import NO_ARGUMENTS_NOTE
from tests.engine_reports import reports


def trips(report: KernelReport) -> dict[str, float]:
    return {loop.variable: loop.trip_count for loop in report.facts.loops}


def only(src: str, argv: tuple[str, ...] | None = None, path: Path | None = None) -> KernelReport:
    found = reports(src, path=path, options=AnalysisOptions(argv=argv) if argv is not None else None)
    assert len(found) == 1
    return found[0]


def unknown_trips(report: KernelReport) -> list[str]:
    return [a for a in texts(report.facts.assumptions) if "trip count of the" in a]


SETTERS = """
#include <cstdlib>
#define DEFAULT_PARTICLES 4096
class Sim {
 public:
  Sim() { set_npart(DEFAULT_PARTICLES); nsteps_ = 10; }
  void set_npart(const int &n) { npart_ = n; }
  int get_npart() const { return npart_; }
  void SetNumberOfParticles(int n) { set_npart(n); }
  void Start();
 private:
  int npart_;
  int nsteps_;
  float *p_;
};

void Sim::Start() {
  int n = get_npart();
  float *p = p_;
  #pragma omp target teams distribute parallel for map(tofrom: p[0:n])
  for (int i = 0; i < n; i++) {
    for (int s = 0; s < nsteps_; s++) p[i] = p[i] * 2.0f + 1.0f;
  }
}

int main(int argc, char **argv) {
  Sim sim;
  if (argc > 1) {
    int n = atoi(argv[1]);
    sim.SetNumberOfParticles(n);
  }
  sim.Start();
  return 0;
}
"""


def test_members_set_by_the_constructor_and_a_setter_the_caller_applies():
    report = only(SETTERS, ("20000",))
    # the setter `main` applies with argv[1] (through `set_npart`), read through the getter;
    # `nsteps_` as the constructor sets it
    assert trips(report) == {"i": 20000, "s": 10}
    assert report.facts.work_items == 20000
    assert unknown_trips(report) == []


def test_without_arguments_the_constructor_s_default_holds_and_is_said_to_be_assumed():
    report = only(SETTERS)
    # the branch that reads argv[1] does not run: the constructor's `set_npart(DEFAULT_PARTICLES)`
    assert trips(report) == {"i": 4096, "s": 10}
    assert NO_ARGUMENTS_NOTE in texts(report.facts.assumptions)


INITIALISER_LIST = """
#include <cstdlib>
__global__ void smooth(float *a, int n, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int w = 0; w < width; w++) s += a[(i + w) % n];
  a[i] = s;
}

struct Grid {
  Grid(int edge, int width) : n_(edge * edge), width_(width + 1) {}
  int size() const { return n_; }
  void run(float *d);
  int n_;
  int width_;
};

void Grid::run(float *d) {
  smooth<<<(size() + 255) / 256, 256>>>(d, n_, this->width_);
}

int main(int argc, char **argv) {
  Grid *grid = new Grid(atoi(argv[1]), 7);
  float *d;
  cudaMalloc(&d, grid->size() * sizeof(float));
  grid->run(d);
  return 0;
}
"""


def test_a_constructor_s_initialiser_list_over_its_arguments_reaches_the_launch():
    report = only(INITIALISER_LIST, ("64",))
    # `n_(edge * edge)` with edge = argv[1] = 64, `width_(width + 1)` = 8; the grid through `size()`
    assert trips(report)["w"] == 8
    assert report.facts.work_items == (64 * 64 + 255) // 256 * 256
    assert unknown_trips(report) == []


LOOPED_SETTER = """
#include <cstdlib>
class Solver {
 public:
  explicit Solver(int n) : n_(n), iters_(4) {}
  void set_iters(int k) { iters_ = k; }
  void solve();
 private:
  int n_, iters_;
  double *x_;
};

void Solver::solve() {
  double *x = x_;
  int n = n_;
  #pragma omp target teams distribute parallel for map(tofrom: x[0:n])
  for (int i = 0; i < n; i++)
    for (int k = 0; k < iters_; k++) x[i] = 0.5 * x[i] + 1.0;
}

void tune(Solver &s);

int main(int argc, char **argv) {
  Solver s(atoi(argv[1]));
  for (int r = 0; r < argc; r++) s.set_iters(r);
  s.solve();
  return 0;
}
"""


def test_a_setter_applied_in_a_loop_leaves_its_member_unknown():
    report = only(LOOPED_SETTER, ("5000",))
    assert trips(report)["i"] == 5000  # set by the constructor only
    assert any("(`iters_`)" in text for text in unknown_trips(report))


def test_an_object_handed_to_a_function_keeps_only_what_constructors_alone_set():
    src = LOOPED_SETTER.replace("for (int r = 0; r < argc; r++) s.set_iters(r);", "s.set_iters(3);\n  tune(s);")
    report = only(src, ("5000",))
    # `tune` may call `set_iters`: `iters_` is unknown; `n_`, which only the constructor sets, holds
    assert trips(report)["i"] == 5000
    assert any("(`iters_`)" in text for text in unknown_trips(report))
    straight = only(LOOPED_SETTER.replace("for (int r = 0; r < argc; r++) s.set_iters(r);", "s.set_iters(3);"),
                    ("5000",))
    assert trips(straight) == {"i": 5000, "k": 3}


def test_a_method_called_only_on_its_own_object_is_not_followed():
    src = LOOPED_SETTER.replace("  s.solve();\n", "  s.solve();\n").replace(
        "Solver s(atoi(argv[1]));", "Solver s(atoi(argv[1]));\n  Solver t = make_solver();")
    # (a copy of what a call returns is no construction the rule reads; the first call decides)
    report = only(src.replace("s.solve();", "t.solve();"), ("5000",))
    assert any("(`n`)" in text for text in unknown_trips(report))


HEADER = """
#pragma once
class Mesh {
 public:
  Mesh(int edgeElems);
  int numNode() const { return m_numNode; }
  void relax(double *x);
 private:
  int m_numNode;
};
"""

METHODS = """
#include "mesh.h"
Mesh::Mesh(int edgeElems) {
  int edgeNodes = edgeElems + 1;
  m_numNode = edgeNodes * edgeNodes * edgeNodes;
}

void Mesh::relax(double *x) {
  int numNode = this->numNode();
  #pragma omp target teams distribute parallel for map(tofrom: x[0:numNode])
  for (int i = 0; i < numNode; i++) x[i] = 0.25 * x[i];
}
"""

MAIN = """
#include <cstdlib>
#include "mesh.h"
int main(int argc, char **argv) {
  int edge = argc > 1 ? atoi(argv[1]) : 30;
  Mesh mesh(edge);
  double *x = new double[mesh.numNode()];
  mesh.relax(x);
  return 0;
}
"""


def test_an_accessor_over_a_member_the_constructor_computes_in_another_file(tmp_path: Path):
    (tmp_path / "mesh.h").write_text(HEADER)
    (tmp_path / "main.cpp").write_text(MAIN)
    methods = tmp_path / "mesh.cpp"
    methods.write_text(METHODS)
    report = only(METHODS, ("9",), path=methods)
    # `m_numNode = edgeNodes^3` with edgeNodes = argv[1] + 1, called from `main` in main.cpp
    assert trips(report) == {"i": 1000}
    assert report.facts.work_items == 1000


# structs: fields the host code sets, read in a region of the same function or passed on -------

STRUCTS = """
#include <cstdlib>
struct Params { int n; int iters; float scale; };

void run(float *x, struct Params *q) {
  #pragma omp target teams distribute parallel for map(tofrom: x[0:q->n])
  for (int i = 0; i < q->n; i++)
    for (int k = 0; k < q->iters; k++) x[i] = x[i] * 0.5f;
}

void run_copy(float *x, Params q) {
  #pragma omp target teams distribute parallel for map(tofrom: x[0:q.n])
  for (int i = 0; i < q.n; i++)
    for (int k = 0; k < q.iters; k++) x[i] = x[i] * q.scale;
}

int main(int argc, char **argv) {
  Params p;
  p.n = std::atoi(argv[1]);
  p.iters = 6;
  float *x = new float[p.n];
  #pragma omp target teams distribute parallel for map(tofrom: x[0:p.n])
  for (int i = 0; i < p.n; i++)
    for (int k = 0; k < p.iters; k++) x[i] = x[i] * 0.5f;
  run_copy(x, p);
  run(x, &p);  // (after which `p`'s fields are unknown: `run` may set them)
  return 0;
}
"""


def test_struct_fields_the_host_code_sets_bound_a_region_of_the_same_function():
    found = {r.kernel.name: r for r in reports(STRUCTS, options=AnalysisOptions(argv=("1000",)))}
    # `p.n = std::atoi(argv[1])` (the C function through <cstdlib>'s std::), `p.iters = 6`
    assert trips(found["main@l22"]) == {"i": 1000, "k": 6}
    assert found["main@l22"].facts.work_items == 1000


def test_a_struct_passed_by_address_or_by_value_carries_the_fields_its_caller_set():
    found = {r.kernel.name: r for r in reports(STRUCTS, options=AnalysisOptions(argv=("1000",)))}
    assert trips(found["run@l6"]) == {"i": 1000, "k": 6}  # `q->n`, `q->iters` of `run(x, &p)`
    assert trips(found["run_copy@l12"]) == {"i": 1000, "k": 6}  # `q.n` of `run_copy(x, p)`
    assert unknown_trips(found["run@l6"]) == unknown_trips(found["run_copy@l12"]) == []


def test_a_field_counted_up_in_a_loop_is_not_its_first_value():
    src = STRUCTS.replace("  p.iters = 6;\n", "  p.iters = 0;\n  for (int r = 0; r < 5; r++) if (r % 2) p.iters++;\n")
    found = {r.kernel.name: r for r in reports(src, options=AnalysisOptions(argv=("1000",)))}
    for name in ("main@l23", "run@l6"):
        assert trips(found[name])["i"] == 1000
        assert any("(`p.iters`)" in t or "(`q->iters`)" in t for t in unknown_trips(found[name])), name


RETURNED = """
#include <cstdlib>
typedef struct { int lookups; int grid; } Inputs;

Inputs read_cli(int argc, char *argv[]) {
  Inputs in;
  in.lookups = 17000000;
  in.grid = 11303;
  if (argc > 1) in.lookups = atoi(argv[1]);
  return in;
}

__global__ void lookup(Inputs in, double *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= in.lookups) return;
  double s = 0.0;
  for (int g = 0; g < in.grid; g += 1000) s += g * 0.5;
  out[i] = s;
}

void simulate(Inputs in, double *out) {
  lookup<<<(in.lookups + 255) / 256, 256>>>(in, out);
  #pragma omp target teams distribute parallel for map(from: out[0:in.lookups])
  for (int i = 0; i < in.lookups; i++) out[i] = 2.0 * out[i];
}

int main(int argc, char *argv[]) {
  Inputs in = read_cli(argc, argv);
  double *out;
  cudaMalloc(&out, in.lookups * sizeof(double));
  simulate(in, out);
  return 0;
}
"""


def test_a_struct_a_function_fills_and_returns_carries_its_fields_to_the_kernels():
    found = {r.kernel.name: r for r in reports(RETURNED, options=AnalysisOptions(argv=("5000",)))}
    # `Inputs in = read_cli(argc, argv)`: argv[1] overrides the default; passed on to `simulate`
    assert found["lookup"].facts.work_items == (5000 + 255) // 256 * 256
    assert trips(found["lookup"]) == {"g": 12}
    assert trips(found["simulate@l23"]) == {"i": 5000}


def test_without_arguments_the_returned_struct_s_defaults_hold_and_are_said_to_be_assumed():
    region = next(r for r in reports(RETURNED) if r.kernel.name == "simulate@l23")
    assert trips(region) == {"i": 17000000}
    assert NO_ARGUMENTS_NOTE in texts(region.facts.assumptions)


def test_a_returned_struct_whose_address_is_taken_is_not_followed():
    src = RETURNED.replace("  double *out;\n", "  double *out;\n  tweak(&in);\n")
    region = next(r for r in reports(src, options=AnalysisOptions(argv=("5000",))) if r.kernel.name == "simulate@l23")
    assert any("(`in.lookups`)" in t for t in unknown_trips(region))


AGGREGATE = """
typedef struct { int dim_b; int dim_c; float *data; int size; } params;

void car(float *out, const params p) {
  const int dim_b = p.dim_b;
  #pragma omp target teams distribute parallel for map(tofrom: out[0:p.size])
  for (int b = 0; b < dim_b; b++)
    for (int c = 0; c < p.dim_c; c++) out[b] += c;
}

int main() {
  float *out = new float[1024];
  params p = {128, 3, 0, 1024};
  car(out, p);
  return 0;
}
"""


def test_an_aggregate_initialiser_sets_the_fields_in_their_declared_order():
    report = only(AGGREGATE)
    assert trips(report) == {"b": 128, "c": 3}
    assert unknown_trips(report) == []
    # a designated or nested initialiser is not read by position
    designated = only(AGGREGATE.replace("{128, 3, 0, 1024}", "{.dim_b = 128, .dim_c = 3}"))
    assert any("(`dim_b`)" in t for t in unknown_trips(designated))


GETTERS_IN_MAIN = """
#include <cstdlib>
__global__ void smooth(float *a, int n, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int w = 0; w < width; w++) s += a[(i + w) % n];
  a[i] = s;
}
class Grid {
 public:
  Grid(int edge) : edge_(edge), cells_(edge * edge) {}
  int cells() const { return cells_; }
  int width() const { return edge_ / 8; }
  void refine();
 private:
  int edge_, cells_;
};
void Grid::refine() { edge_ *= 2; cells_ = edge_ * edge_; }
int main(int argc, char **argv) {
  Grid *grid = new Grid(atoi(argv[1]));
  int n = grid->cells();
  float *d;
  cudaMalloc(&d, n * sizeof(float));
  smooth<<<(n + 255) / 256, 256>>>(d, n, grid->width());
  return 0;
}
"""


def test_getters_of_an_object_the_launching_function_constructs_fold():
    report = only(GETTERS_IN_MAIN, ("64",))
    # `cells_(edge * edge)` read through `grid->cells()`, `edge_ / 8` through `grid->width()`
    assert report.facts.work_items == 64 * 64
    assert trips(report) == {"w": 8}


def test_a_setter_in_a_loop_before_the_getter_leaves_it_unknown():
    src = GETTERS_IN_MAIN.replace("  int n = grid->cells();",
                                  "  for (int r = 0; r < argc; r++) grid->refine();\n  int n = grid->cells();")
    report = only(src, ("64",))
    assert any("(`width`)" in t for t in unknown_trips(report))


SCANNED = """
#include <fstream>
#include <string>
class Series {
 public:
  Series(const std::string &path) : length_(-1), width_(0) {
    std::ifstream file(path);
    int most = -1;
    int count = 8;
    for (int v; file >> v;) {
      if (v > most) most = v;
    }
    count = count * 4;
    length_ = most;
    width_ = count;
  }
  int length() const { return length_; }
  int width() const { return width_; }
 private:
  int length_, width_;
};

void reduce(float *out, const float *in, int ns, int traces) {
  #pragma omp target teams distribute parallel for map(to: in[0:ns * traces]) map(from: out[0:ns])
  for (int t = 0; t < ns; t++) {
    float s = 0.0f;
    for (int k = 0; k < traces; k++) s += in[k * ns + t];
    out[t] = s;
  }
}

int main(int argc, char **argv) {
  Series g(argv[1]);
  const int ns = g.length();
  float *in = new float[1 << 20], *out = new float[1 << 20];
  reduce(out, in, ns, g.width());
  return 0;
}
"""


def test_a_constructor_s_local_set_in_a_loop_or_again_is_not_its_first_value():
    report = only(SCANNED, ("data.bin",))
    # `most` is the largest value read from the file, not its initial -1 (a region of -1
    # iterations, read as one work item); `count` is 32 after `count = count * 4`
    assert any("(`ns`)" in t for t in unknown_trips(report))
    assert trips(report)["k"] == 32
    assert report.facts.uncertain is None


@pytest.mark.parametrize("read", ["    file >> most;\n", "    read_into(&most);\n"])
def test_a_constructor_s_local_read_from_a_stream_or_by_address_is_not_its_first_value(read):
    src = SCANNED.replace("    for (int v; file >> v;) {\n      if (v > most) most = v;\n    }\n", read)
    report = only(src, ("data.bin",))
    assert any("(`ns`)" in t for t in unknown_trips(report))


VECTORS = """
#include <cstdlib>
__global__ void column_sum(const float *a, float *b, int3 dims, int cells) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= cells) return;
  float s = 0.0f;
  for (int z = 0; z < dims.z; z++) s += a[z * dims.x * dims.y + i];
  b[i] = s;
}
int main(int argc, char **argv) {
  int v = atoi(argv[1]);
  int3 dims = {v, v, 2 * v};
  const int cells = dims.x * dims.y;
  float *a, *b;
  cudaMalloc(&a, cells * dims.z * sizeof(float));
  cudaMalloc(&b, cells * sizeof(float));
  column_sum<<<(cells + 255) / 256, 256>>>(a, b, dims, cells);
  return 0;
}
"""


@pytest.mark.parametrize("made", ["{v, v, 2 * v}", "make_int3(v, v, 2 * v)"])
def test_a_cuda_vector_s_lanes_fold_on_the_host_and_in_the_kernel_it_is_passed_to(made):
    report = only(VECTORS.replace("{v, v, 2 * v}", made), ("100",))
    # `dims.x * dims.y` on the host sizes the launch; `dims.z` bounds the kernel's loop
    assert report.facts.work_items == (100 * 100 + 255) // 256 * 256
    assert trips(report) == {"z": 200}
    assert unknown_trips(report) == []


def test_a_dim3_passed_to_a_kernel_binds_by_lane():
    src = VECTORS.replace("int3 dims, int cells)", "dim3 dims, int cells)").replace(
        "int3 dims = {v, v, 2 * v};", "dim3 dims(v, v, 2 * v);")
    assert "dim3 dims, int cells" in src and "dim3 dims(v" in src
    report = only(src, ("100",))
    assert trips(report) == {"z": 200}
    # one load per pass of the threads within `cells` (`dims` was read as an accessor object:
    # `dims.z` a global-memory load of its own)
    assert report.facts.per_item.global_loads == pytest.approx(200 * 10000 / 10240)
