"""Constant folding of C/C++ expressions as text: literals, `#define`s, constants, `dim3`.

Launch configurations, clause arguments and loop bounds are short expressions; folding their
text with a small Pratt parser treats every source of text (tree nodes, macro bodies, pragma
arguments) the same way. Anything not foldable raises `NotConstant` with the reason, which
callers surface as "unknown: depends on `n`".
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from perflsp.kernels.text import split_top_level

Number = int | float
Value = Number | tuple[int, int, int]


class NotConstant(Exception):
    """The expression depends on something that is not a compile-time constant here."""


_READS = threading.local()
NO_ARGUMENTS_NOTE = ("program arguments not given: the host code's values for a run without arguments "
                     "(its defaults) assumed")


def assumed_reads() -> int:
    """How many folds on this thread so far read the program's arguments where they are only
    assumed (a run without arguments, `ConstEnv.argv_assumed`): compare before and after."""
    return getattr(_READS, "count", 0)


def assumed_notes(since: int) -> list[str]:
    """`NO_ARGUMENTS_NOTE` when a fold read assumed program arguments after `since` (an
    `assumed_reads()`), else nothing: the assumption an analysis states."""
    return [NO_ARGUMENTS_NOTE] if assumed_reads() != since else []


def note_assumed_read() -> None:
    _READS.count = assumed_reads() + 1


class ReadsApart:
    """`with ReadsApart() as reads:` folds whose reads of assumed program arguments are not
    counted for the analysis running (they decide what a name holds, and that name carries the
    assumption instead): `reads.seen` says whether there were any."""

    __slots__ = ("_before", "seen")

    def __enter__(self) -> ReadsApart:
        self._before = assumed_reads()
        self.seen = False
        return self

    def __exit__(self, *exc: object) -> None:
        self.seen = assumed_reads() != self._before
        _READS.count = self._before


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\\\n)
  | (?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|(?:\d[\d']*\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))[uUlLfF]*)
  | (?P<id>[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>&|^!~?:,.{}\[\]])
  | (?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
    """,
    re.VERBOSE,
)

# Type names that may appear in casts and sizeof; sizes are those of the CUDA/LP64 ABI.
TYPE_SIZES_BYTES: dict[str, int] = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2,
    "__nv_bfloat16": 2, "half2": 4, "__half2": 4,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4,
    "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8,
    "uint64_t": 8, "size_t": 8, "ssize_t": 8, "ptrdiff_t": 8, "double": 8, "dim3": 12,
    "__nv_bfloat162": 4,
    # <sys/types.h>'s short names (CUDA's vector headers use them too) and pointer-sized integers
    "uchar": 1, "ushort": 2, "uint": 4, "ulong": 8, "u_char": 1, "u_short": 2, "u_int": 4, "u_long": 8,
    "longlong": 8, "ulonglong": 8, "intptr_t": 8, "uintptr_t": 8,
}
# CUDA's vector types, N lanes of their element (`char3` 3 B, `long4` 32 B)
_VECTOR_ELEMENTS = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "long": 8, "ulong": 8,
                    "longlong": 8, "ulonglong": 8, "float": 4, "double": 8}
for _base, _size in _VECTOR_ELEMENTS.items():
    for _lanes in (1, 2, 3, 4):
        TYPE_SIZES_BYTES[f"{_base}{_lanes}"] = _size * _lanes
_INT_TYPES = {"char", "short", "int", "long", "unsigned", "signed", "size_t", "int8_t", "uint8_t",
              "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "bool", "ssize_t",
              "ptrdiff_t", "unsigned int", "unsigned long", "long long", "unsigned long long",
              "signed char", "unsigned char", "unsigned short", "uchar", "ushort", "uint", "ulong", "u_char",
              "u_short", "u_int", "u_long", "longlong", "ulonglong", "intptr_t", "uintptr_t"}
_TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "long", "short", "int", "char", "float",
               "double", "bool", "size_t"} | set(TYPE_SIZES_BYTES)


