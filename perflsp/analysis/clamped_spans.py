"""Trip counts of loops between two clamped ends of one index: the windows of a pooling or
`col2im` gradient.

    phstart = (h < kh) ? 0 : (h - kh) / sh + 1;
    phend = min(h / sh + 1, pooled_height);
    for (int ph = phstart; ph < phend; ++ph)

Each end clamps a value of the thread's index `h` to the edge of the output (a conditional with
a number on one side, `min`/`max` with a size). Away from the edges, which is nearly every
thread of a large image, the loop runs between the unclamped values: `h / sh + 1 - ((h - kh) /
sh + 1)`, the window over its stride (3 over 2: one or two passes, 1.5 on average), whatever
`h` is. Read as unknown, each such loop was assumed 32 passes, 1,024 for the pair: the gradient
counted two orders of magnitude more arithmetic than it runs.

The ends are read from the last assignment before the loop in the function; the interior values
are evaluated at several values of the index names (names the walk reads as thread- or
loop-dependent, the other names known), in C's integer arithmetic; the mean span is the trip
count where the spans differ by at most one (integer division's floor), None otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_calls import _MIN_MAX_ABS
from perflsp.analysis.walk_values import IDENT, Val
from perflsp.kernels.consteval import ConstEnv, try_evaluate

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

_MIN_MAX = _MIN_MAX_ABS - {"abs", "labs", "llabs"}  # the calls the walk folds as min/max
# values of the index names the spans are read at (a spread of residues of any small stride)
_PROBES = tuple(range(1000, 1048, 3))


def clamped_span(walker: Walker, var: str, loop: Node, start: Node | None, bound: Node | None, op: str,
                 bound_value: float | None, form: object, stepping: tuple[str | None, Val | None]) -> float | None:
    """The mean trip count of `for (var = start; var < bound; var += step)` whose start and bound
    are names of clamped values of the same index, said as an assumption; None (nothing said) for
    any other loop (a bound known, a counter compared in another form than itself: `form`)."""
    kind, step_val = stepping
    step = step_val.value if kind == "add" and step_val is not None else None
    if bound_value is not None or form != (1.0, 0.0) or start is None or bound is None or op not in ("<", "<=") \
            or step is None or step <= 0:
        return None
    if start.type != "identifier" or bound.type != "identifier":
        return None
    ends = [_interior(walker, _definition(walker, end, loop)) for end in (start, bound)]
    if ends[0] is None or ends[1] is None:
        return None
    low, high = (walker.text(e) for e in ends)
    names = set(IDENT.findall(low)) | set(IDENT.findall(high))
    if var in names:
        return None
    known: dict[str, float | int] = {}
    varying: list[str] = []
    for name in sorted(names):
        val = walker.lookup(name)
        if val is None:
            return None  # (a function, a macro not expanded: nothing to evaluate)
        if val.value is not None:
            known[name] = int(val.value) if float(val.value).is_integer() else val.value
        elif val.lin.atoms:
            varying.append(name)  # an index or a value of one
        else:
            return None  # a size not known: the window could be anything
    shared = set(IDENT.findall(low)) & set(IDENT.findall(high))
    if not varying or not set(varying) <= shared:
        return None
    spans = []
    for probe in _PROBES:
        env = ConstEnv(constants={**known, **{name: probe + 7 * i for i, name in enumerate(varying)}})
        first, _ = try_evaluate(low, env)
        last, _ = try_evaluate(high, env)
        if not isinstance(first, (int, float)) or not isinstance(last, (int, float)):
            return None
        spans.append(max(0.0, (last - first + (1.0 if op == "<=" else 0.0)) / step))
    if max(spans) - min(spans) > 1.0 or max(spans) <= 0.0:
        return None
    trips = sum(spans) / len(spans)
    walker.assume(assumed(NoteKind.LOOP_TRIP, f"trip count of the `{var}` loop between clamped ends (`{walker.text(start)}` "
                          f"to `{walker.text(bound)}`): {trips:.3g} on average away from the edges", subject=var,
                          line=walker.line(loop), value=trips, unit="iterations"))
    return trips


def _definition(walker: Walker, name: Node, loop: Node) -> Node | None:
    """The value last given to the variable `name` before `loop` in the function around it (a
    declaration's initialiser or a plain assignment); None where there is none, or where the
    variable is also changed in another way (`+=`, `++`)."""
    function = loop.parent
    while function is not None and function.type not in ("function_definition", "lambda_expression"):
        function = function.parent
    if function is None:
        return None
    target = walker.text(name)
    found: Node | None = None
    stack = [function]
    while stack:
        node = stack.pop()
        if node.start_byte >= loop.start_byte:
            continue
        if node.type == "init_declarator":
            declared = node.child_by_field_name("declarator")
            if declared is not None and walker.text(declared) == target:
                found = _later(found, node.child_by_field_name("value"))
        elif node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            if left is not None and walker.text(left) == target:
                if walker.text(node.child_by_field_name("operator")) != "=":
                    return None
                found = _later(found, node.child_by_field_name("right"))
        elif node.type == "update_expression" and walker.text(node.child_by_field_name("argument")) == target:
            return None
        stack.extend(node.named_children)
    return found


def _later(found: Node | None, value: Node | None) -> Node | None:
    if value is None:
        return found
    return value if found is None or value.start_byte > found.start_byte else found


def _interior(walker: Walker, value: Node | None) -> Node | None:
    """The value a clamp gives away from the edge: the other side of a conditional with a number
    on one side (`(h < kh) ? 0 : (h - kh) / sh + 1`), the operand of `min`/`max` that is not a
    plain size (`min(h / sh + 1, pooled_height)`); None where the value is no such clamp."""
    while value is not None and value.type == "parenthesized_expression" and value.named_child_count == 1:
        value = value.named_children[0]
    if value is None:
        return None
    if value.type == "conditional_expression":
        yes, no = value.child_by_field_name("consequence"), value.child_by_field_name("alternative")
        if yes is None or no is None:
            return None
        if _is_number(walker, yes) and not _is_number(walker, no):
            return no
        if _is_number(walker, no) and not _is_number(walker, yes):
            return yes
        return None
    if value.type == "call_expression":
        name = walker.text(value.child_by_field_name("function")).replace(" ", "")
        arguments = value.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        if name not in _MIN_MAX or len(args) != 2:
            return None
        plain = [a.type in ("identifier", "number_literal", "field_expression") for a in args]
        if plain.count(True) != 1:
            return None
        return args[plain.index(False)]
    return None


def _is_number(walker: Walker, node: Node) -> bool:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node.type == "number_literal" or (node.type == "unary_expression" and walker.text(node).lstrip("-+ ").isdigit())
