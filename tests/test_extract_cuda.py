from perflsp.kernels import extract
from perflsp.kernels.consteval import ConstEnv

SRC = b"""#define N 256
#define THREADS (N / 2)
const int TILE = 16;
namespace outer { namespace inner {
template <typename T, int B = 4>
__global__ void __launch_bounds__(N, 2) scale(const T *__restrict__ in, T *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * T(2);
}
template <>
__global__ void scale<double, 8>(const double *in, double *out, int n) { }
struct Solver { __device__ static float sq(float x) { return x * x; } };
}}
__device__ __forceinline__ float helper(float x) { return x + 1.0f; }
__host__ __device__ int both(int a) { return a; }
__global__ void proto(int);
static __global__ void plain(float4 *v, unsigned char (&tab)[16], int rows[][4]) {}

int main(int argc, char **argv) {
  int n = 1 << 20;
  int runtime = atoi(argv[1]);
  dim3 grid((n + THREADS - 1) / THREADS);
  dim3 block2(TILE, TILE);
  outer::inner::scale<float, 4><<<grid, THREADS, 0, stream>>>(a, b, n);
  outer::inner::scale<double, 8><<<grid, 128>>>(c, d, n);
  plain<<<runtime, block2, TILE * TILE * sizeof(float)>>>(v, t, r);
  missing<<<1, 32>>>();
  return 0;
}
"""


def by_name(fk, name):
    return [k for k in fk.kernels + fk.device_functions if k.name == name]


def test_kernels_and_device_functions():
    fk = extract(SRC)
    assert [k.name for k in fk.kernels] == ["scale", "scale", "plain"]
    assert [k.name for k in fk.device_functions] == ["sq", "helper", "both"]
    assert not fk.has_errors


def test_kernel_details():
    fk = extract(SRC)
    scale = fk.kernels[0]
    assert scale.qualified_name == "outer::inner::scale"
    assert scale.line == 6
    assert [(t.kind, t.name, t.type, t.default) for t in scale.template_params] == [
        ("type", "T", None, None), ("value", "B", "int", "4")]
    a, b, n = scale.params
    assert (a.name, a.element_type, a.pointer_depth, a.is_const, a.is_restrict) == ("in", "T", 1, True, True)
    assert (b.name, b.is_const, b.is_restrict) == ("out", False, False)
    assert (n.name, n.type, n.pointer_depth) == ("n", "int", 0)
    assert scale.launch_bounds.max_threads.value == 256
    assert scale.launch_bounds.min_blocks.value == 2
    # ranges: the whole definition includes the template header; body starts at "{"
    assert scale.span.start.line == 4
    assert SRC[scale.body_span.start_byte:scale.body_span.start_byte + 1] == b"{"
    assert SRC[scale.name_span.start_byte:scale.name_span.end_byte] == b"scale"
    spec = fk.kernels[1]
    assert spec.specialization_args == ("double", "8")
    assert by_name(fk, "sq")[0].qualified_name == "outer::inner::Solver::sq"
    assert by_name(fk, "both")[0].is_host_device
    plain = fk.kernels[2]
    v, tab, rows = plain.params
    assert v.element_type == "float4"
    assert tab.is_reference and tab.element_type == "unsigned char" and tab.array_dims == ("16",)
    assert rows.array_dims == ("", "4")


def test_body_hash_ignores_comments_and_whitespace_only():
    base = extract(SRC).kernels[0].body_hash
    reformatted = SRC.replace(b"if (i < n) out[i]", b"// note\n  if (i < n)\n    out[i]")
    assert extract(reformatted).kernels[0].body_hash == base
    changed = SRC.replace(b"T(2)", b"T(3)")
    assert extract(changed).kernels[0].body_hash != base


def test_launch_sites_resolve_and_fold():
    fk = extract(SRC)
    s1, s2, s3, s4 = fk.launches
    assert s1.kernel == "outer::inner::scale" and s1.template_args == ("float", "4")
    assert s1.grid.value == (8192, 1, 1)
    assert s1.block.value == (128, 1, 1)
    assert s1.shared_mem_bytes.value == 0
    assert s1.stream.value is None and "stream" in s1.stream.reason
    assert [a.text for a in s1.args] == ["a", "b", "n"]
    assert s1.function == "main"
    # the explicit specialisation is chosen for matching template arguments
    assert s2.kernel == "outer::inner::scale" and s2.template_args == ("double", "8")
    assert s3.kernel == "plain"
    assert s3.grid.value is None and "runtime" in s3.grid.reason
    assert s3.block.value == (16, 16, 1)
    assert s3.shared_mem_bytes.value == 1024
    assert s4.kernel is None and s4.name == "missing"


