"""A small model of C/CUDA value types: enough to tell FP64 from FP32 from integer work and to
size memory accesses."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from perflsp.analysis.notes import Note, NoteKind, assumed

Kind = Literal["f64", "f32", "f16", "int", "bool", "void", "struct", "unknown"]


@dataclass(frozen=True, slots=True)
class CType:
    kind: Kind
    size_bytes: int  # of one scalar (vectors: of the whole vector)
    lanes: int = 1  # float4 -> 4
    pointer: int = 0  # pointer depth
    wide: bool = False  # 64-bit integer
    # an unsuffixed floating literal (`0.5`): a double, but neutral where the precision lints
    # read what the code means (`x * 0.5` with a float `x` is meant as float; see `exprtypes`)
    literal: bool = False

    @property
    def is_float(self) -> bool:
        return self.kind in ("f64", "f32", "f16") and self.pointer == 0

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "bool") and self.pointer == 0

    def deref(self) -> CType:
        return CType(self.kind, self.size_bytes, self.lanes, max(0, self.pointer - 1), self.wide)

    def address_of(self) -> CType:
        return CType(self.kind, self.size_bytes, self.lanes, self.pointer + 1, self.wide)

    @property
    def element(self) -> CType:
        """One lane of a vector type."""
        if self.lanes == 1:
            return self
        return CType(self.kind, self.size_bytes // self.lanes, 1, self.pointer, self.wide)

    @property
    def value_bytes(self) -> int:
        return 8 if self.pointer else self.size_bytes


F64 = CType("f64", 8)
F64_LITERAL = CType("f64", 8, literal=True)  # `0.5`: double as written
F32 = CType("f32", 4)
F16 = CType("f16", 2)
INT = CType("int", 4)
LONG = CType("int", 8, wide=True)
CHAR = CType("int", 1)
SHORT = CType("int", 2)
BOOL = CType("bool", 1)
VOID = CType("void", 0)
UNKNOWN = CType("unknown", 4)

_SCALARS: dict[str, CType] = {
    "double": F64, "float": F32, "half": F16, "__half": F16, "__nv_bfloat16": F16, "nv_bfloat16": F16,
    "bf16": F16, "half_t": F16,
    "int": INT, "unsigned": INT, "signed": INT, "int32_t": INT, "uint32_t": INT, "uint": INT,
    "unsigned int": INT, "signed int": INT, "u32": INT, "i32": INT,
    "long": LONG, "unsigned long": LONG, "long long": LONG, "unsigned long long": LONG, "int64_t": LONG,
    "uint64_t": LONG, "size_t": LONG, "ssize_t": LONG, "ptrdiff_t": LONG, "long int": LONG,
    "long long int": LONG, "unsigned long long int": LONG, "u64": LONG, "i64": LONG, "intptr_t": LONG,
    "uintptr_t": LONG, "ulong": LONG, "longlong": LONG,
    "char": CHAR, "signed char": CHAR, "unsigned char": CHAR, "int8_t": CHAR, "uint8_t": CHAR, "uchar": CHAR,
    "u8": CHAR, "i8": CHAR, "char8_t": CHAR,
    "short": SHORT, "unsigned short": SHORT, "int16_t": SHORT, "uint16_t": SHORT, "ushort": SHORT,
    "short int": SHORT, "unsigned short int": SHORT,
    "long double": F64,  # (wider on the host; no GPU computes it wider than double)
    "bool": BOOL, "_Bool": BOOL, "void": VOID,
}
_VECTOR = re.compile(r"^(u?char|u?short|u?int|u?long|u?longlong|float|double|half|__half|__nv_bfloat16)([1-4])$")
_VECTOR_BASE = {"char": CHAR, "uchar": CHAR, "short": SHORT, "ushort": SHORT, "int": INT, "uint": INT,
                "long": LONG, "ulong": LONG, "longlong": LONG, "ulonglong": LONG, "float": F32, "double": F64,
                "half": F16, "__half": F16, "__nv_bfloat16": F16}
_QUALIFIERS = {"const", "volatile", "static", "__restrict__", "__restrict", "restrict", "register", "extern",
               "__shared__", "__constant__", "__device__", "__managed__", "constexpr", "inline", "struct",
               "typename", "class", "mutable", "__forceinline__", "__inline__", "thread_local"}


def parse_type(text: str, aliases: Mapping[str, CType] | None = None, guess: bool = True) -> CType:
    """Classify a type as written (`const float *__restrict__`, `double2`, `T`, `uint8_t[16]`).
    `guess`: read an unresolved name like `real_t` as the float type it most likely stands for
    (`guessed_float_type`); without it such a name is a struct (unknown)."""
    pointer = text.count("*") + text.count("[")
    words = [w for w in re.findall(r"[A-Za-z_]\w*(?:::\w+)*", text) if w not in _QUALIFIERS]
    outer = _TEMPLATE_ARGUMENTS.sub(" ", text) if "<" in text else text
    if outer is not text and not re.search(r"\bcomplex\b", outer):
        # `Accessor<scalar_t, 4>` is the accessor, whatever `scalar_t` stands for: aliases and
        # guesses apply to the outer name only; of its arguments, only plain scalars are read
        outer_words = [w for w in re.findall(r"[A-Za-z_]\w*(?:::\w+)*", outer) if w not in _QUALIFIERS]
        base = _classify_words(outer_words, aliases or {}, guess)
        if base.kind == "struct":
            base = _classify_words(words, {}, guess=False)
    else:
        base = _classify_words(words, aliases or {}, guess)
    if pointer:
        return CType(base.kind, base.size_bytes, base.lanes, base.pointer + pointer, base.wide)
    return base


_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>]*(?:<[^<>]*(?:<[^<>]*>[^<>]*)*>[^<>]*)*>")


def _classify_words(words: list[str], aliases: Mapping[str, CType], guess: bool = True) -> CType:
    if not words:
        return UNKNOWN
    joined = " ".join(words)
    if joined in _SCALARS:
        return _SCALARS[joined]
    for word in words:
        short = word.split("::")[-1]
        if word in aliases:
            return aliases[word]
        if short in aliases:
            return aliases[short]
        if short in _SCALARS:
            # `unsigned long long` already handled; here `std::size_t`, `long` etc.
            if short in ("unsigned", "signed") and len(words) > 1:
                continue
            return _SCALARS[short]
        m = _VECTOR.match(short)
        if m:
            base = _VECTOR_BASE[m.group(1)]
            lanes = int(m.group(2))
            return CType(base.kind, base.size_bytes * lanes, lanes, 0, base.wide)
        if short in ("half2", "__half2", "__nv_bfloat162", "nv_bfloat162"):
            return CType("f16", 4, 2)
        if short in ("cuComplex", "cuFloatComplex"):
            return CType("f32", 8, 2)
        if short in ("cuDoubleComplex",):
            return CType("f64", 16, 2)
        if short in ("complex",) and "double" in words:
            return CType("f64", 16, 2)
    if "unsigned" in words or "signed" in words:
        return INT
    if len(words) == 1 and guess:
        guessed = guessed_float_type(words[0].split("::")[-1])
        if guessed is not None:
            return guessed
    return CType("struct", 4) if words else UNKNOWN


# Names of floating-point element types whose definition is not visible (a header that was not
# found): `Real_type`, `real_t`, `REAL`, `dfloat`, `real8`, `FP`. The engine states the guess as
# an assumption (see `guessed_type_notes`) rather than count no floating-point work at all.
_FLOAT_NAME = re.compile(r"^(?P<prefix>[dDsS]?)(?P<word>real|float|double|fp)(?:_?(?:t|type|T))?(?P<bits>4|8|32|64)?(?:_?(?:t|type))?$",
                         re.IGNORECASE)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)

_BUILTIN_VECTORS = frozenset({"half2", "__half2", "__nv_bfloat162", "nv_bfloat162", "cuComplex", "cuFloatComplex",
                              "cuDoubleComplex"})


def guessed_float_type(name: str) -> CType | None:
    """The element type an unresolved type name most likely stands for, or None: names with
    `double` or `real` (or a `d` prefix, an 8/64 suffix) read as double, names with `float` or
    `fp` (or an `s` prefix, a 4/32 suffix) as float. (`scalar_t` is left alone: its meaning
    varies too much between code bases.)"""
    m = _FLOAT_NAME.match(name)
    if m is None or name in ("float", "double") or _VECTOR.match(name) or name in _BUILTIN_VECTORS:
        return None  # CUDA's built-in vector types (float4, double2, half2, ...) are known types
    word = m.group("word").lower()
    bits = m.group("bits")
    if bits in ("8", "64") or m.group("prefix").lower() == "d":
        return F64
    if bits in ("4", "32") or m.group("prefix").lower() == "s":
        return F32
    return F64 if word in ("double", "real") else F32


def guessed_type_notes(text: str, aliases: dict[str, CType]) -> list[Note]:
    """Assumptions for the unresolved floating-point type names that `text` uses as types (its
    comments aside: `// the real root` names no type)."""
    notes = []
    code = _COMMENT.sub(" ", text)
    for name in sorted(set(re.findall(r"\b([A-Za-z_]\w*)\s*(?:[*&]|\s[A-Za-z_(]|>)", code))):
        if name in aliases or name in _SCALARS:
            continue
        guessed = guessed_float_type(name)
        if guessed is not None:
            kind = "double" if guessed.kind == "f64" else "float"
            notes.append(assumed(NoteKind.GUESSED_TYPE, f"type `{name}` is not defined in any source or header found: "
                                 f"assumed {kind} (from its name)", subject=name))
    return notes


def common_type(a: CType, b: CType) -> CType:
    """The usual arithmetic conversions, simplified."""
    if a.pointer:
        return a
    if b.pointer:
        return b
    for kind, scalar in (("f64", F64), ("f32", F32), ("f16", F16)):
        if a.kind == kind or b.kind == kind:
            if a.lanes > 1 and a.kind == kind:
                return a
            if b.lanes > 1 and b.kind == kind:
                return b
            return scalar
    if a.kind == "unknown" and b.kind == "unknown":
        return UNKNOWN
    if a.kind == "unknown":
        return b if b.kind != "struct" else UNKNOWN
    if b.kind == "unknown":
        return a if a.kind != "struct" else UNKNOWN
    if a.wide or b.wide:
        return LONG
    if a.kind == "struct" or b.kind == "struct":
        return UNKNOWN
    return INT
