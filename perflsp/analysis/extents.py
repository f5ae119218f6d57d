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

from tree_sitter import Node

from perflsp.analysis.ctype import parse_type
from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.definitions import parameter_names
from perflsp.kernels.text import split_top_level

if TYPE_CHECKING:
    from perflsp.analysis.unit import AnalysisUnit

DEVICE_ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "hipMalloc", "hipMallocManaged")
HOST_MAPPED_ALLOCATORS = ("cudaHostAlloc", "cudaMallocHost", "hipHostMalloc")


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
    m = re.search(r"[A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*(?!\w|\s*\())*", text.replace("&", " "))
    # a member (`model->m_memory`, `s.ptr`) is its own allocation, not its struct's
    return re.sub(r"\s+", "", m.group()) if m else None


def cuda_extent(unit: AnalysisUnit, name: str, depth: int = 0) -> Extent:
    """Size of the allocation behind host variable `name` in this file."""
    cache = unit.extents
    if name in cache:
        return cache[name]
    cache[name] = Extent(None)
    result = _find_extent(unit, name, depth)
    cache[name] = result
    return result


def _find_extent(unit: AnalysisUnit, name: str, depth: int) -> Extent:
    # `&name` (a member path: `&model->m_memory`), not a member of it (`&model->inputs` for `model`)
    path = r"\s*(?:->|\.)\s*".join(re.escape(part) for part in re.split(r"->|\.", name))
    target = re.compile(r"&\s*\(?\s*" + path + r"\b(?!\s*(?:->|\.))")
    model = unit.model
    for allocator in DEVICE_ALLOCATORS + HOST_MAPPED_ALLOCATORS:
        for call in model.calls_to(allocator):
            args = _args(call)
            if len(args) >= 2 and target.search(unit.ctx.text(args[0])):
                size = _fold(unit, args[1].start_byte, unit.ctx.text(args[1]))
                return Extent(size, allocator in HOST_MAPPED_ALLOCATORS, f"{allocator}({unit.ctx.text(args[1])})")
    for call in model.calls_to("cudaHostGetDevicePointer"):
        args = _args(call)
        if len(args) >= 2 and target.search(unit.ctx.text(args[0])):
            host = leading_name(unit.ctx.text(args[1]))
            inner = cuda_extent(unit, host, depth + 1) if host and depth < 3 else Extent(None)
            return Extent(inner.bytes, True, "cudaHostGetDevicePointer")
    return host_extent(unit, name)


COPIES = ("cudaMemcpy", "cudaMemcpyAsync", "hipMemcpy", "hipMemcpyAsync")


def copied_from(unit: AnalysisUnit, device: str) -> str | None:
    """The host array the file copies into device array `device` (`cudaMemcpy(d_a, a, ...)`,
    or through a function of its own that passes its first two parameters on to one:
    `upload(d_a, a, n)`), None when it copies none."""
    model = unit.model
    wrappers = []
    for copy in COPIES:
        for call in model.calls_to(copy):
            args = _args(call)
            if len(args) >= 2 and leading_name(unit.ctx.text(args[0])) == device:
                return leading_name(unit.ctx.text(args[1]))
            function = model.enclosing_function(call.start_byte)
            params = parameter_names(function, unit.model.data) if function is not None and len(args) >= 2 else []
            if params[:2] == [leading_name(unit.ctx.text(args[0])), leading_name(unit.ctx.text(args[1]))]:
                name = model.function_name(function) if function is not None else None
                if name:
                    wrappers.append(name)
    for wrapper in wrappers:
        for call in model.calls_to(wrapper):
            args = _args(call)
            if len(args) >= 2 and leading_name(unit.ctx.text(args[0])) == device:
                return leading_name(unit.ctx.text(args[1]))
    return None


