"""The server's per-kernel caching: an edit inside one kernel re-analyses and re-lints only it,
and the results always equal a fresh, uncached analysis of the text."""

from pathlib import Path

import pytest

from perflsp.analysis import pipeline
from perflsp.server.analysis import Analyzer
from perflsp.server.config import Layer, Origin, resolve
from perflsp.server.documents import Snapshot
from perflsp.server.features.diagnostics import build
from perflsp.server.oneshot import analyse_text, diagnostic_keys
from perflsp.server.text import Change, TextState
from perflsp.source.positions import Position

ROOT = Path(__file__).resolve().parents[2]
SLIPS = ROOT / "examples" / "lints" / "launch_slips.cu"
CONFIG = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100", "rtx3080"]})])


def analyse(state: TextState, analyzer: Analyzer) -> Snapshot:
    analyzer.start(state, state.extracted, CONFIG.gpus, None, (CONFIG.generation,), state.lines)
    analysis = analyzer.step(None)
    return Snapshot("file:///x.cu", state.version, state.data, state.tree, state.lines, state.extracted.kernels,
                    analysis, CONFIG, state.preprocessed)


def fresh(state: TextState):
    return diagnostic_keys(analyse_text(state.data.decode(), "file:///x.cu", CONFIG, path=state.path,
                                        reading=state.reading).diagnostics)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


def test_an_edit_inside_one_kernel_reanalyses_only_that_kernel():
    text = SLIPS.read_text()
    state = TextState(text, 1, str(SLIPS))
    analyzer = Analyzer()
    snap = analyse(state, analyzer)
    kernels = len(state.extracted.kernels.kernels)
    assert analyzer.analysed == kernels and kernels >= 4
    linted = analyzer.linted_groups
    assert any(d.code == "launch/block-size-not-warp-multiple" for d in build(snap))

    line = line_of(text, "x[i] = -x[i];")  # inside `negate`
    state.apply([Change("    x[i] *= 1.0f;\n", Position(line, 0), Position(line, 0))], 2)
    assert state.extracted.change == "kernel"
    snap = analyse(state, analyzer)
    assert analyzer.analysed == kernels + 1
    assert analyzer.linted_groups == linted + 1
    assert diagnostic_keys(build(snap)) == fresh(state)


def test_an_edit_in_host_code_reanalyses_the_kernels_it_launches():
    text = SLIPS.read_text()
    state = TextState(text, 1, str(SLIPS))
    analyzer = Analyzer()
    analyse(state, analyzer)
    before = analyzer.analysed
    line = line_of(text, "const int rows = 65536")
    state.apply([Change("    int unused = 0;\n", Position(line, 0), Position(line, 0))], 2)
    assert state.extracted.change == "host"
    snap = analyse(state, analyzer)
    assert analyzer.analysed == 2 * before  # main launches every kernel of this file
    assert diagnostic_keys(build(snap)) == fresh(state)


HOSTS = """#define N 4096
__device__ float twice(float v) { return 2.0f * v; }
__global__ void alpha(int n, float *x) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
__global__ void beta(int n, float *y) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = twice(y[i]); }
__global__ void gamma_k(int n, float *z) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) z[i] = 0.0f; }
void launch_alpha(float *x, int n) {
    alpha<<<(n + 255) / 256, 256>>>(n, x);
}
void launch_beta(float *y, int n) {
    beta<<<(n + 127) / 128, 128>>>(n, y);
}
int main() {
    float *x;
    cudaMalloc(&x, N * sizeof(float));
    launch_alpha(x, N);
    return 0;
}
"""


def reports(state: TextState, snap: Snapshot) -> dict[str, tuple]:
    out = {}
    for kernel in state.extracted.kernels.kernels:
        report = snap.analysis.report_for(kernel)
        assert report is not None
        out[kernel.name] = (report.facts.work_items, report.facts.dram_bytes,
                            [(e.gpu, e.verdict, e.confidence) for e in report.estimates])
    return out


def fresh_reports(state: TextState) -> dict[str, tuple]:
    copy = TextState(state.data.decode(), state.version, state.path)
    return reports(copy, analyse(copy, Analyzer()))


