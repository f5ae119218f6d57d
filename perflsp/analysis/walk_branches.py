"""Branches of the kernel walker: `if`/`switch` weights, bounds guards of the thread index (and
the problem size they reveal), and blocks that jump away (`if (c) continue;`)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.case_chains import case_share, unwrapped
from perflsp.analysis.lane_guards import innermost_geometric_loop, lanes_share, modulus_share
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear, base_atom, distinct_values, tile_value
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_values import INDEX_ATOMS, Val, index_atom

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def walk_if(walker: Walker, node: Node) -> None:
    cond = node.child_by_field_name("condition")
    if walker.size_parameters:
        learn_sizes(walker, cond)
    cval = walker.eval(cond)
    weight = branch_weight(walker, cond, cval)
    consequence = node.child_by_field_name("consequence")
    alternative = node.child_by_field_name("alternative")
    saved = walker.mult
    leaves = alternative is None and jumps_away(consequence)
    if cval.known:
        weight = 1.0 if cval.value else 0.0
    elif leaves and (weight >= 1.0 or (walker.loop_depth > 0 and _ends_loop(consequence))):
        # an exit every pass took would leave the code after it dead: the exit is the edge
        # (`if (tile >= tiles) break;` ends a persistent loop once), the passes go on
        weight = 0.0
        walker.assume(assumed(NoteKind.EXIT_EDGE, f"`if ({_clause(walker, cond)})` leaves the block: read as taken "
                              "at the edge only (the code after it runs)", subject=_clause(walker, cond),
                              line=walker.line(node)))
    elif leaves and walker.loop_depth == 0 and weight == walker.cost.branch_weight and not _thread_dependent(cval) \
            and _returns_constant(consequence):  # (the weight `branch_weight` gives a test of data)
        # a test of data that returns nothing or a constant (`if (isnan(p.z)) return zero;`,
        # `if (!valid) return;`) turns away the degenerate items; the work after it is the rule
        # (two such exits read as even splits would leave a quarter of it)
        weight = 0.0
        walker.assume(assumed(NoteKind.EXIT_EDGE, f"`if ({_clause(walker, cond)})` returns a constant on a test of data: "
                              "read as the exception (the code after it runs)", subject=_clause(walker, cond),
                              line=walker.line(node)))
    elif alternative is not None and _resets_tested(walker, cond, consequence):
        # `if (total < 1) total = 1; else { ...work... }`: the arm that only replaces a degenerate
        # value is the exception, the work is the rule
        weight = 0.0
        walker.assume(assumed(NoteKind.DEGENERATE_CASE, f"`if ({_clause(walker, cond)})` only resets the value it tests: "
                              "read as a degenerate case, rarely taken (the `else` arm runs)",
                              subject=_clause(walker, cond), line=walker.line(node)))
    walker.mult = saved * weight
    if weight > 0:
        walker.walk_statement(consequence)
    elif leaves and walker.inline_stack:
        _note_returned(walker, consequence)
    if alternative is not None and weight < 1.0:
        walker.mult = saved * (1.0 - weight)
        walker.walk_statement(alternative)
    walker.mult = saved
    # the share of passes that leave the block here (`if (c) continue;`), for `_compound`
    walker.exited_share = weight if leaves else 0.0


_CONSTANT_NODES = frozenset({"number_literal", "true", "false", "null", "nullptr", "char_literal"})


def _returns_constant(arm: Node | None) -> bool:
    """Whether an arm does nothing but return, with no value or a constant one (`return;`,
    `return 0.5;`, `return make_float4(0.f, 0.f, 0.f, 1.f);`)."""
    while arm is not None and arm.type == "compound_statement":
        statements = [c for c in arm.named_children if c.type != "comment"]
        if len(statements) != 1:
            return False
        arm = statements[0]
    if arm is None or arm.type != "return_statement":
        return False
    values = [c for c in arm.named_children if c.type != "comment"]
    return not values or _constant_expression(values[0])


def _constant_expression(node: Node) -> bool:
    """A literal, a negated or parenthesised one, a call or a braced list of literals
    (`make_float4(0.f, ...)`, `{0.f, 0.f}`)."""
    if node.type in _CONSTANT_NODES:
        return True
    if node.type in ("unary_expression", "parenthesized_expression", "cast_expression"):
        operand = node.child_by_field_name("argument") or node.child_by_field_name("value") \
            or (node.named_children[-1] if node.named_children else None)
        return operand is not None and _constant_expression(operand)
    if node.type == "initializer_list":
        return all(_constant_expression(a) for a in node.named_children if a.type != "comment")
    if node.type == "call_expression":
        arguments = node.child_by_field_name("arguments")
        return arguments is not None and all(_constant_expression(a) for a in arguments.named_children
                                             if a.type != "comment")
    return False


def _note_returned(walker: Walker, exit_arm: Node | None) -> None:
    """An exit read as taken at the edge only, in a function being inlined (`if (bit) return i;`
    in a search loop): what it returns is one of the call's results all the same (counted as
    nothing: `walk_calls` merges the results)."""
    node = exit_arm
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type != "comment"]
        node = statements[-1] if statements else None
    if node is None or node.type != "return_statement":
        return
    values = [c for c in node.named_children if c.type != "comment"]
    if values:
        saved = walker.mult
        walker.mult = 0.0
        walker.return_values.append(walker.eval(values[0]))
        walker.mult = saved


def _resets_tested(walker: Walker, cond: Node | None, arm: Node | None) -> bool:
    """Whether a data-dependent condition compares plain variables with constants (`total < 1`,
    `s <= eps || s > big`) and its arm does nothing but assign constants to those variables."""
    tested: set[str] = set()
    stack = [cond]
    while stack:
        node = unwrapped(stack.pop())
        parts = binary_parts(walker, node)
        if parts is None:
            return False
        op, left, right = parts
        if op in ("&&", "||"):
            stack += [left, right]
            continue
        if op not in _COMPARISONS or left is None or right is None or left.type != "identifier":
            return False
        if not walker.eval(right).known or _thread_dependent(walker.eval(left)):
            return False
        tested.add(walker.text(left))
    statements = arm.named_children if arm is not None and arm.type == "compound_statement" else [arm]
    assigned = [s for s in statements if s is not None and s.type != "comment"]
    if not assigned:
        return False
    for statement in assigned:
        expression = statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
        if expression is None or expression.type != "assignment_expression":
            return False
        target, value = expression.child_by_field_name("left"), expression.child_by_field_name("right")
        if target is None or value is None or walker.text(target) not in tested:
            return False
        if walker.text(expression.child_by_field_name("operator")) != "=" or not walker.eval(value).known:
            return False
    return True


_COMPARISONS = frozenset(("<", "<=", ">", ">=", "==", "!="))


def _ends_loop(node: Node | None) -> bool:
    """Whether a statement that leaves its block ends the loop around it (`break`, `return`): in
    a loop, a data-dependent one is the loop's exit, taken once (its trip count says when), so
    the code after it runs on every trip; `continue` skips one trip and keeps its share."""
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type != "comment"]
        node = statements[-1] if statements else None
    return node is not None and node.type in ("break_statement", "return_statement")


def learn_sizes(walker: Walker, cond: Node | None) -> None:
    """A bounds guard of the thread index against a size parameter (`if (i < n)`, `if (i >= n)
    return;`, joined by `&&`/`||`) says the launch covers that size: at an assumed launch shape,
    the parameter is the number of distinct indices the threads reach (so that a later
    `for (j = 0; j < n; j++)` runs over the same problem the grid does)."""
    parts = binary_parts(walker, cond)
    if parts is None:
        return
    op, left, right = parts
    if op in ("&&", "||"):
        learn_sizes(walker, left)
        learn_sizes(walker, right)
        return
    if op not in _ORDERING or left is None or right is None:
        return
    for size_node, index_node in ((right, left), (left, right)):
        name = walker.text(size_node).strip()
        if size_node.type != "identifier" or name not in walker.size_parameters:
            continue
        current = walker.lookup(name)
        if current is None or current.value is not None or not current.ctype.is_int:
            continue
        (index,) = _uncounted(walker, index_node)
        atoms = index.lin.atoms
        if not atoms or not atoms <= INDEX_ATOMS:
            continue
        extent = distinct_values(index.lin, {a: walker.cardinality.get(a, 1.0) for a in atoms}, math.inf)
        if extent > 1.0:
            learn_size(walker, name, extent)


def learn_size(walker: Walker, name: str, extent: float, loop: str | None = None) -> None:
    """Bind the size parameter `name` (still unknown) to the extent the threads cover, or, for
    the bound of the `loop` loop whose trip count is assumed, to the range that loop covers."""
    current = walker.lookup(name) if name in walker.size_parameters else None
    if current is None or current.value is not None or not current.ctype.is_int:
        return
    walker.size_parameters.discard(name)
    walker.learned_sizes.add(name)
    walker.learned_extents[name] = (extent, loop)
    walker.assign(name, Val(current.ctype, extent, Linear.constant(extent)))
    text = f"`{name}` bounds the thread index: read as the extent the threads cover, {extent:,.0f}" if loop is None \
        else f"`{name}` bounds the `{loop}` loop, whose trip count is assumed: read as the range it covers, {extent:,.0f}"
    walker.assume(assumed(NoteKind.SIZE_BOUND, text, subject=name, value=extent,
                          unit="threads" if loop is None else "elements"))


def branch_weight(walker: Walker, cond: Node | None, cval: Val) -> float:
    """Fraction of work items that take the `then` arm."""
    text = walker.text(cond)
    matching = equality_weight(walker, cond)
    if matching is not None:
        return matching
    both = _conjoined_thread_tests(walker, cond)
    if both is not None:
        return both
    passes = counter_share(walker, cond)
    if passes is not None:
        return passes
    thread_atoms = {a for a in cval.lin.atoms if _thread_index(a)}
    if thread_atoms:
        share = modulus_share(walker, cond)
        if share is not None:
            return share
    if "==" in text and thread_atoms and "&&" not in text and "||" not in text:
        share = case_share(walker, cond)
        if share is not None:
            return share
        share = _equal_threads_share(walker, cond)
        if share is not None:
            return share
        card = 1.0
        for atom in thread_atoms:
            card *= max(1.0, walker.cardinality.get(atom, 1.0))
        return 1.0 / card
    if thread_atoms and re.search(r"<|>", text) and "==" not in text:
        halving = innermost_geometric_loop(walker, cval.lin.atoms)
        if halving is not None:
            # `if (tid < s)` in `for (s = n / 2; s > 0; s >>= 1)`: half the threads, then a
            # quarter, ...: about one full pass over the whole loop; the threads at or above
            # it (`if (tid >= j) sum += v;` of a scan, `j` doubling): all the others
            share = 1.0 / max(1.0, walker.geometric_loops[halving])
            return 1.0 - share if _threads_above(walker, cond, halving) else share
        # a part of the block the walk can count (`threadIdx.x < 32` of 256 threads: an eighth)
        lanes = lanes_share(walker, cond)
        if lanes is not None:
            return lanes
        # a bounds guard against a size the walk knows, under the launch's real shape: the share
        # of its indices on the side it tests (a grid larger than the size leaves threads idle)
        if walker.shape_assumed:
            # (the guessed grid is sized to this bound by the caller: every thread passes it)
            extent = guarded_extent(walker, cond)
            if extent is not None:
                walker.thread_extents.append(extent)
        known = guard_share(walker, cond) if not walker.shape_assumed else None
        if known is not None:
            return known
        # against a size it does not know: (nearly) every item is in bounds; the `then` arm is
        # that side unless the condition tests for being out of them (`if (x >= n) {...} else {...}`)
        return 0.0 if out_of_bounds_test(walker, cond) else 1.0
    inside = index_bounds(walker, cond)
    if inside is not None:
        # `x >= 0 && x < w` on an index read from data (a gather's window): (nearly) every
        # index is in bounds, as a thread's is
        return 1.0 if inside else 0.0
    return walker.cost.branch_weight


def index_bounds(walker: Walker, cond: Node | None) -> bool | None:
    """True for a test that an index is in bounds, each expression it tests both at least zero
    and below a bound (`x >= 0 && y >= 0 && x < w && y < h`); False for the test that it is
    out of them (`x < 0 || x >= w`); None for anything else."""
    parts = binary_parts(walker, cond)
    if parts is None or parts[0] not in ("&&", "||"):
        return None
    joint = parts[0]
    lower: set[str] = set()
    upper: set[str] = set()
    pending = [parts[1], parts[2]]
    while pending:
        leaf = binary_parts(walker, pending.pop())
        if leaf is None or leaf[1] is None or leaf[2] is None:
            return None
        op, left, right = leaf
        if op == joint:
            pending += [left, right]
            continue
        if op not in _FLIPPED:
            return None
        lval, rval = walker.eval(left), walker.eval(right)
        if (lval.known and rval.known) or lval.ctype.is_float or rval.ctype.is_float:
            return None  # (a value's range, `v >= 0.0f && v < 1.0f`, is no index's bounds)
        if lval.known or rval.known:
            # `index op constant`, read with the index first
            index, op, limit = (right, _FLIPPED[op], lval.value) if lval.known else (left, op, rval.value)
            floor = (op, limit) in ((">=", 0), (">", -1)) if joint == "&&" else (op, limit) in (("<", 0), ("<=", -1))
            below = op in ("<", "<=") if joint == "&&" else op in (">", ">=")
            if not (floor or below):
                return None
            (lower if floor else upper).add(" ".join(walker.text(index).split()))
            continue
        # `index < bound` (in) / `index >= bound` (out): the smaller side is the index
        smaller = left if (op in ("<", "<=")) == (joint == "&&") else right
        upper.add(" ".join(walker.text(smaller).split()))
    return (joint == "&&") if lower and lower == upper else None


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _threads_above(walker: Walker, cond: Node | None, loop_atom: str) -> bool:
    """Whether `cond` holds for the threads at or above the loop's variable (`tid >= j`,
    `j <= tid`), not below it (`tid < s`): the thread index on one side, the loop's variable on
    the other. Both on one side (`2 * s * tid < n`) reads as below."""
    parts = binary_parts(walker, cond)
    values = _ordered(walker, *parts) if parts is not None else None
    if parts is None or values is None:
        return False
    op = parts[0]
    left_val, right_val = values

    def threads(val: Val) -> bool:
        return _thread_dependent(val)

    if loop_atom in right_val.lin.atoms and threads(left_val) and not threads(right_val) \
            and loop_atom not in left_val.lin.atoms:
        return op in (">", ">=")
    if loop_atom in left_val.lin.atoms and threads(right_val) and not threads(left_val) \
            and loop_atom not in right_val.lin.atoms:
        return op in ("<", "<=")
    return False


def _conjoined_thread_tests(walker: Walker, cond: Node | None) -> float | None:
    """`threadIdx.x == 0 && blockIdx.x == 0`: each side picks one value of thread or block
    indices of its own; the threads that pass both are the product of the two shares (one
    thread of the grid here). None for any other condition."""
    parts = binary_parts(walker, cond)
    if parts is None or parts[0] != "&&" or parts[1] is None or parts[2] is None:
        return None
    share = 1.0
    seen: set[str] = set()
    differences: list[Linear] = []
    shared = False
    for side in (parts[1], parts[2]):
        difference = _equality(walker, side)
        if difference is None or not all(index_atom(a) for a in difference.atoms):
            return None
        atoms = difference.atoms
        shared = shared or bool(atoms & seen)
        seen |= atoms
        differences.append(difference)
        card = 1.0
        for atom in atoms:
            card *= max(1.0, walker.cardinality.get(atom, 1.0))
        share /= card
    # both sides on one thread index (`lid % 128 == 0 && lid / 128 == 0`): the threads of the
    # block that pass both, counted
    return _threads_passing(walker, differences) if shared else share


def _equal_threads_share(walker: Walker, cond: Node | None) -> float | None:
    """`threadIdx.x / 128 == 0` (of 128 threads: every one), `lid / 64 == 1`: the share of the
    block's threads for which the two sides meet, counted; None for another condition."""
    difference = _equality(walker, cond)
    return _threads_passing(walker, [difference]) if difference is not None else None


