"""Loops of the kernel walker: trip counts from the loop header (bounds, start, step; grid- and
block-stride loops; unknown sizes assumed), and walking the body that many times with the loop
counter and induction variables as linear forms over the loop's atom."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.block_bounds import per_block_trip
from perflsp.analysis.clamped_spans import clamped_span
from perflsp.analysis.counter_forms import counter_form, geometric_passes, solved_bound, spread_geometric_passes
from perflsp.analysis.ctype import INT
from perflsp.analysis.folding import pow2
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear, value_range
from perflsp.analysis.models import LoopFact
from perflsp.analysis.notes import Note, NoteKind, NoteSource, assumed
from perflsp.analysis.walk_branches import learn_size
from perflsp.analysis.walk_profile import begin_profile_loop, collapse_profile_loops, end_profile_loop
from perflsp.analysis.walk_ranges import assume_sized_trip
from perflsp.analysis.walk_values import IDENT, INDEX_ATOMS, LoopOrigin, Val, is_loop_atom, loop_atom
from perflsp.analysis.while_forms import while_expectation
from perflsp.kernels.consteval import ConstEnv, try_evaluate

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def walk_for(walker: Walker, node: Node) -> None:
    walker.scopes.append({})
    try:
        init = node.child_by_field_name("initializer")
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        body = node.child_by_field_name("body")
        var, start = loop_init(walker, init)
        if var is None or var not in IDENT.findall(walker.text(cond) if cond is not None else ""):
            # `int i = tid; for (; i < n; i += stride)`: the index was declared before the loop;
            # `for (int i = a, k = 0; k < n; i++, k++)`: the condition's counter is not the first declared
            named, value = condition_variable(walker, cond)
            if named is not None or var is None:
                var, start = named, value
        elif (stepped := _stepped_counter(walker, init, update, cond, var)) is not None:
            var, start = stepped, walker.lookup(stepped)
        trip, origin, note, step_val = trip_count(walker, var, start, cond, update, node)
        pragma = node.prev_named_sibling
        asked = pragma is not None and pragma.type == "preproc_call" and "unroll" in walker.text(pragma)
        unrolled = walker.trip_is_static and (trip <= walker.cost.unroll_limit or asked)
        _note_geometric(walker, trip)
        run_loop(walker, node, var, start, step_val, trip, origin, note, cond, update, body, unrolled,
                 collapse=_collapsed_levels(walker.text(pragma)) if pragma is not None and pragma.type == "preproc_call"
                 else 1, static_trip=walker.trip_is_static)
    finally:
        walker.scopes.pop()


def _stepped_counter(walker: Walker, init: Node | None, update: Node | None, cond: Node | None,
                     var: str) -> str | None:
    """`for (int idx = t, i = 0; idx < n && i < N; ++i)`: of the names the loop declares, the
    counter is the one its update steps and its condition compares (the first declared, `idx`,
    moves in the body or not at all); None where the first declared is stepped or none other is."""
    if init is None or init.type != "declaration" or update is None or cond is None:
        return None
    stepped = {walker.text(target) for expression in step_expressions(None, update)
               if (target := _step_target(expression)) is not None}
    if var in stepped:
        return None
    compared = set(IDENT.findall(walker.text(cond)))
    for declarator in init.children_by_field_name("declarator"):
        name = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
        if name is not None and walker.text(name) in stepped and walker.text(name) in compared:
            return walker.text(name)
    return None


def _note_geometric(walker: Walker, trip: float) -> None:
    """Record the loop about to run (`run_loop`) as one that doubles or halves its counter (`s
    *= 2`, `i >>= 1`) when its trip count was just read so: guards on the counter (`tid < s`)
    then take their average share over its passes."""
    if walker.last_step_kind in ("mul", "div"):
        walker.geometric_loops[loop_atom(walker.loop_counter + 1)] = max(1.0, trip)


def _collapsed_levels(directive: str) -> int:
    """The loops an OpenMP worksharing directive before a loop collapses into one (`#pragma omp
    parallel for collapse(2)`), 1 for any other line."""
    if not re.search(r"\bomp\b.*\b(?:for|loop|distribute|simd)\b", directive):
        return 1
    found = re.search(r"\bcollapse\s*\(\s*(\d+)\s*\)", directive)
    return int(found.group(1)) if found else 1


def condition_variable(walker: Walker, cond: Node | None) -> tuple[str | None, Val | None]:
    """The variable a loop condition compares (`i < n` -> i), when it is already bound."""
    while cond is not None and cond.type in ("parenthesized_expression", "condition_clause") \
            and cond.named_child_count == 1:
        cond = cond.named_children[0]
    if cond is None or cond.type != "binary_expression":
        return None, None
    for side in ("left", "right"):
        operand = cond.child_by_field_name(side)
        if operand is not None and operand.type == "identifier":
            value = walker.lookup(walker.text(operand))
            if value is not None:
                return walker.text(operand), value
    return None, None


def loop_init(walker: Walker, init: Node | None) -> tuple[str | None, Val | None]:
    if init is None:
        return None, None
    if init.type == "declaration":
        walker.walk_declaration(init)
        decl = init.child_by_field_name("declarator")
        if decl is not None and decl.type == "init_declarator":
            name = walker.text(decl.child_by_field_name("declarator"))
            return name, walker.lookup(name)
        return None, None
    if init.type == "assignment_expression":
        left = init.child_by_field_name("left")
        walker.eval(init)
        name = walker.text(left)
        return name, walker.lookup(name)
    walker.eval(init)
    return None, None


def trip_count(walker: Walker, var: str | None, start: Val | None, cond: Node | None, update: Node | None,
               loop: Node) -> tuple[float, LoopOrigin, str, Val | None]:
    """(trip count per work item, origin, note, step value); sets `trip_is_static` when the
    compiler knows the trip count too (it can then unroll the loop)."""
    walker.trip_is_static = False
    walker.last_step_kind = None
    if cond is None:
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"loop without a condition: assumed {walker.cost.assumed_while_trips:g} iterations",
                              line=walker.line(loop), value=walker.cost.assumed_while_trips, unit="iterations"))
        return walker.cost.assumed_while_trips, "assumed", "no condition", None
    if cond.type == "binary_expression" and walker.text(cond.child_by_field_name("operator")) == "&&" and var is not None:
        return conjunction_trip_count(walker, var, start, cond, update, loop)
    op = None
    bound_node = None
    form = None
    if cond.type == "binary_expression":
        left = cond.child_by_field_name("left")
        right = cond.child_by_field_name("right")
        op = walker.text(cond.child_by_field_name("operator"))
        if var is not None and walker.text(right) == var:
            left, right = right, left
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        if var is None and left is not None and left.type == "identifier":
            var = walker.text(left)
            start = walker.lookup(var)
        if var is not None and (form := counter_form(walker, var, left)) is not None:
            bound_node = right  # (`2 * mb <= j`, `i + 3 <= d`: solved for the counter below)
    if bound_node is None or var is None or op not in ("<", "<=", ">", ">=", "!="):
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"loop bound `{walker.text(cond)}` not understood: "
                              f"assumed {walker.cost.assumed_trip_count:g} iterations", subject=var,
                              line=walker.line(loop), value=walker.cost.assumed_trip_count, unit="iterations"))
        return walker.cost.assumed_trip_count, "assumed", walker.text(cond), None
    saved_mult = walker.mult
    walker.mult = 0.0  # evaluate without counting (the condition is counted per iteration later)
    bound = walker.eval(bound_node)
    step_kind, step = loop_step(walker, var, update)
    walker.last_step_kind = step_kind
    walker.mult = saved_mult
    bound_value = bound.value
    if bound_value is None and walker.resolve_bound is not None:
        bound_value = walker.resolve_bound(walker.text(bound_node))
    bound_value = solved_bound(bound_value, form, op)
    step = _tile_step(walker, var, start, (step_kind, step), bound if bound_value is None else None, update, loop)
    start_value, thread_start, spread = _start_of_loop(walker, start)
    bound_name = walker.text(bound_node).strip()
    # a bound read from an offsets or counts array: the average from the arrays' sizes
    sized = assume_sized_trip(walker, var, start, bound, bound_value, (step_kind, step), loop)
    if sized is not None:
        return sized, "data-dependent", f"{var} {op} {bound_name}", step
    counted = _counted_span(walker, var, loop, bound_node, bound_value, form, op, (step_kind, step))
    if counted is not None:
        return counted, "constant", f"{var} {op} {bound_name}", step
    # a size read from the launch by a bounds guard (`if (i < n)` before the loop): a grid-stride
    # loop says the launch does not cover it
    launch_read = bound_value is not None and bound_name in walker.learned_sizes
    # (a bound that is a block's own position, `t2 <= blockIdx.x`, is no size: averaged below)
    if (bound_value is None or launch_read) and thread_start and step_kind == "add" and step is not None \
            and step.value and step.value >= max(32.0, stride_extent(walker)) and not bound.lin.atoms & INDEX_ATOMS:
        return _grid_stride(walker, var, op, bound_name, bound_node, step, loop, launch_read)
    # a bound that varies with the block index only (the start too): the average over the grid
    averaged = per_block_trip(walker, var, bound, bound_node, start, step if step_kind == "add" else None,
                              op in ("<=", ">="), loop) if bound_value is None else None
    if averaged is not None:
        return averaged, "launch", f"{var} {op} {walker.text(bound_node)}", step
    edge = _clipped_trip(walker, var, start, step if step_kind == "add" else None, bound_node,
                         op in ("<=", ">="), loop) if bound_value is None else None
    if edge is not None:
        return edge, "launch", f"{var} {op} {walker.text(bound_node)}", step
    if bound_value is None:
        trip, origin = _unknown_bound(walker, var, bound, bound_node, (step_kind, step), start_value, thread_start,
                                      loop)
        return trip, origin, f"{var} {op} {walker.text(bound_node)}", step
    if start_value is None:
        if step_kind == "add" and step is not None and (step.value or 0.0) < 0:
            return _down_from_unknown(walker, var, loop), "assumed", f"{var} {op} {walker.text(bound_node)}", step
        # (a loop halving its counter starts from the size an unknown loop is assumed to cover,
        # one doubling it from 1; 0 would give them no pass at all)
        start_value = walker.cost.assumed_trip_count if step_kind == "div" else (1.0 if step_kind == "mul" else 0.0)
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"start of the `{var}` loop unknown: assumed {start_value:g}",
                              subject=var, line=walker.line(loop), value=start_value))
    inclusive = 1.0 if op in ("<=", ">=") else 0.0
    walker.trip_is_static = bool(bound.static and start is not None and start.static and step is not None and step.static)
    if step_kind == "add" and step is not None and step.value:
        if thread_start and step.value < 0 and start is not None:
            # counting down from the thread's own index (`for (j = t; j > 0; j--)`): from its mean
            start_value = _mean_start(walker, start, start_value, abs(step.value))
        span = (bound_value - start_value + (inclusive if step.value > 0 else -inclusive))
        trip = _stepped_trip(span, step.value, spread)
        origin = _counted_origin(walker, thread_start and step.lin.is_constant() and step.value >= 32, bound,
                                 bound_node, span)
        return trip, origin, f"{var} {op} {walker.text(bound_node)}", step
    if step_kind in ("mul", "div") and step is not None and step.value and step.value > 1:
        trip, launched = _geometric_trip(walker, var, start, start_value, bound_value, (step_kind, step.value), op,
                                         loop)
        return trip, launched or ("constant" if bound.known else "arguments"), f"{var} {op} {walker.text(bound_node)}", None
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"step of the `{var}` loop not understood: "
                          f"assumed {walker.cost.assumed_trip_count:g} iterations", subject=var,
                          line=walker.line(loop), value=walker.cost.assumed_trip_count, unit="iterations"))
    return walker.cost.assumed_trip_count, "assumed", f"{var} {op} {walker.text(bound_node)}", None


def _counted_span(walker: Walker, var: str, loop: Node, bound_node: Node | None, bound_value: float | None,
                  form: object, op: str, stepping: tuple[str | None, Val | None]) -> float | None:
    """The trip count of a loop between a start and a bound that differ by a constant
    (`_span_of_difference`), or by a window once the clamps at an index's edges are set aside
    (`clamped_spans`: a pooling gradient's `ph` from `phstart` to `phend`); None otherwise."""
    counted = _span_of_difference(walker, var, loop, bound_node, bound_value, form, op, stepping)
    if counted is not None:
        return counted
    return clamped_span(walker, var, loop, _start_node(loop), bound_node, op, bound_value, form, stepping)


def _span_of_difference(walker: Walker, var: str, loop: Node, bound_node: Node | None, bound_value: float | None,
                        form: object, op: str, stepping: tuple[str | None, Val | None]) -> float | None:
    """The trip count of a loop whose bound and start differ by a constant, whatever the values
    they share (`for (q = nk - 7; q <= nk; q++)`: 8 passes; `j < w + 4` from `j = w`: 4; a
    pointer run to its end, `p != row + m` from `p = row`: m): the
    compiler counts it so too, and may unroll it whole. The two are read with each unknown name
    at two probe values; the same difference both times is the span (a counter compared as it
    is: `form` is the identity)."""
    step_kind, step = stepping
    if bound_value is not None or bound_node is None or form != (1.0, 0.0) or step_kind != "add" \
            or step is None or not step.value or (op != "!=" and (step.value > 0) != (op in ("<", "<="))):
        return None
    start_text = _start_text(walker, loop)
    bound_text = walker.text(bound_node)
    if start_text is None or _OPAQUE.search(start_text) or _OPAQUE.search(bound_text):
        return None
    names = sorted(set(IDENT.findall(start_text)) | set(IDENT.findall(bound_text)))
    if var in names:
        return None  # (`k < n - k`: the bound moves with the counter)
    known = {n: v.value for n in names if (v := walker.lookup(n)) is not None and v.value is not None}
    unknown = [n for n in names if n not in known]
    if not unknown:
        return None
    spans = []
    for probe in _PROBES:
        env = ConstEnv(constants={**known, **{n: probe * (i + 2) for i, n in enumerate(unknown)}})
        start_value, _ = try_evaluate(start_text, env)
        end_value, _ = try_evaluate(bound_text, env)
        if not isinstance(start_value, (int, float)) or not isinstance(end_value, (int, float)):
            return None
        spans.append(end_value - start_value)
    if spans[0] != spans[1]:
        return None
    s = step.value
    if op == "!=":
        # (`p != row + m` from `p = row`: it stops where it lands on the bound, or never)
        if spans[0] % s or spans[0] / s < 0:
            return None
        walker.trip_is_static = bool(step.static)
        return spans[0] / s
    total = spans[0] + ((1.0 if s > 0 else -1.0) if op in ("<=", ">=") else 0.0)
    walker.trip_is_static = bool(step.static)
    return max(0.0, math.ceil(total / s)) if (total > 0) == (s > 0) else 0.0


_PROBES = (1009, 7919)  # (primes: a difference that held at both is no coincidence of the values)
_OPAQUE = re.compile(r"[\[(?:.>]|->")  # calls, subscripts, members, conditionals: not probed


def _unknown_bound(walker: Walker, var: str, bound: Val, bound_node: Node, stepping: tuple[str | None, Val | None],
                   start_value: float | None, thread_start: bool, loop: Node) -> tuple[float, LoopOrigin]:
    """A loop to a bound not known: a row's assumed length where memory holds the bound, else an
    unknown loop's; said."""
    step_kind, step = stepping
    data_dependent = "data" in bound.lin.atoms
    origin: LoopOrigin = "data-dependent" if data_dependent else "assumed"
    trip = walker.cost.assumed_row_trip if data_dependent else walker.cost.assumed_trip_count
    capped = _capped_trip(bound, stepping, start_value)
    if capped is not None and capped < trip:
        # (`h < min(n, 12)`: no more passes than the constant allows, however large `n` is)
        trip = capped
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"trip count of the `{var}` loop unknown (`{walker.text(bound_node)}`"
                              f", at most {bound.most:g}): assumed {trip:g}, its most", subject=var,
                              line=walker.line(loop), value=trip, unit="iterations"))
        return trip, origin
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"trip count of the `{var}` loop unknown (`{walker.text(bound_node)}`): "
                          f"assumed {trip:g}", subject=var, line=walker.line(loop), value=trip, unit="iterations"))
    if step_kind == "add" and step is not None and step.value and step.value > 0 \
            and (thread_start or start_value is not None):
        # a loop over a size parameter (`for (k = 0; k < K; k += TILE)`, a block-stride loop):
        # the size is what the assumed loop covers, wherever else it is read (`A += row * K`)
        learn_size(walker, walker.text(bound_node).strip(), (0.0 if thread_start else start_value or 0.0)
                   + trip * step.value, loop=None if thread_start else var)
    return trip, origin


