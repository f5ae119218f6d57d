"""Average trip counts of loops whose bound is read from memory, from the sizes of the arrays
around them.

No constant states how many elements a row of a sparse matrix or a cell's neighbour list has,
but the allocations say how many there are in all. With launch shape and program arguments
given, the arrays' sizes are usually known, and across all rows the loop runs on average:

- offsets (`for (j = ptr[i]; j < ptr[i + 1]; j++) s += val[j] * x[col[j]];`): the elements of
  the arrays the loop variable indexes (`val`, `col`: nnz) over the rows (the offsets array's
  elements less one);
- counts (`for (k = 0; k < count[n]; k++) m = neighbor[n + k * N];`): at most the elements of
  the array the loop variable indexes over its stride there when the stride spans the rows (the
  count array's elements), or over the rows when each row has a block of its own
  (`neighbor[n * M + k]`).

Where the host code makes the array's values up (`count[i] = rand() % 10 + 1`, offsets as a
running sum of such), their average says it directly (`filled_trip`), before the sizes do.

Each is stated as an assumption; where a size is not known the caller keeps its fixed guess.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.ctype import INT
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_values import Val, index_atom, is_loop_atom

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

_PROBE = "L?probe"  # the loop variable's atom while the body's indices are read ahead of the walk
_MAX_BODY_NODES = 4000  # bounded work: the body is scanned once, not walked


def assume_sized_trip(walker: Walker, var: str, start: Val | None, bound: Val, bound_value: float | None,
                      stepping: tuple[str | None, Val | None], loop: Node) -> float | None:
    """The average trip count of the `var` loop `loop` whose bound `bound` was read from memory
    (its value not known: `bound_value` None), stated as an assumption; None (nothing said) when
    the sizes do not say it. `stepping`: the kind of the loop's step and its amount."""
    step_kind, step = stepping
    less = 0.0
    if bound.loaded is None and bound.counted is not None and start is not None \
            and (start.value is not None or _lane_offset(start)):
        # `count = ptr[i + 1] - ptr[i]; for (k = 0; k < count; k++)`: the row `ptr[i]..ptr[i + 1]`
        # (less what the loop leaves of it: `for (k = 1; k < count - 1; k++)`); from a thread's
        # own position in it (`for (k = lane; k < count; k += 32)`): the lanes share the row,
        # each its steps' worth
        array, first, elem_bytes = bound.counted
        less = bound.counted_less + (start.value or 0.0)
        start = Val(INT, 0.0, loaded=(array, first, elem_bytes))
        bound = Val(INT, None, loaded=(array, first.add(Linear.constant(1.0)), elem_bytes))
    if bound_value is not None or bound.loaded is None or step_kind != "add" or step is None:
        return None
    sized = filled_trip(walker, var, start, bound, step.value, less) \
        or sized_trip(walker, var, start, bound, step.value, loop.child_by_field_name("body"), less)
    if sized is None:
        return None
    walker.assume(assumed(NoteKind.LOOP_TRIP, sized[1], subject=var, line=walker.line(loop), value=sized[0],
                          unit="iterations"))
    return sized[0]


def _lane_offset(start: Val) -> bool:
    """Whether a loop start is a thread's position and nothing read from memory (`lane`, `tid`,
    an enclosing loop's `idx` that starts from `tid`)."""
    atoms = start.lin.atoms
    return start.value is None and start.loaded is None and start.counted is None and bool(atoms) \
        and not start.lin.nonlinear and all(index_atom(a) or is_loop_atom(a) for a in atoms)


def filled_trip(walker: Walker, var: str, start: Val | None, bound: Val, step: float | None,
                less: float = 0.0) -> tuple[float, str] | None:
    """(average trip count per work item, what it rests on) of the `var` loop whose bound was read
    from an array whose values the host code makes up (`kernels.host_fills`): a count's mean, or
    a row's (the mean step of offsets built as a running sum); None when the host does not say."""
    if bound.loaded is None or not step or step <= 0:
        return None
    array, index, _bytes = bound.loaded
    fill = walker.host_fill(array)
    if fill is None:
        return None
    if start is not None and start.loaded is not None:
        first, first_index, _ = start.loaded
        if first != array or not _apart(first_index, index, 1.0) or fill.step is None:
            return None
        per_row, what = max(0.0, fill.step - less), "a row's length" + (f" less {less:g}" if less else "")
    elif start is not None and start.value is not None and fill.mean is not None:
        per_row, what = max(0.0, fill.mean - start.value), "the count"
    else:
        return None
    trip = per_row / step
    text = f"average trip of the `{var}` loop from what the host stores in `{array}` (`{fill.source}`): " \
           f"{what}, {per_row:.4g} on average"
    if step != 1.0:
        text += f", {trip:.4g} per work item (step {step:g})"
    return trip, text


