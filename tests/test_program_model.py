"""The program model (perflsp.kernels.program): what the analysis reads from a file, built once
per file context and shared by its kernels."""

from __future__ import annotations

import perflsp.kernels.program as program
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis, analyze_file
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.program import ProgramModel
from perflsp.source.parser import parse
from tests.engine_reports import reports

H100 = load_database().get("h100")

HOST = """
#define N 4096
__global__ void scale(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }
__global__ void copy(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[i];
}
static void run(int n) {
  float *d_a, *d_in, *d_out;
  float *h = (float *)malloc(n * sizeof(float));
  double *w = new double[N];
  std::vector<int> v(2 * N);
  float table[16][N];
  cudaMalloc(&d_a, n * sizeof(float));
  cudaMalloc(&d_in, N * sizeof(float));
  cudaMalloc(&d_out, N * sizeof(float));
  scale<<<n / 256, 256>>>(d_a, n);
  copy<<<N / 256, 256>>>(d_in, h, N);  /* mapped host memory: sized by its malloc */
}
int main() { run(1 << 20); return 0; }
"""


def model_of(src: str, argv: tuple[str, ...] | None = None) -> ProgramModel:
    data = src.encode()
    tree = parse(data)
    return ProgramModel(data, tree, extract(data, tree), argv=argv)


def test_host_allocations_are_indexed_by_form():
    model = model_of(HOST)
    h, w, v, table = (model.host_allocation(name) for name in ("h", "w", "v", "table"))
    assert h is not None and h.kind == "malloc" and h.groups == ("n * sizeof(float)",)
    assert w is not None and w.kind == "new[]" and w.groups[:2] == ("double", "N")
    assert v is not None and v.kind == "std::vector" and v.groups == ("int", "2 * N")
    assert table is not None and table.kind == "array" and table.groups[0] == "float"
    assert model.host_allocation("d_a") is None  # device memory: found through calls_to(cudaMalloc)
    assert len(model.calls_to("cudaMalloc")) == 3


def test_an_array_member_of_a_struct_is_no_allocation_of_its_name():
    # `trees` is a member of `Rows` and, elsewhere, a pointer to `Tree`s: the member's 4096
    # ints are what each `Rows` holds, not the extent of the pointer
    model = model_of("""
#define N 4096
struct Tree { int apples[N]; };
struct Rows { int trees[N]; struct { float w[8]; } inner; };
struct Cell { int ids[4]; };
Cell table[32];
int main() {
  int *data = (int *)malloc(N * N * sizeof(int));
  Tree *trees = (Tree *)data;
  int apples[7];
  return trees[1].apples[2] + apples[0];
}
""")
    assert model.host_allocation("trees") is None and model.host_allocation("w") is None
    assert model.host_allocation("ids") is None
    table, apples = model.host_allocation("table"), model.host_allocation("apples")
    assert table is not None and table.groups == ("Cell", "[32]")
    assert apples is not None and apples.groups == ("int", "[7]")  # (the local array, not the member)


def test_constants_fold_where_they_are_used_with_the_callers_arguments():
    model = model_of(HOST)
    site = next(s for s in model.kernels.launches if s.name == "scale")
    # `n` is run()'s parameter: its first caller passes 1 << 20
    assert model.fold_at(site.span.start_byte, "n / 256") == (1 << 20) // 256
    assert model.constant("N") == (4096.0, "int")


def test_one_model_and_one_scan_of_the_host_code_serve_every_kernel(monkeypatch):
    built, scans = [], []
    real_init, real_index = ProgramModel.__init__, program.index_allocations

    def counting_init(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    def counting_index(text):
        scans.append(1)
        return real_index(text)

    monkeypatch.setattr(ProgramModel, "__init__", counting_init)
    monkeypatch.setattr(program, "index_allocations", counting_index)
    data = HOST.encode()
    tree = parse(data)
    reports = analyze_file(data, tree, extract(data, tree), [H100])
    assert [r.name for r in reports] == ["scale", "copy"]
    assert built == [1] and scans == [1]
    # the extents the scan found bound the traffic: `copy` moves its two N-float arrays
    copy = reports[1]
    assert copy.facts.traffic is not None and copy.facts.traffic.footprint_bytes <= 2 * 4096 * 4


def test_an_analysis_over_a_given_model_equals_one_that_builds_it():
    data = HOST.encode()
    tree = parse(data)
    kernels = extract(data, tree)
    options = AnalysisOptions(argv=("8",))
    model = ProgramModel(data, tree, kernels, argv=options.argv)
    shared = FileAnalysis(data, tree, kernels, options, model=model).reports([H100])
    fresh = FileAnalysis(data, tree, kernels, options).reports([H100])
    assert [(r.name, r.facts.work_items, r.facts.dram_bytes, r.estimates[0].verdict) for r in shared] == \
        [(r.name, r.facts.work_items, r.facts.dram_bytes, r.estimates[0].verdict) for r in fresh]


def test_a_source_that_calls_many_functions_of_the_file_is_read_once(tmp_path, monkeypatch):
    # three wrappers, each launching a kernel, all called from main.cu: one read of main.cu
    kernels = "".join(f"""
__global__ void k{n}(float *x, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += {n}.0f; }}
void run{n}(float *x, int n) {{ k{n}<<<(n + 255) / 256, 256>>>(x, n); }}
""" for n in range(3))
    (tmp_path / "main.cu").write_text("""
int main() {
  float *x;
  cudaMalloc(&x, 4096 * sizeof(float));
  run0(x, 1024); run1(x, 2048); run2(x, 4096);
}
""")
    path = tmp_path / "kernels.cu"
    path.write_text(kernels)
    program._sibling_model.cache_clear()
    reads: list[str] = []
    real_read = program.read_source

    def counting_read(source_path, *args, **kwargs):
        reads.append(source_path.name if source_path is not None else "")
        return real_read(source_path, *args, **kwargs)

    monkeypatch.setattr(program, "read_source", counting_read)
    found = reports(kernels, path)
    assert [r.facts.work_items for r in found] == [1024, 2048, 4096]
    assert reads.count("main.cu") == 1


def test_a_fragment_included_inside_a_function_reads_that_function(tmp_path):
    # `{ #include "launch_step.h" }`: the fragment's variables are the including function's
    (tmp_path / "run.cu").write_text(
        "__global__ void k(float *a, int n);\n"
        "void run(float *a, int n) {\n  int blocks = n / 256;\n  #include \"launch_step.h\"\n}\n")
    fragment = tmp_path / "launch_step.h"
    fragment.write_text("k<<<blocks, 256>>>(a, n);\n")
    data = fragment.read_bytes()
    tree = parse(data)
    model = ProgramModel(data, tree, extract(data, tree, str(fragment)))
    text = model.including_function_text()
    assert text is not None and text.startswith("void run(float *a, int n)") and "#include" in text
    # a file no function includes: none
    (tmp_path / "alone.h").write_text("k<<<1, 1>>>(0, 0);\n")
    alone = (tmp_path / "alone.h").read_bytes()
    alone_tree = parse(alone)
    assert ProgramModel(alone, alone_tree, extract(alone, alone_tree, str(tmp_path / "alone.h"))).including_function_text() is None
