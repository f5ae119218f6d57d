"""Arithmetic types of C/C++ expressions in GPU code, as far as the precision lints need them.

Two typings are computed for every expression:

- the *actual* type, following C++'s usual arithmetic conversions (`float * 0.5` is `double`);
- the *intended* type, where an unsuffixed floating literal is neutral (`flit`): it takes the
  type of what it is combined with. `x * 0.5` with a float `x` is intended `float`, so the
  literal is a slip; `d * 0.5` with a double `d` is intended `double` and is fine.

Only what the lints need is modelled: scalars (`int`, `float`, `double`), pointers/arrays of them,
CUDA vector types (`float4.x` is a float), typedefs/aliases/`#define`s naming a scalar type,
template type parameters bound at a launch site, and the return types of `__device__` functions.
Anything else is unknown (`None`), and unknown never produces a finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tree_sitter import Node

INT, FLOAT, DOUBLE, FLIT = "int", "float", "double", "flit"
ARITH_OPS = frozenset({"+", "-", "*", "/", "%"})
COMPARE_OPS = frozenset({"<", ">", "<=", ">=", "==", "!="})
COMPOUND_FLOAT_OPS = frozenset({"+=", "-=", "*=", "/="})

_INT_WORDS = frozenset({
    "int", "unsigned", "signed", "short", "long", "char", "bool", "size_t", "ssize_t", "ptrdiff_t",
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
    "intptr_t", "uintptr_t", "uint", "ulong", "ushort", "uchar", "__int64",
})
_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict", "constexpr",
                         "static", "extern", "__shared__", "__constant__", "__device__", "__managed__",
                         "register", "typename", "struct", "class", "inline", "__forceinline__", "mutable",
                         "std", "::"})
# CUDA vector types: base name -> scalar element
_VECTOR = re.compile(r"^(u?char|u?short|u?int|u?long|u?longlong|float|double)([1-4])$")
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


@dataclass(frozen=True, slots=True)
class Ty:
    """A type as far as arithmetic goes: a base name and a pointer/array depth."""

    base: str  # "int", "float", "double", "flit" (intended only), or another name ("float4", "half", "T")
    depth: int = 0

    @property
    def scalar(self) -> str | None:
        return self.base if self.depth == 0 and self.base in (INT, FLOAT, DOUBLE, FLIT) else None

    def deref(self) -> Ty | None:
        return Ty(self.base, self.depth - 1) if self.depth > 0 else None


def node_text(node: Node) -> str:
    """The source text of a node (tree-sitter leaves `text` empty only for detached nodes)."""
    return (node.text or b"").decode("utf-8", "replace")


def normalise_type(words: str, aliases: Mapping[str, str]) -> str | None:
    """`const unsigned int` -> "int", `float4` -> "float4", `real` (typedef float) -> "float"."""
    parts = [w for w in re.split(r"[\s*&]+|::", words) if w and w not in _QUALIFIERS]
    resolved: list[str] = []
    for word in parts:
        seen = 0
        while word in aliases and seen < 8:  # typedef chains, with a guard against cycles
            word = aliases[word]
            seen += 1
        resolved.append(word)
    if not resolved:
        return None
    if any(w == DOUBLE for w in resolved):
        return DOUBLE  # "double", "long double"
    if any(w == FLOAT for w in resolved):
        return FLOAT
    if all(w in _INT_WORDS for w in resolved):
        return INT
    if len(resolved) == 1:
        return resolved[0]
    return None


def vector_element(base: str) -> str | None:
    m = _VECTOR.match(base)
    if m is None:
        return None
    return m.group(1) if m.group(1) in (FLOAT, DOUBLE) else INT


def literal_kind(text: str) -> str:
    """INT, FLOAT (suffix f), DOUBLE (suffix L: long double, intentional) or FLIT (plain double)."""
    t = text.replace("'", "").lower().lstrip("+-")
    if t.startswith("0x"):
        if "p" not in t:  # hex digits include "e" and "f": only a binary exponent makes a float
            return INT
    elif "." not in t.rstrip("ulf") and "e" not in t.rstrip("ulf"):
        return INT
    if t.endswith("f"):
        return FLOAT
    if t.endswith("l"):
        return DOUBLE
    return FLIT


def is_double_literal(node: Node) -> bool:
    return node.type == "number_literal" and literal_kind(node_text(node)) == FLIT


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


def _rank(kind: str | None) -> int:
    return {INT: 0, FLOAT: 1, DOUBLE: 2}.get(kind or "", -1)


def promote_actual(a: Ty | None, b: Ty | None) -> Ty | None:
    if a is None or b is None:
        return None
    ka, kb = a.scalar, b.scalar
    if ka is None or kb is None:
        if a.depth > 0 and kb == INT:
            return a  # pointer arithmetic
        if b.depth > 0 and ka == INT:
            return b
        return None
    ka = DOUBLE if ka == FLIT else ka
    kb = DOUBLE if kb == FLIT else kb
    return Ty(ka if _rank(ka) >= _rank(kb) else kb)


def promote_intended(a: Ty | None, b: Ty | None) -> Ty | None:
    if a is None or b is None:
        return None
    ka, kb = a.scalar, b.scalar
    if ka is None or kb is None:
        if a.depth > 0 and kb == INT:
            return a
        if b.depth > 0 and ka == INT:
            return b
        return None
    kinds = {ka, kb}
    for kind in (DOUBLE, FLOAT, FLIT, INT):
        if kind in kinds:
            return Ty(kind)
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

    def __init__(self, names: dict[str, Ty | Node | None], parent: Scope | None = None):
        self.names = names  # a Node is an `auto` initialiser, typed on demand
        self.parent = parent

    def lookup(self, name: str) -> Ty | Node | None:
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


def bind_declaration(decl: Node, names: dict[str, Ty | Node | None], aliases: Mapping[str, str]) -> None:
    type_text = declared_type_text(decl)
    base = normalise_type(type_text, aliases)
    is_auto = re.search(r"\bauto\b", type_text) is not None
    for declarator in decl.children_by_field_name("declarator"):
        name, depth, value = declarator_name_and_depth(declarator)
        if name is None:
            continue
        if is_auto:
            entry: Ty | Node | None = value if value is not None and depth == 0 else None
        else:
            entry = Ty(base, depth) if base is not None else None
        if name in names and names[name] != entry:
            names[name] = None  # declared twice with different types: do not guess
        else:
            names[name] = entry


class ExprTyper:
    """Actual and intended types of expressions, memoised per node."""

    def __init__(self, scope: Scope, aliases: Mapping[str, str], functions: Mapping[str, Ty | None],
                 language: str = "cpp"):
        self.scope = scope
        self.aliases = aliases
        self.functions = functions
        self.language = language
        self._memo: dict[tuple[int, int, str], tuple[Ty | None, Ty | None]] = {}
        self._active: set[str] = set()

    def actual(self, node: Node) -> Ty | None:
        return self.types(node)[0]

    def intended(self, node: Node) -> Ty | None:
        return self.types(node)[1]

    def types(self, node: Node) -> tuple[Ty | None, Ty | None]:
        key = (node.start_byte, node.end_byte, node.type)
        cached = self._memo.get(key)
        if cached is None:
            cached = self._compute(node)
            self._memo[key] = cached
        return cached

    # -- rules -------------------------------------------------------------------------

    def _compute(self, node: Node) -> tuple[Ty | None, Ty | None]:
        kind = node.type
        if kind == "number_literal":
            lit = literal_kind(node_text(node))
            return (Ty(DOUBLE), Ty(FLIT)) if lit == FLIT else (Ty(lit), Ty(lit))
        if kind in ("char_literal", "true", "false", "sizeof_expression", "alignof_expression"):
            return Ty(INT), Ty(INT)
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
                return Ty(INT), Ty(INT)
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

    def _indirection(self, node: Node) -> tuple[Ty | None, Ty | None]:
        """`a[i]` and `*p` take the element type; `&x` adds a level of pointer."""
        if node.type == "subscript_expression":
            base = node.child_by_field_name("argument")
            if base is None:
                return None, None
            a, i = self.types(base)
            return (a.deref() if a else None), (i.deref() if i else None)
        arg = node.child_by_field_name("argument")
        op = node.child_by_field_name("operator")
        if arg is None or op is None:
            return None, None
        a, i = self.types(arg)
        if op.type == "*":
            return (a.deref() if a else None), (i.deref() if i else None)
        return (Ty(a.base, a.depth + 1) if a else None), (Ty(i.base, i.depth + 1) if i else None)

    def _conditional(self, node: Node) -> tuple[Ty | None, Ty | None]:
        yes = node.child_by_field_name("consequence")
        no = node.child_by_field_name("alternative")
        if yes is None or no is None:
            return None, None
        (ya, yi), (na, ni) = self.types(yes), self.types(no)
        return promote_actual(ya, na), promote_intended(yi, ni)

    def _identifier(self, name: str) -> Ty | None:
        entry = self.scope.lookup(name)
        if isinstance(entry, Ty) or entry is None:
            return entry
        if name in self._active:
            return None
        self._active.add(name)
        try:
            return self.actual(entry)  # `auto v = x[i]`: the initialiser's type
        finally:
            self._active.discard(name)

    def _field(self, node: Node) -> Ty | None:
        arg = node.child_by_field_name("argument")
        field = node.child_by_field_name("field")
        op = node.child_by_field_name("operator")
        if arg is None or field is None:
            return None
        if arg.type == "identifier" and node_text(arg) in _BUILTIN_INDEX and self.scope.lookup(node_text(arg)) is None:
            return Ty(INT)
        base = self.actual(arg)
        if base is None:
            return None
        if op is not None and op.type == "->":
            base = base.deref()
            if base is None:
                return None
        if base.depth != 0 or node_text(field) not in _VECTOR_MEMBERS:
            return None
        element = vector_element(base.base)
        return Ty(element) if element else None

    def _type_descriptor(self, node: Node | None) -> Ty | None:
        if node is None:
            return None
        text = node_text(node)
        depth = text.count("*")
        base = normalise_type(text.replace("*", " "), self.aliases)
        return Ty(base, depth) if base else None

    def _binary(self, node: Node) -> tuple[Ty | None, Ty | None]:
        op_node = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if op_node is None or left is None or right is None:
            return None, None
        op = op_node.type
        if op in COMPARE_OPS or op in ("&&", "||"):
            return Ty(INT), Ty(INT)
        (la, li), (ra, ri) = self.types(left), self.types(right)
        if op in ("+", "-", "*", "/"):
            return promote_actual(la, ra), promote_intended(li, ri)
        if op in ("%", "<<", ">>", "&", "|", "^"):
            return (la, li) if la is not None and la.scalar == INT else (None, None)
        return None, None

    def _call(self, node: Node) -> tuple[Ty | None, Ty | None]:
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
            base = normalise_type(node_text(fn), self.aliases)  # functional cast `float(x)`, `T(0)`
            ty = Ty(base) if base else None
            return ty, ty
        name = call_name(node)
        if name is None:
            return None, None
        base = math_base_name(name)
        if is_float_math(name):
            return Ty(FLOAT), Ty(FLOAT)
        if base in _DOUBLE_INTRINSICS:
            return Ty(DOUBLE), Ty(DOUBLE)
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

    def _double_math(self, args: list[Node]) -> tuple[Ty | None, Ty | None]:
        typed = [self.types(a) for a in args]
        actual_kinds = [a.scalar if a else None for a, _ in typed]
        intended_kinds = [i.scalar if i else None for _, i in typed]
        if not typed or None in actual_kinds or None in intended_kinds:
            return None, None
        if self.language == "c":
            actual = Ty(DOUBLE)  # C has one `sqrt`: double
        elif any(k in (DOUBLE, FLIT) for k in actual_kinds):
            actual = Ty(DOUBLE)
        elif FLOAT in actual_kinds:
            actual = Ty(FLOAT)
        else:
            actual = Ty(DOUBLE)  # std::sqrt(int) is the double overload
        if DOUBLE in intended_kinds:
            intended = Ty(DOUBLE)
        elif FLOAT in intended_kinds:
            intended = Ty(FLOAT)
        else:
            intended = Ty(FLIT) if FLIT in intended_kinds else Ty(DOUBLE)
        return actual, intended


def is_runtime(node: Node) -> bool:
    """Whether an expression has a run-time operand (a variable, call, subscript), i.e. is not
    folded by the compiler."""
    if node.type in ("identifier", "call_expression", "subscript_expression", "field_expression",
                     "pointer_expression", "update_expression", "assignment_expression"):
        return True
    return any(is_runtime(c) for c in node.named_children)
