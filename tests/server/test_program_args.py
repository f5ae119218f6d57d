"""`perflsp.profiling.args` reaches the server's analysis as the program's arguments (argv), under
profiling's trust rule: user-level settings or a trusted workspace, never an untrusted repository
file."""

from __future__ import annotations

from perflsp.server.config import Layer, Origin, resolve
from perflsp.server.oneshot import analyse_text
from tests.test_check_args import POLY


def trip_count(config) -> float:
    snap = analyse_text(POLY, "file:///poly.cu", config)
    (report,) = snap.analysis.reports.values()
    return next(loop.trip_count for loop in report.facts.loops if loop.variable == "d")


def test_profiling_args_fold_into_the_analysis():
    heavy = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"], "profiling": {"args": ["400"]}})])
    light = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"], "profiling": {"args": ["4"]}})])
    unset = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"]})])
    assert heavy.argv == ("400",) and unset.argv is None
    assert trip_count(heavy) == 400 and trip_count(light) == 4
    assert trip_count(unset) != 400


def test_untrusted_repository_file_cannot_set_them():
    config = resolve([Layer(Origin.FILE, ".perflsp.toml", {"profiling": {"args": ["400"]}})])
    assert config.argv is None


SPLIT_HEADERS = """\
#include <cstdlib>
__global__ void scale(float *x, int n, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) for (int r = 0; r < reps; r++) x[i] *= 0.5f;
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  float *x;
  cudaMalloc(&x, sizeof(float) * n);
#ifdef DEBUG_SWEEP
  for (int reps = 9; reps <= 9; ++reps) {
#else
  for (int reps = 5; reps <= 16; ++reps) {
#endif
    scale<<<(n + 255) / 256, 256>>>(x, n, reps);
  }
  return 0;
}
"""


def test_the_open_document_reads_loop_headers_split_between_branches_as_check_does():
    config = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"], "profiling": {"args": ["4096"]}})])
    snap = analyse_text(SPLIT_HEADERS, "file:///split.cu", config)
    (report,) = snap.analysis.reports.values()
    assert {loop.variable: loop.trip_count for loop in report.facts.loops} == {"r": 5}
    assert report.facts.work_items == 4096


def test_typing_in_a_document_with_split_loop_headers_reparses_its_view_from_the_last_one():
    from perflsp.kernels.includes import balanced_view
    from perflsp.server.text import Change, TextState
    from perflsp.source.parser import parse
    from perflsp.source.positions import Position

    state = TextState(SPLIT_HEADERS, 0, None)
    assert state.model(("4096",)).model.data != SPLIT_HEADERS.encode()  # (read through the view)
    line = SPLIT_HEADERS.splitlines().index("    scale<<<(n + 255) / 256, 256>>>(x, n, reps);")
    for version, ch in enumerate("  ", 1):
        state.apply([Change(ch, Position(line, 0), Position(line, 0))], version)
        view = balanced_view(state.data, state.preprocessed)
        tree = state.view_tree(view)
        assert str(tree.root_node) == str(parse(view).root_node)  # the incremental parse is the fresh one
        assert state.view_tree(view) is tree  # (one parse a version)
    config = resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"], "profiling": {"args": ["4096"]}})])
    snap = analyse_text(state.data.decode(), "file:///split.cu", config)
    (report,) = snap.analysis.reports.values()
    assert {loop.variable: loop.trip_count for loop in report.facts.loops} == {"r": 5}
