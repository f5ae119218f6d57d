"""Tensor cores in a kernel: WMMA fragments and their `mma_sync`/`load_matrix_sync`/
`store_matrix_sync`, and `mma.sync` in inline PTX, counted by the precision of their inputs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.ctype import CType, parse_type
from perflsp.analysis.folding import int_literal
from perflsp.analysis.linear import Linear, tile_atom, tile_parts
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_accesses import record_access
from perflsp.analysis.walk_values import UNKNOWN_VAL, WARP_SIZE, Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def fragment_declaration(walker: Walker, type_text: str, node: Node) -> None:
    """`wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a, b[2];`: remember
    each name's use, shape and element type."""
    m = _FRAGMENT.search(type_text)
    if m is None:
        return
    parts = [p.strip() for p in m.group(1).split(",")]
    if len(parts) < 4:
        return
    use = parts[0].split("::")[-1]
    shape = tuple(fragment_dim(walker, p) for p in parts[1:4])
    element = tensor_type_name(walker, parts[4]) if len(parts) > 4 else ""
    for declarator in node.children_by_field_name("declarator"):
        name = re.match(r"\W*(\w+)", walker.text(declarator))
        if name:
            walker.fragments[name.group(1)] = (use, shape, element)


def tensor_type_name(walker: Walker, text: str) -> str:
    """A fragment's element type as written, or the scalar a template parameter or alias
    stands for (`In` bound to `double`)."""
    if _tensor_field(text, "float") is not None or "precision" in text:
        return text
    ctype = parse_type(text, walker.aliases)
    return {"f64": "double", "f16": "half", "f32": "float"}.get(ctype.kind, text) if ctype.lanes == 1 else text


def fragment_dim(walker: Walker, text: str) -> float | None:
    value = int_literal(text)
    if value is not None:
        return value
    bound = walker.lookup(text)
    if bound is not None and bound.value is not None:
        return bound.value
    if walker.constant_lookup is not None:
        found = walker.constant_lookup(text)
        if found is not None:
            return found[0]
    return None


def mma_sync(walker: Walker, arg_nodes: list[Node]) -> Val:
    """`wmma::mma_sync(d, a, b, c)`: one m×n×k multiply-accumulate per warp, 2·m·n·k
    operations in the precision of `a` (and, for FP16, of the accumulator)."""
    for a in arg_nodes:
        walker.eval(a)
    names = [re.match(r"\W*(\w+)", walker.text(a)) for a in arg_nodes]
    fragments = [walker.fragments.get(n.group(1)) if n else None for n in names]
    a_frag, acc = fragments[1], fragments[0] or fragments[3]
    declared = a_frag[1] if a_frag is not None else (acc[1] if acc is not None else (None, None, None))
    if any(d is None for d in declared):
        walker.assume(assumed(NoteKind.TENSOR_CORE, "tensor-core fragment shape unknown: assumed 16×16×16",
                              subject="fragment shape"))
    shape = tuple(d if d is not None else 16.0 for d in declared)
    element = a_frag[2] if a_frag is not None else "half"
    if a_frag is None:
        walker.assume(assumed(NoteKind.TENSOR_CORE, "tensor-core fragment types not visible: assumed FP16 inputs",
                              subject="fragment types"))
    accumulator = acc[2] if acc is not None else "float"
    count_tensor(walker, 2.0 * shape[0] * shape[1] * shape[2] / WARP_SIZE, _tensor_field(element, accumulator))
    return UNKNOWN_VAL