def test_line_numbers_count_cr_as_line_end():
    src = b"// a\r// b\n__global__ void k() {}\n"
    assert extract(src).kernels[0].line == 3


def test_macro_alias_and_token_fallback():
    src = b"""#define GLOBAL __global__
#define DEV __device__
GLOBAL static void aliased(float *x) { x[0] = 1; }
DEV float dhelp(float x) { return x; }
#define DECLARE(x) x
DECLARE(int) broken = {
__global__ void
  lost (float *a, int n)
{ a[0] = n; }
"""
    fk = extract(src)
    names = {k.name: k for k in fk.kernels}
    assert set(names) == {"aliased", "lost"}
    assert names["lost"].line == 8
    assert [p.name for p in names["lost"].params] == ["a", "n"]
    assert [d.name for d in fk.device_functions] == ["dhelp"]


def test_prototypes_and_commented_kernels_are_not_kernels():
    src = b"""__global__ void proto(int n);
// __global__ void commented(int n) { }
/* __global__ void block_commented(int n) { } */
const char *s = "__global__ void in_string() {}";
"""
    fk = extract(src)
    assert fk.kernels == []


def test_launch_bounds_macro_between_type_and_name():
    src = b"""#define LAUNCH_BOUNDS(a, b) __launch_bounds__(a, b)
template <class real>
__global__ void
LAUNCH_BOUNDS (128, 2)
rates(const real *T, real *R)
{ R[threadIdx.x] = T[threadIdx.x]; }
"""
    (k,) = extract(src).kernels
    assert (k.name, k.line) == ("rates", 5)


def test_a_file_included_by_a_sibling_is_read_in_its_context(tmp_path):
    from perflsp.kernels.includes import IncludeResolver

    (tmp_path / "main.cu").write_text('#define fp float\n#include "kernel.cu"\nint main() {}\n')
    kernel = tmp_path / "kernel.cu"
    kernel.write_text("__global__ void k(fp *a) { a[0] = 1; }\n")
    env = IncludeResolver().env_for(kernel, kernel.read_bytes(), includers=True)
    assert env.all_macros()["fp"] == "float"
    assert "fp" not in IncludeResolver().env_for(kernel, kernel.read_bytes()).all_macros()


def test_function_space_mentions_ignore_comments():
    from perflsp.kernels.text import function_space_mentions

    src = (b"// small __device__ helpers, see the __global__ kernel below\n"
           b"/* __device__ in a block comment */\n"
           b'const char *s = "__global__";\n'  # a string is not a comment: counted (the scan then decides)
           b"__device__ float f(float x) { return x; }\n"
           b"__global__ void k(float *x) { x[0] = f(x[0]); }\n")
    assert function_space_mentions(src) == 3
    # below the threshold the raw count is answered without looking for comments
    assert function_space_mentions(src, more_than=10) == 6


def test_comment_mentions_do_not_trigger_the_token_fallback():
    from perflsp.kernels.incremental import extract_full
    from perflsp.source.document import SourceDocument

    doc = SourceDocument(b"// a __device__ helper and a __global__ kernel\n"
                         b"__device__ float f(float x) { return x; }\n"
                         b"__global__ void k(float *x) { x[0] = f(x[0]); }\n", 0)
    extracted = extract_full(doc.data, doc.tree, doc.lines, None, ConstEnv())
    assert not extracted.token_scan and extracted.mentions == 2
    assert [f.name for f in (*extracted.kernels.kernels, *extracted.kernels.device_functions)] == ["k", "f"]


def test_identical_parameter_lists_are_read_once_and_shared():
    """Generated and templated code repeats a few signatures thousands of times: each distinct
    list is read once per file and its functions share the parameters (a Param holds no
    position); a list that a macro changes is still read from its expansion."""
    src = (b"#define RESTRICT __restrict__\n"
           + b"".join(b"__global__ void k%d(const float *x, float *y, int n) { }\n" % i for i in range(50))
           + b"__global__ void m(double * RESTRICT a) { }\n__global__ void m2(double * RESTRICT a) { }\n")
    fk = extract(src, path="same.cu")
    plain = [k for k in fk.kernels if k.name.startswith("k")]
    assert len(plain) == 50 and all(k.params is plain[0].params for k in plain)
    assert [p.name for p in plain[0].params] == ["x", "y", "n"] and plain[0].params[0].is_const
    macro = [k for k in fk.kernels if k.name in ("m", "m2")]
    assert [(p.name, p.is_restrict) for k in macro for p in k.params] == [("a", True), ("a", True)]


VS_FORMATTED = """__global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
int main() {
  float *x; int n = 1 << 20;
  scale << < (n + 255) / 256, 256 >> > (x, n);
}
"""