def host_extent(unit: AnalysisUnit, name: str) -> Extent:
    """`name = malloc(...)`, `new T[n]`, `std::vector<T> name(n)`, `T name[N]` (the model
    indexes these once per file)."""
    found = unit.model.host_allocation(name)
    if found is None:
        return Extent(None)
    kind, offset, groups = found.kind, found.offset, found.groups
    if kind in ("malloc", "calloc", "aligned_alloc"):
        args = split_top_level(groups[0] or "")
        if kind == "calloc" and len(args) == 2:
            size = _fold(unit, offset, f"({args[0]}) * ({args[1]})")
        else:
            size = _fold(unit, offset, args[-1]) if args else None
        return Extent(size, False, kind)
    if kind == "new[]":
        elem_type, count_text, inner_text = groups
        count = _fold(unit, offset, count_text or "")
        inner = _fold(unit, offset, inner_text) if inner_text else 1.0
        elem = _sizeof(unit, elem_type or "")
        return Extent(count * inner * elem if count is not None and inner is not None and elem else None, False, "new[]")
    if kind == "std::vector":
        elem_type, arguments = groups
        args = split_top_level(arguments or "")
        count = _fold(unit, offset, args[0]) if args else None
        elem = _sizeof(unit, elem_type or "")
        return Extent(count * elem if count is not None and elem else None, False, "std::vector")
    return Extent(_declared_array_bytes(unit, offset, groups), False, "array")


def omp_extent(unit: AnalysisUnit, name: str, elem_bytes: float) -> Extent:
    """The largest `map` section of `name` in any OpenMP pragma of the file."""
    best: float | None = None
    for start, clauses in unit.model.map_clauses:
        for clause in clauses:
            for item in clause.items:
                if item.variable != name or not item.sections:
                    continue
                total: float | None = elem_bytes
                for _lower, length in item.sections:
                    value = _fold(unit, start, length) if length else None
                    total = total * value if total is not None and value is not None else None
                if total is not None:
                    best = max(best or 0.0, total)
    if best is not None:
        return Extent(best, False, "map clause")
    return host_extent(unit, name)


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _fold(unit: AnalysisUnit, byte_offset: int, text: str, seen: frozenset[str] = frozenset()) -> float | None:
    value = unit.model.fold_at(byte_offset, _array_sizes(unit, text, seen))
    if isinstance(value, (int, float)) and value >= 0:
        return float(value)
    return None


# `sizeof(table)`, `sizeof table`: the operand a plain name (a type or a variable)
_SIZEOF_NAME = re.compile(r"\bsizeof\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))")


def _array_sizes(unit: AnalysisUnit, text: str, seen: frozenset[str]) -> str:
    """`text` with each `sizeof` of a host array the file declares (`float table[26];`) replaced
    by its bytes: `cudaMalloc(&d_table, sizeof(table))` allocates 104 B, as the compiler
    counts it. A type's `sizeof` (and a name that is no array) is left to the folding."""
    if "sizeof" not in text:
        return text

    def bytes_of(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        found = unit.model.host_allocation(name) if name not in seen else None
        if found is None or found.kind != "array":
            return m.group(0)
        size = _declared_array_bytes(unit, found.offset, found.groups, seen | {name})
        return f"({size:.0f})" if size is not None else m.group(0)

    return _SIZEOF_NAME.sub(bytes_of, text)


def _declared_array_bytes(unit: AnalysisUnit, offset: int, groups: tuple[str | None, ...],
                          seen: frozenset[str] = frozenset()) -> float | None:
    """The bytes of `T name[N][M]` from its declaration's (type, brackets) groups."""
    elem_type, brackets = groups[0], groups[1]
    total = _sizeof(unit, elem_type or "")
    for d in re.findall(r"\[([^\]]+)\]", brackets or ""):
        value = _fold(unit, offset, d, seen)
        total = total * value if total is not None and value is not None else None
    return total


def _sizeof(unit: AnalysisUnit, type_text: str) -> float | None:
    ctype = parse_type(type_text, unit.type_aliases)
    if ctype.pointer:
        return 8.0
    if ctype.kind in ("unknown", "struct"):
        # a struct the source lays out, a macro naming a type: `sizeof` as the host code folds it
        value, _ = try_evaluate(f"sizeof({type_text})", unit.env)
        return float(value) if isinstance(value, int) and value > 0 else None
    if ctype.kind == "void":
        return None
    return float(ctype.size_bytes)