@dataclass
class ConstEnv:
    """Names that fold: macros (text), constants (text or value), `dim3` variables (text).

    `lookup` resolves lazily and memoises, with a guard against self-referential macros.
    `unknown` names map to the reason they are not constant (e.g. "reassigned in a loop").
    """

    macros: dict[str, str] = field(default_factory=dict)
    function_macros: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # name -> (params, body)
    constants: dict[str, str | Value] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    parent: ConstEnv | None = None
    argv: tuple[str, ...] | None = None  # the program's arguments, argv[0] included, when known
    argv_assumed: bool = False  # `argv` is the assumption of a run without arguments
    # names whose value rests on that assumption (set where a branch on `argc` was folded)
    assumed: set[str] = field(default_factory=set)
    type_aliases: dict[str, str] = field(default_factory=dict)  # `typedef double Real_t;` in headers
    headers: tuple[Path, ...] = ()  # local headers the translation unit includes (paths), in include order
    _memo: dict[str, Value] = field(default_factory=dict, repr=False)
    _memo_assumed: set[str] = field(default_factory=set, repr=False)  # memoised from assumed arguments
    _active: set[str] = field(default_factory=set, repr=False)
    # functions of one `return` of an expression over their value parameters (`iDivUp`): name ->
    # (parameters, expression text), folded in this environment where they are called
    pure_functions: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    # the host helpers of the file run on known arguments (`helper_runs.HelperCalls`): a call
    # no other rule folds, `getLevels(n)` computing a log2 in a loop, is run with them
    helpers: Callable[[str, list[str], ConstEnv, tuple[str, ...]], Value] | None = field(default=None, repr=False, compare=False)
    # Memos of what is derived from this environment (its bindings do not change once built):
    # macro bodies that fold to numbers (`preprocess`), the `_Pragma` macros (`omp`), and the
    # launch-argument texts folded in it (`launches`).
    numeric_bodies: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)
    pragma_macros: dict[str, bool] | None = field(default=None, repr=False, compare=False)
    launch_folds: dict[str, tuple[Value | None, str | None]] = field(default_factory=dict, repr=False, compare=False)
    # the bytes of a type the source defines (a struct's layout: `analysis.struct_layout`, which
    # the analysis sets here), None for one it does not lay out
    type_sizes: Callable[[str], int | None] | None = field(default=None, repr=False, compare=False)

    def all_macros(self) -> dict[str, str]:
        """Macros of this environment and its parents (the nearest definition wins)."""
        merged = dict(self.parent.all_macros()) if self.parent is not None else {}
        merged.update(self.macros)
        return merged

    def all_function_macros(self) -> dict[str, tuple[tuple[str, ...], str]]:
        merged = dict(self.parent.all_function_macros()) if self.parent is not None else {}
        merged.update(self.function_macros)
        return merged

    def chain(self) -> Iterator[ConstEnv]:
        """This environment, then each parent outwards (where the nearest definition is found)."""
        env: ConstEnv | None = self
        while env is not None:
            yield env
            env = env.parent

    def function_macro(self, name: str) -> tuple[tuple[str, ...], str] | None:
        """The function-like macro `name` (its parameters and body), the nearest definition."""
        return next((env.function_macros[name] for env in self.chain() if name in env.function_macros), None)

    def type_alias(self, name: str) -> str | None:
        """The type `name` stands for (`typedef double Real_t;`), the nearest definition."""
        return next((env.type_aliases[name] for env in self.chain() if name in env.type_aliases), None)

    def pure_function(self, name: str) -> tuple[tuple[str, ...], str, ConstEnv] | None:
        """The pure function `name` (its parameters and expression) and the environment that
        defines it, the nearest definition."""
        env = next((env for env in self.chain() if name in env.pure_functions), None)
        return (*env.pure_functions[name], env) if env is not None else None

    def child(self) -> ConstEnv:
        return ConstEnv(parent=self)

    def program_arguments(self) -> tuple[str, ...] | None:
        return next((env.argv for env in self.chain() if env.argv is not None), None)

    def binds(self, name: str) -> bool:
        """Whether this environment or a parent says something of `name` (known or unknown)."""
        return any(name in env.constants or name in env.unknown or name in env._memo for env in self.chain())

    def lookup(self, name: str) -> Value:
        if name in self._memo:
            if name in self._memo_assumed:
                note_assumed_read()
            return self._memo[name]
        if name in self.unknown:
            raise NotConstant(f"`{name}` {self.unknown[name]}")
        source = self.constants.get(name)
        if source is None:
            source = self.macros.get(name)
        if source is None:
            if self.parent is not None:
                return self.parent.lookup(name)
            raise NotConstant(f"depends on `{name}`")
        before = assumed_reads()
        if name in self.assumed:
            note_assumed_read()
        if not isinstance(source, str) or isinstance(source, _StringValue):
            return cast(Value, source)  # (a string bound as such, `optarg`: not a text to fold)
        if source.startswith("{"):
            raise NotConstant(f"`{name}` is an array")
        if name in self._active:
            raise NotConstant(f"`{name}` is defined in terms of itself")
        self._active.add(name)
        try:
            value = evaluate(source, self, strings=True)  # (`c = token;` copies a string)
        except NotConstant as exc:
            reason = str(exc)
            raise NotConstant(reason if name in reason else f"depends on `{name}` ({reason})") from None
        finally:
            self._active.discard(name)
        self._memo[name] = value
        if assumed_reads() != before:
            self._memo_assumed.add(name)
        return value

    def element(self, name: str, index: Value) -> Value:
        """`name[index]` of a constant array (`const int sizes[] = {64, 128};`), folded where
        the array is defined."""
        env: ConstEnv | None = self
        while env is not None:
            if name in env.unknown:
                raise NotConstant(f"`{name}` {env.unknown[name]}")
            source = env.constants.get(name, env.macros.get(name))
            if isinstance(source, _StringValue):
                return _character(source, index)  # (a character of a string argument)
            if source is not None:
                if not isinstance(source, str) or not source.startswith("{"):
                    raise NotConstant(f"`{name}` is not an array")
                items = split_top_level(source[1:-1])
                if not isinstance(index, int) or not 0 <= index < len(items) or items[index].startswith("{"):
                    raise NotConstant(f"`{name}[{index}]` is not a known element")
                if name in env.assumed:
                    note_assumed_read()
                return evaluate(items[index], env)
            env = env.parent
        raise NotConstant(f"depends on `{name}`")

    def arguments_assumed(self) -> bool:
        """Whether the program's arguments here are the assumption of a run without any."""
        return next((env.argv_assumed for env in self.chain() if env.argv is not None), False)


