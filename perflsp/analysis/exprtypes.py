"""Arithmetic types of C/C++ expressions in GPU code, as far as the precision lints need them.

Types are the walker's (`perflsp.analysis.ctype.CType`, type names read by `parse_type` with the
unit's typedefs), so a lint and the engine agree on what an expression is. Two typings are
computed for every expression:

- the *actual* type, following C++'s usual arithmetic conversions (`float * 0.5` is `double`,
  `ctype.common_type`);
- the *intended* type, where an unsuffixed floating literal is neutral (`FLIT`, a double marked
  `literal`): it takes the type of what it is combined with. `x * 0.5` with a float `x` is
  intended float, so the literal is a slip; `d * 0.5` with a double `d` is intended double.

What the rules compare is an expression's `precision` (int, float, double or a neutral literal);
vectors (`float4.x` is a float), pointers, template type parameters bound at a launch site and
the return types of `__device__` functions are typed too. Anything else (a struct, `half`, a
name defined nowhere the model looked) has no precision, and no precision never produces a
finding: unlike the walker, the lints do not guess a float type from a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from tree_sitter import Node

from perflsp.analysis.ctype import F32, F64, F64_LITERAL, INT, UNKNOWN, CType, common_type, parse_type
from perflsp.analysis.folding import number_literal

# the precisions the rules compare (see `precision`)
FLOAT, DOUBLE, FLIT = F32, F64, F64_LITERAL
Types = tuple[CType | None, CType | None]  # (actual, intended)
ARITH_OPS = frozenset({"+", "-", "*", "/", "%"})
COMPARE_OPS = frozenset({"<", ">", "<=", ">=", "==", "!="})
COMPOUND_FLOAT_OPS = frozenset({"+=", "-=", "*=", "/="})

_VECTOR_MEMBERS = frozenset({"x", "y", "z", "w"})
_BUILTIN_INDEX = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})

# Math functions whose plain name is the double version in C (and whose float overload/`f` name
# exists in CUDA): `sqrt` vs `sqrtf`.
DOUBLE_MATH = frozenset({
    "sqrt", "cbrt", "rsqrt", "rcbrt", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10",
    "log1p", "logb", "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "sinpi", "cospi", "fabs", "floor", "ceil", "round",
    "trunc", "rint", "nearbyint", "fmod", "remainder", "fmin", "fmax", "fdim", "hypot", "rhypot",
    "erf", "erfc", "erfinv", "erfcinv", "lgamma", "tgamma", "fma", "copysign", "ldexp", "scalbn",
    "norm3d", "rnorm3d", "norm4d", "rnorm4d", "j0", "j1", "y0", "y1", "normcdf", "normcdfinv",
})
# Float intrinsics that are not simply `<double name>f`.
_FLOAT_INTRINSICS = frozenset({
    "__fdividef", "__saturatef", "__frcp_rn", "__frcp_rz", "__frcp_ru", "__frcp_rd", "__fsqrt_rn",
    "__fsqrt_rz", "__fsqrt_ru", "__fsqrt_rd", "__frsqrt_rn", "__fmul_rn", "__fmul_rz", "__fadd_rn",
    "__fadd_rz", "__fsub_rn", "__fsub_rz", "__fmaf_rn", "__fmaf_rz", "__fdiv_rn", "__int2float_rn",
    "__uint2float_rn", "__half2float", "__bfloat162float", "__int_as_float", "__uint_as_float",
    "__shfl_sync_float",
})
_DOUBLE_INTRINSICS = frozenset({"__dmul_rn", "__dadd_rn", "__dsub_rn", "__fma_rn", "__ddiv_rn", "__drcp_rn",
                                "__dsqrt_rn", "__longlong_as_double", "__hiloint2double", "__int2double_rn"})
_PROMOTING = frozenset({"min", "max", "std::min", "std::max", "fminf", "fmaxf"})


def precision(ty: CType | None) -> CType | None:
    """What the precision rules compare of a type: INT (integers and bool, any width), FLOAT,
    DOUBLE or FLIT (an unsuffixed literal); None for a pointer, a vector, a struct, a half or
    an unknown type."""
    if ty is None or ty.pointer or ty.lanes != 1:
        return None
    if ty.kind in ("int", "bool"):
        return INT
    if ty.kind == "f32":
        return FLOAT
    if ty.kind == "f64":
        return FLIT if ty.literal else DOUBLE
    return None


def has_precision(ty: CType | None, wanted: CType) -> bool:
    return precision(ty) == wanted


def node_text(node: Node) -> str:
    """The source text of a node (tree-sitter leaves `text` empty only for detached nodes)."""
    return (node.text or b"").decode("utf-8", "replace")


def type_of(text: str, aliases: Mapping[str, CType]) -> CType | None:
    """The type `text` names (`const unsigned int` -> int, `real` (typedef float) -> float,
    `float *` -> a pointer), read as the walker reads it but without guessing from a name;
    None when it names nothing."""
    ty = parse_type(text, aliases, guess=False)
    return None if ty == UNKNOWN else ty


def pointer_to(ty: CType, depth: int) -> CType:
    """`ty` with `depth` more levels of pointer (or array)."""
    return CType(ty.kind, ty.size_bytes, ty.lanes, ty.pointer + depth, ty.wide) if depth else ty


def literal_type(text: str) -> CType:
    """The type of a number literal as written: an integer (as the walker reads it), FLOAT
    (suffix f), DOUBLE (suffix L: long double, intentional) or FLIT (a plain double)."""
    t = text.replace("'", "").lower().lstrip("+-")
    if t.startswith("0x"):
        if "p" not in t:  # hex digits include "e" and "f": only a binary exponent makes a float
            return number_literal(text).ctype
    elif "." not in t.rstrip("ulf") and "e" not in t.rstrip("ulf"):
        return number_literal(text).ctype
    if t.endswith("f"):
        return FLOAT
    if t.endswith("l"):
        return DOUBLE
    return FLIT


def is_double_literal(node: Node) -> bool:
    return node.type == "number_literal" and literal_type(node_text(node)) == FLIT


def double_literals(node: Node) -> Iterator[Node]:
    """Unsuffixed floating literals inside `node` (not inside casts to double, which are intended)."""
    if node.type == "number_literal":
        if is_double_literal(node):
            yield node
        return
    if node.type == "cast_expression":
        type_node = node.child_by_field_name("type")
        if type_node is not None and b"double" in (type_node.text or b""):
            return
    for child in node.named_children:
        yield from double_literals(child)


def promote_actual(a: CType | None, b: CType | None) -> CType | None:
    """The usual arithmetic conversions (`ctype.common_type`) where both operands have a
    precision, pointer arithmetic, else None."""
    if a is None or b is None:
        return None
    pa, pb = precision(a), precision(b)
    if pa is None or pb is None:
        if a.pointer and pb == INT:
            return a  # pointer arithmetic
        if b.pointer and pa == INT:
            return b
        return None
    return common_type(a, b)


def promote_intended(a: CType | None, b: CType | None) -> CType | None:
    """The intended precision of `a op b`: the widest of double, float, a neutral literal, int."""
    if a is None or b is None:
        return None
    pa, pb = precision(a), precision(b)
    if pa is None or pb is None:
        if a.pointer and pb == INT:
            return a
        if b.pointer and pa == INT:
            return b
        return None
    for kind in (DOUBLE, FLOAT, FLIT, INT):
        if kind in (pa, pb):
            return kind
    return None


def call_name(call: Node) -> str | None:
    """`pow`, `std::pow`, `::sqrt` -> the name as written without spaces; None for other callees."""
    fn = call.child_by_field_name("function")
    if fn is None or fn.type not in ("identifier", "qualified_identifier"):
        return None
    return re.sub(r"\s+", "", node_text(fn))


def math_base_name(name: str) -> str:
    """`std::pow` -> `pow`, `::sqrt` -> `sqrt`."""
    return name.rsplit("::", 1)[-1]


def is_float_math(name: str) -> bool:
    base = math_base_name(name)
    if base in _FLOAT_INTRINSICS:
        return True
    stripped = base[2:] if base.startswith("__") else base
    return stripped.endswith("f") and stripped[:-1] in DOUBLE_MATH


class Scope:
    """Names visible in one function: parameters, locals, file-scope variables."""

    def __init__(self, names: dict[str, CType | Node | None], parent: Scope | None = None):
        self.names = names  # a Node is an `auto` initialiser, typed on demand
        self.parent = parent

    def lookup(self, name: str) -> CType | Node | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None


def declarator_name_and_depth(declarator: Node) -> tuple[str | None, int, Node | None]:
    """(name, pointer/array depth, initialiser) of one declarator."""
    depth = 0
    value = None
    node: Node | None = declarator
    while node is not None:
        kind = node.type
        if kind == "init_declarator":
            value = node.child_by_field_name("value")
            node = node.child_by_field_name("declarator")
        elif kind in ("pointer_declarator", "array_declarator"):
            depth += 1
            node = node.child_by_field_name("declarator")
        elif kind in ("reference_declarator", "parenthesized_declarator"):
            node = next((c for c in node.named_children if c.type != "type_qualifier"), None)
        elif kind in ("identifier", "field_identifier"):
            return node_text(node), depth, value
        else:
            return None, depth, value
    return None, depth, value


def declared_type_text(decl: Node) -> str:
    """The type words of a declaration/parameter, qualifiers included."""
    parts = []
    for child in decl.children:
        if child.type in ("type_qualifier", "storage_class_specifier", "primitive_type", "type_identifier",
                          "sized_type_specifier", "qualified_identifier", "template_type",
                          "placeholder_type_specifier", "auto"):
            parts.append(node_text(child))
    return " ".join(parts)


def bind_declaration(decl: Node, names: dict[str, CType | Node | None], aliases: Mapping[str, CType]) -> None:
    type_text = declared_type_text(decl)
    base = type_of(type_text, aliases)
    is_auto = re.search(r"\bauto\b", type_text) is not None
    for declarator in decl.children_by_field_name("declarator"):
        name, depth, value = declarator_name_and_depth(declarator)
        if name is None:
            continue
        if is_auto:
            entry: CType | Node | None = value if value is not None and depth == 0 else None
        else:
            entry = pointer_to(base, depth) if base is not None else None
        if name in names and names[name] != entry:
            names[name] = None  # declared twice with different types: do not guess
        else:
            names[name] = entry


class ExprTyper:
    """Actual and intended types of expressions, memoised per node."""

    def __init__(self, scope: Scope, aliases: Mapping[str, CType], functions: Mapping[str, CType | None],
                 language: str = "cpp"):
        self.scope = scope
        self.aliases = aliases
        self.functions = functions
        self.language = language
        self._memo: dict[tuple[int, int, str], Types] = {}
        self._active: set[str] = set()

    def actual(self, node: Node) -> CType | None:
        return self.types(node)[0]

    def intended(self, node: Node) -> CType | None:
        return self.types(node)[1]

    def types(self, node: Node) -> Types:
        key = (node.start_byte, node.end_byte, node.type)
        cached = self._memo.get(key)
        if cached is None:
            cached = self._compute(node)
            self._memo[key] = cached
        return cached

    # -- rules -------------------------------------------------------------------------

    def _compute(self, node: Node) -> Types:
        kind = node.type
        if kind == "number_literal":
            lit = literal_type(node_text(node))
            return (DOUBLE, FLIT) if lit == FLIT else (lit, lit)
        if kind in ("char_literal", "true", "false", "sizeof_expression", "alignof_expression"):
            return INT, INT
        if kind == "identifier":
            ty = self._identifier(node_text(node))
            return ty, ty
        if kind in ("parenthesized_expression",):
            inner = node.named_children[-1] if node.named_children else None
            return self.types(inner) if inner is not None else (None, None)
        if kind == "field_expression":
            ty = self._field(node)
            return ty, ty
        if kind in ("subscript_expression", "pointer_expression"):
            return self._indirection(node)
        if kind == "unary_expression":
            op = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            if op is not None and op.type == "!":
                return INT, INT
            return self.types(arg) if arg is not None else (None, None)
        if kind == "update_expression":
            arg = node.child_by_field_name("argument")
            return self.types(arg) if arg is not None else (None, None)
        if kind == "cast_expression":
            ty = self._type_descriptor(node.child_by_field_name("type"))
            return ty, ty
        if kind == "binary_expression":
            return self._binary(node)
        if kind == "conditional_expression":
            return self._conditional(node)
        if kind == "assignment_expression":
            left = node.child_by_field_name("left")
            return self.types(left) if left is not None else (None, None)
        if kind == "comma_expression":
            right = node.child_by_field_name("right")
            return self.types(right) if right is not None else (None, None)
        if kind == "call_expression":
            return self._call(node)
        return None, None

    def _indirection(self, node: Node) -> Types:
        """`a[i]` and `*p` take the element type; `&x` adds a level of pointer."""
        if node.type == "subscript_expression":
            base = node.child_by_field_name("argument")
            if base is None:
                return None, None
            a, i = self.types(base)
            return _deref(a), _deref(i)
        arg = node.child_by_field_name("argument")
        op = node.child_by_field_name("operator")
        if arg is None or op is None:
            return None, None
        a, i = self.types(arg)
        if op.type == "*":
            return _deref(a), _deref(i)
        return (a.address_of() if a else None), (i.address_of() if i else None)

    def _conditional(self, node: Node) -> Types:
        yes = node.child_by_field_name("consequence")
        no = node.child_by_field_name("alternative")
        if yes is None or no is None:
            return None, None
        (ya, yi), (na, ni) = self.types(yes), self.types(no)
        return promote_actual(ya, na), promote_intended(yi, ni)

    def _identifier(self, name: str) -> CType | None:
        entry = self.scope.lookup(name)
        if isinstance(entry, CType) or entry is None:
            return entry
        if name in self._active:
            return None
        self._active.add(name)
        try:
            return self.actual(entry)  # `auto v = x[i]`: the initialiser's type
        finally:
            self._active.discard(name)

    def _field(self, node: Node) -> CType | None:
        arg = node.child_by_field_name("argument")
        field = node.child_by_field_name("field")
        op = node.child_by_field_name("operator")
        if arg is None or field is None:
            return None
        if arg.type == "identifier" and node_text(arg) in _BUILTIN_INDEX and self.scope.lookup(node_text(arg)) is None:
            return INT
        base = self.actual(arg)
        if op is not None and op.type == "->":
            base = _deref(base)
        if base is None or base.pointer != 0 or node_text(field) not in _VECTOR_MEMBERS:
            return None
        # a member of a vector type (`float4.x`): one lane; a struct's member is not known
        return base.element if base.kind in ("int", "bool", "f16", "f32", "f64") else None

    def _type_descriptor(self, node: Node | None) -> CType | None:
        return type_of(node_text(node), self.aliases) if node is not None else None

    def _binary(self, node: Node) -> Types:
        op_node = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if op_node is None or left is None or right is None:
            return None, None
        op = op_node.type
        if op in COMPARE_OPS or op in ("&&", "||"):
            return INT, INT
        (la, li), (ra, ri) = self.types(left), self.types(right)
        if op in ("+", "-", "*", "/"):
            return promote_actual(la, ra), promote_intended(li, ri)
        if op in ("%", "<<", ">>", "&", "|", "^"):
            return (la, li) if precision(la) == INT else (None, None)
        return None, None

    def _call(self, node: Node) -> Types:
        fn = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        args = [a for a in args_node.named_children if a.type != "comment"] if args_node is not None else []
        if fn is None:
            return None, None
        if fn.type == "template_function":
            name_node = fn.child_by_field_name("name")
            targs = fn.child_by_field_name("arguments")
            if name_node is not None and node_text(name_node).endswith("_cast") and targs is not None and targs.named_children:
                ty = self._type_descriptor(targs.named_children[0])
                return ty, ty
            return None, None
        if fn.type == "primitive_type" or (fn.type == "identifier" and node_text(fn) in self.aliases):
            ty = type_of(node_text(fn), self.aliases)  # functional cast `float(x)`, `T(0)`
            return ty, ty
        name = call_name(node)
        if name is None:
            return None, None
        base = math_base_name(name)
        if is_float_math(name):
            return FLOAT, FLOAT
        if base in _DOUBLE_INTRINSICS:
            return DOUBLE, DOUBLE
        if base in DOUBLE_MATH:
            return self._double_math(args)
        if name in _PROMOTING:
            typed = [self.types(a) for a in args]
            if len(typed) != 2:
                return None, None
            return promote_actual(typed[0][0], typed[1][0]), promote_intended(typed[0][1], typed[1][1])
        if name in self.functions:
            ty = self.functions[name]
            return ty, ty
        return None, None

    def _double_math(self, args: list[Node]) -> Types:
        typed = [self.types(a) for a in args]
        actual_kinds = [precision(a) for a, _ in typed]
        intended_kinds = [precision(i) for _, i in typed]
        if not typed or None in actual_kinds or None in intended_kinds:
            return None, None
        if self.language == "c":
            actual = DOUBLE  # C has one `sqrt`: double
        elif any(k in (DOUBLE, FLIT) for k in actual_kinds):
            actual = DOUBLE
        elif FLOAT in actual_kinds:
            actual = FLOAT
        else:
            actual = DOUBLE  # std::sqrt(int) is the double overload
        if DOUBLE in intended_kinds:
            intended = DOUBLE
        elif FLOAT in intended_kinds:
            intended = FLOAT
        else:
            intended = FLIT if FLIT in intended_kinds else DOUBLE
        return actual, intended


def _deref(ty: CType | None) -> CType | None:
    """The element a pointer or array points to; None for anything else."""
    return ty.deref() if ty is not None and ty.pointer > 0 else None


def is_runtime(node: Node) -> bool:
    """Whether an expression has a run-time operand (a variable, call, subscript), i.e. is not
    folded by the compiler."""
    if node.type in ("identifier", "call_expression", "subscript_expression", "field_expression",
                     "pointer_expression", "update_expression", "assignment_expression"):
        return True
    return any(is_runtime(c) for c in node.named_children)
