"""Memory accesses of the kernel walker: array subscripts, pointer dereferences and member
accesses, stores, and the counting of each access (bytes, address arithmetic) with its index as
a linear form."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.ctype import F32, INT, UNKNOWN, CType
from perflsp.analysis.fragment_elements import fragment_num_elements
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear
from perflsp.analysis.notes import NoteKind, assumed
from perflsp.analysis.walk_groups import block_view
from perflsp.analysis.walk_values import DIM_NAMES, THREAD_ATOMS, UNKNOWN_VAL, Access, Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def pointee_bytes(ctype: CType) -> int | None:
    """The size of what a pointer points to (None: a type the source does not size)."""
    if ctype.pointer > 1:
        return 8
    if ctype.pointer == 1 and ctype.kind not in ("unknown", "struct", "void") and ctype.size_bytes > 0:
        return ctype.size_bytes
    return None


def repointed(val: Val, ctype: CType) -> Val:
    """`val`, a pointer into an array, read as a pointer to `ctype`'s element (`(int4 *)&a[i]`,
    `reinterpret_cast<float4 *>(p)`): the index, counted in elements of the pointer's type, is
    rescaled to the new element (`&h[8 * j]` of 2-byte halves is `j` of 16-byte `int4`s), so that
    offsets added after the cast (`(int4 *)p + lane`) and the access's width agree. A pointer to a
    type the source does not size keeps its index."""
    before, after = pointee_bytes(val.ctype), pointee_bytes(ctype)
    lin = val.lin
    if val.root is not None and before is not None and after is not None and before != after:
        lin = lin.scale(before / after)
    return Val(ctype, None, lin, val.root, val.space, val.dims if before == after else ())


def _note_stride(walker: Walker, index_lin: Linear, elem: CType) -> None:
    """The bytes between the elements an access reaches in one iteration of the innermost
    profiled loop and the next, any array (a stack or team-local one too): the compiled loop
    steps its address by a multiple of them (`SourceLoop.access_strides`)."""
    if not walker.profile_loops or not walker.loop_atoms or walker.profile is None:
        return
    step = index_lin.coeff_map().get(walker.loop_atoms[-1])
    size = 8 if elem.pointer else elem.size_bytes
    if step and step != UNKNOWN_COEFF and size:
        loop = walker.profile.loops[walker.profile_loops[-1]]
        loop.access_strides.add(abs(step) * size)
        loop.index_steps.add(abs(step))


def _count_loop_load(walker: Walker, access: Access) -> None:
    """Add a global load to the bytes one iteration of the innermost profiled loop loads: each
    element once (the compiler loads `a[m]` read twice once) and only if the loop moves it (a
    load the loop does not move is hoisted out of it)."""
    atom = walker.loop_atoms[-1] if walker.loop_atoms else None
    lin = access.lin
    if atom is None or not (atom in lin.atoms or atom in lin.nonlinear or "data" in lin.nonlinear):
        return
    key = (access.array, lin.coeffs, lin.nonlinear, lin.const)
    seen = walker.profile_load_keys[-1]
    if key not in seen:
        seen.add(key)
        walker.profile_load_bytes[-1] += access.elem_bytes


def record_access(walker: Walker, base: Val, index_lin: Linear, elem: CType, is_store: bool, node: Node,
                  atomic: bool = False) -> None:
    _note_stride(walker, index_lin, elem)
    if base.space in (None, "local") or base.root is None:
        return
    sized = elem.kind not in ("unknown", "struct", "void") or bool(elem.pointer)
    size = elem.size_bytes if sized else 4
    layout = walker.layouts.get(base.root) if elem.kind == "struct" and not elem.pointer else None
    if layout is not None:
        sized, size = True, layout.size_bytes  # a whole struct the source lays out
    if elem.pointer:
        size = 8
    access = Access(base.root, base.space or "global", size, is_store, index_lin, walker.mult, atomic, walker.line(node),
                    frozenset(walker.loop_atoms), sized)
    walker.accesses.append(access)
    # (an evaluation that costs nothing, `t += x[j]` read for the step it might be before the
    # walk of the body, is no load of the loop around it)
    if walker.profile_load_bytes and walker.mult > 0 and access.space == "global" and not is_store and not atomic:
        _count_loop_load(walker, access)

    # an address that a loop does not change is computed once, outside that loop
    invariant = 1.0
    for atom in walker.loop_atoms:
        if atom not in index_lin.atoms or (atom in walker.unrolled_atoms and atom not in index_lin.nonlinear):
            invariant *= max(1.0, walker.cardinality.get(atom, 1.0))
    address_mult = walker.mult / invariant
    if base.space == "shared":
        walker.counts.int32 += walker.cost.int_per_shared_access * address_mult
        walker.counts.int_address += walker.cost.int_per_shared_access * address_mult
        walker.counts.shared_accesses += walker.mult
        if atomic:
            pass  # counted under atomics
        elif is_store:
            walker.counts.shared_store_bytes += size * walker.mult
        else:
            walker.counts.shared_load_bytes += size * walker.mult
    elif base.space == "global":
        walker.counts.int32 += walker.cost.int_per_global_access * address_mult
        walker.counts.int_address += walker.cost.int_per_global_access * address_mult
        if size < 4:
            walker.count_int(walker.cost.int_per_byte_element)
        if atomic:
            pass  # counted under atomics; the access still counts for DRAM traffic
        elif is_store:
            walker.counts.global_store_bytes += size * walker.mult
            walker.counts.global_stores += walker.mult
        else:
            walker.counts.global_load_bytes += size * walker.mult
            walker.counts.global_loads += walker.mult
    if atomic:
        walker.counts.atomics += walker.mult


def _member_constant(walker: Walker, base_text: str, field_name: str) -> Val | None:
    """A member of a local that is a compile-time constant: a wmma fragment's `num_elements`, or a
    static constant of the local's class (`x128 v; ... v.size`, `size` a static constexpr)."""
    if field_name == "num_elements" and (elements := fragment_num_elements(walker, base_text)):
        return elements
    if base_text in walker.declared_types and walker.constant_lookup is not None:
        constant = walker.constant_lookup(f"{walker.declared_types[base_text]}::{field_name}")
        if constant is not None:
            return Val(INT if constant[1] == "int" else F32, constant[0], Linear.constant(constant[0]), static=True)
    return None