def evaluate(text: str, env: ConstEnv | Mapping[str, Value] | None = None, strings: bool = False) -> Value:
    """Fold `text` to a number or a dim3 triple (with `strings`, also a known string: a
    variable's value on its way into `atoi()`), or raise NotConstant."""
    if env is None:
        env = ConstEnv()
    elif not isinstance(env, ConstEnv):
        env = ConstEnv(constants=dict(env))
    if "->" in text:  # `this->n` in a method reads the member `n` (`objects.member_env` binds it); `p->n`, the path `p.n`
        text = _ARROW.sub(".", _THIS_MEMBER.sub("", text))
    tokens = _tokenize(text)
    if not tokens:
        raise NotConstant("empty expression")
    parser = _Parser(tokens, env)
    value = parser.expression()
    if parser.pos != len(tokens):
        raise NotConstant(f"cannot fold `{text.strip()}`")
    if isinstance(value, str) and not (strings and isinstance(value, _StringValue)):
        raise NotConstant(f"`{text.strip()}` is a string")
    return value


_THIS_MEMBER = re.compile(r"\bthis\s*->\s*(?=[A-Za-z_])")
_ARROW = re.compile(r"(?<=\w)\s*->\s*(?=[A-Za-z_])")


def try_evaluate(text: str, env: ConstEnv | None = None) -> tuple[Value | None, str | None]:
    """(value, None) when foldable, else (None, reason)."""
    if env is not None and "(" in text and set(re.findall(r"[A-Za-z_]\w*", text)) & env.all_function_macros().keys():
        from perflsp.kernels.preprocess import expand_macros  # (imports this module)

        text = expand_macros(text, env)  # `DIV_UP(n, 128)`: a function-like macro, not a call
    try:
        return evaluate(text, env), None
    except NotConstant as exc:
        return None, str(exc)
    except (ZeroDivisionError, OverflowError, ValueError, RecursionError):
        return None, f"cannot fold `{text.strip()}`"


