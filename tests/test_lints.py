"""Lint rules: each fires where it should, stays silent where it should, and its fixes apply and
re-parse cleanly (and make the finding go away). The examples are checked against
examples/expected.toml: exactly the intended findings in the lint files, none in the clean ones."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from perflsp.analysis.ctype import CHAR, F32, F64, LONG, CType, common_type, parse_type
from perflsp.analysis.fixes import apply_edits, syntax_error_count
from perflsp.analysis.lints import LINT_CODES, RULE_MODULES, LintContext, LintOptions, run_lints
from perflsp.analysis.models import Finding
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.unit import AnalysisUnit
from perflsp.analysis.rules import RULES, SEVERITIES
from perflsp.hardware import load_database
from perflsp.kernels import extract, extract_path
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.program import ProgramModel, read_source
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
EXPECTED = tomllib.loads((EXAMPLES / "expected.toml").read_text())


@pytest.fixture(scope="module")
def gpus():
    db = load_database()
    return [db.get("rtx3080"), db.get("h100-sxm5-80gb"), db.get("a100-sxm4-80gb")]


def lint(src: str, gpus=(), path: str = "t.cu", enabled=None, options=None) -> list[Finding]:
    data = src.encode()
    tree = parse(data)
    notes: list[str] = []
    model = ProgramModel(data, tree, extract(data, tree, path=path))
    findings = run_lints(model, gpus, enabled=enabled, options=options, notes=notes, build_fixes=True)
    assert notes == []
    return findings


def codes(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def text_of(src: str, finding: Finding) -> str:
    return src.encode()[finding.span.start_byte:finding.span.end_byte].decode()


def apply_fix(src: str, finding: Finding, index: int = 0) -> str:
    """Apply one fix; the result must parse with no errors."""
    fixed = apply_edits(src.encode(), finding.fixes[index].edits)
    assert syntax_error_count(parse(fixed)) == 0
    return fixed.decode()


# --------------------------------------------------------------------------- rule modules


def test_every_rule_module_is_a_complete_unit():
    for module in RULE_MODULES:
        assert module.__doc__ and module.CODE in module.__doc__, module.__name__
        assert len(module.RULE.doc) > 200, module.__name__
        assert module.DEFAULT_SEVERITY in SEVERITIES
        info = RULES[module.CODE]
        assert info.default_severity == module.DEFAULT_SEVERITY
        assert info.name == module.NAME
        assert (ROOT / info.doc_path).is_file()
        assert callable(module.check)
    assert len(set(LINT_CODES)) == len(LINT_CODES) == 6


def test_enabled_selects_rules():
    src = ("__global__ void k(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 0.5; }\n"
           "void h(float *x, int n) { k<<<(n + 99) / 100, 100>>>(x, n); }\n")
    every = {f.code for f in lint(src)}
    assert {"precision/double-promotion", "launch/block-size-not-warp-multiple"} <= every
    only = lint(src, enabled={"precision/double-promotion"})
    assert {f.code for f in only} == {"precision/double-promotion"}
    assert lint(src, enabled=set()) == []


# --------------------------------------------------------------------------- precision/double-promotion

PROMO = "precision/double-promotion"


def test_double_literal_with_float_operand_fires_and_fix_suffixes():
    src = "__global__ void k(int n, const float *x, float *y) { int i = threadIdx.x; y[i] = x[i] * 0.5; }\n"
    (finding,) = codes(lint(src), PROMO)
    assert text_of(src, finding) == "0.5"
    assert finding.severity == "warning" and finding.kernel == "k"
    fixed = apply_fix(src, finding)
    assert "x[i] * 0.5f" in fixed
    assert codes(lint(fixed), PROMO) == []


@pytest.mark.parametrize("statement, literal", [
    ("float v = i * 0.5; y[i] = v;", "0.5"),          # int * double narrowed into a float
    ("float s = x[i]; if (s > 0.0) y[i] = s;", "0.0"),  # comparison in FP64
    ("float s = x[i]; s *= 2.0; y[i] = s;", "2.0"),      # compound assignment
    ("y[i] = sinf(i * 0.1);", "0.1"),                   # argument of a float function
    ("y[i] = (float)(i * 0.1);", "0.1"),                # cast after an FP64 product
    ("y[i] = x[i] / 3.;", "3."),                        # a literal without digits after the dot
    ("y[i] = 1e-3 * x[i];", "1e-3"),                    # exponent form
])
def test_promotion_contexts(statement, literal):
    src = f"__global__ void k(const float *x, float *y) {{ int i = threadIdx.x; {statement} }}\n"
    found = codes(lint(src), PROMO)
    assert [text_of(src, f) for f in found] == [literal]
    assert codes(lint(apply_fix(src, found[0])), PROMO) == []


@pytest.mark.parametrize("body", [
    "y[i] = x[i] * 0.5;",                 # double kernel: intended
    "y[i] = 0.5;",                        # compile-time conversion
    "y[i] = 1.0 / 3.0;",                  # constant expression
    "y[i] = x[i] * 2;",                   # integer literal
    "y[i] = (double)x[i] * 0.5;",         # explicit FP64
    "y[i] = x[i] * 0.5L;",                # long double literal, explicit
])
def test_promotion_silent_cases(body):
    element = "double" if body == "y[i] = x[i] * 0.5;" else "float"
    src = f"__global__ void k(const {element} *x, {element} *y) {{ int i = threadIdx.x; {body} }}\n"
    assert codes(lint(src), PROMO) == []


def test_promotion_silent_in_index_math_and_host_code():
    src = """__global__ void k(float *y, int n) { int i = threadIdx.x * 2 + 1; y[i] = 0.0f; }
