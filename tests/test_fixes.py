"""Validated edit builders: inputs are checked, edits land where they should, the result
re-parses cleanly and folds to the requested value; unsafe requests raise EditError."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflsp.analysis.fixes import (
    EditError,
    apply_edits,
    best_block_for,
    float_function_fix,
    float_literal_fix,
    preferred_block_size,
    set_block_size,
    set_launch_bounds,
    set_omp_clauses,
    square_fix,
    syntax_error_count,
    validated_fix,
)
from perflsp.analysis.models import ByteEdit
from perflsp.hardware import load_database
from perflsp.kernels import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import Span
from perflsp.kernels.program import ProgramModel, read_source
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]


class Doc:
    def __init__(self, text: str | bytes):
        self.data = text.encode() if isinstance(text, str) else text
        self.tree = parse(self.data)
        self.fk = extract(self.data, self.tree)
        self.model = ProgramModel(self.data, self.tree, self.fk)

    def applied(self, fix) -> Doc:
        new = Doc(apply_edits(self.data, fix.edits))
        assert syntax_error_count(new.tree) == 0
        return new

    @property
    def text(self) -> str:
        return self.data.decode()

    def site(self, name: str, nth: int = 0):
        return [s for s in self.fk.launches if s.name == name][nth]

    def kernel(self, name: str):
        return next(k for k in self.fk.kernels if k.name == name)

    def span_of(self, needle: str) -> Span:
        start = self.data.index(needle.encode())
        return Span(start, start + len(needle.encode()))


def example(rel: str) -> Doc:
    return Doc((ROOT / rel).read_bytes())


# --------------------------------------------------------------------------- apply_edits / validation


def test_apply_edits_orders_dedupes_and_rejects_overlaps():
    data = b"0123456789"
    edits = [ByteEdit(8, 9, "X"), ByteEdit(1, 3, "ab"), ByteEdit(5, 5, "+"), ByteEdit(8, 9, "X")]
    assert apply_edits(data, edits) == b"0ab34+567X9"
    with pytest.raises(EditError, match="overlap"):
        apply_edits(data, [ByteEdit(1, 4, "a"), ByteEdit(3, 5, "b")])
    with pytest.raises(EditError, match="outside"):
        apply_edits(data, [ByteEdit(9, 12, "a")])


def test_validated_fix_rejects_edits_that_break_the_parse():
    doc = Doc("__global__ void k(float *x) { x[0] = 1.0f; }\n")
    brace = doc.data.index(b"}")
    with pytest.raises(EditError, match="parse"):
        validated_fix(doc.data, doc.tree, "bad", [ByteEdit(brace, brace + 1, "")])
    with pytest.raises(EditError, match="nothing"):
        validated_fix(doc.data, doc.tree, "empty", [])


def test_validation_compares_with_existing_errors():
    # A file that already has a syntax error can still be edited elsewhere.
    doc = Doc("int broken( { \n__global__ void k(float *x) { x[0] = 0.5; }\n")
    fix = float_literal_fix(doc.data, doc.tree, doc.span_of("0.5"))
    assert b"0.5f" in apply_edits(doc.data, fix.edits)


# --------------------------------------------------------------------------- precision builders


def test_float_literal_fix_only_for_unsuffixed_floating_literals():
    doc = Doc("__global__ void k(float *x) { x[0] = x[1] * 0.5 + 2 + 1.5f; }\n")
    assert float_literal_fix(doc.data, doc.tree, doc.span_of("0.5")).edits[0].text == "f"
    for literal in ("2 ", "1.5f"):
        with pytest.raises(EditError):
            float_literal_fix(doc.data, doc.tree, doc.span_of(literal.strip()))


def test_float_function_fix_keeps_std_names_and_suffixes_literals():
    doc = Doc("__global__ void k(float *x) { x[0] = std::pow(x[1], 3.0) + ::exp(x[2] * 0.5); }\n")
    fix = float_function_fix(doc.data, doc.tree, doc.span_of("std::pow(x[1], 3.0)"))
    assert "std::pow(x[1], 3.0f)" in doc.applied(fix).text
    fix = float_function_fix(doc.data, doc.tree, doc.span_of("::exp(x[2] * 0.5)"))
    assert "::expf(x[2] * 0.5f)" in doc.applied(fix).text


def test_square_fix_requires_exponent_two():
    doc = Doc("__global__ void k(float *x) { x[0] = pow(x[1], 3.0); }\n")
    with pytest.raises(EditError, match="not 2"):
        square_fix(doc.data, doc.tree, doc.span_of("pow(x[1], 3.0)"))


# --------------------------------------------------------------------------- set_block_size


def test_literal_block_and_precomputed_grid():
    doc = example("examples/lints/launch_slips.cu")
    fix = set_block_size(doc.model, doc.site("negate"), 128)
    after = doc.applied(fix)
    assert "negate<<<(n + 127) / 128, 128>>>(n, da);" in after.text
    site = after.site("negate")
    assert site.block.value == (128, 1, 1) and site.grid.value == (32768, 1, 1)


def test_macro_owned_by_the_kernel_is_edited_at_its_definition():
    doc = example("examples/lints/launch_slips.cu")
    fix = set_block_size(doc.model, doc.site("scale"), 96)
    after = doc.applied(fix)
    assert "#define ODD_BLOCK 96  //" in after.text
    assert after.site("scale").block.value == (96, 1, 1)
    assert after.kernel("scale").launch_bounds.max_threads.value == 96


def test_launch_bounds_below_the_new_size_are_raised():
    doc = example("examples/lints/launch_slips.cu")
    fix = set_block_size(doc.model, doc.site("add_one"), 256)
    after = doc.applied(fix)
    assert "add_one<<<(n + 255) / 256, 256>>>" in after.text
    assert after.kernel("add_one").launch_bounds.max_threads.value == 256
    assert after.site("add_one").grid.value == (16384, 1, 1)


def test_shared_macro_and_shared_grid_variable_edit_only_this_launch():
    doc = example("examples/lints/precision_slips.cu")
    fix = set_block_size(doc.model, doc.site("halve"), 128)
    after = doc.applied(fix)
    assert "halve<<<(n + 128 - 1) / 128, 128>>>(n, dx, dy);" in after.text
    assert "square_pow<<<grid, BLOCK>>>" in after.text and "#define BLOCK 256" in after.text
    assert after.site("halve").grid.value == (8192, 1, 1)


def test_block_constant_used_inside_the_kernel_and_elsewhere_is_refused():
    doc = Doc("""#define BLOCK 256
