"""The OpenMP device runtime's code (on the directive's line, under no statement of the
program): each of its branches read as even, so a reduction's alternative paths are counted
once, not all of them on every pass."""

from __future__ import annotations

import textwrap

import pytest

from perflsp.analysis.notes import texts
from perflsp.compiled import counts
from perflsp.compiled.branch_shares import block_shares
from perflsp.compiled.model import ZERO, Block, CompiledFunction, Loop
from perflsp.compiled.names import directive_line
from tests.test_compiled import analyse, compiler, needs_omp  # noqa: F401 - the fixture


def function(successors: list[list[int]], loops: list[Loop], owner: list[int | None]) -> CompiledFunction:
    blocks = [Block(start=16 * i, lines=[], successors=s, loop=owner[i]) for i, s in enumerate(successors)]
    return CompiledFunction("k", True, 32, [], blocks, loops)


def loop(header: int, blocks: list[int], parent: int | None = None) -> Loop:
    return Loop(header=header, blocks=blocks, parent=parent, latch_chains=[], steps=[], own_counts=ZERO)


def test_the_arms_of_a_branch_share_the_pass_and_meet_again():
    # 0 -> {1, 2} -> 3 (a diamond), then 3 -> {4, 5}, 4 -> 5
    fn = function([[1, 2], [3], [3], [4, 5], [5], []], [], [None] * 6)
    assert block_shares(fn) == pytest.approx([1.0, 0.5, 0.5, 1.0, 0.5, 1.0])


def test_a_nested_loop_passes_on_what_reaches_it_and_its_body_is_read_per_trip():
    # outer loop 0 (header 1): 1 -> {2, 5}; inner loop 1 at 2..3 (3 -> 2 back, 3 -> 4 exit);
    # 4 -> 1 closes the outer loop; 5 -> 6 and 4 ... the outer exit is 1 -> 6 via 5
    successors = [[1], [2, 5], [3], [2, 4], [1], [1, 6], []]
    owner: list[int | None] = [None, 0, 1, 1, 0, 0, None]
    fn = function(successors, [loop(1, [1, 2, 3, 4, 5]), loop(2, [2, 3], parent=0)], owner)
    shares = block_shares(fn)
    assert shares[1] == 1.0  # the outer header, every trip
    assert shares[4] == pytest.approx(0.5) and shares[5] == pytest.approx(0.5)  # after the inner loop / the other arm
    assert shares[2] == 1.0 and shares[3] == 1.0  # the inner loop's body, per inner trip


def test_irreducible_flow_keeps_every_block():
    # 0 -> {1, 2}, 1 <-> 2 without a dominating header: no clean order
    fn = function([[1, 2], [2], [1]], [], [None] * 3)
    assert block_shares(fn) == [1.0, 1.0, 1.0]


def test_the_directive_line_of_an_offload_entry():
    assert directive_line("__omp_offloading_10309_2f04440__Z3dotIdET_PKS0_S2__l139") == 139
    assert directive_line("_Z3dotPKfS0_Pfi") is None


@needs_omp
def test_a_reduction_counts_one_of_the_runtimes_paths(tmp_path, compiler, monkeypatch):  # noqa: F811
    source = tmp_path / "dot.cpp"
    source.write_text(textwrap.dedent("""\
        double dot(int n, const double *a, const double *b) {
          double sum = 0.0;
          #pragma omp target teams distribute parallel for map(to: a[0:n], b[0:n]) reduction(+:sum)
          for (int i = 0; i < n; i++)
            sum += a[i] * b[i];
          return sum;
        }
        int main() { static double a[1 << 22], b[1 << 22]; return dot(1 << 22, a, b) > 0; }
        """))
    (report,) = analyse(source, compiler).values()
    assert "operations counted in the compiled code" in texts(report.facts.evidence)[0]
    even = report.facts.per_item
    monkeypatch.setattr(counts, "block_shares", lambda fn: [1.0] * len(fn.blocks))
    (every,) = analyse(source, compiler).values()
    every_path = every.facts.per_item
    # the loop body (one DFMA per iteration) is the program's own statement: unchanged
    assert even.fp64 >= 2.0
    # the runtime's reduction (warp shuffles for full and partial warps, shared memory) after
    # each chunk of iterations: one path of it, not all of them
    assert even.int32 < every_path.int32
    assert even.fp64 < every_path.fp64
