"""Recording where the walked statements and loops are, and how often each runs (the source
profile that compiled code is tied to: statements with their guard weights, loops with their
header lines and trip counts)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.compiled.profile import SourceLoop, SourceStatement

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def record_statement(walker: Walker, node: Node) -> None:
    assert walker.profile is not None and walker.path is not None
    weight = walker.mult / walker.trip_product if walker.trip_product > 0 else 0.0
    walker.profile.statements.append(SourceStatement(
        walker.path, walker.line(node), node.end_point[0] + 1 + walker.line_offset, weight,
        walker.profile_loops[-1] if walker.profile_loops else None, walker.callsites,
        node.type in _TESTS_AND_JUMPS))


_TESTS_AND_JUMPS = frozenset({"if_statement", "switch_statement", "return_statement", "break_statement",
                              "continue_statement", "goto_statement"})


def begin_profile_loop(walker: Walker, node: Node, body: Node | None, trip: float, step: float | None,
                       parallel: bool = False, first_line: int | None = None,
                       induction_steps: tuple[float, ...] = (), static_trip: bool = False) -> int | None:
    """Record a loop the walk enters (`end_profile_loop` when it leaves); None when not
    profiling. `first_line`: where its header starts when not on the loop statement (the
    directive of an OpenMP worksharing loop, whose runtime loops the compiler puts there)."""
    if walker.profile is None or walker.path is None:
        return None
    weight = walker.mult / walker.trip_product if walker.trip_product > 0 else 0.0
    index = len(walker.profile.loops)
    walker.profile.loops.append(SourceLoop(
        walker.path, first_line or walker.line(node), walker.line(body) if body is not None else walker.line(node),
        node.end_point[0] + 1 + walker.line_offset, trip, weight * walker.trip_product, step,
        len(walker.profile_loops), walker.callsites, parallel, induction_steps=induction_steps,
        static_trip=static_trip))
    walker.profile_loops.append(index)
    walker.profile_load_bytes.append(0.0)
    walker.profile_load_keys.append(set())
    walker.outer_trip_products.append(walker.trip_product)
    if not parallel:
        walker.trip_product *= trip
    return index


def collapse_profile_loops(walker: Walker, index: int | None, levels: int) -> None:
    """The loop `index` and the `levels - 1` loops nested in it (each the first of its depth)
    are one loop of the compiled code (an OpenMP `collapse(levels)` clause): each gets the nest's
    iterations. Called once the nest is walked."""
    if index is None or walker.profile is None or levels < 2:
        return
    loops = walker.profile.loops
    members = [index]
    for later in range(index + 1, len(loops)):
        if len(members) == levels or loops[later].depth <= loops[index].depth:
            break
        if loops[later].depth == loops[members[-1]].depth + 1:
            members.append(later)
    product = math.prod(loops[m].trip for m in members)
    for m in members:
        loops[m].collapsed_trip = product


def end_profile_loop(walker: Walker, index: int | None) -> None:
    if index is None:
        return
    walker.profile_loops.pop()
    assert walker.profile is not None
    walker.profile.loops[index].load_bytes = walker.profile_load_bytes.pop()
    walker.profile_load_keys.pop()
    walker.trip_product = walker.outer_trip_products.pop()