def sized_trip(walker: Walker, var: str, start: Val | None, bound: Val, step: float | None,
               body: Node | None, less: float = 0.0) -> tuple[float, str] | None:
    """(average trip count per work item, what it rests on) of the `var` loop whose bound
    `bound` was read from a global array, or None when the sizes do not say it."""
    if bound.loaded is None or body is None or not walker.array_extents or not step or step <= 0:
        return None
    array, index, elem_bytes = bound.loaded
    entries = _elements(walker, array, elem_bytes)
    if entries is None:
        return None
    capacities = _body_capacities(walker, var, body, exclude=array)
    if not capacities:
        return None
    if start is not None and start.loaded is not None:
        first, first_index, first_bytes = start.loaded
        if first == array and _apart(first_index, index, 1.0) and entries >= 2:
            rows = entries - 1.0  # a row's offsets, `ptr[i]` to `ptr[i + 1]`
            where = f"`{array}` has {_count(entries)} offsets"
        elif first != array and _apart(first_index, index, 0.0) and _elements(walker, first, first_bytes) == entries:
            rows = entries  # a row's first and end in two arrays, `begin[c]` to `end[c]`
            where = f"`{first}` and `{array}` have {_count(entries)} entries"
        else:
            return None
        name, elements, coeff, _rest = min(capacities, key=lambda c: c[1] / c[2])
        per_row = max(0.0, elements / coeff / rows - less)
        how = f"{_count(elements)} elements of `{name}`" + (f" / stride {coeff:g}" if coeff != 1.0 else "")
        text = f"average trip of the `{var}` loop from the sizes: {how} over {_count(rows)} rows ({where})" \
               + (f" less {less:g}" if less else "") + f" = {per_row:.4g}"
    elif start is not None and start.value is not None:
        bounds = [(b, c) for c in capacities if (b := _count_bound(c, index, entries)) is not None]
        if not bounds:
            return None  # rows whose elements may overlap (`a[n + k]`): the sizes bound nothing
        (over, per_row), (name, elements, _coeff, _rest) = min(bounds, key=lambda b: b[0][1])
        per_row = max(0.0, per_row - max(0.0, start.value))
        text = (f"average trip of the `{var}` loop from the sizes: at most {_count(elements)} elements "
                f"of `{name}` over {over} = {per_row:.4g}")
    else:
        return None
    trip = per_row / step
    if step != 1.0:
        text += f", {trip:.4g} per work item (step {step:g})"
    return trip, text


def _count_bound(capacity: tuple[str, float, float, Linear], row_index: Linear, rows: float) -> tuple[str, float] | None:
    """(what it rests on, the most iterations a row can have) of a counts loop whose variable
    indexes the array of `capacity` (name, elements, the variable's coefficient, the rest of the
    index): the elements over the stride when the stride spans all the rows (`a[n + k * N]`), or
    over the rows when each row has a block of more than the stride (`a[n * M + k]`); None when
    the rows' elements may overlap."""
    _name, elements, coeff, rest = capacity
    if coeff >= rows:
        return f"stride {coeff:g}", elements / coeff
    block = _multiple(rest, row_index)
    if block is None or block <= coeff:
        return None
    return f"{_count(rows)} rows", min(block, elements / rows) / coeff


def _multiple(index: Linear, row_index: Linear) -> float | None:
    """`m` where `index` holds `m` times `row_index` (the row's own term), else None."""
    if not row_index.coeffs:
        return None
    terms = index.coeff_map()
    ratios = {terms.get(atom, 0.0) / c for atom, c in row_index.coeffs if c not in (0.0, UNKNOWN_COEFF)}
    if len(ratios) != 1 or any(terms.get(atom) == UNKNOWN_COEFF for atom, _ in row_index.coeffs):
        return None
    return abs(ratios.pop())


def offset_origin(op: str, left: Val, right: Val) -> tuple[str, Linear, float] | None:
    """What `left op right` was read from, when it is a value read from memory offset by a
    thread's or iteration's own position (`ptr[i] + threadIdx.x`: the lanes of a warp share a
    row): the loop it starts runs over the same range."""
    if op != "+":
        return None
    for loaded, other in ((left, right), (right, left)):
        if loaded.loaded is not None and "data" not in other.lin.atoms and not other.ctype.is_float \
                and not other.ctype.pointer and other.loaded is None:
            return loaded.loaded
    return None