def _equality(walker: Walker, cond: Node | None) -> Linear | None:
    """The difference of the two sides of `a == b` (walked without counting: the condition is
    counted where it is walked), where it is a plain form of known atoms; None otherwise."""
    parts = binary_parts(walker, cond)
    if parts is None or parts[0] != "==" or parts[1] is None or parts[2] is None:
        return None
    difference = _difference(walker, parts[1], parts[2])
    if not difference.atoms or difference.nonlinear or any(c == UNKNOWN_COEFF for _, c in difference.coeffs):
        return None
    return difference


def _difference(walker: Walker, left: Node, right: Node) -> Linear:
    saved = walker.mult, walker.visited
    walker.mult = 0.0
    try:
        return walker.eval(left).lin.add(walker.eval(right).lin, -1.0)
    finally:
        walker.mult, walker.visited = saved


_MAX_COUNTED = 4096  # threads of a block enumerated at most


def _threads_passing(walker: Walker, differences: list[Linear]) -> float | None:
    """The share of a block's threads for which every form of `differences` is zero, the forms
    over thread indices alone (an index divided by a constant, `lid / 128`, is a fractional
    coefficient: its integer quotient is meant); None beyond thread indices or a large block."""
    bases = sorted({base_atom(a) for d in differences for a in d.atoms})
    sizes = [int(walker.cardinality.get(b, 0.0)) for b in bases]
    if not set(bases) <= {"tx", "ty", "tz"} or any(n < 1 for n in sizes) or math.prod(sizes) > _MAX_COUNTED:
        return None
    passing = 0
    for values in itertools.product(*(range(n) for n in sizes)):
        at = dict(zip(bases, values))
        passing += all(_zero(d, at) for d in differences)
    return passing / math.prod(sizes)