def matrix_sync(walker: Walker, node: Node, arg_nodes: list[Node], is_store: bool) -> Val:
    """`wmma::load_matrix_sync(frag, ptr, ldm)` / `store_matrix_sync(ptr, frag, ldm, layout)`:
    the warp moves the fragment's tile; each thread its share of the elements."""
    ptr_node, frag_node = (arg_nodes[0], arg_nodes[1]) if is_store else (arg_nodes[1], arg_nodes[0])
    for a in arg_nodes:
        if a is not ptr_node:
            walker.eval(a)
    ptr = walker.eval(ptr_node)
    name = re.match(r"\W*(\w+)", walker.text(frag_node))
    fragment = walker.fragments.get(name.group(1)) if name else None
    if ptr.root is None:
        return UNKNOWN_VAL
    dims = [d for d in fragment[1] if d is not None] if fragment is not None else []
    if fragment is not None and len(dims) == len(fragment[1]):
        m, n, k = dims
        use = fragment[0]
        rows_cols = m * k if use == "matrix_a" else (k * n if use == "matrix_b" else m * n)
        element = parse_type(fragment[2], walker.aliases) if fragment[2] else ptr.ctype.deref()
        if element.kind in ("unknown", "struct") or "precision" in fragment[2]:
            element = ptr.ctype.deref()
    else:
        rows_cols, element = 256.0, ptr.ctype.deref()
    per_thread = max(1, int(rows_cols / WARP_SIZE))
    size = element.size_bytes if element.kind not in ("unknown", "struct", "void") else 2
    tile = CType(element.kind, size * per_thread, per_thread)
    record_access(walker, ptr, _with_lane(walker, ptr.lin), tile, is_store, node)
    return UNKNOWN_VAL


def _with_lane(walker: Walker, lin: Linear) -> Linear:
    """Where a lane's share of a warp's tile lies: the tile's address (the same in every lane:
    `a + warp * 16 * lda` with `warp = tid / 32`) plus the lane's index in shares (the access's
    element is one lane's share), so that the 32 lanes reach the whole tile, not one share of it."""
    lane = tile_atom("tx", 1, WARP_SIZE)
    if walker.cardinality.get("tx", 1.0) < WARP_SIZE or lin.nonlinear:
        return lin
    for atom in lin.atoms:
        parts = tile_parts(atom)
        if atom == "tx" or (parts is not None and parts[0] == "tx" and parts[1] < WARP_SIZE):
            return lin  # (the lanes' addresses differ already)
    walker.cardinality.setdefault(lane, float(WARP_SIZE))
    return lin.add(Linear.atom(lane))


def count_tensor(walker: Walker, ops_per_thread: float, field_name: str | None) -> None:
    if field_name is None:
        return
    setattr(walker.counts, field_name, getattr(walker.counts, field_name) + ops_per_thread * walker.mult)


def eval_asm(walker: Walker, node: Node) -> Val:
    """Inline PTX: `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` is one warp-wide
    multiply-accumulate of 2·m·n·k operations."""
    text = walker.text(node)
    for m in _PTX_MMA.finditer(text):
        types = m.group(4).split(".")
        inputs = next((t for t in types[1:] if t in _PTX_TYPES), types[-1] if types else "f16")
        accumulator = "half" if types and types[0] == "f16" else "float"
        element = _PTX_TYPES.get(inputs, "half")
        count_tensor(walker, 2.0 * int(m.group(1)) * int(m.group(2)) * int(m.group(3)) / WARP_SIZE,
                     _tensor_field(element, accumulator))
    for child in node.named_children:
        if child.type != "string_literal":
            walker.eval(child)
    return UNKNOWN_VAL


_FRAGMENT = re.compile(r"\bfragment\s*<(.*)>")


# `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: shape, then layouts, then D/A/B/C types
_PTX_MMA = re.compile(r"\bmma\.sync\.aligned\.m(\d+)n(\d+)k(\d+)((?:\.[a-z0-9]+)*)")


_PTX_TYPES = {"f16": "half", "bf16": "__nv_bfloat16", "tf32": "precision::tf32", "f64": "double",
              "s8": "signed char", "u8": "unsigned char", "s4": "precision::s4", "u4": "precision::u4"}


def _tensor_field(element: str, accumulator: str) -> str | None:
    """The `OpCounts` field of a matrix multiply-accumulate with inputs of type `element`."""
    e = element.replace(" ", "").split("::")[-1].lower()
    if e in ("half", "__half", "f16"):
        return "tensor_fp16_fp16acc" if accumulator.replace(" ", "").split("::")[-1].lower() in ("half", "__half") \
            else "tensor_fp16"
    if e in ("__nv_bfloat16", "nv_bfloat16", "bf16"):
        return "tensor_bf16"
    if e == "tf32":
        return "tensor_tf32"
    if e == "double":
        return "tensor_fp64"
    if e in ("signedchar", "unsignedchar", "char", "int8_t", "uint8_t", "s8", "u8", "s4", "u4", "b1"):
        return "tensor_int8"
    return None
