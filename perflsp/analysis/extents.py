"""How large the arrays a kernel reads and writes are, from the host code that allocates them.

A footprint can never exceed its array: `cudaMalloc(&d_a, n * sizeof(float))`,
`a = (float *)malloc(...)`, `new float[n]`, `std::vector<float> a(n)`, `float a[N][M]` and
OpenMP `map(to: a[0:n])` sections all say so. Memory from `cudaHostAlloc`/`cudaMallocHost`
(mapped into the device) lives in host memory: the GPU reads it over the bus, not from DRAM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.omp import parse_clauses, split_directive

if TYPE_CHECKING:
    from perflsp.analysis.engine import AnalysisUnit

DEVICE_ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "hipMalloc", "hipMallocManaged")
HOST_MAPPED_ALLOCATORS = ("cudaHostAlloc", "cudaMallocHost", "hipHostMalloc")
_PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+omp[ \t]+((?:[^\n\\]|\\\r?\n)*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Extent:
    bytes: float | None  # None: size not known
    host_memory: bool = False  # mapped host memory: not DRAM traffic
    source: str = ""


def leading_name(expression: str) -> str | None:
    """The array variable an argument expression refers to: `d_a`, `d_a + off`, `&x[0]`,
    `(float *)buf`, `v.data()`, `thrust::raw_pointer_cast(v.data())`."""
    text = re.sub(r"\((?:const\s+)?[\w:\s]+\*+\s*\)", " ", expression)  # C casts
    text = re.sub(r"\b(?:thrust::raw_pointer_cast|reinterpret_cast<[^>]*>|static_cast<[^>]*>)\s*\(", "(", text)
    m = re.search(r"[A-Za-z_]\w*", text.replace("&", " "))
    return m.group() if m else None


def cuda_extent(unit: AnalysisUnit, name: str, depth: int = 0) -> Extent:
    """Size of the allocation behind host variable `name` in this file."""
    cache: dict[str, Extent] = unit.__dict__.setdefault("_extent_cache", {})
    if name in cache:
        return cache[name]
    cache[name] = Extent(None)
    result = _find_extent(unit, name, depth)
    cache[name] = result
    return result


def _find_extent(unit: AnalysisUnit, name: str, depth: int) -> Extent:
    target = re.compile(r"&\s*\(?\s*" + re.escape(name) + r"\b")
    for allocator in DEVICE_ALLOCATORS + HOST_MAPPED_ALLOCATORS:
        for call in unit._calls_to(allocator):
            args = _args(unit, call)
            if len(args) >= 2 and target.search(unit.ctx.text(args[0])):
                size = _fold(unit, args[1].start_byte, unit.ctx.text(args[1]))
                return Extent(size, allocator in HOST_MAPPED_ALLOCATORS, f"{allocator}({unit.ctx.text(args[1])})")
    for call in unit._calls_to("cudaHostGetDevicePointer"):
        args = _args(unit, call)
        if len(args) >= 2 and target.search(unit.ctx.text(args[0])):
            host = leading_name(unit.ctx.text(args[1]))
            inner = cuda_extent(unit, host, depth + 1) if host and depth < 3 else Extent(None)
            return Extent(inner.bytes, True, "cudaHostGetDevicePointer")
    return host_extent(unit, name)


def host_extent(unit: AnalysisUnit, name: str) -> Extent:
    """`name = malloc(...)`, `new T[n]`, `std::vector<T> name(n)`, `T name[N]`."""
    text = unit.data.decode("latin-1")  # one character per byte: match offsets are byte offsets
    escaped = re.escape(name)
    m = re.search(escaped + r"\s*=\s*(?:\([^()]*\)\s*)?(?:std::)?(malloc|calloc|aligned_alloc)\s*\(([^;]*)\)\s*;", text)
    if m:
        args = _split_args(m.group(2))
        if m.group(1) == "calloc" and len(args) == 2:
            size = _fold(unit, m.start(), f"({args[0]}) * ({args[1]})")
        else:
            size = _fold(unit, m.start(), args[-1]) if args else None
        return Extent(size, False, m.group(1))
    m = re.search(escaped + r"\s*=\s*new\s+([\w:<> ]+?)\s*\[([^;]+)\]\s*(?:\[([^;\]]+)\])?\s*;", text)
    if m:
        count = _fold(unit, m.start(), m.group(2))
        inner = _fold(unit, m.start(), m.group(3)) if m.group(3) else 1.0
        elem = _sizeof(unit, m.group(1))
        return Extent(count * inner * elem if count is not None and inner is not None and elem else None, False, "new[]")
    m = re.search(r"vector\s*<\s*([\w:<> ]+?)\s*>\s*" + escaped + r"\s*[({]([^;]*?)[)}]\s*;", text)
    if m:
        args = _split_args(m.group(2))
        count = _fold(unit, m.start(), args[0]) if args else None
        elem = _sizeof(unit, m.group(1))
        return Extent(count * elem if count is not None and elem else None, False, "std::vector")
    m = re.search(r"\b([A-Za-z_][\w:]*)\s+" + escaped + r"\s*((?:\[[^\]]+\]\s*)+)\s*[;={]", text)
    if m:
        dims = re.findall(r"\[([^\]]+)\]", m.group(2))
        total = _sizeof(unit, m.group(1))
        for d in dims:
            value = _fold(unit, m.start(), d)
            total = total * value if total is not None and value is not None else None
        return Extent(total, False, "array")
    return Extent(None)


def omp_extent(unit: AnalysisUnit, name: str, elem_bytes: float) -> Extent:
    """The largest `map` section of `name` in any OpenMP pragma of the file."""
    best: float | None = None
    for start, clauses in _map_clauses(unit):
        for clause in clauses:
            for item in clause.items:
                if item.variable != name or not item.sections:
                    continue
                total = elem_bytes
                for lower, length in item.sections:
                    value = _fold(unit, start, length) if length else None
                    total = total * value if total is not None and value is not None else None
                if total is not None:
                    best = max(best or 0.0, total)
    if best is not None:
        return Extent(best, False, "map clause")
    return host_extent(unit, name)


def _map_clauses(unit: AnalysisUnit) -> list[tuple[int, list]]:
    cached = unit.__dict__.get("_map_clauses")
    if cached is None:
        cached = []
        for m in _PRAGMA.finditer(unit.data):
            text = re.sub(r"\\\r?\n", " ", m.group(1).decode("utf-8", errors="replace"))
            words, rest = split_directive("omp " + text)
            clauses = [c for c in parse_clauses(rest) if c.name in ("map", "to", "from")]
            if clauses:
                cached.append((m.start(), clauses))
        unit.__dict__["_map_clauses"] = cached
    return cached


def _args(unit: AnalysisUnit, call) -> list:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _split_args(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _fold(unit: AnalysisUnit, byte_offset: int, text: str) -> float | None:
    value, _ = try_evaluate(text, unit.env_at(byte_offset))
    if isinstance(value, (int, float)) and value >= 0:
        return float(value)
    return None


def _sizeof(unit: AnalysisUnit, type_text: str) -> float | None:
    from perflsp.analysis.ctype import parse_type

    ctype = parse_type(type_text, unit.type_aliases)
    if ctype.pointer:
        return 8.0
    if ctype.kind in ("unknown", "struct", "void"):
        return None
    return float(ctype.size_bytes)