def as_dim3(value: Value) -> tuple[int, int, int]:
    if isinstance(value, tuple):
        return value
    return (int(value), 1, 1)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise NotConstant(f"unexpected `{text[pos]}` in `{text.strip()}`")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind == "ws":
            continue
        tokens.append((kind, re.sub(r"\s+", "", m.group()) if kind == "id" else m.group()))
    return tokens


def _number(literal: str) -> Number:
    lit = literal.replace("'", "")
    low = lit.lower()
    if low.startswith("0x"):
        return int(low.rstrip("ul"), 16)
    if low.startswith("0b"):
        return int(low[2:].rstrip("ul"), 2)
    stripped = low.rstrip("ulf") if not low.startswith(("0x",)) else low
    if any(c in low for c in ".e") or low.endswith("f"):
        return float(low.rstrip("lf") if not low.endswith("e") else low)
    if len(stripped) > 1 and stripped.startswith("0"):
        return int(stripped, 8)
    return int(stripped)


def _c_div(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return a - _c_div(a, b) * b
    return math.fmod(a, b)


_BINARY: dict[str, tuple[int, Callable[[Number, Number], Number]]] = {
    "||": (1, lambda a, b: int(bool(a) or bool(b))),
    "&&": (2, lambda a, b: int(bool(a) and bool(b))),
    "|": (3, lambda a, b: int(a) | int(b)),
    "^": (4, lambda a, b: int(a) ^ int(b)),
    "&": (5, lambda a, b: int(a) & int(b)),
    "==": (6, lambda a, b: int(a == b)),
    "!=": (6, lambda a, b: int(a != b)),
    "<": (7, lambda a, b: int(a < b)),
    ">": (7, lambda a, b: int(a > b)),
    "<=": (7, lambda a, b: int(a <= b)),
    ">=": (7, lambda a, b: int(a >= b)),
    "<<": (8, lambda a, b: int(a) << int(b)),
    ">>": (8, lambda a, b: int(a) >> int(b)),
    "+": (9, lambda a, b: a + b),
    "-": (9, lambda a, b: a - b),
    "*": (10, lambda a, b: a * b),
    "/": (10, _c_div),
    "%": (10, _c_mod),
}

_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "min": min, "max": max, "std::min": min, "std::max": max, "fmin": min, "fmax": max,
    "fminf": min, "fmaxf": max, "abs": abs, "std::abs": abs, "fabs": abs,
    "ceil": math.ceil, "floor": math.floor, "ceilf": math.ceil, "floorf": math.floor,
    "sqrt": math.sqrt, "std::sqrt": math.sqrt, "pow": math.pow, "std::pow": math.pow,
    "log2": math.log2, "exp2": math.exp2,
    # the single-precision and `std::` spellings of the same functions (`(int)sqrtf(size)`)
    "sqrtf": math.sqrt, "powf": math.pow, "log2f": math.log2, "exp2f": math.exp2, "fabsf": abs,
    "std::ceil": math.ceil, "std::floor": math.floor, "std::log2": math.log2, "std::fabs": abs,
}


_MACRO_WORD = re.compile(r"[A-Za-z_]\w*")


class _StringValue(str):
    """A string argument (`argv[i]`, `"256"`) on its way into `atoi()` and friends."""


def _character(text: str, index: Value) -> Value:
    """`text[index]` as C reads a string: the character's code, 0 at its end."""
    if not isinstance(index, int) or not 0 <= index <= len(text):
        raise NotConstant(f"character {index} of a string of {len(text)}")
    return ord(text[index]) if index < len(text) else 0


def string_value(text: str) -> Value:
    """`text` as a string value a `ConstEnv` can bind (`optarg`): `atoi()` of it folds."""
    return cast(Value, _StringValue(text))


_ESCAPES = {"n": "\n", "t": "\t", "0": "\0", "\\": "\\", "'": "'", '"': '"', "r": "\r"}


