"""Expressions of the kernel walker: names, literals, operators, assignments, casts and the
conditional operator; each gives a `Val` (type, constant value, linear form) and counts the
operations it executes by precision."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis import costs
from perflsp.analysis.case_chains import unwrapped
from perflsp.analysis.ctype import BOOL, F16, F32, F64, INT, LONG, UNKNOWN, CType, common_type, parse_type
from perflsp.analysis.folding import LIBRARY_CONSTANTS, combine_linear, exact_float_scale, fold_binary, number_literal
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear, tile_atom, tile_parts, value_range
from perflsp.analysis.walk_accesses import record_store, repointed
from perflsp.analysis.walk_branches import branch_weight
from perflsp.analysis.walk_ranges import offset_origin, row_count, shifted_count
from perflsp.analysis.walk_statement_expressions import eval_statement_expression
from perflsp.analysis.walk_values import HIP_BUILTINS, THREAD_ATOMS, UNKNOWN_VAL, Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def eval_number(walker: Walker, node: Node) -> Val:
    return number_literal(walker.text(node))


def eval_identifier(walker: Walker, node: Node) -> Val:
    return identifier_named(walker, walker.text(node))


def identifier_named(walker: Walker, name: str) -> Val:
    val = walker.lookup(name)
    if val is not None:
        return val
    if name in ("true", "false"):
        return Val(BOOL, float(name == "true"), Linear.constant(float(name == "true")))
    if name in ("NULL", "nullptr"):
        return Val(INT, 0.0, Linear.constant(0.0))
    if name in HIP_BUILTINS:
        family, axis = HIP_BUILTINS[name]
        if family in THREAD_ATOMS:
            return Val(INT, None, Linear.atom(THREAD_ATOMS[family][axis]))
        shape = walker.launch.block if family == "blockDim" else walker.launch.grid
        if shape is not None:
            return Val(INT, float(shape[axis]), Linear.constant(float(shape[axis])))
        return Val(INT, None, Linear(const_known=False))
    if name == "warpSize":
        return Val(INT, 32.0, Linear.constant(32.0), static=True)
    if walker.constant_lookup is not None:
        constant = walker.constant_lookup(name)
        if constant is not None:
            value, kind = constant
            ctype = {"int": INT, "f32": F32}.get(kind, F64)
            return Val(ctype, value, Linear.constant(value), static=True)
    if name in LIBRARY_CONSTANTS:
        # <math.h>/<float.h> constants: compile-time constants of their type
        value, ctype = LIBRARY_CONSTANTS[name]
        return Val(ctype, value, Linear.constant(value), static=True)
    return Val(UNKNOWN, None, Linear(const_known=False))


def eval_parenthesized(walker: Walker, node: Node) -> Val:
    inner = [c for c in node.named_children if c.type != "comment"]
    if len(inner) == 1 and inner[0].type == "compound_statement":
        return eval_statement_expression(walker, inner[0])  # `({ ...; value; })`
    val = UNKNOWN_VAL
    for child in inner:
        val = walker.eval(child)
    return val


def eval_comma(walker: Walker, node: Node) -> Val:
    val = UNKNOWN_VAL
    for child in node.named_children:
        val = walker.eval(child)
    return val


def eval_binary(walker: Walker, node: Node) -> Val:
    op = walker.text(node.child_by_field_name("operator"))
    left_node = node.child_by_field_name("left")
    misparsed = misparsed_cast(walker, left_node)
    if misparsed is not None and op in ("*", "/", "%"):
        # `(i) + (j) * N` parsed as `((i) +(j)) * N`: rebuild `i + ((j) * N)`
        variable, unary_op, argument = misparsed
        inner = combine_values(walker, op, walker.eval(argument), walker.eval(node.child_by_field_name("right")))
        return combine_values(walker, unary_op, variable, inner)
    left = walker.eval(left_node)
    right = walker.eval(node.child_by_field_name("right"))
    return combine_values(walker, op, left, right)


def misparsed_cast(walker: Walker, node: Node | None) -> tuple[Val, str, Node] | None:
    """`(name) + x` where `name` is a variable: the grammar reads a cast of `+x`."""
    if node is None or node.type != "cast_expression":
        return None
    variable = walker.lookup(walker.text(node.child_by_field_name("type")).strip())
    value = node.child_by_field_name("value")
    if variable is None or value is None or value.type not in ("unary_expression", "pointer_expression"):
        return None
    op = walker.text(value.child_by_field_name("operator"))
    argument = value.child_by_field_name("argument")
    if op not in ("+", "-", "*", "&") or argument is None:
        return None
    return variable, op, argument


def combine_values(walker: Walker, op: str, left: Val, right: Val) -> Val:
    value = fold_binary(op, left.value, right.value)
    if op in ("&&", "||"):
        return Val(BOOL, value, Linear(const_known=value is not None, const=value or 0.0,
                                       nonlinear=left.lin.atoms | right.lin.atoms))
    if op in ("<", ">", "<=", ">=", "==", "!="):
        ctype = common_type(left.ctype, right.ctype)
        if not (left.static and right.static) and (ctype.is_int or ctype.pointer):
            walker.count_int(1.0)
        lin = Linear(const_known=value is not None, const=value or 0.0, nonlinear=left.lin.atoms | right.lin.atoms)
        return Val(BOOL, value, lin)
    # pointer arithmetic keeps the array
    if left.ctype.pointer and op in ("+", "-") and not right.ctype.pointer:
        walker.count_int(1.0)
        if walker.size_parameters and right.value is None and _size_unknown(right.lin):
            walker.offset_before_size = True
        return Val(left.ctype, None, left.lin.add(right.lin, 1.0 if op == "+" else -1.0), left.root, left.space, left.dims)
    if right.ctype.pointer and op == "+" and (right.root is not None or left.root is None):
        walker.count_int(1.0)
        if walker.size_parameters and left.value is None and _size_unknown(left.lin):
            walker.offset_before_size = True
        return Val(right.ctype, None, right.lin.add(left.lin), right.root, right.space, right.dims)
    if left.ctype.pointer and op == "+":
        walker.count_int(1.0)
        return Val(left.ctype, None, left.lin.add(right.lin), left.root, left.space, left.dims)
    ctype = common_type(left.ctype, right.ctype)
    static = left.static and right.static
    if not static:
        count_binary(walker, op, ctype, left, right)
    lin = _under_modulus(walker, op, left, right) or tile_of(walker, op, left, right) \
        or split_at(walker, op, left, right) or combine_linear(op, left.lin, right.lin, left.value, right.value)
    if value is not None and not lin.atoms:
        lin = Linear.constant(value)  # (`v & ~7` of a known `v`: a number, as an offset or a start)
    if ctype.is_float and lin.atoms:
        lin = lin.opaque()  # float values are not indices
    counted = row_count(op, left, right)
    less = shifted_count(op, left, right) if counted is None else None
    return Val(ctype, value, lin, static=static, loaded=offset_origin(op, left, right),
               counted=less[0] if less is not None else counted, counted_less=less[1] if less is not None else 0.0)


def _under_modulus(walker: Walker, op: str, left: Val, right: Val) -> Linear | None:
    """`v % C` of an integer index whose every value over the launch and the loops lies in
    0..C-1 (`i % m` with `m = 2^63`, a random generator's modulus): `v` itself. None otherwise."""
    lin = left.lin
    if op != "%" or right.value is None or right.value < 1 or not left.ctype.is_int or not lin.coeffs:
        return None
    spread = value_range(lin, walker.cardinality)
    return lin if spread is not None and spread[0] >= 0.0 and spread[1] < right.value else None


def tile_of(walker: Walker, op: str, left: Val, right: Val) -> Linear | None:
    """`tx % C` and `tx / C` (`tx & (C - 1)`, `tx >> k`) of one thread index or of a tile of it,
    C a number under its extent: a tile's column and its row, each an atom of its own over its
    own values (`linear.tile_atom`); None for anything else. Read as one opaque index, a tile of
    32 columns K apart looked like 1,024 scattered rows, and `lane == 0` like one thread of the
    block. The index of an OpenMP worksharing loop of a known iteration count is a flattened
    thread index, split so too (`c = i / (h * w)`, `x = i % w`: read as `i / (h * w)`, neighbouring
    iterations looked planes apart)."""
    lin = left.lin
    if right.value is None or not left.ctype.is_int or lin.nonlinear or len(lin.coeffs) != 1 \
            or not lin.const_known or lin.const != 0:
        return None
    atom, coeff = lin.coeffs[0]
    parts = (atom, 1, math.inf) if atom in THREAD_ATOMS["threadIdx"] or atom in walker.counted_parallel_atoms \
        else tile_parts(atom)
    if parts is None or coeff != 1.0:
        return None
    split = _divisor(op, right.value)
    if split is None:
        return None
    kind, divisor = split
    base, low, values = parts
    extent = walker.cardinality.get(atom, 1.0)
    if kind == "%" and extent <= divisor:
        return lin  # every value of it is under the divisor
    if divisor < 2 or extent <= divisor or (values != math.inf and values % divisor):
        return None  # one value of it, or tiles that do not nest: read as before
    if kind == "%":
        name, count = tile_atom(base, low, divisor), divisor
    else:
        name, count = tile_atom(base, low * int(divisor), values / divisor), math.ceil(extent / divisor)
    walker.cardinality[name] = float(count)
    return Linear.atom(name)


def _divisor(op: str, value: float) -> tuple[str, int] | None:
    """(`/` or `%`, C) of an integer `/ C`, `% C`, `>> k` (C = 2**k) or `& (C - 1)`; None otherwise."""
    if op == "&" and value >= 1 and math.log2(value + 1).is_integer():
        return "%", int(value) + 1
    if op == ">>" and 0 < value < 31:
        return "/", 2 ** int(value)
    if op in ("%", "/") and float(value).is_integer() and value >= 2:
        return op, int(value)
    return None


def split_at(walker: Walker, op: str, left: Val, right: Val) -> Linear | None:
    """`v / C` and `v % C` of an index over several launch indices and loop counters whose terms
    split at C: `v = q * C + r` with every term of `q` a multiple of C and the others summing to
    less than C (`i = blockIdx.x * 256 + threadIdx.x` with C = 65,536: `i / C` is `blockIdx.x / 256`,
    `i % C` is `(blockIdx.x % 256) * 256 + threadIdx.x`; a term is split into tiles where C is a
    multiple of its coefficient). Then `(i / C) * C * K + i % C` keeps neighbouring threads on
    neighbouring elements: read as `i * K`, 8 channels of an image apart looked 8 elements apart,
    and moved 8 times the bytes. None for any other form (`combine_linear` reads it)."""
    lin = left.lin
    split = _divisor(op, right.value) if right.value is not None and left.ctype.is_int else None
    if split is None or lin.nonlinear or not lin.const_known or lin.const != 0 or len(lin.coeffs) < 2:
        return None
    kind, divisor = split
    high: list[tuple[str, float]] = []  # the terms of v / C
    low: list[tuple[str, float]] = []  # the terms of v % C
    cards: dict[str, float] = {}  # the tiles made here, with their values
    for atom, coeff in lin.coeffs:
        card = walker.cardinality.get(atom)
        if card is None or not math.isfinite(card) or coeff <= 0 or not math.isfinite(coeff) \
                or not float(coeff).is_integer():
            return None
        c = int(coeff)
        if c % divisor == 0:
            high.append((atom, float(c // divisor)))
        elif divisor % c == 0 and card > divisor // c:
            per = divisor // c  # values of the atom in one C
            base, lowest, values = tile_parts(atom) or (atom, 1, math.inf)
            if values != math.inf and values % per:
                return None  # tiles that do not nest
            row = tile_atom(base, lowest * per, values / per)
            column = tile_atom(base, lowest, per)
            cards[row], cards[column] = math.ceil(card / per), float(per)
            high.append((row, 1.0))
            low.append((column, float(c)))
        else:
            low.append((atom, float(c)))
    reach = sum(c * (max(1.0, cards.get(a, walker.cardinality.get(a, 1.0))) - 1) for a, c in low)
    if reach >= divisor or not high:
        return None  # the low terms carry into the quotient, or none leaves it: read as before
    walker.cardinality.update(cards)
    return Linear(tuple(high if kind == "/" else low))


def count_binary(walker: Walker, op: str, ctype: CType, left: Val, right: Val) -> None:
    if ctype.kind == "f64" and op == "*" and exact_float_scale(left, right):
        ctype = F32  # float × 0.5 is exact in float: nvcc keeps it single precision
    if op in ("/", "%"):
        if ctype.is_float:
            divisor = right.value if right.static else None
            if divisor is not None and divisor != 0 and math.log2(abs(divisor)).is_integer():
                walker.count_op(ctype, 1.0)
            elif ctype.kind == "f64":
                fp, sfu, ints = costs.FP64_DIV
                walker.count_math(fp, sfu, ints, F64)
            else:
                fp, sfu, ints = costs.FP32_DIV
                walker.count_math(fp, sfu, ints, F32 if ctype.kind != "f16" else F16)
            return
        if right.static and right.value is not None and right.value > 0 and math.log2(right.value).is_integer():
            walker.count_int(1.0)
        elif right.static and right.value is not None:
            walker.count_int(costs.INT_DIV_BY_CONSTANT)
        else:
            walker.count_int(costs.INT64_DIV if ctype.wide else costs.INT32_DIV)
        return
    if op in ("+", "-", "*", "<<", ">>", "&", "|", "^"):
        if op in ("+", "-", "*") and (ctype.is_float or ctype.kind == "unknown"):
            walker.count_op(ctype, 1.0)
        else:
            walker.count_op(ctype if not ctype.is_float else INT, 1.0)


def eval_unary(walker: Walker, node: Node) -> Val:
    op = walker.text(node.child_by_field_name("operator"))
    arg = walker.eval(node.child_by_field_name("argument"))
    if arg.value is not None:
        if op == "~":  # (of an integer: a float operand, infinity among them, has no complement)
            value = float(~int(arg.value)) if math.isfinite(arg.value) else None
        else:
            value = {"-": -arg.value, "+": arg.value, "!": float(not arg.value)}.get(op)
        if not arg.static and op in ("!", "~"):
            walker.count_int(1.0)
        return Val(arg.ctype, value, Linear.constant(value), static=arg.static)
    if op in ("!", "~") and arg.ctype.is_int:
        walker.count_int(1.0)
    if op == "-":
        return Val(arg.ctype, None, arg.lin.scale(-1.0), arg.root, arg.space)
    return Val(arg.ctype if op != "!" else BOOL, None, arg.lin.opaque())


def eval_update(walker: Walker, node: Node) -> Val:
    target = node.child_by_field_name("argument")
    val = lvalue_load(walker, target, compound=True)
    walker.count_op(val.ctype if val.ctype.kind != "unknown" else INT, 1.0)
    if target is not None and target.type == "identifier":
        name = walker.text(target)
        current = walker.lookup(name)
        if current is not None:
            walker.assign(name, Val(current.ctype, None, current.lin.opaque() if current.lin.atoms else Linear(const_known=False),
                                    current.root, current.space, current.dims))
    return val


def eval_assignment(walker: Walker, node: Node) -> Val:
    left = node.child_by_field_name("left")
    op = walker.text(node.child_by_field_name("operator"))
    right = walker.eval(node.child_by_field_name("right"))
    compound = op != "="
    target = lvalue_load(walker, left, compound=compound) if compound else lvalue_type(walker, left)
    if compound:
        arith = op[:-1]
        ctype = common_type(target.ctype, right.ctype)
        count_binary(walker, arith, ctype if not target.ctype.pointer else INT, target, right)
    record_store(walker, left, right if not compound else Val(target.ctype))
    if left is not None and left.type == "field_expression":
        _assign_local_member(walker, left, right, target if compound else None)
    if left is not None and left.type == "identifier":
        name = walker.text(left)
        current = walker.lookup(name)
        if compound:
            if current is not None:
                if op in ("+=", "-=") and current.ctype.pointer:
                    new_lin = current.lin.add(right.lin, 1.0 if op == "+=" else -1.0)
                else:
                    new_lin = Linear(const_known=False, nonlinear=current.lin.atoms | right.lin.atoms)
                walker.assign(name, Val(current.ctype, None, new_lin, current.root, current.space, current.dims))
        else:
            ctype = current.ctype if current is not None and current.ctype.kind != "unknown" else right.ctype
            root = right.root if right.root is not None else (current.root if current is not None and not ctype.pointer else None)
            value = right.value if walker.loop_depth == 0 else None
            space = right.space if right.root else (current.space if current else None)
            walker.assign(name, Val(ctype, value, right.lin, root, space, right.dims, loaded=right.loaded,
                                    counted=right.counted, counted_less=right.counted_less))
    return right


def _assign_local_member(walker: Walker, left: Node, right: Val, before: Val | None) -> None:
    """`r.data = ...` on a local struct (`benchtype r;`): the member keeps the value, as a variable
    would, under the name `r.data` in the scope that declares `r` (`before`: the member's value
    read by a compound assignment)."""
    arg = left.child_by_field_name("argument")
    if arg is None or arg.type != "identifier" or walker.text(left.child_by_field_name("operator")) != ".":
        return
    name = walker.text(arg)
    if name in walker.members:
        return
    holder = next((scope for scope in reversed(walker.scopes) if name in scope), None)
    if holder is None or holder[name].ctype.pointer or holder[name].root is not None or right.ctype.is_float:
        return  # (a floating-point member keeps the member's own type, which the walk does not know)
    if before is not None:
        right = Val(before.ctype, None, Linear(const_known=False, nonlinear=before.lin.atoms | right.lin.atoms
                                               | before.lin.nonlinear | right.lin.nonlinear))
    member = f"{name}.{walker.text(left.child_by_field_name('field'))}"
    if right.ctype.pointer and right.root is not None and before is None:
        # a pointer member (`sub.elements = &a.elements[offset]`): the array it points into
        holder[member] = Val(right.ctype, None, right.lin, right.root, right.space)
        return
    holder[member] = Val(right.ctype, None, right.lin)


def lvalue_type(walker: Walker, node: Node | None) -> Val:
    if node is None:
        return UNKNOWN_VAL
    if node.type == "identifier":
        return walker.lookup(walker.text(node)) or UNKNOWN_VAL
    return UNKNOWN_VAL


def lvalue_load(walker: Walker, node: Node | None, compound: bool) -> Val:
    """Read an lvalue (for `+=`, `++`): counts the load of an array element."""
    if node is None:
        return UNKNOWN_VAL
    return walker.eval(node)


def eval_cast(walker: Walker, node: Node) -> Val:
    type_text = walker.text(node.child_by_field_name("type"))
    value_node = node.child_by_field_name("value")
    misparsed = misparsed_cast(walker, node)
    if misparsed is not None:
        variable, op, argument = misparsed
        return combine_values(walker, op, variable, walker.eval(argument))
    val = walker.eval(value_node)
    ctype = parse_type(type_text, walker.aliases)
    if ctype.kind == "unknown" or ctype.kind == "struct":
        return val
    value = val.value
    if value is not None and ctype.is_int:
        value = float(int(value))
    if ctype.pointer and val.root is not None:
        return repointed(val, ctype)
    lin = val.lin if ctype.is_int or ctype.pointer else val.lin.opaque()
    return Val(ctype, value, lin, val.root if ctype.pointer else None, val.space if ctype.pointer else None,
               static=val.static)


def eval_conditional(walker: Walker, node: Node) -> Val:
    cond = walker.eval(node.child_by_field_name("condition"))
    saved = walker.mult
    if cond.known:
        chosen = node.child_by_field_name("consequence") if cond.value else node.child_by_field_name("alternative")
        return walker.eval(chosen)
    weight = branch_weight(walker, node.child_by_field_name("condition"), cond)
    walker.mult = saved * weight
    a = walker.eval(node.child_by_field_name("consequence"))
    walker.mult = saved * (1.0 - weight)
    b = walker.eval(node.child_by_field_name("alternative"))
    walker.mult = saved
    walker.count_int(1.0)  # select
    ctype = common_type(a.ctype, b.ctype)
    return Val(ctype, None, Linear(const_known=False, nonlinear=a.lin.atoms | b.lin.atoms | cond.lin.atoms),
               a.root or b.root, a.space or b.space, most=_least_of(walker, node, a, b))


def _least_of(walker: Walker, node: Node, a: Val, b: Val) -> float | None:
    """The most `c < x ? c : x` (the least of its two arms, as `MIN` macros expand) can be: the
    bound of the arm that has one (its value, or its own most); None for any other selection."""
    cond = unwrapped(node.child_by_field_name("condition"))
    if cond is None or cond.type != "binary_expression":
        return None
    op = walker.text(cond.child_by_field_name("operator"))
    sides = [_bare(walker, cond.child_by_field_name(f)) for f in ("left", "right")]
    arms = [_bare(walker, node.child_by_field_name(f)) for f in ("consequence", "alternative")]
    if op not in ("<", "<=", ">", ">=") or sorted(sides) != sorted(arms) or sides[0] == sides[1]:
        return None
    # `l < r ? l : r` and `l > r ? r : l` take the least
    if (arms[0] == sides[0]) != (op in ("<", "<=")):
        return None
    bounds = [v.value if v.value is not None else v.most for v in (a, b)]
    known = [v for v in bounds if v is not None]
    return min(known) if known else None


def _bare(walker: Walker, node: Node | None) -> str:
    """An operand's text without its parentheses and spaces (`(a)` and `a` compare equal)."""
    inner = unwrapped(node)
    return walker.text(inner).replace(" ", "") if inner is not None else ""


def eval_sizeof(walker: Walker, node: Node) -> Val:
    type_node = node.child_by_field_name("type")
    ctype = parse_type(walker.text(type_node), walker.aliases) if type_node is not None else UNKNOWN
    value_node = node.child_by_field_name("value")
    if type_node is None and value_node is not None:
        # `sizeof(int4)`, `sizeof(T)`, `sizeof(x)`: the grammar reads a parenthesised name as
        # an expression; it names a type, or a variable whose type we know
        name = walker.text(value_node).strip("() \t")
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            ctype = parse_type(name, walker.aliases)
            known = walker.lookup(name)
            if ctype.kind in ("unknown", "struct") and known is not None:
                ctype = known.ctype
    size = float(ctype.value_bytes) if ctype.kind not in ("unknown", "struct") else 4.0
    return Val(LONG, size, Linear.constant(size), static=True)


def eval_initializer_list(walker: Walker, node: Node) -> Val:
    for child in node.named_children:
        walker.eval(child)
    return UNKNOWN_VAL


def _size_unknown(offset: Linear) -> bool:
    """Whether a pointer offset rests on a size not known yet (`p + n`, `A + blockIdx.x * K`)."""
    return (not offset.atoms and not offset.const_known) or any(c == UNKNOWN_COEFF for _, c in offset.coeffs)