def _capped_trip(bound: Val, stepping: tuple[str | None, Val | None], start: float | None) -> float | None:
    """The most passes a counter stepping up from `start` makes below a bound whose most is known
    (`Val.most`); None where the bound has none or the loop does not count up by a constant."""
    step_kind, step = stepping
    if bound.most is None or start is None or step_kind != "add" or step is None or not step.value or step.value <= 0:
        return None
    return max(0.0, math.ceil((bound.most - start) / step.value))


def _stepped_trip(span: float, step: float, spread: bool) -> float:
    """Passes of a counter stepping by `step` over `span`: where threads start spread over one
    stride (grid-/block-stride loops), or passes of an enclosing loop over a range, on average
    span / stride each, not the ceiling of it."""
    if (span > 0) != (step > 0):
        return 0.0
    return max(0.0, span / step) if spread else max(0.0, math.ceil(span / step))


def _mean_start(walker: Walker, start: Val, least: float, step: float) -> float:
    """The mean of a start that varies with the thread's index, where its values spread over more
    than one step (`j = threadIdx.x` counting down by 1: from 127.5 in a block of 256, not 0);
    `least`, its constant part, where they do not or an extent is not known."""
    spread = value_range(start.lin, walker.cardinality)
    if spread is None or spread[1] - spread[0] <= step:
        return least
    return (spread[0] + spread[1]) / 2.0