def test_a_launch_written_as_visual_studio_formats_it_is_a_launch():
    # `<< <` and `>> >`: what Visual Studio's formatter makes of `<<<`; nvcc takes it as a launch
    (site,) = extract(VS_FORMATTED.encode()).launches
    assert site.kernel == "scale"
    assert site.grid.value == (4096, 1, 1) and site.block.value == (256, 1, 1)


def test_a_launch_typed_in_visual_studio_s_format_is_found_as_the_user_types():
    from lsprotocol.types import Position

    from perflsp.server.text import Change, TextState

    state = TextState(VS_FORMATTED.replace("  scale << < (n + 255) / 256, 256 >> > (x, n);\n", ""), 0, None)
    assert state.extracted.kernels.launches == []
    state.apply([Change("  scale << < (n + 255) / 256, 256 >> > (x, n);\n", Position(6, 0), Position(6, 0))], 1)
    (site,) = state.extracted.kernels.launches
    assert site.kernel == "scale" and site.block.value == (256, 1, 1)


BENCH_MACRO = """
__global__ void reduce(const int *in, int *out, int n) { atomicAdd(out, in[threadIdx.x]); }
__global__ void reduce_v2(const int *in, int *out, int n) { atomicAdd(out, in[threadIdx.x]); }
#define bench(kernel, grid) \\
  for (int r = 0; r < 10; r++) { \\
    kernel<<<dim3(grid), dim3(block)>>>(in, out, n); \\
  }
int main() {
  int n = 1 << 20, block = 128, blocks = 2048;
  int *in, *out;
  reduce<<<blocks, block>>>(in, out, n);
  bench(reduce, blocks);
  bench(reduce_v2, blocks / 2);
}
"""


def test_a_launch_a_macro_makes_is_a_launch_where_the_macro_is_used():
    written, first, second = extract(BENCH_MACRO.encode()).launches
    assert (written.kernel, first.kernel, second.kernel) == ("reduce", "reduce", "reduce_v2")
    # the expansion's texts, folded where each use stands
    assert "blocks / 2" in second.grid.text and second.grid.value == (1024, 1, 1)
    assert second.block.value == (128, 1, 1)
    assert [a.text for a in second.args] == ["in", "out", "n"] and second.args[2].value == 1 << 20
    assert second.function == "main"
    line = BENCH_MACRO.splitlines().index("  bench(reduce_v2, blocks / 2);")
    assert second.span.start.line == line


NESTED_LAUNCH_MACROS = """
__global__ void colmin(int *out) { out[threadIdx.x] = 0; }
#define launch(k, n_blocks, n_threads) \\
  launch_with_shared(k, n_blocks, n_threads, 0ll)
#define launch_with_shared(k, n_blocks, n_threads, shared) \\
{ \\
  k <<< n_blocks, n_threads, shared>>> (out); \\
}
void run(int *out) {
  const int blocks = 64;
  launch(colmin, blocks, 256);
}
"""


def test_a_macro_that_uses_a_launching_macro_launches_where_it_is_used():
    (site,) = extract(NESTED_LAUNCH_MACROS.encode()).launches
    assert site.kernel == "colmin" and site.function == "run"
    assert site.grid.value == (64, 1, 1) and site.block.value == (256, 1, 1)
    assert site.span.start.line == NESTED_LAUNCH_MACROS.splitlines().index("  launch(colmin, blocks, 256);")


def test_explicit_class_instantiation_is_no_syntax_error():
    # tree-sitter-cuda reads `template class Stream<float>;` as a declaration missing its
    # declarator; the check must not tell the user that valid code has syntax errors
    src = b"""template <class T> struct Stream { T *a; void copy(); };
template <class T> void Stream<T>::copy() {
  #pragma omp target teams distribute parallel for
  for (int i = 0; i < 1024; i++) a[i] = 0;
}
template class Stream<float>;
extern template struct Stream<double>;
"""
    assert not extract(src).has_errors
    assert extract(src + b"int broken( {\n").has_errors


def test_an_extended_lambda_is_no_syntax_error():
    # tree-sitter-cuda reads the execution space of `[=] __device__ (int i) {...}` as an error
    src = b"""template <typename F> __global__ void each(int n, F f) { int i = threadIdx.x; if (i < n) f(i); }
void run(int n, float *a) {
  each<<<1, 256>>>(n, [=] __device__ (int i) { a[i] = 0; });
  auto g = [=] __host__ __device__ (int i) mutable { return i; };
}
"""
    assert not extract(src).has_errors
    assert extract(src.replace(b"__device__ (int i) {", b"__device__ (int i {", 1)).has_errors