def _zero(form: Linear, at: dict[str, int]) -> bool:
    value = form.const
    for atom, coeff in form.coeffs:
        tiled = tile_value(atom, at[base_atom(atom)])
        value += coeff * (tiled if tiled is not None else at[atom])
    return math.floor(value + 1e-9) == 0 if value >= 0 else math.ceil(value - 1e-9) == 0


def equality_weight(walker: Walker, cond: Node | None) -> float | None:
    """`if (i == j)` / `if (i != j)` over counters of loops or indices of threads: the two sides
    meet on one value of their difference's range (`i == j` in a loop over `j`: one trip in
    `n`, and `if (i != j) continue;` skips one), not on half the passes. None when a side is
    not a plain sum of such indices and constants (a value read from memory, a call), or when
    only the thread index decides an equality (`branch_weight` counts those threads)."""
    parts = binary_parts(walker, cond)
    if parts is None:
        return None
    op, left, right = parts
    if op not in ("==", "!=") or left is None or right is None or not (_plain(left) and _plain(right)):
        return None
    difference = _difference(walker, left, right)  # (uncounted: the condition is counted where it is walked)
    counters = set(walker.loop_atoms)
    atoms = difference.atoms
    if not atoms or difference.nonlinear or not all(a in counters or index_atom(a) for a in atoms - _omp_indices(atoms)) \
            or (op == "==" and not atoms & counters) \
            or any(c == UNKNOWN_COEFF or walker.cardinality.get(a, 1.0) <= 1.0 for a, c in difference.coeffs):
        return None
    cards = {a: walker.cardinality[a] for a in atoms}
    coeffs = difference.coeff_map()
    if len(atoms) == 2 and sorted(coeffs.values()) == [-1.0, 1.0]:
        share = 1.0 / max(cards.values())  # `i == j` over two ranges: each i meets its one j
    else:
        share = 1.0 / distinct_values(difference, cards, math.inf)
    return share if op == "==" else 1.0 - share