def row_count(op: str, left: Val, right: Val) -> tuple[str, Linear, float] | None:
    """The row `left - right` counts when both are read from one offsets array a row apart
    (`ptr[i + 1] - ptr[i]`): (array, the row's first index, element bytes)."""
    if op != "-" or left.loaded is None or right.loaded is None:
        return None
    array, end_index, elem_bytes = left.loaded
    first, first_index, _ = right.loaded
    return (array, first_index, elem_bytes) if first == array and _apart(first_index, end_index, 1.0) else None


def shifted_count(op: str, left: Val, right: Val) -> tuple[tuple[str, Linear, float], float] | None:
    """A row's count moved by a constant (`len - 1`, `len + 2` of `len = ptr[i + 1] - ptr[i]`):
    (the row, as `row_count` gives it, what is taken off the count)."""
    if op not in ("+", "-"):
        return None
    if left.counted is not None and right.value is not None and not right.lin.atoms:
        return left.counted, left.counted_less + (right.value if op == "-" else -right.value)
    if op == "+" and right.counted is not None and left.value is not None and not left.lin.atoms:
        return right.counted, right.counted_less - left.value
    return None


def _apart(first: Linear, second: Linear, distance: float) -> bool:
    """Whether index `second` is `distance` past `first` (`i` and `i + 1`): the same row term;
    a row term of unknown size must name the same atoms (thread or loop indices)."""
    gap = second.add(first, -1.0)
    if gap.coeffs or gap.nonlinear or gap.const != distance:
        return False
    return (first.const_known and second.const_known) or bool(first.coeffs and first.coeffs == second.coeffs)


def _elements(walker: Walker, array: str, elem_bytes: float) -> float | None:
    """How many elements the allocation behind `array` holds (None: not known)."""
    size, _host = walker.array_extents.get(array.rstrip("[]"), (None, False))
    if size is None or size <= 0 or elem_bytes <= 0:
        return None
    return size / elem_bytes


def _body_capacities(walker: Walker, var: str, body: Node, exclude: str) -> list[tuple[str, float, float, Linear]]:
    """(array, its elements, the loop variable's coefficient in its index, the rest of the index) of each sized global
    array of known size the body indexes linearly with `var`: the loop cannot run past the
    elements it indexes."""
    uses_var = re.compile(rf"\b{re.escape(var)}\b")
    found: list[tuple[str, float, float, Linear]] = []
    saved_mult, saved_accesses = walker.mult, len(walker.accesses)
    walker.mult = 0.0  # reading ahead: nothing is counted
    walker.scopes.append({var: Val(INT, None, Linear.atom(_PROBE))})
    try:
        pending, seen = [body], 0
        while pending and seen < _MAX_BODY_NODES:
            node = pending.pop()
            seen += 1
            if node.type == "subscript_expression":
                entry = _capacity(walker, node, uses_var, exclude)
                if entry is not None:
                    found.append(entry)
            pending.extend(node.named_children)
    finally:
        walker.scopes.pop()
        del walker.accesses[saved_accesses:]
        walker.mult = saved_mult
    return found


def _capacity(walker: Walker, node: Node, uses_var: re.Pattern[str], exclude: str) -> tuple[str, float, float, Linear] | None:
    argument = node.child_by_field_name("argument")
    indices = node.child_by_field_name("indices")
    if argument is None or argument.type != "identifier" or indices is None:
        return None
    index_node = next((c for c in indices.named_children if c.type != "comment"), None)
    if index_node is None or not uses_var.search(walker.text(index_node)) or _acts(index_node):
        return None
    base = walker.lookup(walker.text(argument))
    if base is None or base.space != "global" or base.root is None or base.root == exclude or base.dims:
        return None
    elem = base.ctype.deref()
    if elem.kind in ("unknown", "struct", "void") or elem.size_bytes <= 0:
        return None
    elements = _elements(walker, base.root, 8.0 if elem.pointer else float(elem.size_bytes))
    index = walker.eval(index_node).lin
    coeff = index.coeff_map().get(_PROBE)
    if elements is None or _PROBE in index.nonlinear or coeff is None or coeff == UNKNOWN_COEFF or coeff == 0:
        return None
    rest = index.add(Linear(coeffs=((_PROBE, coeff),)), -1.0)
    return base.root, elements, abs(coeff), rest


_ACTIONS = frozenset({"call_expression", "assignment_expression", "update_expression"})


def _acts(node: Node) -> bool:
    """Whether reading the expression `node` ahead would do something (`a[k++]`, `a[f(j)]`): such
    an index is left to the walk."""
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type in _ACTIONS:
            return True
        pending.extend(current.named_children)
    return False


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:.3g}"