@pytest.mark.parametrize(("needle", "old", "new", "kind", "reanalysed"), [
    ("launch_alpha(x, N);", "launch_alpha(x, N);", "launch_alpha(x, N / 4);", "host", 1),  # main calls launch_alpha
    ("beta<<<", "128>>>", "64>>>", "host", 1),  # a launch in launch_beta: only beta
    ("return 0;", "return 0;", "return 1;", "host", 1),  # main: its callee's launch (alpha)
    ("twice(float v)", "2.0f * v", "3.0f * v", "device", 1),  # twice: beta calls it
])
def test_an_edit_outside_kernels_reanalyses_only_what_depends_on_it(needle, old, new, kind, reanalysed):
    state = TextState(HOSTS, 1, None)
    analyzer = Analyzer()
    analyse(state, analyzer)
    before, linted = analyzer.analysed, analyzer.linted_groups
    assert before == 3
    line = line_of(HOSTS, needle)
    column = HOSTS.splitlines()[line].index(old)
    state.apply([Change(new, Position(line, column), Position(line, column + len(old)))], 2)
    assert state.extracted.change == kind
    snap = analyse(state, analyzer)
    assert analyzer.analysed == before + reanalysed
    assert analyzer.linted_groups < linted * 2
    assert reports(state, snap) == fresh_reports(state)
    assert diagnostic_keys(build(snap)) == fresh(state)


def test_findings_follow_the_text_after_an_edit_above_them():
    text = SLIPS.read_text()
    state = TextState(text, 1, str(SLIPS))
    analyzer = Analyzer()
    first = build(analyse(state, analyzer))
    line = line_of(text, "x[i] *= s;")  # inside `scale`, the first kernel
    state.apply([Change("\n\n", Position(line, 0), Position(line, 0))], 2)
    second = build(analyse(state, analyzer))
    moved = {(d.code, d.range.start.line) for d in second}
    for d in first:
        if d.range.start.line > line:
            assert (d.code, d.range.start.line + 2) in moved
    assert diagnostic_keys(second) == fresh(state)


def test_an_engine_failure_becomes_an_uncertain_verdict(monkeypatch):
    def broken(unit, kernel, gpus):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(pipeline, "analyze_kernel", broken)
    state = TextState((ROOT / "examples" / "cuda" / "saxpy.cu").read_text(), 1, None)
    diagnostics = build(analyse(state, Analyzer()))
    uncertain = [d for d in diagnostics if d.code == "roofline/uncertain"]
    assert len(uncertain) == 2 and "engine error: ZeroDivisionError: boom" in uncertain[0].message


@pytest.mark.parametrize("name", ["precision_slips.cu", "launch_slips.cu"])
def test_lint_findings_match_a_whole_file_run(name):
    path = ROOT / "examples" / "lints" / name
    state = TextState(path.read_text(), 1, str(path))
    snap = analyse(state, Analyzer())
    lint_codes = {d.code for d in build(snap)} - {"roofline/compute-bound", "roofline/bandwidth-bound", "roofline/uncertain"}
    assert lint_codes, "the examples are written to trigger lints"
    assert diagnostic_keys(build(snap)) == fresh(state)


@pytest.mark.parametrize("name", ["poly-cuda/kernels.h", "mmul-cuda/main.cu", "heavy-omp/main.cpp"])
def test_the_server_shows_what_check_shows(name):
    # one pipeline: an open document and `perflsp check` read a file in the same context (a
    # header takes its launch sites from the source that includes it) and give the same facts
    from perflsp.analysis.report import CheckSettings
    from perflsp.checking import check_file
    from perflsp.kernels.includes import IncludeResolver

    path = ROOT / "tests" / "data" / "eval" / "src" / name
    state = TextState(path.read_text(), 1, str(path))
    snapshot = analyse(state, Analyzer())
    served = [snapshot.analysis.report_for(k) for k in (*state.extracted.kernels.kernels,
                                                         *state.extracted.kernels.omp_regions)]
    checked = check_file(path, CONFIG.gpus, CheckSettings(), IncludeResolver())
    assert not isinstance(checked, str) and checked.kernels
    assert len(served) == len(checked.kernels)
    for mine, theirs in zip(served, checked.kernels):
        assert mine is not None and mine.name == theirs.name
        assert mine.facts.work_items == theirs.facts.work_items
        assert mine.facts.dram_bytes == theirs.facts.dram_bytes
        assert [(e.gpu, e.verdict, e.confidence) for e in mine.estimates] == \
            [(e.gpu, e.verdict, e.confidence) for e in theirs.estimates]