void host(float *h, int n) { for (int i = 0; i < n; ++i) h[i] = h[i] * 0.5; }
"""
    assert codes(lint(src), PROMO) == []


def test_promotion_follows_template_instantiations():
    src = """template <typename T>
__global__ void scale(T *x) { x[threadIdx.x] = x[threadIdx.x] * 0.5; }
void host(float *f, double *d) { scale<double><<<1, 256>>>(d); %s }
"""
    double_only = src % ""
    assert codes(lint(double_only), PROMO) == []
    with_float = src % "scale<float><<<1, 256>>>(f);"
    (finding,) = codes(lint(with_float), PROMO)
    assert "scale<float>" in finding.message


def test_promotion_sees_typedefs_vectors_device_functions_and_omp():
    src = """typedef float real;
__device__ float half_of(float v, int k) { return k * 0.5; }
__global__ void k(const float4 *p, real *y) { y[threadIdx.x] = p[threadIdx.x].x * 0.25; }
void host(float *a, int n) {
#pragma omp target teams distribute parallel for map(tofrom: a[0:n])
    for (int i = 0; i < n; ++i)
        a[i] = a[i] + 1.0;
}
"""
    found = codes(lint(src, path="t.cpp"), PROMO)
    assert sorted(text_of(src, f) for f in found) == ["0.25", "0.5", "1.0"]


# --------------------------------------------------------------------------- precision/double-math-function

MATH = "precision/double-math-function"


def test_pow_with_double_exponent_fires_with_both_fixes():
    src = "__global__ void k(const float *x, float *y) { int i = threadIdx.x; y[i] = pow(x[i], 2.0); }\n"
    (finding,) = codes(lint(src), MATH)
    assert text_of(src, finding) == "pow(x[i], 2.0)"
    titles = [fix.title for fix in finding.fixes]
    assert titles[0].startswith("Replace with `x[i] * x[i]`") and finding.fixes[0].preferred
    squared = apply_fix(src, finding, 0)
    assert "y[i] = x[i] * x[i];" in squared
    assert lint(squared, enabled={MATH, PROMO}) == []
    powf = apply_fix(src, finding, 1)
    assert "powf(x[i], 2.0f)" in powf
    assert lint(powf, enabled={MATH, PROMO}) == []


def test_exp_of_promoted_argument_fires():
    src = "__global__ void k(float t, float *y) { y[threadIdx.x] = exp(-2.5e-3 * t); }\n"
    (finding,) = codes(lint(src), MATH)
    fixed = apply_fix(src, finding)
    assert "expf(-2.5e-3f * t)" in fixed
    assert lint(fixed, enabled={MATH, PROMO}) == []


@pytest.mark.parametrize("call", [
    "sqrt(x[i])",         # C++ float overload
    "exp(x[i])",
    "pow(x[i], x[i])",
    "pow(x[i], 2)",       # CUDA's pow(float, int)
    "powf(x[i], 2.0f)",
    "sqrt(d)",            # a double variable: intended
])
def test_math_silent_in_cpp(call):
    src = f"__global__ void k(const float *x, float *y, double d) {{ int i = threadIdx.x; y[i] = {call}; }}\n"
    assert codes(lint(src), MATH) == []


def test_math_in_c_files_flags_double_named_functions_on_float_data():
    src = """#include <math.h>