def _omp_indices(atoms: frozenset[str]) -> set[str]:
    return {a for a in atoms if a.startswith("o")}


_PLAIN_NODES = frozenset({"identifier", "number_literal", "binary_expression", "parenthesized_expression",
                          "unary_expression", "field_expression"})


def _plain(node: Node) -> bool:
    """An operand whose value costs no memory read or call to find again: names, numbers and
    sums of them (`threadIdx.x`, `i + 1`)."""
    if node.type not in _PLAIN_NODES:
        return False
    operator = node.child_by_field_name("operator")
    if node.type == "binary_expression" and (operator is None or operator.type not in ("+", "-", "*")):
        return False
    if node.type == "field_expression" and (operator is None or operator.type != "."):
        return False  # `p->n` reads memory
    return all(_plain(child) for child in node.named_children if child.type != "field_identifier")


def binary_parts(walker: Walker, cond: Node | None) -> tuple[str, Node | None, Node | None] | None:
    """(operator, left, right) of a condition that is a binary expression under its parentheses;
    None for any other condition."""
    cond = unwrapped(cond)
    if cond is None or cond.type != "binary_expression":
        return None
    return walker.text(cond.child_by_field_name("operator")), cond.child_by_field_name("left"), \
        cond.child_by_field_name("right")


def _uncounted(walker: Walker, *nodes: Node) -> list[Val]:
    """The values of `nodes`, evaluated without counting (the condition is counted where it is walked)."""
    saved = walker.mult
    walker.mult = 0.0
    try:
        return [walker.eval(node) for node in nodes]
    finally:
        walker.mult = saved