def _down_from_unknown(walker: Walker, var: str, loop: Node) -> float:
    """A loop counting down from a start not known (`for (j = len - 1; j > 0; j--)`) to a known
    end: as many passes as an unknown bound's, said (a start of 0 gave it none)."""
    trip = walker.cost.assumed_trip_count
    written = _start_text(walker, loop)
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"start of the `{var}` loop unknown{f' (`{written}`)' if written else ''}, "
                          f"counting down: assumed {trip:g} iterations", subject=var, line=walker.line(loop),
                          value=trip, unit="iterations"))
    return trip


def _start_text(walker: Walker, loop: Node) -> str | None:
    """The text of the value a `for` loop's counter starts from (`int q = nk - 7`, `q = nk - 7`)."""
    value = _start_node(loop)
    return walker.text(value) if value is not None else None


def _start_node(loop: Node) -> Node | None:
    """The value a `for` loop's counter starts from (`nk - 7` of `int q = nk - 7` or `q = nk - 7`)."""
    init = loop.child_by_field_name("initializer")
    if init is None:
        return None
    if init.type == "declaration":
        declarators = init.children_by_field_name("declarator")
        return declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
    operator = init.child_by_field_name("operator") if init.type == "assignment_expression" else None
    return init.child_by_field_name("right") if operator is not None and operator.text == b"=" else None