__global__ void k(float *x) { __shared__ float s[BLOCK]; s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x]; }
__global__ void j(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f; }
void host(float *x) { k<<<64, BLOCK>>>(x); j<<<64, BLOCK>>>(x); }
""")
    with pytest.raises(EditError, match="also used inside `k`"):
        set_block_size(doc.model, doc.site("k"), 128)
    with pytest.raises(EditError, match="does not follow"):  # j's grid is a constant 64 blocks
        set_block_size(doc.model, doc.site("j"), 128)


@pytest.mark.parametrize("body, why", [
    ("x[blockIdx.x] = 0.0f;", "never reads threadIdx"),               # one thread per block by design
    ("x[blockIdx.x * 256 + threadIdx.x] = 0.0f;", "never reads blockDim"),
    ("x[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f;", "does not follow"),  # grid 64 would stay 64
    ("__shared__ float s[256]; s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];", "uses the number 256"),
])
def test_kernels_that_assume_their_block_size_are_refused(body, why):
    doc = Doc(f"__global__ void k(float *x) {{ {body} }}\nvoid host(float *x) {{ k<<<64, 256>>>(x); }}\n")
    with pytest.raises(EditError, match=why):
        set_block_size(doc.model, doc.site("k"), 128)


def test_kernel_defined_elsewhere_is_refused():
    doc = Doc("__global__ void k(float *x);\nvoid host(float *x, int n) { k<<<(n + 255) / 256, 256>>>(x); }\n")
    with pytest.raises(EditError, match="not defined in this file"):
        set_block_size(doc.model, doc.site("k"), 128)


def test_dynamic_shared_memory_follows_the_block():
    doc = Doc("""#define BLOCK 128