def _literal(token: str) -> Value:
    """A character literal's code (`'n'` in `case 'n':`) or a string literal's text."""
    body = token[1:-1]
    if len(body) == 2 and body[0] == "\\" and body[1] in _ESCAPES:
        body = _ESCAPES[body[1]]
    if token.startswith("'"):
        if len(body) != 1:
            raise NotConstant(f"character literal {token}")
        return ord(body)
    if "\\" in body:
        raise NotConstant(f"string literal with escapes {token}")
    return cast(Value, _StringValue(body))


def _parse_int(text: str) -> int:
    m = re.match(r"\s*[-+]?(0[xX][0-9a-fA-F]+|\d+)", text)
    if not m:
        raise ValueError(text)
    return int(m.group(), 0) if m.group().strip().lstrip("+-").startswith(("0x", "0X")) else int(m.group())


def _parse_float(text: str) -> float:
    m = re.match(r"\s*[-+]?(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)", text)
    if not m:
        raise ValueError(text)
    return float(m.group())


_STRING_TO_NUMBER: dict[str, Callable[[str], Number]] = {
    name: _parse_int for name in ("atoi", "atol", "atoll", "strtol", "strtoul", "strtoll", "strtoull", "std::stoi",
                                  "std::stol", "std::stoll", "std::stoul", "std::stoull", "stoi", "stol", "stoul")
} | {name: _parse_float for name in ("atof", "strtod", "strtof", "std::stod", "std::stof", "stod", "stof")}
# `std::atoi(argv[1])` (<cstdlib>) is the C function
_STRING_TO_NUMBER |= {f"std::{name}": parse for name, parse in _STRING_TO_NUMBER.items() if "::" not in name}


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], env: ConstEnv):
        self.tokens = tokens
        self.pos = 0
        self.env = env

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def peek_text(self, offset: int = 0) -> str | None:
        tok = self.peek(offset)
        return tok[1] if tok is not None else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise NotConstant("incomplete expression")
        self.pos += 1
        return tok

    def expression(self) -> Value:
        value = self.binary(0)
        tok = self.peek()
        if tok and tok[1] == "?":
            self.take("?")
            if isinstance(value, tuple):
                raise NotConstant("a dim3 as a condition")
            # only the branch the condition chooses is folded (`argc > 1 ? atoi(argv[1]) : 4`)
            if value:
                yes = self.expression()
                self.take(":")
                self._skip_operand()
                return yes
            self._skip_operand(to_colon=True)
            self.take(":")
            return self.expression()
        return value

    def _skip_operand(self, to_colon: bool = False) -> None:
        """Pass over the branch of a `?:` that is not chosen: up to its `:` (`to_colon`), or to
        the end of the expression (a closing bracket or `,` of the enclosing one)."""
        depth = 0
        pending = 0  # nested `?` waiting for their `:`
        while (tok := self.peek()) is not None:
            text = tok[1] if tok[0] == "op" else ""
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                if depth == 0:
                    return
                depth -= 1
            elif depth == 0 and text == ",":
                return
            elif depth == 0 and text == "?":
                pending += 1
            elif depth == 0 and text == ":":
                if pending == 0:
                    if to_colon:
                        return
                    return  # (the `:` of an enclosing `?:`)
                pending -= 1
            self.pos += 1
        if to_colon:
            raise NotConstant("incomplete expression")

    def binary(self, min_prec: int) -> Value:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "op" or tok[1] not in _BINARY:
                return left
            prec, fn = _BINARY[tok[1]]
            if prec < min_prec:
                return left
            self.take()
            right = self.binary(prec + 1)
            if isinstance(left, tuple) or isinstance(right, tuple):
                raise NotConstant("arithmetic on a dim3")
            if tok[1] in ("==", "!=") and {type(left), type(right)} == {_StringValue, int} and 0 in (left, right):
                left = int(tok[1] == "!=")  # (`token == NULL`: a known string is not the null pointer)
                continue
            if isinstance(left, str) or isinstance(right, str):
                raise NotConstant("arithmetic on a string")
            left = fn(left, right)

    def unary(self) -> Value:
        tok = self.peek()
        if tok is None:
            raise NotConstant("incomplete expression")
        if tok[1] in ("-", "+", "!", "~"):
            self.take()
            operand = self.unary()
            if isinstance(operand, (tuple, str)):
                raise NotConstant("arithmetic on a dim3" if isinstance(operand, tuple) else "arithmetic on a string")
            if tok[1] == "-":
                return -operand
            if tok[1] == "!":
                return int(not operand)
            return ~int(operand) if tok[1] == "~" else operand
        if tok[1] == "(" and self._is_cast():
            type_words = self._type_in_parens()
            operand = self.unary()
            return self._cast(type_words, operand)
        return self.postfix(self.primary())

    def _is_cast(self) -> bool:
        i = 1
        saw = False
        while (tok := self.peek(i)) is not None and tok[1] != ")":
            if not ((tok[0] == "id" and tok[1] in _TYPE_WORDS) or (saw and tok[1] == "*")):
                return False  # (`(char *)"-n"`: a pointer type after its words)
            saw = True
            i += 1
        nxt = self.peek(i + 1)
        return (saw and tok is not None and nxt is not None and nxt[1] not in _BINARY.keys() - {"-", "+", "*", "&"}
                and nxt[1] not in (")", ","))

    def _type_in_parens(self) -> str:
        self.take("(")
        words = []
        while self.peek_text() not in (None, ")"):
            words.append(self.take()[1])
        self.take(")")
        return " ".join(w for w in words if w not in ("const", "volatile"))

    @staticmethod
    def _cast(type_name: str, value: Value) -> Value:
        if isinstance(value, tuple):
            raise NotConstant("cast of a dim3")
        if type_name in _INT_TYPES or type_name.split()[-1] in _INT_TYPES:
            return int(value)
        if type_name in ("float", "double"):
            return float(value)
        if type_name.endswith("*") and isinstance(value, _StringValue):
            return value  # (`(char *)"-size"`: the same string)
        raise NotConstant(f"cast to `{type_name}`")

    def primary(self) -> Value:
        kind, text = self.take()
        if kind == "num":
            return _number(text)
        if text == "(":
            value = self.expression()
            self.take(")")
            return value
        if text == "{":
            return self._dim3_args("}")
        if kind == "str":
            return _literal(text)
        if kind == "id":
            if text in ("true", "false"):
                return int(text == "true")
            if text in ("NULL", "nullptr"):
                return 0
            if text in ("sizeof",):
                return self._sizeof()
            casts = ("static_cast", "int", "unsigned", "float", "double", "size_t", "long")
            if text in casts and self.peek_text() in ("<", "("):
                return self._functional_cast(text)
            if text == "dim3":
                if self.peek_text() in ("(", "{"):
                    close = ")" if self.take()[1] == "(" else "}"
                    return self._dim3_args(close)
                raise NotConstant("dim3 without arguments")
            if self.peek_text() == "(":
                return self._call(text)
            if self.peek_text() == "<" and (types := self._template_arguments()) is not None:
                return self._call(text, types)  # (`roundUp<unsigned int>(n)`)
            if text in ("argv", "argc"):
                return self._program_argument(text)
            if self.peek_text() == "." and (member := self.peek(1)) is not None and member[0] == "id" \
                    and self.env.binds(f"{text}.{member[1]}"):
                # `p.n` where the host code set `p.n = ...;` (a struct's field, bound by its path);
                # `grid.size()`, a getter of an object whose state is known (`objects.object_paths_env`)
                self.pos += 4 if self.peek_text(2) == "(" and self.peek_text(3) == ")" else 2
                return self.env.lookup(f"{text}.{member[1]}")
            if self.peek_text() == "[":
                self.take("[")
                index = self.expression()
                self.take("]")
                if isinstance(index, tuple):
                    raise NotConstant("a dim3 as an index")
                return self.env.element(text, index)
            if "::" in text:
                # `cfg::TILE`: namespace-scope constants are known by their simple name
                try:
                    return self.env.lookup(text)
                except NotConstant:
                    return self.env.lookup(text.rsplit("::", 1)[1])
            return self.env.lookup(text)
        raise NotConstant(f"cannot fold `{text}`")

    def postfix(self, value: Value) -> Value:
        tok = self.peek()
        if tok and tok[1] == "." and isinstance(value, tuple):
            self.take(".")
            member = self.take()[1]
            if member not in ("x", "y", "z"):
                raise NotConstant(f"dim3 has no member `{member}`")
            return value["xyz".index(member)]
        return value

    def _dim3_args(self, close: str) -> tuple[int, int, int]:
        parts: list[int] = []
        if self.peek_text() == close:
            self.take(close)
            return (1, 1, 1)
        while True:
            v = self.expression()
            if isinstance(v, tuple):
                if not parts and self.peek_text() == close:
                    self.take(close)
                    return v
                raise NotConstant("nested dim3")
            parts.append(int(v))
            if self.take()[1] == close:
                break
        if len(parts) > 3:
            raise NotConstant("dim3 with more than 3 values")
        parts += [1] * (3 - len(parts))
        return (parts[0], parts[1], parts[2])

    def _args(self) -> list[Value]:
        self.take("(")
        args: list[Value] = []
        if self.peek_text() == ")":
            self.take(")")
            return args
        while True:
            args.append(self.expression())
            if self.take()[1] == ")":
                return args

    def _program_argument(self, name: str) -> Value:
        argv = self.env.program_arguments()
        if argv is None:
            raise NotConstant(f"depends on the program's arguments (`{name}`)")
        if name == "argc":
            if self.env.arguments_assumed():
                note_assumed_read()
            return len(argv)
        self.take("[")
        index = self.expression()
        self.take("]")
        if not isinstance(index, int) or not 0 <= index < len(argv):
            raise NotConstant(f"argv[{index}] is not given")
        if self.peek_text() == "[":  # `argv[i][0] == '-'`, `flag = argv[i][1]`: a character of it
            self.take("[")
            position = self.expression()
            self.take("]")
            return _character(argv[index], position)
        # only `atoi`/`atof`/`strtol` (`_call`) accept the string, and they convert it
        return cast(Value, _StringValue(argv[index]))

    def _template_arguments(self) -> tuple[str, ...] | None:
        """The types of `<unsigned int, float>(` after a function's name (consumed), or None
        (nothing consumed) where the `<` is not such a list."""
        i = 1
        types: list[str] = []
        words: list[str] = []
        while (tok := self.peek(i)) is not None:
            if tok[1] in (",", ">") and words:
                types.append(" ".join(words))
                words = []
                if tok[1] == ">":
                    break
            elif (tok[0] == "id" and tok[1] in _TYPE_WORDS) or (words and tok[1] == "*"):
                words.append(tok[1])
            else:
                return None
            i += 1
        if tok is None or self.peek_text(i + 1) != "(":
            return None
        self.pos += i + 1
        return tuple(types)

    def _call(self, name: str, types: tuple[str, ...] = ()) -> Value:
        if name in _STRING_TO_NUMBER:
            # (`strtol(s, &end, 10)`: the end pointer is an output, not folded; the base is)
            texts = self._arg_texts()
            string = _Parser(_tokenize(texts[0]), self.env).expression() if texts else None
            if not isinstance(string, _StringValue):
                raise NotConstant(f"`{name}()` of a value that is not a known string")
            base = evaluate(texts[2], self.env) if len(texts) > 2 and _STRING_TO_NUMBER[name] is _parse_int else 10
            try:
                if base not in (0, 10):
                    return int(str(string).strip(), int(base)) if isinstance(base, int) else int("?")
                return _STRING_TO_NUMBER[name](str(string))
            except ValueError:
                raise NotConstant(f"`{name}(\"{string}\")` is not a number") from None
        if name in ("strcmp", "std::strcmp"):
            # `strcmp(argv[i], "-n") == 0`: the known strings compared
            args = self._args()
            if len(args) != 2 or not all(isinstance(a, _StringValue) for a in args):
                raise NotConstant(f"`{name}()` of values that are not known strings")
            first, second = str(args[0]), str(args[1])
            return (first > second) - (first < second)
        macro = self.env.function_macro(name)
        if macro is not None:
            # `ceil(N, 16)` with `#define ceil(a,b) ((a) % (b) == 0 ? ...)` in a text being folded
            params, body = macro
            texts = self._arg_texts()
            if len(texts) != len(params) and not (params and params[-1] == "..."):
                raise NotConstant(f"`{name}` takes {len(params)} arguments")
            bound = dict(zip(params, texts))
            return evaluate(_MACRO_WORD.sub(lambda m: f"({bound[m.group()]})" if m.group() in bound else m.group(), body),
                            self.env)
        fn = _FUNCTIONS.get(name)
        pure = self.env.pure_function(name) if fn is None else None
        if pure is not None:
            params, body, defined = pure
            args = self._args()
            if len(args) != len(params):
                raise NotConstant(f"`{name}` takes {len(params)} arguments")
            return evaluate(body, ConstEnv(constants=dict(zip(params, args)), parent=defined))
        if fn is None:
            helpers = next((env.helpers for env in self.env.chain() if env.helpers is not None), None)
            if helpers is None:
                raise NotConstant(f"calls `{name}()`")
            return helpers(name, self._arg_texts(), self.env, types)
        args = self._args()
        if any(isinstance(a, tuple) for a in args):
            raise NotConstant(f"`{name}()` of a dim3")
        try:
            return fn(*args)
        except TypeError:
            raise NotConstant(f"`{name}()` with {len(args)} arguments") from None

    def _arg_texts(self) -> list[str]:
        """The arguments of a call as texts (a function-like macro's), split at top-level commas."""
        self.take("(")
        texts: list[str] = []
        current: list[str] = []
        depth = 0
        while True:
            tok = self.take()
            text = tok[1]
            if depth == 0 and text in (",", ")"):
                if current or text == ",":
                    texts.append(" ".join(current))
                current = []
                if text == ")":
                    return texts
                continue
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                depth -= 1
            current.append(text)

    def _functional_cast(self, name: str) -> Value:
        if name == "static_cast":
            self.take("<")
            words = []
            while self.peek_text() not in (None, ">"):
                words.append(self.take()[1])
            self.take(">")
            type_name = " ".join(w for w in words if w not in ("const", "volatile"))
        else:
            type_name = name
        args = self._args()
        if len(args) != 1:
            raise NotConstant("cast with several arguments")
        return self._cast(type_name, args[0])

    def _sizeof(self) -> int:
        self.take("(")
        words = []
        while self.peek_text() not in (None, ")"):
            words.append(self.take()[1])
        self.take(")")
        type_name = " ".join(w for w in words if w not in ("const", "volatile", "struct"))
        named = type_name
        seen: set[str] = set()
        while not type_name.endswith("*") and type_name not in TYPE_SIZES_BYTES and type_name not in seen:
            # `typedef double Real_t;`, `using real = float;`: the size of the aliased type
            seen.add(type_name)
            alias = self.env.type_alias(type_name) or self._type_macro(type_name)
            if alias is None:
                break
            type_name = " ".join(w for w in re.findall(r"[A-Za-z_]\w*|\*", alias) if w not in ("const", "volatile", "struct"))
            type_name = type_name.replace(" *", "*")
        if type_name.endswith("*"):
            return 8
        size = TYPE_SIZES_BYTES.get(type_name)
        if size is None:
            sizes = next((env.type_sizes for env in self.env.chain() if env.type_sizes is not None), None)
            size = sizes(type_name) if sizes is not None and re.fullmatch(r"[A-Za-z_]\w*", type_name) else None
        if size is None:
            raise NotConstant(f"sizeof({named}) is not known here")
        return size

    def _type_macro(self, name: str) -> str | None:
        """The type an object-like macro stands for (`#define REAL float`), None for a macro
        that is no type name (a number, an expression) and for a name no macro defines."""
        body = next((env.macros[name] for env in self.env.chain() if name in env.macros), None)
        if not isinstance(body, str):
            return None
        body = " ".join(body.split())
        return body if body and _TYPE_TEXT.fullmatch(body) else None


_TYPE_TEXT = re.compile(r"[A-Za-z_][\w\s]*\**")


def numbered_enumerators(items: Iterable[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """(name, value text) of an enumeration's enumerators, given (name, value text or None): one
    without a value is the one before it plus 1, the first 0, as the compiler numbers them."""
    found: list[tuple[str, str]] = []
    previous: str | None = None
    for name, value in items:
        found.append((name, value if value else (f"({previous}) + 1" if previous else "0")))
        previous = name
    return found