_ORDERING = frozenset(("<", "<=", ">", ">="))


def _ordered(walker: Walker, op: str, left: Node | None, right: Node | None) -> tuple[Val, Val] | None:
    """The two sides' values of an ordering comparison (`<`, `<=`, `>`, `>=`), evaluated without
    counting; None for another operator or a side missing."""
    if op not in _ORDERING or left is None or right is None:
        return None
    lval, rval = _uncounted(walker, left, right)
    return lval, rval


def guard_share(walker: Walker, cond: Node | None) -> float | None:
    """The share of the launch's threads for which a bounds guard holds, where it compares a
    thread index (a sum of `threadIdx`/`blockIdx` terms) with a value the walk knows
    (`if (idx < N)` with `#define N 500000`, a size the launch's arguments give), `&&` of such
    guards multiplied as independent axes (a side against a size the walk does not know passing
    every thread); None where no side is such a guard."""
    parts = binary_parts(walker, cond)
    if parts is None:
        return None
    op, left, right = parts
    if op == "&&":
        window = _window_share(walker, left, right)
        if window is not None:
            return window
        sides = [guard_share(walker, side) for side in (left, right)]
        unknown = [side for share, side in zip(sides, (left, right)) if share is None]
        if len(unknown) == 2 or any(out_of_bounds_test(walker, side) for side in unknown):
            return None
        # a side against a size the walk does not know lets (nearly) every thread through, as
        # `branch_weight` reads such a guard alone (`j > i && j < *n`: the pairs' share); one
        # that tests for being past a size (`n <= i`) is left to the reading of the whole
        return math.prod(share for share in sides if share is not None)
    share = _ranged_share(walker, op, left, right, lambda val: _index_range(walker, val))
    return share if share is not None else _indices_compared(walker, op, left, right)


