"""The memory layout of a struct the source defines: its size and each member's offset and type,
as the C ABI lays it out (each member at a multiple of its alignment, the struct padded to its
largest alignment). An array of such structs is read in whole elements of that size, and a
member `p[i].y` sits at `i * size + offset` (an array of structs: its neighbours' members fill
the sectors between).

A struct whose layout the source does not fully show (a member of a type it does not define, a
template parameter, a base class, virtual methods, bit fields) has no layout here: its accesses
keep the engine's assumption (4 B elements, far apart)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tree_sitter import Node

from perflsp.analysis.ctype import CType, parse_type
from perflsp.kernels.program import ProgramModel

_DEPTH = 3  # levels of structs inside structs followed
_MEMBERS = 64  # members read at most (a large class is not an element type)


@dataclass(frozen=True, slots=True)
class Member:
    offset_bytes: int
    ctype: CType  # of one element (an array member: of its elements)


@dataclass(frozen=True, slots=True)
class Layout:
    name: str
    size_bytes: int
    align_bytes: int
    members: Mapping[str, Member]


def pointee_struct_name(type_text: str) -> str | None:
    """`const COMPLEX *__restrict__` -> "COMPLEX": the struct a one-level pointer type points to."""
    if type_text.count("*") + type_text.count("[") != 1 or "<" in type_text:
        return None
    words = [w for w in re.findall(r"[A-Za-z_]\w*(?:::\w+)*", type_text)
             if w not in ("const", "volatile", "struct", "class", "__restrict__", "__restrict", "restrict")]
    return words[-1].split("::")[-1] if len(words) == 1 else None


def declared_struct_name(text: str, name: str) -> str | None:
    """The type name `text` declares the pointer or array `name` with (`Option *opts`,
    `Option* opts = new Option[n]`, `Option opts[64]`), or None."""
    m = re.search(rf"\b([A-Za-z_]\w*)\s*(?:\*\s*(?:const\s+|__restrict__\s+|restrict\s+)?)+{re.escape(name)}\b", text) \
        or re.search(rf"\b([A-Za-z_]\w*)\s+{re.escape(name)}\s*\[", text)
    return m.group(1) if m and m.group(1) not in ("const", "return", "struct", "sizeof") else None


def struct_layout(model: ProgramModel, name: str, aliases: Mapping[str, CType], depth: int = 0) -> Layout | None:
    """The layout of the struct or class `name` (declared in this file or its local headers),
    or None when the source does not show all of it."""
    if depth > _DEPTH:
        return None
    found = model.class_fields(name)
    if len(found) != 1:
        return None  # not found, or declared differently in two files
    data, fields = found[0]
    declared_align = _declared_alignment(data, fields[0])
    if not fields or len(fields) > _MEMBERS or declared_align is None:
        return None
    members: dict[str, Member] = {}
    offset = 0
    align = declared_align
    for field in fields:
        text = data[field.start_byte : field.end_byte].decode("utf-8", errors="replace")
        if re.search(r"\bvirtual\b", text) or any(child.type == "bitfield_clause" for child in field.children):
            return None  # (a table of virtual methods, bit fields: a layout of the compiler's choosing)
        if re.search(r"\bstatic\b", text) or _is_method(field):
            continue  # (static members and methods take no room in each element)
        type_node = field.child_by_field_name("type")
        if type_node is None:
            return None
        type_text = data[type_node.start_byte : type_node.end_byte].decode("utf-8", errors="replace")
        for declarator in field.children_by_field_name("declarator"):
            placed = _member(model, data, type_text, declarator, aliases, depth)
            if placed is None:
                return None
            member_name, ctype, size, member_align = placed
            offset = -(-offset // member_align) * member_align
            members[member_name] = Member(offset, ctype)
            offset += size
            align = max(align, member_align)
    if not members:
        return None
    return Layout(name, -(-offset // align) * align, align, members)


def _declared_alignment(data: bytes, field: Node) -> int | None:
    """The alignment the struct around `field` declares (`struct __align__(16) P {...}`,
    `alignas(8)`; 1 when none), or None when it has a base class (whose members come first)."""
    body = field.parent
    record = body.parent if body is not None else None
    if record is None or body is None or any(child.type == "base_class_clause" for child in record.children):
        return None
    head = data[record.start_byte : body.start_byte].decode("utf-8", errors="replace")
    m = re.search(r"\b(?:__align__|alignas|aligned)\s*\(\s*(\d+)\s*\)", head)
    return int(m.group(1)) if m else 1


def _is_method(field: Node) -> bool:
    declarator = field.child_by_field_name("declarator")
    while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
        declarator = declarator.child_by_field_name("declarator")
    return declarator is not None and declarator.type == "function_declarator"


def _member(model: ProgramModel, data: bytes, type_text: str, declarator: Node, aliases: Mapping[str, CType],
            depth: int) -> tuple[str, CType, int, int] | None:
    """(name, element type, bytes, alignment) of one declared member."""
    text = data[declarator.start_byte : declarator.end_byte].decode("utf-8", errors="replace")
    name = re.match(r"[\s*&]*([A-Za-z_]\w*)", text)
    if name is None or "(" in text:
        return None
    count = 1
    for dim in re.findall(r"\[([^\]]*)\]", text):
        value = model.evaluate(dim) if dim.strip() else None
        if not isinstance(value, (int, float)) or value <= 0:
            return None
        count *= int(value)
    if text.lstrip().startswith("*"):
        return name.group(1), CType("int", 8, wide=True), 8 * count, 8
    ctype = parse_type(type_text, aliases, guess=False)
    if ctype.kind in ("unknown", "void"):
        return None
    if ctype.kind == "struct":
        inner_name = pointee_struct_name(type_text + "*")
        inner = struct_layout(model, inner_name, aliases, depth + 1) if inner_name else None
        if inner is None:
            return None
        return name.group(1), ctype, inner.size_bytes * count, inner.align_bytes
    # a vector type is aligned to its size (float4: 16, double2: 16), except 3-lane ones (float3: 4)
    align = ctype.size_bytes if ctype.lanes in (1, 2, 4) else ctype.size_bytes // ctype.lanes
    return name.group(1), ctype, ctype.size_bytes * count, align
