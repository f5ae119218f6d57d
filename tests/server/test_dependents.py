"""Which kernels an edit in host code re-analyses: the program model of the edited text says
who calls whom (`server.dependents` asks its call index), up to the levels of callers a launch's
values are folded through."""

from __future__ import annotations

from perflsp.server import dependents
from perflsp.server.text import Change, TextState
from perflsp.source.positions import Position

TEXT = """\
__global__ void near(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = 1.0f; }
__global__ void far(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = 2.0f; }
__global__ void alone(float *x) { x[threadIdx.x] = 3.0f; }

void launch_near(float *x, int n) { near<<<n / 256, 256>>>(x, n); }
void launch_far(float *x, int n) { far<<<n / 256, 256>>>(x, n); }
void middle(float *x, int n) { launch_far(x, n); }
void unrelated(int n) { int m = n * 2; (void)m; }

int main() {
    float *x;
    int n = 1 << 20;
    launch_near(x, n);
    middle(x, n);
    unrelated(n);
    return 0;
}
"""


def affected_by(old: str, new: str) -> set[str]:
    """Names of the kernels re-analysed after replacing `old` (its first occurrence) by `new`."""
    state = TextState(TEXT, 1, None)
    start = TEXT.index(old)
    line = TEXT.count("\n", 0, start)
    column = start - (TEXT.rfind("\n", 0, start) + 1)
    state.apply([Change(new, Position(line, column), Position(line, column + len(old)))], 2)
    assert state.extracted.change == "host", state.extracted.change
    names = {id(k): k.name for k in state.extracted.kernels.kernels}
    return {names[i] for i in dependents.affected(state.model(None).model, state.extracted)}


def test_an_edit_in_main_reaches_the_kernels_launched_through_its_callees() -> None:
    # main -> launch_near -> near (one level), main -> middle -> launch_far -> far (two)
    assert affected_by("int n = 1 << 20;", "int n = 1 << 21;") == {"near", "far"}


def test_an_edit_in_a_caller_reaches_only_what_it_calls() -> None:
    assert affected_by("launch_far(x, n); }", "launch_far(x, n + 1); }") == {"far"}


def test_an_edit_in_a_function_that_launches_nothing_reaches_no_kernel() -> None:
    assert affected_by("int m = n * 2;", "int m = n * 3;") == set()


def test_a_call_the_edit_removed_still_counts() -> None:
    assert affected_by("void middle(float *x, int n) { launch_far(x, n); }",
                       "void middle(float *x, int n) { }") == {"far"}