def _counted_origin(walker: Walker, grid_stride: bool, bound: Val, bound_node: Node | None, span: float) -> LoopOrigin:
    """Where a counted loop's trip count comes from; a grid-stride loop over a known size under a
    guessed launch records that size (the caller sizes the grid to cover it once)."""
    names = set(IDENT.findall(walker.text(bound_node)))
    if walker.learned_sizes and walker.learned_sizes & names:
        return "assumed"  # over a size read from the assumed launch
    if grid_stride:
        if walker.shape_assumed:
            walker.thread_extents.append(span)
        return "grid-stride"
    return "constant" if bound.known else "arguments"


def _tile_step(walker: Walker, var: str, start: Val | None, stepping: tuple[str | None, Val | None],
               unknown_bound: Val | None, update: Node | None, loop: Node) -> Val | None:
    """The step of a loop whose step and bound the source does not state (`for (it = 0; it <
    order; it += tile)`): it steps over tiles that the loops inside it cover. The step is read as
    the assumed trip count, and a step that is a variable keeps that value for the rest of the
    walk, so that `for (i = it; i < it + tile; i++)` inside covers one step (the nest covers its
    range once, not 32 times over). Any other loop keeps its step: a known bound, or one varying
    with the indices, keeps the loop's own count; a start from a thread's index makes the step a
    stride over the threads, not a tile."""
    kind, step = stepping
    if kind != "add" or step is None or step.value is not None or step.lin.atoms or unknown_bound is None \
            or unknown_bound.lin.atoms or start_of(start)[1]:
        return step
    size = walker.cost.assumed_trip_count
    named = _step_operand(update)
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"step of the `{var}` loop unknown"
                          f"{f' (`{walker.text(named)}`)' if named is not None else ''}: assumed {size:g}",
                          subject=var, line=walker.line(loop), value=size))
    if named is not None and named.type == "identifier":
        walker.assign(walker.text(named), Val(INT, size, Linear.constant(size)))
    return Val(INT, size, Linear.constant(size))


def _step_operand(update: Node | None) -> Node | None:
    """`tile` of `it += tile` or `it = it + tile`."""
    if update is not None and update.type == "comma_expression":
        for child in update.named_children:
            found = _step_operand(child)
            if found is not None:
                return found
        return None
    if update is None or update.type != "assignment_expression":
        return None
    right = update.child_by_field_name("right")
    if right is not None and right.type == "binary_expression":
        left = update.child_by_field_name("left")
        first, second = right.child_by_field_name("left"), right.child_by_field_name("right")
        return second if left is not None and first is not None and first.text == left.text else first
    return right


_MIN_CALLS = frozenset({"min", "std::min", "fmin", "fminf", "umin", "llmin", "ullmin", "imin"})


def _clipping_operands(walker: Walker, node: Node | None) -> list[Node] | None:
    """The operands of a bound that is the smaller of two (`min(n, it + T)`, `a < b ? a : b`, a
    `MIN` macro expanded): the loop runs to the nearer one."""
    while node is not None and node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    if node is None:
        return None
    if node.type == "call_expression":
        name = walker.text(node.child_by_field_name("function")).replace(" ", "")
        args = [a for a in (node.child_by_field_name("arguments") or node).named_children if a.type != "comment"]
        return args if name in _MIN_CALLS and len(args) == 2 else None
    if node.type == "conditional_expression":
        cond = node.child_by_field_name("condition")
        while cond is not None and cond.type == "parenthesized_expression" and cond.named_child_count == 1:
            cond = cond.named_children[0]
        yes, no = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        if cond is None or cond.type != "binary_expression" or yes is None or no is None:
            return None
        op = walker.text(cond.child_by_field_name("operator"))
        a, b = (walker.text(cond.child_by_field_name(side)).strip("() ") for side in ("left", "right"))
        y, n = walker.text(yes).strip("() "), walker.text(no).strip("() ")
        if (op in ("<", "<=") and (a, b) == (y, n)) or (op in (">", ">=") and (a, b) == (n, y)):
            return [yes, no]
    return None