def _window_share(walker: Walker, left: Node | None, right: Node | None) -> float | None:
    """`col >= c - 2 && col <= c + 1`: a thread index within a window of constant width
    about a value the walk does not know (read from memory): the window's width over the
    index's range (4 columns of the row's threads), wherever the window lies. None where the two
    sides are not one lower and one upper bound of one index by one value moved by constants."""
    first, second = _window_bound(walker, left), _window_bound(walker, right)
    if first is None or second is None:
        return None
    (index1, center1, low1, lower1), (index2, center2, low2, lower2) = first, second
    if walker.text(index1) != walker.text(index2) or center1 != center2 or lower1 == lower2:
        return None
    lowest, highest = (low1, low2) if lower1 else (low2, low1)
    span = _index_range(walker, _uncounted(walker, index1)[0])
    if span is None:
        return None
    values = span[1] - span[0] + 1.0
    return min(max(highest - lowest + 1.0, 0.0), values) / values


def _window_bound(walker: Walker, side: Node | None) -> tuple[Node, str, float, bool] | None:
    """(the thread index, the text of the value it is compared with, the integer bound that value
    moved by a constant sets, whether it is a lower bound) of `i >= v - 2`, `v + 1 >= i`,
    `i < v + 2`; None for another comparison, or one whose value depends on the thread."""
    parts = binary_parts(walker, side)
    values = _ordered(walker, *parts) if parts is not None else None
    if parts is None or values is None:
        return None
    op, left, right = parts
    assert left is not None and right is not None  # (`_ordered` has both sides)
    lval, rval = values
    if _index_range(walker, rval) is not None and _index_range(walker, lval) is None:
        left, right, lval, rval, op = right, left, rval, lval, _FLIPPED[op]  # `v + 1 >= i` is `i <= v + 1`
    if _index_range(walker, lval) is None or any(_thread_index(a) for a in rval.lin.atoms) \
            or (rval.lin.is_constant() and rval.lin.const_known):
        return None  # (against a value the walk knows, the share on each side is counted exactly)
    center, offset = _moved_value(walker, right)
    if center is None:
        return None
    # integers: `i > v + c` is `i >= v + c + 1`, `i < v + c` is `i <= v + c - 1`
    bound = offset + {">": 1.0, ">=": 0.0, "<": -1.0, "<=": 0.0}[op]
    return left, center, bound, op in (">", ">=")


def _moved_value(walker: Walker, node: Node) -> tuple[str | None, float]:
    """(`v`, c) of `v + c` or `v - c` with c a number, (`v`, 0) of a plain name `v`; (None, 0)
    for anything else."""
    plain = unwrapped(node)
    if plain is not None and plain.type == "identifier":
        return walker.text(plain), 0.0
    parts = binary_parts(walker, plain)
    if parts is None or parts[0] not in ("+", "-"):
        return None, 0.0
    op, moved, by = parts
    name, number = unwrapped(moved), unwrapped(by)
    if name is None or number is None or name.type != "identifier" or number.type != "number_literal":
        return None, 0.0
    try:
        value = float(walker.text(number).rstrip("uUlLfF"))
    except ValueError:
        return None, 0.0
    return walker.text(name), value if op == "+" else -value


def _indices_compared(walker: Walker, op: str, left: Node | None, right: Node | None) -> float | None:
    """`if (j > i)` on two thread indices of their own axes, or on two loops of a collapsed
    OpenMP nest (the upper triangle of a grid of pairs): the share of the launch's (i, j) pairs
    on the side tested, each index spread evenly over its range (half of a square's, less its
    diagonal). A thread index against an open loop's counter (`if (tid > k)` in `for (k = 0;
    k < n; k++)`, a triangle over the passes) is the share over the threads and the passes
    alike. None where a side is anything else or the two share an index (`tx > tx / 2`)."""
    values = _ordered(walker, op, left, right)
    if values is None:
        return None
    lval, rval = values
    counters = set(walker.loop_atoms) - walker.guessed_atoms  # (a guessed trip count's range is no range)
    lspan, rspan = (_atoms_range(walker, val, lambda atom: _thread_index(atom) or atom in counters)
                    for val in (lval, rval))
    if lspan is None or rspan is None or lval.lin.atoms & rval.lin.atoms \
            or not any(_thread_index(a) for a in lval.lin.atoms | rval.lin.atoms):
        return None
    if op in ("<", "<="):  # `i < j` is `j > i`
        lspan, rspan, op = rspan, lspan, {"<": ">", "<=": ">="}[op]
    above = _share_above(lspan, rspan)
    # `l >= r` holds wherever `r > l` does not
    return above if op == ">" else 1.0 - _share_above(rspan, lspan)