def eval_field(walker: Walker, node: Node) -> Val:
    arg = node.child_by_field_name("argument")
    field_name = walker.text(node.child_by_field_name("field"))
    base_text = walker.text(arg)
    if arg is not None and field_name in ("x", "y", "z") and (view := block_view(walker, arg)) is not None:
        base_text = view  # `block.group_index().x`: `blockIdx.x`
    if base_text in THREAD_ATOMS and field_name in ("x", "y", "z"):
        atom = THREAD_ATOMS[base_text]["xyz".index(field_name)]
        return Val(INT, None, Linear.atom(atom))
    if base_text in DIM_NAMES and field_name in ("x", "y", "z"):
        shape = walker.launch.block if base_text == "blockDim" else walker.launch.grid
        axis = "xyz".index(field_name)
        if shape is not None:
            return Val(INT, float(shape[axis]), Linear.constant(float(shape[axis])))
        if axis == 0:
            walker.assume(assumed(NoteKind.LAUNCH_SHAPE, f"{base_text}.x unknown: the launch shape is not visible",
                                  subject=f"{base_text}.x"))
        return Val(INT, None, Linear(const_known=False))
    operator = walker.text(node.child_by_field_name("operator"))
    if operator == "." and (constant := _member_constant(walker, base_text, field_name)) is not None:
        return constant
    if operator == "." and (assigned := walker.lookup(f"{base_text}.{field_name}")) is not None:
        return assigned  # a member of a local struct the kernel assigned (`r.data = ...`)
    if operator in (".", "->") and base_text in walker.members and field_name in walker.members[base_text]:
        return walker.members[base_text][field_name]
    if operator == "->" and base_text == "this":
        # `this->a` in a method (an OpenMP region over the class's member arrays): the member
        member = walker.lookup(field_name)
        if member is not None:
            return member
    if operator == "." and arg is not None and arg.type == "subscript_expression":
        element, lin, elem = subscript_address(walker, arg)
        if element is not None and element.space in ("global", "shared") and not (element.dims and len(element.dims) > 1):
            placed = member_address(walker, element, lin, field_name)
            if placed is not None:
                address, field_type = placed
                parent = node.parent
                if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                    # `p[i].v[k]`: an array member, indexed from its own place in the element
                    return Val(field_type.address_of(), None, address, element.root, element.space)
                record_access(walker, element, address, field_type, False, node)
                return Val(field_type, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
            # `p[i].field`: the element's size is unknown, so elements are far apart
            address = lin.scale(None) if lin.atoms else lin
            parent = node.parent
            if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                return Val(CType("unknown", 4, pointer=1), None, address, element.root, element.space)
            field_type = member_type(elem, field_name)
            record_access(walker, element, address, field_type, False, node)
            return Val(field_type, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    base = walker.eval(arg)
    if operator == "." and base.root is not None and base.space == "global" and base.dims:
        # a member of an accessor/struct parameter (`pitched.ptr`, `t.data`): same memory
        return Val(CType("unknown", 4, pointer=1), None, base.lin, base.root, base.space, base.dims)
    if operator == "->" and base.root is not None and base.space == "global":
        parent = node.parent
        if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
            # `p->a[i]`: an array member of the struct (or the array a pointer member points to),
            # indexed like any global array
            return Val(CType("unknown", 4, pointer=1), None, Linear.constant(0.0), f"{base.root}->{field_name}", base.space)
        placed = member_address(walker, base, base.lin, field_name) if base.ctype.pointer == 1 else None
        address, elem = placed if placed is not None else (base.lin, member_type(base.ctype, field_name))
        record_access(walker, base, address, elem, False, node)
        return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    if base.ctype.lanes > 1 and field_name in ("x", "y", "z", "w"):
        return Val(base.ctype.element, None, base.lin.opaque() if base.lin.atoms else base.lin)
    return Val(member_type(base.ctype, field_name), None, base.lin.opaque() if base.lin.atoms else Linear(const_known=False))


def member_address(walker: Walker, array: Val, index: Linear, field_name: str) -> tuple[Linear, CType] | None:
    """The place of member `field_name` of element `index` of an array of structs whose layout
    the source shows (`p[i].y`, `p->y`), counted in elements of the member's type
    (`i * size + offset`, over the member's size), and the member's type; None otherwise.
    A lane of a built-in vector type (`float2`, `int4`: `p[i].y` is `i * 2 + 1` floats) is placed
    the same way."""
    element = array.ctype.deref()
    if element.lanes > 1 and not element.pointer and field_name in _LANES[:element.lanes]:
        return index.scale(float(element.lanes)).add(Linear.constant(float(_LANES.index(field_name)))), element.element
    layout = walker.layouts.get(array.root) if array.root is not None and array.ctype.kind == "struct" else None
    member = layout.members.get(field_name) if layout is not None else None
    if layout is None or member is None or member.ctype.size_bytes <= 0:
        return None
    size = member.ctype.size_bytes
    return index.scale(layout.size_bytes / size).add(Linear.constant(member.offset_bytes / size)), member.ctype


_LANES = "xyzw"


def member_type(base: CType, field_name: str) -> CType:
    if base.lanes > 1:
        return base.element
    if base.kind in ("f64", "f32", "f16", "int"):
        return CType(base.kind, base.size_bytes, 1, 0, base.wide)
    return UNKNOWN


def record_store(walker: Walker, node: Node | None, value: Val) -> None:
    if node is None:
        return
    if node.type == "subscript_expression":
        base, index, elem = subscript_address(walker, node)
        if base is not None:
            record_access(walker, base, index, elem, True, node)
    elif node.type == "pointer_expression" and walker.text(node.child_by_field_name("operator")) == "*":
        target = walker.eval(node.child_by_field_name("argument"))
        if target.root is not None:
            record_access(walker, target, target.lin, target.ctype.deref(), True, node)
    elif node.type == "field_expression":
        arg = node.child_by_field_name("argument")
        field_name = walker.text(node.child_by_field_name("field"))
        if arg is not None and arg.type == "subscript_expression":
            base, index, elem = subscript_address(walker, arg)
            if base is not None:
                placed = member_address(walker, base, index, field_name)
                address, field_type = placed if placed is not None else (index, member_type(elem, ""))
                record_access(walker, base, address, field_type, True, node)
        elif walker.text(node.child_by_field_name("operator")) == "->":
            base = walker.eval(arg)
            if base.root is not None:
                placed = member_address(walker, base, base.lin, field_name) if base.ctype.pointer == 1 else None
                address, field_type = placed if placed is not None else (base.lin, UNKNOWN)
                record_access(walker, base, address, field_type, True, node)
    elif node.type == "parenthesized_expression":
        for child in node.named_children:
            record_store(walker, child, value)


def subscript_address(walker: Walker, node: Node) -> tuple[Val | None, Linear, CType]:
    """(array base, element index, element type) of `a[i]` / `a[i][j]` without loading."""
    arg = node.child_by_field_name("argument")
    indices = node.child_by_field_name("indices")
    index_node = next((c for c in indices.named_children if c.type != "comment"), None) if indices is not None else None
    base = walker.eval(arg) if arg is None or arg.type != "subscript_expression" else partial_subscript(walker, arg)
    index = walker.eval(index_node)
    if base.root is None:
        return None, Linear(), UNKNOWN
    lin = base.lin.add(index.lin)
    if base.dims and len(base.dims) > 1:
        stride: float | None = 1.0
        for d in base.dims[1:]:
            stride = stride * d if stride is not None and d else None  # an unknown dimension
        lin = base.lin.add(index.lin.scale(stride))
    return base, lin, base.ctype.deref()


def partial_subscript(walker: Walker, node: Node) -> Val:
    """`a[i]` where `a` is a multi-dimensional array: an address, not a load."""
    base, lin, elem = subscript_address(walker, node)
    if base is None or base.root is None:
        return UNKNOWN_VAL
    if base.dims and len(base.dims) > 1:
        return Val(elem, None, lin, base.root, base.space, base.dims[1:])
    # a pointer loaded from memory (`float **rows`): load the row pointer, then index it
    record_access(walker, base, lin, elem, False, node)
    return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False), base.root + "[]", base.space)