__global__ void __launch_bounds__(BLOCK) blur(int n, float *x) {
    extern __shared__ float line[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    line[threadIdx.x] = x[i];
}
__global__ void __launch_bounds__(BLOCK) other(float *x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = 0.0f;
}
void host(int n, float *x, int r) {
    const size_t smem = (BLOCK + 2 * r) * sizeof(float);
    blur<<<(n + BLOCK - 1) / BLOCK, BLOCK, smem>>>(n, x);
    other<<<64, BLOCK, BLOCK * 4>>>(x, n);
}
""")
    after = doc.applied(set_block_size(doc.model, doc.site("blur"), 256))
    assert "const size_t smem = (256 + 2 * r) * sizeof(float);" in after.text
    assert "blur<<<(n + 256 - 1) / 256, 256, smem>>>" in after.text
    assert "__launch_bounds__(256) blur" in after.text and "__launch_bounds__(BLOCK) other" in after.text
    after = doc.applied(set_block_size(doc.model, doc.site("other"), 64))
    assert "other<<<64, 64, 64 * 4>>>" in after.text


@pytest.mark.parametrize("grid, expected", [
    ("(n + threads - 1) / threads", "(n + 128 - 1) / 128"),
    ("(n + (threads - 1)) / threads", "(n + (128 - 1)) / 128"),
    ("ceil(n / (float)threads)", "ceil(n / (float)128)"),
    ("div_up(n, threads)", "div_up(n, 128)"),
    ("(n - 1) / threads + 1", "(n - 1) / 128 + 1"),
    ("n / threads + (n % threads != 0)", "n / 128 + (n % 128 != 0)"),
])
def test_grid_forms_follow_the_block(grid, expected):
    src = f"""int div_up(int a, int b);
__global__ void k(int n, float *x) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }}
void host(int n, float *x, int threads) {{ k<<<{grid}, threads>>>(n, x); }}
"""
    doc = Doc(src)
    after = doc.applied(set_block_size(doc.model, doc.site("k"), 128))
    assert f"k<<<{expected}, 128>>>" in after.text


def test_exact_division_grid_is_refused():
    doc = Doc("""__global__ void k(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
void host(float *x, int n) { k<<<n / 256, 256>>>(x); }
""")
    with pytest.raises(EditError, match="without rounding up"):
        set_block_size(doc.model, doc.site("k"), 128)


def test_local_constants_and_grid_variable_used_only_here_are_edited_in_place():
    doc = Doc("""__global__ void k(int n, float *x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }
void host(int n, float *x) {
    const int threads = 64;
    const int blocks = (n + threads - 1) / threads;
    k<<<blocks, threads>>>(n, x);
}
""")
    after = doc.applied(set_block_size(doc.model, doc.site("k"), 256))
    assert "const int threads = 256;" in after.text
    assert "const int blocks = (n + threads - 1) / threads;" in after.text  # follows the constant


def test_dim3_block_variable():
    doc = Doc("""__global__ void k(int n, float *x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 1.0f; }
void host(int n, float *x) {
    dim3 block(64);
    dim3 grid((n + 63) / 64);
    k<<<grid, block>>>(n, x);
}
""")
    after = doc.applied(set_block_size(doc.model, doc.site("k"), 256))
    assert "dim3 block(256);" in after.text and "dim3 grid((n + 255) / 256);" in after.text


def test_block_size_inputs_are_validated():
    doc = example("examples/lints/launch_slips.cu")
    site = doc.site("negate")
    for bad, match in ((0, "between"), (2048, "between"), (100, "warp"), (256, "already"), (1.5, "whole")):
        with pytest.raises(EditError, match=match):
            set_block_size(doc.model, site, bad)
    fix = set_block_size(doc.model, site, 100, allow_any_size=True)
    assert doc.applied(fix).site("negate").block.value == (100, 1, 1)


def test_two_dimensional_block_is_refused():
    doc = example("examples/cuda/sgemm_tiled.cu")
    with pytest.raises(EditError, match="16x16x1"):
        set_block_size(doc.model, doc.site("sgemm_tiled"), 128)


def test_template_block_parameter_is_refused():
    doc = example("examples/cuda/templated.cu")
    with pytest.raises(EditError, match="template argument too"):
        set_block_size(doc.model, doc.site("sum_squares"), 512)


# --------------------------------------------------------------------------- set_launch_bounds


def test_insert_launch_bounds_before_the_name():
    doc = example("examples/lints/launch_slips.cu")
    fix = set_launch_bounds(doc.model, doc.kernel("negate"), 256)
    after = doc.applied(fix)
    assert "__global__ void __launch_bounds__(256) negate(int n" in after.text
    assert after.kernel("negate").launch_bounds.max_threads.value == 256


def test_replace_keeps_or_sets_min_blocks():
    doc = example("examples/cuda/image_pipeline.cu")
    unsharp = doc.kernel("unsharp_mask")
    kept = doc.applied(set_launch_bounds(doc.model, unsharp, 512))
    assert kept.kernel("unsharp_mask").launch_bounds.min_blocks.text == "4"
    changed = doc.applied(set_launch_bounds(doc.model, unsharp, 512, 2))
    assert "__launch_bounds__(512, 2)" in changed.text
    dropped = doc.applied(set_launch_bounds(doc.model, unsharp, 512, keep_min_blocks=False))
    assert dropped.kernel("unsharp_mask").launch_bounds.min_blocks is None


def test_launch_bounds_on_a_qualified_out_of_class_definition():
    doc = Doc("""namespace ns { __global__ void k(float *x); }
__global__ void ns::k(float *x) { x[0] = 1.0f; }
""")
    kernel = doc.fk.kernels[0]
    after = doc.applied(set_launch_bounds(doc.model, kernel, 128))
    assert "__global__ void __launch_bounds__(128) ns::k(float *x) {" in after.text


def test_launch_bounds_below_a_launch_or_out_of_range_are_refused():
    doc = example("examples/lints/launch_slips.cu")
    with pytest.raises(EditError, match="line 64 uses 256 threads"):
        set_launch_bounds(doc.model, doc.kernel("negate"), 128)
    for max_threads, min_blocks in ((0, None), (4096, None), (256, 0), (256, 99)):
        with pytest.raises(EditError, match="between"):
            set_launch_bounds(doc.model, doc.kernel("negate"), max_threads, min_blocks)


# --------------------------------------------------------------------------- set_omp_clauses


def test_thread_limit_from_a_macro_and_num_teams_follow():
    doc = example("examples/openmp/saxpy_omp.cpp")
    region = doc.fk.omp_regions[0]
    after = doc.applied(set_omp_clauses(doc.model, region, thread_limit=128))
    assert "num_teams((n + 128 - 1) / 128) thread_limit(128)" in after.text
    assert after.fk.omp_regions[0].clause("thread_limit").value.value == 128


def test_clauses_are_added_on_a_continued_pragma():
    doc = example("examples/openmp/dot_omp.cpp")
    region = doc.fk.omp_regions[0]
    after = doc.applied(set_omp_clauses(doc.model, region, thread_limit=512, num_teams=1024))
    new_region = after.fk.omp_regions[0]
    assert new_region.clause("thread_limit").value.value == 512
    assert new_region.clause("num_teams").value.value == 1024
    assert "reduction(+:sum) thread_limit(512) num_teams(1024)\n" in after.text
    assert after.text.count("\\\n") == doc.text.count("\\\n")  # continuations untouched


def test_clause_added_before_a_trailing_comment():
    doc = Doc("""void f(float *x, int n) {
#pragma omp target teams distribute parallel for map(tofrom: x[0:n])  // offload
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
}
""")
    after = doc.applied(set_omp_clauses(doc.model, doc.fk.omp_regions[0], thread_limit=256))
    assert "map(tofrom: x[0:n]) thread_limit(256)  // offload" in after.text


def test_omp_inputs_are_validated():
    doc = Doc("""void f(float *x, int n) {
#pragma omp target parallel for map(tofrom: x[0:n])
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
}
""")
    region = doc.fk.omp_regions[0]
    with pytest.raises(EditError, match="teams"):
        set_omp_clauses(doc.model, region, thread_limit=128)
    saxpy = example("examples/openmp/saxpy_omp.cpp")
    for kwargs in ({}, {"thread_limit": 0}, {"thread_limit": 2048}, {"num_teams": 0}):
        with pytest.raises(EditError):
            set_omp_clauses(saxpy.model, saxpy.fk.omp_regions[0], **kwargs)


# --------------------------------------------------------------------------- block size choice


def test_best_block_for_is_a_warp_multiple_within_launch_bounds():
    db = load_database()
    gpu = db.get("rtx3080")
    doc = example("examples/lints/launch_slips.cu")
    assert best_block_for(None, gpu) % 32 == 0
    assert best_block_for(doc.kernel("add_one"), gpu) == 32  # __launch_bounds__(32) caps it
    assert best_block_for(doc.kernel("scale"), gpu) == 96  # capped at 100, rounded to the warp
    assert best_block_for(None, gpu, regs_per_thread=128) <= 512


def test_preferred_block_size_reaches_the_best_occupancy_everywhere():
    db = load_database()
    gpus = [db.get("rtx3080"), db.get("h100-sxm5-80gb")]
    assert preferred_block_size(gpus) == 128
    assert preferred_block_size([]) is None


def test_incremental_reparse_matches_a_full_parse():
    from perflsp.analysis.fixes.document import _reparse

    doc = example("examples/lints/launch_slips.cu")
    fixes = [set_block_size(doc.model, doc.site("add_one"), 256),
             set_launch_bounds(doc.model, doc.kernel("negate"), 256)]
    for fix in fixes:
        new_data = apply_edits(doc.data, fix.edits)
        assert str(_reparse(doc.data, doc.tree, fix.edits, new_data).root_node) == str(parse(new_data).root_node)
    assert str(doc.tree.root_node) == str(parse(doc.data).root_node)  # the caller's tree is untouched


def test_regions_that_share_out_work_by_hand_are_refused():
    doc = Doc("""#include <omp.h>
void f(float *x) {
#pragma omp target teams num_teams(64) thread_limit(128)
    {
#pragma omp parallel
        x[omp_get_team_num() * 128 + omp_get_thread_num()] = 0.0f;
    }
}
""")
    with pytest.raises(EditError, match="by hand"):
        set_omp_clauses(doc.model, doc.fk.omp_regions[0], thread_limit=256)


def test_a_fix_in_a_header_context_checks_the_edited_text_s_own_macros(tmp_path):
    """The model holds the file's macros as its preprocessor read them (with its headers'): the
    edit of `#define BLOCK` is checked on the edited text's own macros, not on the old value."""
    (tmp_path / "shape.h").write_text("#define ITEMS (1 << 20)\n")
    path = tmp_path / "k.cu"
    path.write_text('#include "shape.h"\n#define BLOCK 100\n'
                    "__global__ void k(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f; }\n"
                    "int main() { float *x = 0; k<<<(ITEMS + BLOCK - 1) / BLOCK, BLOCK>>>(x); return 0; }\n")
    source = read_source(path, path.read_bytes(), IncludeResolver())
    model = ProgramModel(source.data, source.tree, source.kernels, source.env)
    (site,) = model.kernels.launches
    assert site.block.value == (100, 1, 1) and site.grid.value == (10486, 1, 1)  # ITEMS from the header
    fix = set_block_size(model, site, 128)
    after = model.reread(apply_edits(model.data, fix.edits), parse(apply_edits(model.data, fix.edits)))
    assert b"#define BLOCK 128" in after.data
    assert after.kernels.launches[0].block.value == (128, 1, 1) and after.kernels.launches[0].grid.value == (8192, 1, 1)
    assert after.evaluate("ITEMS") == 1 << 20  # the header's macros are still in the context


def test_launch_bounds_are_checked_on_the_edited_definition_alone():
    doc = Doc("#define THREADS 256\n__global__ void k(float *x) { x[threadIdx.x] = 0.0f; }\n"
              "void host(float *x) { k<<<1, THREADS>>>(x); }\n")
    fix = set_launch_bounds(doc.model, doc.kernel("k"), 512)
    edited = apply_edits(doc.data, fix.edits)
    kernel = doc.model.edited_definition(edited, parse(edited), fix.edits[0].start_byte)
    assert kernel is not None and kernel.name == "k" and kernel.launch_bounds.max_threads.value == 512
    with pytest.raises(EditError, match="line"):
        set_launch_bounds(doc.model, doc.kernel("k"), 128)  # below the launch's THREADS (the model's constant)