def _thread_index(atom: str) -> bool:
    """A thread's or a block's index, or the index of an OpenMP worksharing loop."""
    return index_atom(atom) or bool(_omp_indices(frozenset({atom})))


def _share_above(left: tuple[float, float], right: tuple[float, float]) -> float:
    """The share of the pairs (l, r) of integers of the spans `left` and `right` with l > r."""
    a, b = math.ceil(left[0]), math.floor(left[1])
    c, d = math.ceil(right[0]), math.floor(right[1])
    if b < a or d < c:
        return 0.0
    count_left = b - a + 1
    total = 0
    # each r below `a`: every l; each r from `a` to `b`: the b - r values above it; above b: none
    total += count_left * max(0, min(d, a - 1) - c + 1)
    lo, hi = max(c, a), min(d, b)
    if hi >= lo:
        total += (hi - lo + 1) * (2 * b - lo - hi) // 2
    return total / (count_left * (d - c + 1))


def counter_share(walker: Walker, cond: Node | None) -> float | None:
    """`if (j < 250)` in `for (j = 0; j < 1000; ++j)`: the share of the passes of the open
    loops for which a comparison of their counters (a sum of them with known coefficients and a
    known start) with a value the walk knows holds (a quarter), not the even split of a
    data-dependent branch; None where a side is anything else (a thread index: `branch_weight`
    reads those, a value read from memory)."""
    parts = binary_parts(walker, cond)
    if parts is None:
        return None
    op, left, right = parts
    return _ranged_share(walker, op, left, right, lambda val: _counter_range(walker, val))


def _ranged_share(walker: Walker, op: str, left: Node | None, right: Node | None,
                  ranged: Callable[[Val], tuple[float, float] | None]) -> float | None:
    """The share of the values of a sum `ranged` reads (its lowest and highest) on the side of a
    comparison with a value the walk knows; None where the comparison is no such test."""
    guard = _index_against_bound(walker, op, left, right, ranged)
    if guard is None:
        return None
    op, summed, bound = guard
    span = ranged(summed)
    assert span is not None  # (`_index_against_bound` keeps only such sums)
    return _share_on_side(op, span, bound)


def _share_on_side(op: str, span: tuple[float, float], bound: float) -> float:
    """The share of the integers in `span` (lowest, highest) on the side `op` of `bound`."""
    lo, hi = span
    values = hi - lo + 1.0
    below = min(max(math.ceil(bound) - lo, 0.0), values)  # values < bound
    at_most = min(max(math.floor(bound) - lo + 1.0, 0.0), values)  # values <= bound
    inside = {"<": below, "<=": at_most, ">": values - at_most, ">=": values - below}[op]
    return inside / values


def guarded_extent(walker: Walker, cond: Node | None) -> float | None:
    """How many values of the flat thread index (`blockIdx.x * blockDim.x + threadIdx.x`) a
    bounds guard against a known size lets through (`if (i < n)`: n); None for anything else."""
    parts = binary_parts(walker, cond)
    guard = _index_against_bound(walker, parts[0], parts[1], parts[2]) if parts is not None else None
    if guard is None or guard[0] not in ("<", "<=") or guard[2] < 1.0:
        return None
    op, index, bound = guard
    coeffs = dict(index.lin.coeffs)
    if index.lin.const != 0 or set(coeffs) != {"bx", "tx"} or coeffs["tx"] != 1.0 \
            or coeffs["bx"] != walker.cardinality.get("tx"):
        return None
    return math.ceil(bound) if op == "<" else math.floor(bound) + 1.0


def _index_against_bound(walker: Walker, op: str, left: Node | None, right: Node | None,
                         span: Callable[[Val], tuple[float, float] | None] | None = None
                         ) -> tuple[str, Val, float] | None:
    """A comparison of a thread index (`_index_range`, or the ranged sums `span` reads) with a
    value the walk knows, as (the operator with the index on its left, the index, the value);
    None for anything else."""
    values = _ordered(walker, op, left, right)
    if values is None:
        return None
    ranged = span or (lambda val: _index_range(walker, val))
    lval, rval = values
    if ranged(rval) is not None and ranged(lval) is None:
        lval, rval, op = rval, lval, _FLIPPED[op]
    bound = rval.value if rval.value is not None else (rval.lin.const if not rval.lin.atoms and not rval.lin.nonlinear
                                                       and rval.lin.const_known else None)
    if ranged(lval) is None or bound is None or not math.isfinite(bound):
        return None
    return op, lval, bound


def _index_range(walker: Walker, val: Val) -> tuple[float, float] | None:
    """(lowest, highest) value of a thread index over the launch: a sum of thread and block
    indices with known coefficients and a known constant; None for anything else."""
    return _atoms_range(walker, val, index_atom)