def test_a_full_extraction_that_changed_only_a_kernel_reuses_the_other_results():
    text = SLIPS.read_text()
    state = TextState(text, 1, str(SLIPS))
    analyzer = Analyzer()
    analyse(state, analyzer)
    before, linted = analyzer.analysed, analyzer.linted_groups
    edited = text.replace("x[i] = -x[i];", "x[i] = -x[i];\n    x[i] *= 2.0f;")
    state.apply([Change(edited)], 2)  # extracted in full, as when error recovery spreads past the kernel
    assert state.extracted.change == "full"
    snap = analyse(state, analyzer)
    assert analyzer.analysed == before + 1
    assert analyzer.linted_groups == linted + 1
    assert diagnostic_keys(build(snap)) == fresh(state)


def test_a_half_typed_statement_keeps_the_last_analysis_and_moves_its_findings():
    # Typing a statement that does not parse yet holds the kernel (kernels/incremental.py): no
    # engine run, no lint, every diagnostic where its text now is; completing the statement
    # analyses the kernel again and equals a fresh analysis of the text.
    text = SLIPS.read_text()
    state = TextState(text, 1, str(SLIPS))
    analyzer = Analyzer()
    first = build(analyse(state, analyzer))
    analysed, linted = analyzer.analysed, analyzer.linted_groups
    line = line_of(text, "const int i = blockIdx.x")  # inside `scale`, the first kernel
    typed = "    float t = \n"
    state.apply([Change(typed, Position(line, 0), Position(line, 0))], 2)
    assert state.extracted.change == "held"
    second = build(analyse(state, analyzer))
    assert (analyzer.analysed, analyzer.linted_groups) == (analysed, linted)
    expected = {(d.code, d.range.start.line + (1 if d.range.start.line >= line else 0), d.range.start.character)
                for d in first}
    assert {(d.code, d.range.start.line, d.range.start.character) for d in second} == expected

    state.apply([Change("2.0f;", Position(line, len(typed) - 1), Position(line, len(typed) - 1))], 3)
    assert state.extracted.change == "kernel"
    third = build(analyse(state, analyzer))
    assert analyzer.analysed == analysed + 1
    assert diagnostic_keys(third) == fresh(state)


FILE_SCOPE = """\
float scale = 2.0f;
auto offset = 1.5f;

__global__ void scaled(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float t = scale * 0.5; x[i] = t; }
}

__global__ void shifted(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float t = offset * 0.5; x[i] = t; }
}

__global__ void plain(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + 1.0f;
}
"""


@pytest.mark.parametrize("auto_global", [False, True])
def test_file_scope_types_carry_over_edits_inside_kernels(auto_global):
    # the file-scope declarations are read once while only kernel bodies change (an `auto`
    # global's initialiser is a node of its tree: then they are read again for each tree)
    text = FILE_SCOPE if auto_global else FILE_SCOPE.replace("auto offset", "float offset")
    state = TextState(text, 1, "/x.cu")
    analyzer = Analyzer()
    snap = analyse(state, analyzer)
    promoted = [d for d in build(snap) if d.code == "precision/double-promotion"]
    assert {d.range.start.line for d in promoted} == {5, 10}  # the globals' types are known
    version = 1
    for needle, typed in (("x[i] + 1.0f", " + 0.5f"), ("scale * 0.5", " * 2"), ("offset * 0.5", " - 1")):
        line = line_of(state.data.decode(), needle)
        column = state.data.decode().splitlines()[line].index(needle) + len(needle)
        version += 1
        state.apply([Change(typed, Position(line, column), Position(line, column))], version)
        assert state.extracted.change == "kernel"
        snap = analyse(state, analyzer)
        assert diagnostic_keys(build(snap)) == fresh(state)
    shared = analyzer._lint_facts.file_scope
    assert shared is not None and shared[2] is (not auto_global)