def eval_subscript(walker: Walker, node: Node) -> Val:
    base, lin, elem = subscript_address(walker, node)
    if base is None:
        return Val(UNKNOWN, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    if base.dims and len(base.dims) > 1:
        return Val(elem, None, lin, base.root, base.space, base.dims[1:])
    record_access(walker, base, lin, elem, False, node)
    if base.space == "const" or base.space == "local":
        return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    loaded = (base.root, lin, float(pointee_bytes(base.ctype) or 0)) if base.space == "global" and base.root else None
    return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False), loaded=loaded)


def eval_pointer(walker: Walker, node: Node) -> Val:
    op = walker.text(node.child_by_field_name("operator"))
    arg_node = node.child_by_field_name("argument")
    if op == "&":
        if arg_node is not None and arg_node.type == "subscript_expression":
            base, lin, elem = subscript_address(walker, arg_node)
            if base is not None:
                return Val(elem.address_of(), None, lin, base.root, base.space)
        member = _member_address_of(walker, arg_node) if arg_node is not None else None
        if member is not None:
            return member
        arg = walker.eval(arg_node)
        return Val(arg.ctype.address_of(), None, arg.lin, arg.root, arg.space)
    target = walker.eval(arg_node)
    if target.root is not None:
        record_access(walker, target, target.lin, target.ctype.deref(), False, node)
    return Val(target.ctype.deref(), None, Linear(nonlinear=frozenset({"data"}), const_known=False))


def _member_address_of(walker: Walker, node: Node) -> Val | None:
    """`&t[i].data`: the address of a member of an array's element, where the element's layout
    places it (no access: taking an address reads nothing); None for other operands."""
    if node.type != "field_expression" or walker.text(node.child_by_field_name("operator")) != ".":
        return None
    arg = node.child_by_field_name("argument")
    if arg is None or arg.type != "subscript_expression":
        return None
    element, lin, _ = subscript_address(walker, arg)
    if element is None or element.space not in ("global", "shared") or (element.dims and len(element.dims) > 1):
        return None
    placed = member_address(walker, element, lin, walker.text(node.child_by_field_name("field")))
    if placed is None:
        return None
    address, field_type = placed
    return Val(field_type.address_of(), None, address, element.root, element.space)
