"""Constant folding for the kernel walker: number literals, binary operators and math functions
of constants (as the compiler folds them), and the linear form of an index expression."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from perflsp.analysis.ctype import F16, F32, F64, INT, LONG, CType
from perflsp.analysis.linear import Linear
from perflsp.analysis.walk_values import Val


@lru_cache(maxsize=8192)
def number_literal(written: str) -> Val:
    """The value of a number literal as written (`0x1F`, `1e-3f`, `10UL`): the same few
    literals recur in every kernel, and a `Val` is never changed once made."""
    text = written.replace("'", "").lower()
    is_hex = text.startswith("0x")
    if not is_hex and ("." in text or "e" in text or text.endswith("f")):
        ctype = F32 if text.endswith("f") else F64
        try:
            value = float(text.rstrip("fl"))
        except ValueError:
            value = None
        return Val(ctype, value, Linear.constant(value), static=True)
    digits = text.rstrip("ul")
    try:
        octal = len(digits) > 1 and digits.startswith("0") and not is_hex and digits.isdigit()
        value = float(int(digits, 8)) if octal else float(int(digits, 0))
    except ValueError:
        value = None
    wide = ("l" in text[-3:] and not is_hex) or (value is not None and value > 2**31)
    return Val(LONG if wide else INT, value, Linear.constant(value), static=value is not None)


def conversion_target(name: str) -> CType:
    """The result type of a conversion intrinsic, from its name (`__int2float_rn` -> float)."""
    if "2half" in name:
        return F16
    if "2float" in name or "as_float" in name:
        return F32
    return F64 if "double" in name.split("2")[-1] else INT


def atoms_of(args: list[Val]) -> frozenset[str]:
    """The index atoms any of the values depends on."""
    return frozenset().union(*(a.lin.atoms for a in args)) if args else frozenset()


def pow2(exponent: float | None) -> float | None:
    """2**exponent for a shift amount; None when it is unknown or not a sane shift."""
    if exponent is None or not 0 <= exponent < 63:
        return None
    return float(2 ** int(exponent))


def exact_float_scale(left: Val, right: Val) -> bool:
    """One side is a float value, the other a double literal power of two."""
    for a, b in ((left, right), (right, left)):
        if a.ctype.kind == "f32" and b.ctype.kind == "f64" and b.static and b.value:
            exponent = math.log2(abs(b.value))
            if exponent.is_integer():
                return True
    return False


def fold_binary(op: str, a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    fold = _FOLDABLE_BINARY.get(op)
    if fold is None:
        return None
    try:
        return fold(a, b)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None


def _fold_division(a: float, b: float) -> float:
    """C division: integer operands truncate."""
    return a / b if not (float(a).is_integer() and float(b).is_integer()) else float(int(a / b))


# binary operators evaluated at compile time when both operands are constants
_FOLDABLE_BINARY: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _fold_division,
    "%": lambda a, b: float(math.fmod(a, b)),
    "<<": lambda a, b: float(int(a) << int(b)),
    ">>": lambda a, b: float(int(a) >> int(b)),
    "&": lambda a, b: float(int(a) & int(b)),
    "|": lambda a, b: float(int(a) | int(b)),
    "^": lambda a, b: float(int(a) ^ int(b)),
    "<": lambda a, b: float(a < b),
    ">": lambda a, b: float(a > b),
    "<=": lambda a, b: float(a <= b),
    ">=": lambda a, b: float(a >= b),
    "==": lambda a, b: float(a == b),
    "!=": lambda a, b: float(a != b),
    "&&": lambda a, b: float(bool(a) and bool(b)),
    "||": lambda a, b: float(bool(a) or bool(b)),
}


def fold_math(name: str, args: list[Val]) -> float | None:
    values = [a.value for a in args if a.value is not None]
    if not values or len(values) != len(args):
        return None
    base = name.rstrip("f") if name.endswith("f") and name not in ("erf",) else name
    fn = _FOLDABLE_MATH.get(base)
    try:
        return float(fn(*values)) if fn is not None else None
    except (ValueError, OverflowError, TypeError):
        return None


# math functions evaluated at compile time when every operand is a constant
_FOLDABLE_MATH: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "ceil": math.ceil,
    "floor": math.floor, "fabs": abs, "pow": math.pow, "log10": math.log10, "exp2": lambda x: 2.0 ** x,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "tanh": math.tanh, "atan": math.atan,
    "asin": math.asin, "acos": math.acos, "atan2": math.atan2, "cbrt": lambda x: math.copysign(abs(x) ** (1 / 3), x),
    "rsqrt": lambda x: 1.0 / math.sqrt(x), "erf": math.erf, "fmin": min, "fmax": max,
    "hypot": math.hypot, "fmod": math.fmod,
}


def combine_linear(op: str, a: Linear, b: Linear, av: float | None, bv: float | None) -> Linear:
    if op == "+":
        return a.add(b)
    if op == "-":
        return a.add(b, -1.0)
    if op == "*":
        return a.mul(b)
    if op == "<<" and bv is not None and 0 <= bv < 63:
        return a.scale(float(2 ** int(bv)))
    if op in ("/", ">>") and bv is not None and bv != 0 and (op == "/" or 0 <= bv < 63):
        # integer division of an index by a constant: still walks the same range, coarser
        factor = bv if op == "/" else float(2 ** int(bv))
        if not a.atoms:
            return Linear.constant(None if av is None else av / factor)
        return Linear(tuple((atom, c / factor) for atom, c in a.coeffs), a.const / factor, a.const_known, a.nonlinear)
    if op in ("%", "&") and a.atoms:
        return a.opaque()
    return Linear(const_known=False, nonlinear=a.atoms | b.atoms)


def int_literal(text: str) -> float | None:
    try:
        return float(int(text.rstrip("uUlL"), 0))
    except ValueError:
        return None


# <math.h> and <float.h> constants (values and the type they have in C)
LIBRARY_CONSTANTS: dict[str, tuple[float, CType]] = {
    "M_PI": (math.pi, F64), "M_PI_2": (math.pi / 2, F64), "M_PI_4": (math.pi / 4, F64),
    "M_1_PI": (1 / math.pi, F64), "M_2_PI": (2 / math.pi, F64), "M_2_SQRTPI": (2 / math.sqrt(math.pi), F64),
    "M_SQRT2": (math.sqrt(2), F64), "M_SQRT1_2": (math.sqrt(0.5), F64), "M_E": (math.e, F64),
    "M_LN2": (math.log(2), F64), "M_LN10": (math.log(10), F64), "M_LOG2E": (math.log2(math.e), F64),
    "M_LOG10E": (math.log10(math.e), F64),
    "FLT_MAX": (3.4028234663852886e38, F32), "FLT_MIN": (1.1754943508222875e-38, F32),
    "FLT_EPSILON": (1.1920928955078125e-07, F32), "DBL_MAX": (1.7976931348623157e308, F64),
    "DBL_MIN": (2.2250738585072014e-308, F64), "DBL_EPSILON": (2.220446049250313e-16, F64),
    "INFINITY": (math.inf, F32), "HUGE_VALF": (math.inf, F32), "HUGE_VAL": (math.inf, F64), "NAN": (math.nan, F32),
}
