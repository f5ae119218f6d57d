"""Folding at launch sites: macro bodies with comments, locals whose address is taken."""

from perflsp.kernels import extract


def _sites(src: str):
    return extract(src.encode()).launches


def test_macro_with_trailing_comment_folds():
    src = """#define BLOCK 100  // not a multiple of 32
#define OTHER /* why */ 64 /* more */
__global__ void k(int n) {}
void host(int n) { k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n); k<<<2, OTHER>>>(n); }
"""
    first, second = _sites(src)
    assert first.block.value == (100, 1, 1)
    assert second.block.value == (64, 1, 1)


def test_local_whose_address_is_taken_is_unknown_after():
    src = """__global__ void k(int n) {}
void query(int *g, int *b);
void host(int n) {
    int grid = 0, block = 0;
    k<<<4, block + 32>>>(n);
    query(&grid, &block);
    k<<<grid, block>>>(n);
}
"""
    before, after = _sites(src)
    assert before.block.value == (32, 1, 1)
    assert after.block.value is None and "address" in after.block.reason
    assert after.grid.value is None


def test_address_taken_inside_a_declaration_counts():
    src = """__global__ void k(int n) {}
void host(int n) {
    int block = 128;
    int *p = &block;
    *p = 64;
    k<<<1, block>>>(n);
}
"""
    (site,) = _sites(src)
    assert site.block.value is None


def test_a_constant_defined_in_each_branch_of_an_ifdef_takes_the_active_one():
    # `SIZE_FROM_SCRIPT` is never defined: the `#else` branch is what the compiler reads
    src = """#ifndef SMALL_TEST
#ifdef SIZE_FROM_SCRIPT
const int n = SIZE_FROM_SCRIPT;
#else
const int requested = 1000;
const int n = 1 << (requested < 512 ? 9 : 10);
#endif
#else
const int n = 4;
#endif
#if defined(SMALL)
const int threads = 32;
#elif 1
const int threads = 256;
#endif
__global__ void k(int *x) {}
void host(int *x) { k<<<n, threads>>>(x); }
"""
    (site,) = _sites(src)
    assert site.grid.value == (1024, 1, 1)
    assert site.block.value == (256, 1, 1)


def test_a_macro_continued_over_crlf_lines_folds_whole():
    src = ("#define ilog2(n) ((n<8)?2:((n<16)?3:((n<32)?4:\\\r\n"
           "                ((n<64)?5:6))))\r\n"
           "const int requested = 40;\r\n"
           "const int n = 1 << ilog2(requested);\r\n"
           "__global__ void k(int *x) {}\r\n"
           "void host(int *x) { k<<<n, 64>>>(x); }\r\n")
    (site,) = _sites(src)
    assert site.grid.value == (32, 1, 1)