def _counter_range(walker: Walker, val: Val) -> tuple[float, float] | None:
    """(lowest, highest) value of a sum of the open loops' counters (`j`, `2 * j + k + 1`)
    over their passes; None for anything else."""
    return _atoms_range(walker, val, lambda atom: atom in walker.loop_atoms)


def _atoms_range(walker: Walker, val: Val, ranged: Callable[[str], bool]) -> tuple[float, float] | None:
    """(lowest, highest) value of a sum of atoms `ranged` accepts, each over its cardinality,
    with known coefficients and a known constant; None for anything else."""
    lin = val.lin
    if lin.nonlinear or not lin.const_known or not lin.coeffs or not all(ranged(a) for a in lin.atoms):
        return None
    lo = hi = lin.const
    for atom, coeff in lin.coeffs:
        if coeff == UNKNOWN_COEFF:
            return None
        reach = coeff * (max(1.0, walker.cardinality.get(atom, 1.0)) - 1.0)
        lo, hi = lo + min(0.0, reach), hi + max(0.0, reach)
    return lo, hi


def out_of_bounds_test(walker: Walker, cond: Node | None) -> bool:
    """Whether a bounds guard holds for the few items outside the bounds: a thread index
    above a runtime size (`i >= n`, `n <= i`) or below zero (`i < 0`), joined by `||`
    (`x >= w || y >= h`) or `&&`; False for `i < n`, `i > 0` and anything unclear."""
    parts = binary_parts(walker, cond)
    if parts is None:
        return False
    op, left, right = parts
    if op in ("||", "&&"):
        sides = [out_of_bounds_test(walker, left), out_of_bounds_test(walker, right)]
        return any(sides) if op == "||" else all(sides)
    values = _ordered(walker, op, left, right)
    if values is None:
        return False
    lval, rval = values
    if _thread_dependent(lval) and not _thread_dependent(rval):
        index_above = op in (">", ">=")  # `i >= bound`
        bound = rval
    elif _thread_dependent(rval) and not _thread_dependent(lval):
        index_above = op in ("<", "<=")  # `bound <= i`
        bound = lval
    else:
        return False
    if bound.static:
        # a compile-time constant: only a test below zero is an edge (`i < 0`); `i > 0`,
        # `tid >= 32` are not
        return not index_above and bound.value is not None and bound.value <= 0
    return index_above  # a size: `i >= n` holds past the end


def walk_switch(walker: Walker, node: Node) -> None:
    """Each case runs for an equal share of the passes; on a value the walk knows, the case it
    selects (and the cases it falls through to) for all of them, the others never."""
    cval = walker.eval(node.child_by_field_name("condition"))
    body = node.child_by_field_name("body")
    if body is None:
        return
    cases = [c for c in body.named_children if c.type == "case_statement"]
    saved = walker.mult
    weights = _case_weights(walker, cases, cval.value) if cval.known else [1.0 / max(1, len(cases))] * len(cases)
    for case, weight in zip(cases, weights):
        walker.mult = saved * weight
        for child in case.named_children:
            if child.type != "number_literal" and child != case.child_by_field_name("value"):
                walker.walk_statement(child)
    walker.mult = saved


def _case_weights(walker: Walker, cases: list[Node], value: float | None) -> list[float]:
    """1 for the case `value` selects and those it falls through to, 0 for the others; every
    case an equal share when a case label is not known."""
    labels = []
    for case in cases:
        label = case.child_by_field_name("value")
        labels.append(None if label is None else walker.eval(label).value)
        if label is not None and labels[-1] is None:
            return [1.0 / len(cases)] * len(cases)
    start = next((i for i, label in enumerate(labels) if label is not None and label == value), None)
    if start is None:
        start = next((i for i, label in enumerate(labels) if label is None), None)  # `default:`
    weights = [0.0] * len(cases)
    if start is None:
        return weights
    for i in range(start, len(cases)):
        weights[i] = 1.0
        statements = [c for c in cases[i].named_children if c != cases[i].child_by_field_name("value")]
        if statements and jumps_away(statements[-1]):
            break
    return weights




_JUMPS = frozenset({"continue_statement", "break_statement", "return_statement", "goto_statement"})


def jumps_away(node: Node | None) -> bool:
    """Whether a statement ends by leaving its block (`continue;`, `{ ...; return; }`)."""
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type != "comment"]
        node = statements[-1] if statements else None
    return node is not None and node.type in _JUMPS


def _clause(walker: Walker, cond: Node | None) -> str:
    """The condition's text without its parentheses, on one line."""
    return " ".join(walker.text(cond).split()).removeprefix("(").removesuffix(")").strip()


def _thread_dependent(val: Val) -> bool:
    return any(_thread_index(a) for a in val.lin.atoms)