TOP_LEVEL = """\
typedef double real;
__constant__ real weights[16];
const int taps = 16;

__global__ void smooth(const real* x, real* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    real acc = 0.0;
    for (int k = 0; k < taps; ++k) acc += weights[k] * x[i + k] * 1.5;
    if (i < n) y[i] = acc;
}

__global__ void copy(const real* x, real* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def test_top_level_facts_are_read_once_while_only_function_bodies_change():
    # the typedefs, file-scope device variables and constants are read from the top level once;
    # edits inside a kernel's body hand the same facts to the next version's program model, an
    # edit of the top level reads them again: the results always equal a fresh analysis
    state = TextState(TOP_LEVEL, 1, "/x.cu")
    analyzer = Analyzer()
    analyse(state, analyzer)
    top = state.extracted.top
    assert top is not None and {"type_aliases", "globals"} <= top.known()
    assert top.remembered("type_aliases", dict)["real"].size_bytes == 8
    version = 1
    for typed in ("2", "5", "0"):  # digits typed into the literal `1.5`: the kernel parses after each
        line = line_of(state.data.decode(), "* 1.5")
        column = state.data.decode().splitlines()[line].index("* 1.5") + len("* 1.5")
        version += 1
        state.apply([Change(typed, Position(line, column), Position(line, column))], version)
        assert state.extracted.change == "kernel"
        assert state.extracted.top is top
        snap = analyse(state, analyzer)
        assert diagnostic_keys(build(snap)) == fresh(state)
    version += 1
    state.apply([Change("float", Position(0, 8), Position(0, 14))], version)  # the typedef itself
    assert state.extracted.top is not top
    snap = analyse(state, analyzer)
    assert state.extracted.top.remembered("type_aliases", dict)["real"].size_bytes == 4
    assert diagnostic_keys(build(snap)) == fresh(state)


GLOBAL_SIZE = """int size = 1 << 20;
__global__ void fill(int n, float *x) { for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.0f; }
void launch(float *x) {
    const int n = size;
    fill<<<1, 256>>>(n, x);
}
void configure(int argc) {
    int unused = argc;
}
int main(int argc, char **argv) {
    float *x;
    cudaMalloc(&x, (1 << 20) * sizeof(float));
    configure(argc);
    launch(x);
    return 0;
}
"""


def test_an_edit_that_writes_a_file_scope_variable_reanalyses_what_reads_it():
    # `fill` is launched in `launch`, which reads `size`; the edit is in `configure`, which is
    # not on its call path, but now writes `size`: it no longer keeps its initial value
    state = TextState(GLOBAL_SIZE, 1, None)
    analyzer = Analyzer()
    analyse(state, analyzer)
    assert analyzer.analysed == 1
    line = line_of(GLOBAL_SIZE, "int unused = argc;")
    state.apply([Change("    size = argc * 1000;\n", Position(line, 0), Position(line, 0))], 2)
    assert state.extracted.change == "host"
    snap = analyse(state, analyzer)
    assert analyzer.analysed == 2
    assert reports(state, snap) == fresh_reports(state)


CHAIN = """__global__ void k(float *y, int n, int taps) { for (int t = 0; t < taps; t++) y[t % n] += 1.0f; }
void launch(float *y, int n, int taps) { k<<<1, 1>>>(y, n, taps); }
void stage(float *y, int n) { launch(y, n, n / 64); }
void run(float *y, int n) { stage(y, n); }
int main() { float *y; cudaMalloc(&y, 4096 * sizeof(float)); run(y, 4096); return 0; }
"""


def test_an_edit_three_callers_up_reanalyses_the_launch():
    state = TextState(CHAIN, 1, None)
    analyzer = Analyzer()
    analyse(state, analyzer)
    assert analyzer.analysed == 1
    line = line_of(CHAIN, "run(y, 4096)")
    column = CHAIN.splitlines()[line].index("4096);")
    state.apply([Change("8192", Position(line, column), Position(line, column + 4))], 2)
    assert state.extracted.change == "host"
    snap = analyse(state, analyzer)
    assert analyzer.analysed == 2
    assert reports(state, snap) == fresh_reports(state)