def _clipped_trip(walker: Walker, var: str, start: Val | None, step: Val | None, bound: Node | None,
                  inclusive: bool, loop: Node) -> float | None:
    """The trip count of a loop bounded by the smaller of two operands: the shortest trip either
    gives on its own (the other one only clips the last tile). None for any other bound, or when
    no operand's trip is known."""
    if start is None or step is None or not step.value:
        return None
    operands = _clipping_operands(walker, bound)
    if not operands:
        return None
    trips = []
    saved = walker.mult
    walker.mult = 0.0
    try:
        for operand in operands:
            end = walker.eval(operand)
            span = None
            if end.value is not None and start.value is not None:
                span = end.value - start.value
            elif end.lin.const_known and start.lin.const_known and not end.lin.nonlinear \
                    and not start.lin.nonlinear and (diff := end.lin.add(start.lin, -1.0)).is_constant():
                span = diff.const
            if span is None:
                continue
            span += math.copysign(1.0, step.value) if inclusive else 0.0
            trips.append(max(0.0, math.ceil(span / step.value)) if (span > 0) == (step.value > 0) else 0.0)
    finally:
        walker.mult = saved
    if not trips:
        return None
    walker.notes.append(Note(NoteKind.LOOP_TRIP, NoteSource.SOURCE,
                             f"the `{var}` loop runs to the nearer of two bounds: {min(trips):g} iterations "
                             "(the other clips the last tile only)", subject=var, value=min(trips),
                             unit="iterations", line=walker.line(loop)))
    return min(trips)


def _start_of_loop(walker: Walker, start: Val | None) -> tuple[float | None, bool, bool]:
    """`start_of`, and whether the start is spread over threads or over an enclosing loop's
    passes (`for (j = i; j > 0; j--)`: the mean of `i`, the trip count averaged as `j < i`'s is)."""
    start_value, thread_start = start_of(start)
    outer_mean = _mean_over_loops(walker, start) if start is not None and not thread_start else None
    if outer_mean is not None:
        return outer_mean, thread_start, True
    return start_value, thread_start, thread_start


def _mean_over_loops(walker: Walker, start: Val) -> float | None:
    """The mean of a loop start made of enclosing loops' counters (`i`, `2 * i + 1`) over their
    passes, or None for any other start (a known value, a thread's index, data)."""
    lin = start.lin
    if start.value is not None or lin.nonlinear or not lin.coeffs or not lin.const_known \
            or not all(is_loop_atom(atom) and coeff != UNKNOWN_COEFF and atom not in walker.geometric_loops
                       for atom, coeff in lin.coeffs):
        return None  # (a doubling loop's counter is no arithmetic range: `stride = size / 2`)
    spread = value_range(lin, {atom: walker.cardinality.get(atom, 1.0) for atom, _ in lin.coeffs})
    return (spread[0] + spread[1]) / 2.0 if spread is not None else None


def _geometric_trip(walker: Walker, var: str, start: Val | None, start_value: float, bound: float,
                    stepping: tuple[str, float], op: str, loop: Node) -> tuple[float, LoopOrigin | None]:
    """Passes of a loop multiplying or dividing its counter by a factor: averaged over the
    threads' (or passes') starting values where the start varies with them, else from its
    one start. The origin where the launch sets it, else None (the bound's)."""
    kind, factor = stepping
    if start is not None and start.value is None and start.lin.coeffs:
        spread = _spread_geometric_trip(walker, var, start, bound, factor, kind, op, loop)
        if spread is not None:
            return spread, "launch"
    lo, hi = sorted((max(start_value, 1.0), max(bound, 1.0)))
    passes = geometric_passes(start_value, bound, factor, kind, op)
    inclusive = 1.0 if op in ("<=", ">=") else 0.0
    trip = passes if passes is not None else \
        max(0.0, math.ceil(math.log(hi / lo, factor) + inclusive)) if hi > lo else 0.0
    return trip, None


def _spread_geometric_trip(walker: Walker, var: str, start: Val, bound: float, factor: float, kind: str, op: str,
                           loop: Node) -> float | None:
    """A loop halving (or doubling) a counter that starts at the thread's own index or an
    enclosing loop's counter (`n = i; while (n > 0) { ...; n >>= 1; }`, a random generator's
    skip-ahead): its passes averaged over the values the launch and the loops give the start,
    not those of its constant part (0: no pass at all). None where an index's coefficient or
    extent is not known."""
    spread = value_range(start.lin, walker.cardinality)
    if spread is None:
        return None
    low, high = spread
    passes = spread_geometric_passes(low, high, bound, factor, kind, op)
    if passes is None:
        return None
    walker.notes.append(Note(NoteKind.LOOP_TRIP, NoteSource.SOURCE,
                              f"the `{var}` loop scales a counter that starts at each thread's (or pass's) own value "
                              f"({low:,.0f} to {high:,.0f}): {passes:.3g} passes on average",
                              value=passes, unit="iterations", line=walker.line(loop)))
    return passes


def start_of(start: Val | None) -> tuple[float | None, bool]:
    """(the loop's first value where known, whether it starts at the thread's own index): a
    start spread over the threads (`i = threadIdx.x`) counts from its constant part."""
    start_value = start.value if start is not None else None
    thread_start = start is not None and bool(start.lin.atoms & INDEX_ATOMS)
    if start_value is None and start is not None and (thread_start or start.lin.const_known):
        start_value = start.lin.const
    return start_value, thread_start


_COMPARISONS = ("<", "<=", ">", ">=", "!=")