void f(float *x, int n) {
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])
    for (int i = 0; i < n; ++i)
        x[i] = sqrt(x[i]);
}
"""
    (finding,) = codes(lint(src, path="t.c"), MATH)
    assert "in C" in finding.message
    assert "sqrtf(x[i])" in apply_fix(src, finding)
    assert codes(lint(src, path="t.cpp"), MATH) == []


def test_square_fix_refuses_operands_with_side_effects():
    src = "__global__ void k(float *x, float *y) { int i = threadIdx.x; y[i] = pow(x[i++], 2.0); }\n"
    (finding,) = codes(lint(src), MATH)
    assert [fix.title.split()[0] for fix in finding.fixes] == ["Use"]


def test_square_fix_parenthesises_inside_an_expression():
    src = "__global__ void k(float *x, float *y) { int i = threadIdx.x; y[i] = 1.0f / pow(x[i], 2.0); }\n"
    (finding,) = codes(lint(src), MATH)
    assert "1.0f / (x[i] * x[i])" in apply_fix(src, finding, 0)


# --------------------------------------------------------------------------- launch/block-size-not-warp-multiple

WARP = "launch/block-size-not-warp-multiple"


def test_odd_block_fires_with_nearest_fixes_and_grid_follows():
    src = """__global__ void __launch_bounds__(100) k(int n, float *x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }
void host(int n, float *x) { k<<<(n + 99) / 100, 100>>>(n, x); }
"""
    (finding,) = codes(lint(src), WARP)
    assert text_of(src, finding) == "100" and "28 idle lanes" in finding.message
    assert [fix.title for fix in finding.fixes] == ["Launch `k` with 96 threads per block",
                                                    "Launch `k` with 128 threads per block"]
    assert finding.fixes[0].preferred
    rounded_up = apply_fix(src, finding, 1)
    assert "k<<<(n + 127) / 128, 128>>>" in rounded_up
    assert "__launch_bounds__(128)" in rounded_up  # raised: the old bound would make the launch fail
    assert codes(lint(rounded_up), WARP) == []


def test_two_dimensional_blocks_count_the_product():
    src = """__global__ void __launch_bounds__(256) k(float *x) { x[(blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x] = 1.0f; }
__global__ void __launch_bounds__(100) j(float *x) { x[(blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x] = 1.0f; }
void host(float *x, int n) { dim3 a(16, 16); k<<<n / 256, a>>>(x); dim3 b(10, 10); j<<<n / 100, b>>>(x); }
"""
    found = codes(lint(src), WARP)
    assert [text_of(src, f) for f in found] == ["b"]
    assert found[0].fixes == ()  # a 2-D shape is the user's choice


def test_odd_launch_bounds_and_thread_limit():
    src = """__global__ void __launch_bounds__(200) k(float *x) { x[0] = 1.0f; }
void f(float *x, int n) {
#pragma omp target teams distribute parallel for thread_limit(48)
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
}
"""
    found = codes(lint(src, path="t.cpp"), WARP)
    assert len(found) == 2
    bounds, limit = found
    assert "__launch_bounds__ size of 200" in bounds.message
    assert "__launch_bounds__(224)" in apply_fix(src, bounds)
    assert "thread_limit(32)" in apply_fix(src, limit, 0) and "thread_limit(64)" in apply_fix(src, limit, 1)


def test_warp_multiples_and_unknown_sizes_are_silent():
    src = """__global__ void __launch_bounds__(256) k(float *x) { x[0] = 1.0f; }
void host(float *x, int threads) { k<<<8, 256>>>(x); k<<<8, threads>>>(x); k<<<8, dim3(32, 8)>>>(x); }
"""
    assert codes(lint(src), WARP) == []


# --------------------------------------------------------------------------- occupancy/low

OCC = "occupancy/low"


def test_one_warp_blocks_cap_occupancy(gpus):
    src = """__global__ void __launch_bounds__(32) k(int n, float *x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }
void host(int n, float *x) { k<<<(n + 31) / 32, 32>>>(n, x); }
"""
    (finding,) = codes(lint(src, gpus), OCC)
    assert finding.severity == "information"
    assert "33% on GeForce RTX 3080" in finding.message and "50% on H100" in finding.message
    fixed = apply_fix(src, finding)
    assert "k<<<(n + 127) / 128, 128>>>" in fixed and "__launch_bounds__(128)" in fixed
    assert codes(lint(fixed, gpus), OCC) == []


def test_threshold_and_gpu_list_decide(gpus):
    src = """__global__ void __launch_bounds__(64) k(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
void host(float *x, int n) { k<<<n / 64, 64>>>(x); }
"""
    assert codes(lint(src, gpus), OCC) == []  # 67% on sm_86, 100% on sm_80/sm_90
    strict = LintOptions(occupancy_threshold=0.7)
    (finding,) = codes(lint(src, gpus, options=strict), OCC)
    assert "67% on GeForce RTX 3080" in finding.message and "H100" not in finding.message
    assert codes(lint(src, []), OCC) == []  # no GPUs configured: nothing to judge


def test_small_grid_leaves_sms_idle(gpus):
    src = """__global__ void __launch_bounds__(256) k(float *x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = 1.0f;
}
void host(float *x, int n) { k<<<8, 256>>>(x, n); k<<<512, 256>>>(x, n); }
void f(float *x, int n) {
#pragma omp target teams distribute parallel for num_teams(4) thread_limit(256)
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
}
"""
    found = codes(lint(src, gpus, path="t.cpp"), OCC)
    assert len(found) == 2
    assert "124 of 132 SMs idle on H100" in found[0].message
    assert "num_teams of 4 teams" in found[1].message


def test_register_or_shared_memory_limits_are_not_this_rule(gpus):
    src = """__global__ void __launch_bounds__(1024) k(float *x) { __shared__ float tile[12000]; x[0] = tile[0]; }
void host(float *x) { k<<<4096, 1024>>>(x); }
"""
    assert codes(lint(src, gpus), OCC) == []


# --------------------------------------------------------------------------- memory/uncoalesced-access

UNC = "memory/uncoalesced-access"


@pytest.mark.parametrize("access", [
    "a[threadIdx.x * stride]",
    "a[tid * n + k]",             # through a local derived from threadIdx.x
    "row_ptr[k]",                 # through a pointer offset by tid * n
    "a[threadIdx.x * 8]",         # 32 bytes apart
    "a[(size_t)tid * n]",
    "*(a + tid * n)",
])
def test_thread_strided_access_fires(access):
    src = f"""__global__ void k(const float *a, float *out, int n, int stride) {{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const float *row_ptr = a + tid * n;
    float s = 0.0f;
    for (int k = 0; k < n; ++k)
        s += {access};
    out[tid] = s;
}}
"""
    (finding,) = codes(lint(src), UNC)
    assert text_of(src, finding) == access
    assert finding.severity == "warning" and finding.fixes == ()


@pytest.mark.parametrize("access", [
    "a[tid]", "a[tid + k * n]", "a[blockIdx.x * n + threadIdx.x]", "a[2 * tid]", "a[k]",
    "a[threadIdx.y * n + threadIdx.x]", "a[(threadIdx.x % 32) * n]", "a[idx[tid] * n]",
    "tile[threadIdx.x * n]",
])
def test_coalesced_or_unknowable_access_is_silent(access):
    src = f"""__global__ void k(const float *a, const int *idx, float *out, int n) {{
    __shared__ float tile[1024];
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    for (int k = 0; k < n; ++k)
        s += {access};
    out[tid] = s;
}}
"""
    assert codes(lint(src), UNC) == []


def test_grid_stride_loop_variable_keeps_unit_stride():
    src = """__global__ void k(const float *a, float *out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = a[i];
}
"""
    assert codes(lint(src), UNC) == []


def test_wide_elements_scale_the_constant_stride():
    src = """__global__ void k(const float *f, const double4 *d, float *out) {
    out[threadIdx.x] = f[threadIdx.x * 4] + d[threadIdx.x * 2].x;
}
"""
    found = codes(lint(src), UNC)
    assert [text_of(src, f) for f in found] == ["d[threadIdx.x * 2]"]  # 64 bytes apart; floats 16


# --------------------------------------------------------------------------- launch/missing-launch-bounds

BOUNDS = "launch/missing-launch-bounds"


def test_constant_launches_without_bounds_fire_and_fix_inserts():
    src = """namespace ns {
template <typename T>
__global__ void k(T *x) { x[threadIdx.x] = T(0); }
}
void host(float *x) { ns::k<float><<<64, 128>>>(x); ns::k<float><<<64, 256>>>(x); }
"""
    (finding,) = codes(lint(src), BOUNDS)
    assert text_of(src, finding) == "k" and "at most 256 threads" in finding.message
    fixed = apply_fix(src, finding)
    assert "__global__ void __launch_bounds__(256) k(T *x)" in fixed
    assert codes(lint(fixed), BOUNDS) == []


@pytest.mark.parametrize("launches", [
    "",                                         # launched from elsewhere
    "k<<<64, threads>>>(x);",                  # run-time block size
    "k<<<64, 256>>>(x); k<<<64, threads>>>(x);",
])
def test_missing_bounds_silent_without_constant_launches(launches):
    src = f"__global__ void k(float *x) {{ x[0] = 1.0f; }}\nvoid host(float *x, int threads) {{ {launches} }}\n"
    assert codes(lint(src), BOUNDS) == []


# --------------------------------------------------------------------------- no finding whose fix changes nothing
# (issue 26: each case below is a shape the rules reported on NVIDIA/cuda-samples and BabelStream)

SERIAL = """__global__ void step(float *r, const float *a) { *r = *r / *a; }
void host(float *r, float *a) { step<<<1, 1>>>(r, a); }
"""
PRINT_TREE = """__global__ void tree(int depth) {
    if (threadIdx.x == 0) printf("block %d depth %d\\n", blockIdx.x, depth);
    if (depth < 3) tree<<<gridDim.x, blockDim.x>>>(depth + 1);
}
void host() { tree<<<2, 2>>>(0); }
"""
ONE_BLOCK = """__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }
void host(float *x) { scale<<<1, 100>>>(x); }
"""
ASSERTS = """__global__ void check(int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; assert(i < n); }
void host() { dim3 grid(2); dim3 block(32); check<<<grid, block>>>(60); }
"""


@pytest.mark.parametrize("src", [SERIAL, PRINT_TREE, ONE_BLOCK, ASSERTS], ids=["serial", "print-tree", "one-block", "asserts"])
def test_block_shape_rules_are_silent_where_the_kernel_is_written_for_its_block(src, gpus):
    """A kernel written for its launch shape (one thread, a fixed tree of prints, one block of exactly
    the data's size, a fixed count of threads it checks): another block size or more blocks would
    change what it computes or repeat it, not use idle lanes or SMs."""
    found = lint(src, gpus)
    assert codes(found, WARP) == [] and codes(found, OCC) == [], [f.message for f in found]


def test_a_two_dimensional_block_whose_grid_follows_it_is_still_reported(gpus):
    src = """const int BX = 4;
const int BY = 4;
__global__ void solve(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    x[j * n + i] *= 0.5f;
}
void host(float *x) { const int N = 1024; dim3 grid(N / BX, N / BY); dim3 block(BX, BY); solve<<<grid, block>>>(x, N); }
"""
    (finding,) = codes(lint(src, gpus), WARP)
    assert "block of 16 threads" in finding.message


def test_small_grids_are_reported_only_for_grid_stride_kernels(gpus):
    fixed = """__global__ void part(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
void host(float *x) { part<<<64, 256>>>(x); }
"""
    assert codes(lint(fixed, gpus), OCC) == []  # 64 blocks of fixed work: more blocks would do nothing
    strided = fixed.replace("{ x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }",
                            "{ for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 1 << 24; "
                            "i += blockDim.x * gridDim.x) x[i] = 1.0f; }")
    (finding,) = codes(lint(strided, gpus), OCC)
    assert "a grid of 64 blocks" in finding.message


def test_tiny_blocks_in_a_grid_too_small_to_reach_the_cap_are_not_reported(gpus):
    src = """__global__ void k(float *x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = 0.0f;
}
void host(float *x, int n) { k<<<SIZE, 32>>>(x, n); }
"""
    small = codes(lint(src.replace("SIZE", "96"), gpus), OCC)
    assert not any("32-thread blocks" in f.message for f in small)  # 96 blocks: at most one per SM anyway
    large = codes(lint(src.replace("SIZE", "(n + 31) / 32"), gpus), OCC)
    assert any("32-thread blocks" in f.message for f in large)


def test_launch_bounds_are_not_asked_for_kernels_launched_with_1024_threads():
    src = """__global__ void copy(const float *a, float *b) { int i = blockIdx.x * blockDim.x + threadIdx.x; b[i] = a[i]; }
void host(const float *a, float *b, int n) { copy<<<n / 1024, 1024>>>(a, b); copy<<<n / 256, 256>>>(a, b); }
"""
    assert codes(lint(src), BOUNDS) == []  # at most 1,024: the bound would state the maximum
    (finding,) = codes(lint(src.replace("1024", "512")), BOUNDS)
    assert "at most 512 threads" in finding.message and "1024 threads" in finding.message


def test_an_uncoalesced_write_is_called_a_write():
    src = """__global__ void transpose(float *out, const float *in, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    out[x * h] = in[x];
}
"""
    (finding,) = codes(lint(src), UNC)
    assert "neighbouring threads (threadIdx.x) write `out`" in finding.message, finding.message


# --------------------------------------------------------------------------- examples


def _expected_lints() -> dict[str, list[dict]]:
    by_file: dict[str, list[dict]] = {}
    for entry in EXPECTED["lint"]:
        by_file.setdefault(entry["file"], []).append(entry)
    return by_file


def _lint_path(path: Path, gpus) -> list[Finding]:
    fk = extract_path(path)
    data = path.read_bytes()
    notes: list[str] = []
    findings = run_lints(ProgramModel(data, parse(data), fk), gpus, notes=notes, build_fixes=True)
    assert notes == []
    return findings


@pytest.mark.parametrize("rel", sorted(_expected_lints()))
def test_lint_examples_raise_exactly_the_intended_findings(rel, gpus):
    entries = _expected_lints()[rel]
    found = {(f.span.line, f.code) for f in _lint_path(ROOT / rel, gpus)}
    required = {(e["line"], e["rule"]) for e in entries if not e["optional"]}
    allowed = {(e["line"], e["rule"]) for e in entries}
    assert required <= found, f"missing: {sorted(required - found)}"
    assert found <= allowed, f"unexpected: {sorted(found - allowed)}"


@pytest.mark.parametrize("rel", EXPECTED["clean"]["files"])
def test_clean_examples_raise_nothing(rel, gpus):
    assert _lint_path(ROOT / rel, gpus) == []


def test_every_example_fix_applies_and_reparses(gpus):
    applied = 0
    for rel in _expected_lints():
        path = ROOT / rel
        data = path.read_bytes()
        for finding in _lint_path(path, gpus):
            for fix in finding.fixes:
                fixed = apply_edits(data, fix.edits)
                assert syntax_error_count(parse(fixed)) == 0, (rel, fix.title)
                applied += 1
    assert applied >= 9


def test_promotion_silent_when_computing_into_a_double():
    src = """__global__ void k(const float *u, double *f) {
    float u0 = u[threadIdx.x];
    double usqr = 3 * (u0 * u0) / 2.;
    f[threadIdx.x] += 2 * 1. / 18 * (-u0);
    f[0] = usqr;
}
"""
    assert codes(lint(src), PROMO) == []


def test_uncoalesced_reports_each_array_once_with_the_other_accesses_related():
    src = """__global__ void k(const float *a, float *out, int n) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    out[tid] = a[tid * n] + a[tid * n + 1] + a[tid * n + 2];
}
"""
    (finding,) = codes(lint(src), UNC)
    assert text_of(src, finding) == "a[tid * n]"
    assert len(finding.related) == 2 and "2 more access(es)" in finding.message


def test_uncoalesced_sees_through_integer_functional_casts():
    src = """typedef int Index_t;
__global__ void k(const int *nodes, int *out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int *mine = nodes + Index_t(8) * i;
    out[i] = mine[0];
}
"""
    (finding,) = codes(lint(src), UNC)
    assert "8 elements (32 bytes) apart" in finding.message


def test_promotion_through_a_type_macro_and_auto():
    src = """#define real_t float
__global__ void k(const real_t *x, real_t *y) { auto v = x[threadIdx.x]; y[threadIdx.x] = v - 0.5; }
"""
    (finding,) = codes(lint(src), PROMO)
    assert text_of(src, finding) == "0.5"
    assert codes(lint(src.replace("float", "double")), PROMO) == []


def test_one_thread_per_block_over_the_data_is_still_reported(gpus):
    """`k<<<n, 1>>>`: one block per item is the slip these rules exist for (a fix packs items into warps)."""
    src = """__global__ void inc(float *x) { x[blockIdx.x] += 1.0f; }
void host(float *x, int n) { inc<<<n, 1>>>(x); }
"""
    found = lint(src, gpus)
    assert len(codes(found, WARP)) == 1 and any("1-thread blocks" in f.message for f in codes(found, OCC))


def test_grid_stride_needs_a_step_by_the_grid(gpus):
    """`gridDim` in an index or a print is no grid-stride loop; a single block or a child grid is not judged."""
    indexed = """__global__ void timed(float *t) { if (threadIdx.x == 0) t[blockIdx.x + gridDim.x] = 1.0f; }
void host(float *t) { timed<<<64, 256>>>(t); }
"""
    assert codes(lint(indexed, gpus), OCC) == []
    stride = """__global__ void sum(const float *x, float *out, int n) {
    const int step = blockDim.x * gridDim.x;
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) s += x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
void host(const float *x, float *out, int n) { sum<<<32, 256>>>(x, out, n); sum<<<1, 256>>>(x, out, n); }
"""
    (finding,) = codes(lint(stride, gpus), OCC)
    assert "a grid of 32 blocks" in finding.message
    child = """__global__ void leaf(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f; }
__global__ void parent(float *x, int n) { leaf<<<(n + 31) / 32, 32>>>(x); }
"""
    assert codes(lint(child, gpus), OCC) == []


def test_launch_bounds_are_not_asked_for_single_block_launches():
    src = """__global__ void finish(float *r, const float *a) { r[threadIdx.x] = a[threadIdx.x]; }
void host(float *r, const float *a) { finish<<<1, 64>>>(r, a); }
"""
    assert codes(lint(src), BOUNDS) == []
    (finding,) = codes(lint(src.replace("<<<1, 64>>>", "<<<8, 64>>>")), BOUNDS)
    assert "with 64 threads per block" in finding.message


# --------------------------------------------------------------------------- the program model's view


def _model_of(tmp_path: Path, files: dict[str, str], main: str) -> ProgramModel:
    """The model of `main` read as `perflsp check` reads it (its local headers' macros and typedefs)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / main
    source = read_source(path, path.read_bytes(), IncludeResolver())
    return ProgramModel(source.data, source.tree, source.kernels, source.env, lines=source.lines)


def test_lints_read_the_typedefs_and_constants_of_the_model(tmp_path):
    model = _model_of(tmp_path, {
        "types.h": "typedef float real;\n#define STRIDE 32\n",
        "k.cu": '#include "types.h"\n'
                "__global__ void k(real *y, const float *x, int n) {\n"
                "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (i < n) y[i] = y[i] * 0.5;\n"
                "    if (i < n) y[i] += x[i * STRIDE];\n"
                "}\n"}, "k.cu")
    findings = run_lints(model)
    # `real` is the header's float (the engine's typedef): the literal promotes it
    assert [text_of(model.data.decode(), f) for f in codes(findings, "precision/double-promotion")] == ["0.5"]
    # `STRIDE` folds with the header's macro: the stride is stated in bytes
    (strided,) = codes(findings, UNC)
    assert text_of(model.data.decode(), strided) == "x[i * STRIDE]" and "32 elements (128 bytes) apart" in strided.message


def test_the_lints_type_expressions_as_the_engine_does():
    src = """typedef double real_t;
__global__ void k(real_t *a, long n, float4 v, unsigned char *c, float *out) {
    real_t x = a[0];
    out[0] = x * 0.5 + v.x * 0.5 + c[n] + n;
}
"""
    data = src.encode()
    tree = parse(data)
    model = ProgramModel(data, tree, extract(data, tree, path="k.cu"))
    (code,) = LintContext(model).gpu_code()
    aliases = AnalysisUnit.of(model, AnalysisOptions()).type_aliases  # what the walker reads types with

    def typed(text: str) -> tuple[CType | None, CType | None]:
        start = data.index(text.encode(), data.index(b"out[0]"))
        node = tree.root_node.named_descendant_for_byte_range(start, start + len(text))
        while (node.end_byte - node.start_byte) < len(text):
            node = node.parent
        return code.typer.types(node)

    assert typed("x")[0] == parse_type("real_t", aliases) == F64
    assert typed("n")[0] == parse_type("long", aliases) == LONG
    assert typed("v.x")[0] == parse_type("float4", aliases).element == F32
    assert typed("c[n]")[0] == parse_type("unsigned char", aliases) == CHAR
    # actual: the usual conversions (the walker's `common_type`); intended: the literal is neutral
    assert typed("x * 0.5") == (F64, F64)
    assert typed("v.x * 0.5") == (common_type(F32, F64), F32)
    assert typed("x * 0.5 + v.x * 0.5 + c[n] + n")[0] == F64