def conjunction_trip_count(walker: Walker, var: str, start: Val | None, cond: Node, update: Node | None,
                           loop: Node) -> tuple[float, LoopOrigin, str, Val | None]:
    """`i < n && i < limit` (`row < max_row && row < h`, `k < K && !found`): the loop stops at
    the first bound it reaches, the fewest iterations of the comparisons of its counter whose
    bounds are known (one of them, as a plain condition, when none is); a condition that is not
    such a comparison may end it earlier, which is said."""
    parts: list[Node] = []
    pending = [cond]
    while pending:
        node = pending.pop(0)
        while node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        if node.type == "binary_expression" and walker.text(node.child_by_field_name("operator")) == "&&":
            pending[:0] = [c for c in (node.child_by_field_name("left"), node.child_by_field_name("right")) if c is not None]
        else:
            parts.append(node)
    compares = [p for p in parts if _compares_counter(walker, var, p)]
    if not compares:
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"loop bound `{walker.text(cond)}` not understood: "
                              f"assumed {walker.cost.assumed_trip_count:g} iterations", subject=var,
                              line=walker.line(loop), value=walker.cost.assumed_trip_count, unit="iterations"))
        return walker.cost.assumed_trip_count, "assumed", walker.text(cond), None
    known = [p for p in compares if _bound_known(walker, var, p)]
    results = []
    for part in known or compares[:1]:
        trip, origin, note, step = trip_count(walker, var, start, part, update, loop)
        results.append((trip, origin, note, step, walker.trip_is_static, walker.last_step_kind))
    trip, origin, note, step, static, step_kind = min(results, key=lambda r: r[0])
    others = [walker.text(p) for p in parts if p not in compares or (known and p not in known)]
    walker.trip_is_static = static and not others
    walker.last_step_kind = step_kind
    if others and origin not in ("assumed", "data-dependent"):
        walker.assume(assumed(NoteKind.LOOP_TRIP, f"the `{var}` loop may end before its bound "
                              f"(`{' && '.join(others)}`): assumed it runs to the bound", subject=var,
                              line=walker.line(loop), value=trip, unit="iterations"))
    return trip, origin, note, step


def _compares_counter(walker: Walker, var: str, node: Node) -> bool:
    """Whether `node` compares the loop counter `var` with something (`i < n`, `n > i`)."""
    if node.type != "binary_expression" or walker.text(node.child_by_field_name("operator")) not in _COMPARISONS:
        return False
    return var in (walker.text(node.child_by_field_name("left")), walker.text(node.child_by_field_name("right")))


def _bound_known(walker: Walker, var: str, node: Node) -> bool:
    """Whether the other side of the comparison `node` of the counter `var` folds to a value."""
    left = node.child_by_field_name("left")
    bound = node.child_by_field_name("right") if walker.text(left) == var else left
    saved = walker.mult
    walker.mult = 0.0  # (read, not counted)
    try:
        value = walker.eval(bound).value
    finally:
        walker.mult = saved
    if value is None and walker.resolve_bound is not None:
        value = walker.resolve_bound(walker.text(bound))
    return value is not None


def stride_extent(walker: Walker) -> float:
    """The smallest stride of a grid-stride loop: the threads of one launch dimension
    (`gridDim.x * blockDim.x` in a grid whose `y` picks the row or the dimension)."""
    if walker.launch.grid is None or walker.launch.block is None:
        return math.inf
    extents = [g * b for g, b in zip(walker.launch.grid, walker.launch.block) if g * b > 1]
    return min(extents) if extents else 1.0


def loop_step(walker: Walker, var: str, update: Node | None) -> tuple[str | None, Val | None]:
    if update is None:
        return None, None
    if update.type == "comma_expression":
        for child in update.named_children:
            kind, val = loop_step(walker, var, child)
            if kind:
                return kind, val
        return None, None
    if update.type == "update_expression":
        arg = update.child_by_field_name("argument")
        if walker.text(arg) != var:
            return None, None
        sign = -1.0 if "--" in walker.text(update) else 1.0
        return "add", Val(INT, sign, Linear.constant(sign), static=True)
    if update.type == "assignment_expression":
        left = update.child_by_field_name("left")
        if walker.text(left) != var:
            # `k = j++` (a polygon's edges: the previous vertex kept as the counter steps)
            stepped = update.child_by_field_name("right")
            return loop_step(walker, var, stepped) if stepped is not None \
                and stepped.type in ("update_expression", "assignment_expression") else (None, None)
        op = walker.text(update.child_by_field_name("operator"))
        right = update.child_by_field_name("right")
        val = walker.eval(right)
        if op == "+=":
            return "add", val
        if op == "-=":
            return "add", Val(val.ctype, -val.value if val.value is not None else None, val.lin.scale(-1.0))
        if op in ("*=", "<<="):
            factor = val.value if op == "*=" else pow2(val.value)
            return "mul", Val(INT, factor)
        if op in ("/=", ">>="):
            factor = val.value if op == "/=" else pow2(val.value)
            return "div", Val(INT, factor)
        if op == "=" and right is not None and right.type == "binary_expression":
            rop = walker.text(right.child_by_field_name("operator"))
            rl = right.child_by_field_name("left")
            rr = right.child_by_field_name("right")
            other = rr if walker.text(rl) == var else (rl if walker.text(rr) == var and rop in ("+", "*") else None)
            if other is None:
                return None, None
            oval = walker.eval(other)
            if rop == "+":
                return "add", oval
            if rop == "-":
                return "add", Val(oval.ctype, -oval.value if oval.value is not None else None, oval.lin.scale(-1.0))
            if rop in ("*", "<<"):
                return "mul", Val(INT, oval.value if rop == "*" else pow2(oval.value))
            if rop in ("/", ">>"):
                return "div", Val(INT, oval.value if rop == "/" else pow2(oval.value))
    return None, None


def run_loop(walker: Walker, node: Node, var: str | None, start: Val | None, step: Val | None, trip: float,
             origin: LoopOrigin, note: str, cond: Node | None, update: Node | None, body: Node | None,
             unrolled: bool = False, collapse: int = 1, static_trip: bool = False) -> None:
    """Walk a loop body `trip` times. An unrolled loop has no counter or compare, and the
    addresses it steps through become immediate offsets. `collapse`: the loops of the nest it
    heads that an OpenMP directive collapses into one."""
    walker.loop_counter += 1
    atom = loop_atom(walker.loop_counter)
    walker.cardinality[atom] = max(1.0, trip)
    if origin in ("assumed", "data-dependent"):
        walker.guessed_atoms.add(atom)  # (its range is a guess: `walk_branches` compares no index with it)
    walker.loops.append(LoopFact(walker.line(node), var, trip, origin, note))
    saved = walker.mult
    if var is not None and start is not None:
        lin = start.lin
        if step is not None and step.value is not None:
            lin = lin.add(Linear.atom(atom).scale(step.value))
        elif step is not None:
            lin = lin.add(step.lin.mul(Linear.atom(atom)) if not step.lin.is_constant() else Linear.atom(atom).scale(None))
        else:
            lin = Linear(nonlinear=frozenset({atom}) | start.lin.atoms, const_known=False)
        walker.assign(var, Val(start.ctype if start.ctype.kind != "unknown" else INT, None, lin, start.root, start.space))
    elif var is not None:
        walker.assign(var, Val(INT, None, Linear(nonlinear=frozenset({atom}), const_known=False)))
    entry = {name: val for name in stepped_names(walker, body, var, update) if (val := walker.lookup(name)) is not None}
    induction_steps: list[float] = []
    inductions = induction_variables(walker, body, var, atom, update, induction_steps)
    walker.mult = saved * trip
    walker.loop_depth += 1
    walker.loop_atoms.append(atom)
    if unrolled:
        walker.unrolled_atoms.add(atom)
    walker.mult = saved
    profiled = begin_profile_loop(walker, node, body, trip, step.value if step is not None else None,
                                  induction_steps=tuple(induction_steps), static_trip=static_trip)
    walker.mult = saved * trip
    try:
        if not unrolled:
            walker.count_int(walker.cost.int_per_loop_iteration)
            walker.counts.int_loop += walker.cost.int_per_loop_iteration * walker.mult
        walker.counts.loop_iterations += walker.mult
        if cond is not None:
            walker.eval(cond)
        walker.walk_statement(body)
        if update is not None:
            walker.mult = 0.0  # the counter update is part of int_per_loop_iteration
            walker.eval(update)
    finally:
        end_profile_loop(walker, profiled)
        collapse_profile_loops(walker, profiled, collapse)
        walker.loop_depth -= 1
        walker.loop_atoms.pop()
        walker.mult = saved
    if var is not None:
        current = walker.lookup(var)
        if current is not None:
            walker.assign(var, _exit_value(current, start, step, trip, origin, body))
    for name in inductions:
        # after the loop: the entry value moved by an unknown multiple of the step (the
        # thread indices it held still hold)
        before = entry[name]
        walker.assign(name, Val(before.ctype, None, Linear(coeffs=before.lin.coeffs, nonlinear=before.lin.nonlinear,
                                                           const_known=False), before.root, before.space))


def _exit_value(current: Val, start: Val | None, step: Val | None, trip: float, origin: str, body: Node | None) -> Val:
    """The counter after its loop: its first value plus the passes' steps where the loop's passes
    are stated and whole, its start and step known, and nothing leaves it early (`for (m = 0; m <
    6; m++)` leaves 6); else not known."""
    if start is not None and start.value is not None and step is not None and step.value is not None \
            and origin not in ("assumed", "data-dependent") and float(trip).is_integer() and not _leaves_early(body):
        value = start.value + trip * step.value
        return Val(current.ctype, value, Linear.constant(value), current.root, current.space)
    return Val(current.ctype, None, Linear(const_known=False), current.root, current.space)


def _leaves_early(body: Node | None) -> bool:
    """Whether a loop body can leave the loop before its condition does: a `break` of its own
    (not a nested loop's or `switch`'s), a `return` or a `goto`."""
    stack = [(body, False)] if body is not None else []
    while stack:
        node, nested = stack.pop()
        if node.type in ("return_statement", "goto_statement") or (node.type == "break_statement" and not nested):
            return True
        inner = nested or node.type in ("for_statement", "while_statement", "do_statement", "for_range_loop",
                                        "switch_statement")
        if node.type not in ("lambda_expression",):
            stack.extend((child, inner) for child in node.named_children)
    return False


def step_expressions(body: Node | None, update: Node | None) -> list[Node]:
    """The expression statements of a loop body, and the expressions of its update clause
    (`t++, p += n` steps `p` as well as the counter)."""
    found: list[Node] = []
    statements = (body.named_children if body.type == "compound_statement" else [body]) if body is not None else []
    for statement in statements:
        if statement.type == "expression_statement" and statement.named_child_count:
            found.append(statement.named_children[0])
    pending = [update] if update is not None else []
    while pending:
        expression = pending.pop(0)
        if expression.type == "comma_expression":
            pending[:0] = [c for c in (expression.child_by_field_name("left"), expression.child_by_field_name("right"))
                           if c is not None]
        else:
            found.append(expression)
    return found


def stepped_names(walker: Walker, body: Node | None, var: str | None, update: Node | None = None) -> list[str]:
    names = []
    for expression in step_expressions(body, update):
        target = _step_target(expression)
        if target is not None and walker.text(target) != var:
            names.append(walker.text(target))
    return names


def _step_target(expression: Node) -> Node | None:
    """The variable an assignment or `++`/`--` expression steps, when it is a plain name."""
    target = expression.child_by_field_name("left") if expression.type == "assignment_expression" \
        else expression.child_by_field_name("argument") if expression.type == "update_expression" else None
    return target if target is not None and target.type == "identifier" else None


def induction_variables(walker: Walker, body: Node | None, var: str | None, atom: str, update: Node | None = None,
                        steps: list[float] | None = None) -> list[str]:
    """Variables the body or the update clause steps by a loop-invariant amount
    (`index += stride;`, `p += n;`, `k++;` as statements of the body, `t++, p += n` in the
    update): during the loop they are their entry value plus the iteration times the step,
    like the loop's own counter. `steps` collects the steps that are constants."""
    found: list[str] = []
    saved = walker.mult
    walker.mult = 0.0  # reading the step costs nothing here; the statement is counted in the body
    try:
        for expression in step_expressions(body, update):
            target = expression.child_by_field_name("left") if expression.type == "assignment_expression" \
                else expression.child_by_field_name("argument") if expression.type == "update_expression" else None
            name = walker.text(target) if target is not None and target.type == "identifier" else None
            if name is None or name == var or name in found:
                continue
            current = walker.lookup(name)
            kind, step = loop_step(walker, name, expression)
            if current is None or kind != "add" or step is None:
                continue
            if step.lin.atoms & {atom, *walker.loop_atoms} or "data" in step.lin.nonlinear:
                continue  # the step itself moves inside the loop, or comes from memory
            if step.value is not None:
                moved = Linear.atom(atom).scale(step.value)
                if steps is not None:
                    steps.append(step.value)
            elif step.lin.atoms:
                moved = step.lin.mul(Linear.atom(atom))
            else:
                moved = Linear.atom(atom).scale(None)  # a runtime stride (`idx += stride_z`)
            walker.assign(name, Val(current.ctype, None, current.lin.add(moved), current.root, current.space))
            found.append(name)
    finally:
        walker.mult = saved
    return found


def walk_while(walker: Walker, node: Node) -> None:
    cond = node.child_by_field_name("condition")
    body = node.child_by_field_name("body")
    if counted_while(walker, node, cond, body):
        return
    expected = while_expectation(walker, node, cond, body)
    if expected is not None:
        trip, note = expected
        if note.source == NoteSource.ASSUMED:
            walker.assume(note)
        else:
            walker.notes.append(note)
        origin: LoopOrigin = "assumed" if note.source == NoteSource.ASSUMED else "constant"
        run_loop(walker, node, None, None, None, trip, origin, walker.text(cond), cond, None, body)
        return
    trip = walker.cost.assumed_while_trips
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"`while` loop with a data-dependent condition: assumed {trip:g} iterations",
                          line=walker.line(node), value=trip, unit="iterations"))
    run_loop(walker, node, None, None, None, trip, "data-dependent", walker.text(cond), cond, None, body)


def counted_while(walker: Walker, node: Node, cond: Node | None, body: Node | None) -> bool:
    """`while (i < n) { ...; i += stride; }` and `do { k += TILE; ... } while (k < K);`: a
    counted loop whose counter one statement of the body steps (and nothing else assigns); walked
    like the equivalent `for` (a do-while's first pass included: it runs while the counter,
    stepped from its start, stays below the bound, as the `for` does)."""
    var, start = condition_variable(walker, cond)
    if var is None or body is None:
        return False
    statements = [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else [body]
    if node.type == "while_statement":
        # (the last statement: a step placed earlier changes what the body sees, and is rare)
        last = statements[-1] if statements else None
        steps = [last] if last is not None else []
    else:
        steps = statements
    updates = [s.named_children[0] for s in steps if s.type == "expression_statement" and s.named_child_count
               and loop_step(walker, var, s.named_children[0])[0] is not None]
    if len(updates) != 1 or _assigned_elsewhere(walker, body, var, updates[0]):
        return False
    update = updates[0]
    inner = cond
    while inner is not None and inner.type in ("parenthesized_expression", "condition_clause") \
            and inner.named_child_count == 1:
        inner = inner.named_children[0]
    walker.scopes.append({})
    try:
        trip, origin, note, step_val = trip_count(walker, var, start, inner, update, node)
        _note_geometric(walker, trip)
        run_loop(walker, node, var, start, step_val, trip, origin, note, inner, None, body)
    finally:
        walker.scopes.pop()
    return True


_ASSIGNMENTS = ("assignment_expression", "update_expression")


def _assigned_elsewhere(walker: Walker, body: Node, var: str, update: Node) -> bool:
    """Whether a statement of `body` other than `update` assigns `var`."""
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type in _ASSIGNMENTS and node.id != update.id:
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target is not None and walker.text(target).strip() == var:
                return True
        stack.extend(node.named_children)
    return False


def walk_do(walker: Walker, node: Node) -> None:
    walk_while(walker, node)


def walk_range_for(walker: Walker, node: Node) -> None:
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"range-based loop: assumed {walker.cost.assumed_trip_count:g} iterations",
                          line=walker.line(node), value=walker.cost.assumed_trip_count, unit="iterations"))
    run_loop(walker, node, None, None, None, walker.cost.assumed_trip_count, "assumed",
             walker.text(node.child_by_field_name("right")), None, None, node.child_by_field_name("body"))


def _grid_stride(walker: Walker, var: str | None, op: str, bound_name: str, bound_node: Node | None, step: Val,
                 loop: Node, launch_read: bool) -> tuple[float, LoopOrigin, str, Val | None]:
    """A grid-stride loop over a size the source does not say: one pass where the launch's grid
    is computed from it, else the production size (the loop's bound is the problem size the
    loop is assumed to cover)."""
    if bound_name in walker.grid_sized():
        return _one_pass(walker, var, op, bound_name, bound_node, step, loop)
    assert step.value
    trip = max(1.0, walker.cost.assumed_problem_size / step.value)
    if launch_read:
        current = walker.lookup(bound_name)
        assert current is not None
        size = walker.cost.assumed_problem_size
        walker.assign(bound_name, Val(current.ctype, size, Linear.constant(size)))
    else:
        learn_size(walker, bound_name, walker.cost.assumed_problem_size)
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"grid-stride loop over an unknown size (`{walker.text(bound_node)}`): "
                          f"assumed the production size, {trip:g} iteration(s) per thread", subject=var,
                          line=walker.line(loop), value=trip, unit="iterations"))
    return trip, "assumed", f"{var} {op} {walker.text(bound_node)}", step


def _one_pass(walker: Walker, var: str | None, op: str, bound_name: str, bound_node: Node | None, step: Val,
              loop: Node) -> tuple[float, LoopOrigin, str, Val | None]:
    """A grid-stride loop over the size its launch's grid is computed from: the threads cover
    it, one pass each; the size is read as the threads along the stride."""
    size = float(step.value or 1.0)
    current = walker.lookup(bound_name)
    if bound_name in walker.size_parameters:
        learn_size(walker, bound_name, size)  # the launch's extent, as a bounds guard reads it
    elif current is not None and current.value is None and current.ctype.is_int:
        walker.assign(bound_name, Val(current.ctype, size, Linear.constant(size)))
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"grid-stride loop over `{walker.text(bound_node)}`, the size the launch's "
                          "grid is computed from: one pass per thread", subject=var, line=walker.line(loop),
                          value=1.0, unit="iterations"))
    return 1.0, "assumed", f"{var} {op} {walker.text(bound_node)}", step
