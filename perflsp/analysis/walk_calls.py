"""Calls in a kernel: casts, atomics, load/store intrinsics, the OpenMP thread API, math and
warp functions (counted by their cost), min/max and conversions, and `__device__` functions and
lambdas (inlined, depth-limited)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis import costs
from perflsp.analysis.ctype import F16, F32, F64, INT, UNKNOWN, CType, common_type, parse_type
from perflsp.analysis.folding import atoms_of, conversion_target, fold_math
from perflsp.analysis.linear import Linear, distinct_values
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.walk_accesses import record_access, record_store, repointed
from perflsp.analysis.walk_expressions import combine_values, identifier_named
from perflsp.analysis.walk_groups import group_method
from perflsp.analysis.walk_tensor import matrix_sync, mma_sync
from perflsp.analysis.walk_values import IDENT, MAX_INLINE_DEPTH, OMP_THREAD_API, UNKNOWN_VAL, Callee, Val
from perflsp.kernels.definitions import non_const_reference

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker


def eval_call(walker: Walker, node: Node) -> Val:
    walker.call_line = walker.line(node)
    fn = node.child_by_field_name("function")
    args_node = node.child_by_field_name("arguments")
    arg_nodes = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
    name = "".join(walker.text(fn).split())  # (template arguments may span lines)
    simple = re.sub(r"<.*>", "", name).split("::")[-1] if name else ""
    if fn is not None and fn.type == "field_expression":
        return method_call(walker, fn, arg_nodes)
    special = call_on_nodes(walker, node, name, simple, arg_nodes)
    if special is not None:
        return special
    args = [walker.eval(a) for a in arg_nodes]
    builtin = math_call(walker, simple, args)
    if builtin is None:
        builtin = builtin_call(walker, simple, args)
    if builtin is not None:
        return builtin
    return user_call(walker, fn, simple, args, arg_nodes)


def method_call(walker: Walker, fn: Node, arg_nodes: list[Node]) -> Val:
    """`v.load()`, `cg::this_grid().sync()`: evaluate the object, unknown result."""
    obj = walker.eval(fn.child_by_field_name("argument"))
    method = walker.text(fn.child_by_field_name("field"))
    group = group_method(walker, fn, method)  # `warp.size()` of a cooperative group
    if group is not None:
        return group
    if method in ("data", "get", "ptr", "begin") and obj.root is not None:
        return Val(obj.ctype if obj.ctype.pointer else obj.ctype.address_of(), None, obj.lin, obj.root, obj.space)
    callee = walker.callees.get(method)
    if callee is not None and method not in walker.inline_stack and len(walker.inline_stack) < MAX_INLINE_DEPTH:
        return inline_call(walker, method, callee, [walker.eval(a) for a in arg_nodes])
    for a in arg_nodes:
        walker.eval(a)
    return Val(UNKNOWN, None, Linear(nonlinear=frozenset({"data"}), const_known=False))


# the widest a texture's dimension is read as where its coordinate's range is not known
_TEXTURE_ROW = float(1 << 20)
_FLOAT_LITERAL = re.compile(r"\s*(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)(?:[eE][+-]?\d+)?[fFlL]?\s*")


def texture_fetch(walker: Walker, node: Node, simple: str, arg_nodes: list[Node]) -> Val:
    """`tex1Dfetch(t, i)`, `tex2D<float4>(obj, x, y)`, ...: a read of the texel at those
    coordinates, a global load through the texture cache (Nsight Compute's DRAM bytes count it
    like any other) of the texture's element: the call's template argument, else the type a
    `texture<T, ...>` reference is declared with, else a float."""
    texture = walker.eval(arg_nodes[0])
    coordinates = [_texel_coordinate(walker, a) for a in arg_nodes[1:]]
    template = re.search(r"<(.*)>", walker.text(node.child_by_field_name("function")))
    if template:
        element = parse_type(template.group(1), walker.aliases)
    elif texture.root is not None and texture.ctype.pointer:
        element = texture.ctype.deref()
    else:
        element = F32
    # the coordinates as one row-major index, each dimension as wide as the range its coordinate
    # takes: distinct texels count as distinct elements, `x` keeps a warp's coalescing, and
    # neighbours (a filter's taps) overlap as they do in an array
    used = coordinates[:costs.TEXTURE_FETCHES[simple]]
    if any(c.lin.nonlinear or not c.lin.const_known for c in used):
        index = _own_texel(walker)
    else:
        index, _ = _row_major(walker, [c.lin for c in used])
    root = texture.root or walker.text(arg_nodes[0]).strip()
    record_access(walker, Val(element.address_of(), None, Linear.constant(0.0), root, "global"), index, element,
                  False, node)
    return Val(element, None, Linear(nonlinear=frozenset({"data"}), const_known=False))


def surface_access(walker: Walker, node: Node, simple: str, arg_nodes: list[Node]) -> Val:
    """`surf2Dread<T>(surf, x, y)`, `surf2Dread(&v, surf, x, y)`, `surf2Dwrite(v, surf, x, y)`:
    a load or store of the element at those coordinates, a global access (a surface is an
    array in device memory; Nsight Compute's DRAM bytes count it). The element is the template
    argument, else the type of the value written or read into; `x` counts bytes."""
    store = simple in costs.SURFACE_WRITES
    template = re.search(r"<(.*)>", walker.text(node.child_by_field_name("function")))
    rest = arg_nodes
    element = parse_type(template.group(1), walker.aliases) if template else INT
    if store or not template:
        # (the value written, or where a read without a template argument puts its value)
        value = walker.eval(arg_nodes[0])
        if not template and value.ctype.kind not in ("unknown", "void"):
            element = value.ctype.deref() if not store and value.ctype.pointer else value.ctype
        rest = arg_nodes[1:]
    surface = walker.eval(rest[0])
    dims = (costs.SURFACE_WRITES if store else costs.SURFACE_READS)[simple]
    coordinates = [walker.eval(a) for a in rest[1:1 + dims]]
    if len(coordinates) < dims or any(c.lin.nonlinear or not c.lin.const_known for c in coordinates):
        index = _own_texel(walker)
    else:
        # (x counts bytes: the element it starts)
        size = float(element.size_bytes or 4)
        index, stride = _row_major(walker, [coordinates[0].lin.scale(1.0 / size), *(c.lin for c in coordinates[1:])])
        handle = rest[0]
        while handle.type == "parenthesized_expression" and handle.named_child_count == 1:
            handle = handle.named_children[0]
        if handle.type == "subscript_expression" and (chosen := _subscript_index(walker, handle)) is not None:
            # a surface chosen from an array of them (`levels[mip]`, one per mip level): each is
            # an array of its own, placed after the others
            index = index.add(chosen.scale(stride))
    root = surface.root or walker.text(rest[0]).strip()
    record_access(walker, Val(element.address_of(), None, Linear.constant(0.0), root, "global"), index, element,
                  store, node)
    return Val(element, None, Linear(nonlinear=frozenset({"data"}), const_known=False)) if not store else UNKNOWN_VAL


def _row_major(walker: Walker, coordinates: list[Linear]) -> tuple[Linear, float]:
    """Coordinates as one row-major index, each dimension as wide as the range its coordinate
    takes (at most `_TEXTURE_ROW` where unbounded), and the index's whole range."""
    index, stride = Linear.constant(0.0), 1.0
    for coordinate in coordinates:
        index = index.add(coordinate.scale(stride))
        stride *= distinct_values(coordinate, walker.cardinality, _TEXTURE_ROW)
    return index, stride


def _subscript_index(walker: Walker, node: Node) -> Linear | None:
    """The linear index of `a[i]` (None where it is not one the walk follows)."""
    indices = node.child_by_field_name("indices") or node.child_by_field_name("index")
    inner = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
    if indices is not None and indices.type not in ("subscript_argument_list",):
        inner = [indices]
    if len(inner) != 1:
        return None
    saved = walker.mult
    walker.mult = 0.0  # (evaluated again when the surface argument is: counted there)
    try:
        value = walker.eval(inner[0])
    finally:
        walker.mult = saved
    return None if value.lin.nonlinear or not value.lin.const_known else value.lin


def _own_texel(walker: Walker) -> Linear:
    """The texel of the thread's own position in the launch (row-major over the grid's threads):
    where the walk cannot follow a fetch's coordinates (floating-point arithmetic: `x + j` of
    a float `x = ix + 0.5f`), the fetch is read as around the pixel the thread works on, as image
    filters sample, so that the launch reads each texel once and its neighbours' taps add none."""
    index, stride = Linear.constant(0.0), 1.0
    for block_atom, thread_atom in (("bx", "tx"), ("by", "ty"), ("bz", "tz")):
        threads = max(1.0, walker.cardinality.get(thread_atom, 1.0))
        index = index.add(Linear.atom(thread_atom).scale(stride)).add(Linear.atom(block_atom).scale(stride * threads))
        stride *= threads * max(1.0, walker.cardinality.get(block_atom, 1.0))
    return index


def _texel_coordinate(walker: Walker, node: Node) -> Val:
    """A texture coordinate as the texel index it names: `x + 0.5f` and `(float)x` (a texel's
    centre, written in floating point) are the integer `x` (a float value is no index)."""
    while True:
        value = node.child_by_field_name("value")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and value is not None:
            node = value
        elif node.type == "binary_expression" and walker.text(node.child_by_field_name("operator")) in ("+", "-") \
                and left is not None and right is not None and _FLOAT_LITERAL.fullmatch(walker.text(right)):
            node = left  # (an integer offset, `x - 1`, stays: it names another texel)
        else:
            return walker.eval(node)


def call_on_nodes(walker: Walker, node: Node, name: str, simple: str, arg_nodes: list[Node]) -> Val | None:
    """Calls that read their argument nodes themselves (casts, atomics, tensor cores, cache
    hints, the OpenMP thread API); None for any other call."""
    if simple in ("reinterpret_cast", "static_cast", "const_cast", "dynamic_cast") and arg_nodes:
        # the type as written (`name` has lost its spaces: `const float4 *` would read `constfloat4*`)
        cast_target = re.search(r"<(.*)>", walker.text(node.child_by_field_name("function")))
        val = walker.eval(arg_nodes[0])
        ctype = parse_type(cast_target.group(1), walker.aliases) if cast_target else val.ctype
        if ctype.kind in ("unknown", "struct") and not ctype.pointer:
            return val
        if ctype.pointer and val.root is not None:
            return repointed(val, ctype)
        return Val(ctype, val.value if not ctype.pointer else None, val.lin if (ctype.is_int or ctype.pointer) else val.lin.opaque(),
                   val.root if ctype.pointer else None, val.space if ctype.pointer else None, static=val.static)
    if simple in costs.ATOMIC_FUNCTIONS:
        return eval_atomic(walker, node, arg_nodes)
    if simple == "mma_sync" and len(arg_nodes) >= 4:
        return mma_sync(walker, arg_nodes)
    if simple in ("load_matrix_sync", "store_matrix_sync") and len(arg_nodes) >= 3:
        return matrix_sync(walker, node, arg_nodes, simple == "store_matrix_sync")
    if simple in costs.TEXTURE_FETCHES and len(arg_nodes) >= 2:
        return texture_fetch(walker, node, simple, arg_nodes)
    if (simple in costs.SURFACE_READS or simple in costs.SURFACE_WRITES) and len(arg_nodes) >= 2:
        return surface_access(walker, node, simple, arg_nodes)
    if simple in costs.LOAD_FUNCTIONS and arg_nodes:
        ptr = walker.eval(arg_nodes[0])
        if ptr.root is not None:
            record_access(walker, ptr, ptr.lin, ptr.ctype.deref(), False, node)
        return Val(ptr.ctype.deref(), None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    if simple in costs.STORE_FUNCTIONS and len(arg_nodes) >= 2:
        ptr = walker.eval(arg_nodes[0])
        walker.eval(arg_nodes[1])
        if ptr.root is not None:
            record_access(walker, ptr, ptr.lin, ptr.ctype.deref(), True, node)
        return UNKNOWN_VAL
    if simple in OMP_THREAD_API:
        atom, dim = OMP_THREAD_API[simple]
        if atom is not None:
            return Val(INT, None, Linear.atom(atom))
        shape = walker.launch.block if dim == "block" else walker.launch.grid
        value = float(shape[0]) if shape is not None else None
        return Val(INT, value, Linear.constant(value))
    return None


def math_call(walker: Walker, simple: str, args: list[Val]) -> Val | None:
    """Synchronisation, warp intrinsics, math library and half-precision intrinsics; None for
    any other call."""
    if simple in costs.SYNC_FUNCTIONS or simple in costs.GROUP_HANDLES:
        return UNKNOWN_VAL
    if simple in _MUL24 and len(args) == 2:
        # the product of the low 24 bits: an index's product as written (`__mul24(n, vec)`), one
        # integer instruction, its value and linear form those of `a * b`
        return combine_values(walker, "*", args[0], args[1])
    if simple in costs.WARP_FUNCTIONS:
        walker.count_int(1.0)
        ctype = args[1].ctype if len(args) > 1 else INT
        return Val(ctype, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
    if args and all(a.static for a in args) and (simple in costs.MATH_FP32 or simple in costs.MATH_FP64):
        # `sqrtf(2.0f / M_PI)`: every operand is a compile-time constant, the compiler folds it
        precision = F32 if simple in costs.MATH_FP32 else F64
        if simple in costs.OVERLOADED and all(a.ctype.kind == "f32" for a in args):
            precision = F32
        value = fold_math(simple, args)
        return Val(precision, value, Linear.constant(value) if value is not None else Linear(const_known=False),
                   static=True)
    if simple in costs.MATH_FP32:
        fp, sfu, ints = costs.MATH_FP32[simple]
        walker.count_math(fp, sfu, ints, F32)
        return Val(F32, fold_math(simple, args), Linear(const_known=False, nonlinear=atoms_of(args)))
    if simple in costs.MATH_FP64:
        precision = F64
        if simple in costs.OVERLOADED and args and args[0].ctype.kind == "f32" and all(a.ctype.kind != "f64" for a in args):
            precision = F32  # `sqrt(float)` is the float overload in CUDA C++
            table = costs.MATH_FP32.get(simple + "f", costs.MATH_FP64[simple])
            fp, sfu, ints = table
        else:
            fp, sfu, ints = costs.MATH_FP64[simple]
        walker.count_math(fp, sfu, ints, precision)
        return Val(precision, fold_math(simple, args), Linear(const_known=False, nonlinear=atoms_of(args)))
    if simple in costs.HALF_INTRINSICS:
        walker.count_math(costs.HALF_INTRINSICS[simple], 0, 0, F16)
        return Val(F16)
    return None


def builtin_call(walker: Walker, simple: str, args: list[Val]) -> Val | None:
    """min/max/abs, vector constructors, conversion intrinsics and functional casts; None for
    any other call."""
    if simple in _MIN_MAX_ABS:
        ctype = common_type(args[0].ctype, args[1].ctype) if len(args) > 1 else (args[0].ctype if args else INT)
        values = [a.value for a in args if a.value is not None]
        if values and len(values) == len(args):
            folded = (min if "min" in simple else max)(values) if simple not in ("abs", "labs", "llabs") else abs(values[0])
            return Val(ctype, folded, Linear.constant(folded))
        if ctype.is_int:
            walker.count_int(1.0)
        bounds = [a.value if a.value is not None else a.most for a in args]
        least = min(b for b in bounds if b is not None) if "min" in simple and any(b is not None for b in bounds) \
            else None
        return Val(ctype, None, Linear(const_known=False, nonlinear=atoms_of(args)), most=least)
    if simple in _VECTOR_CONSTRUCTORS:
        return Val(parse_type(simple.replace("make_", ""), walker.aliases))
    if simple in _CONVERSIONS:
        target = {"float": F32, "double": F64, "int": INT}.get(simple)
        if target is None:
            target = conversion_target(simple)
        return Val(target, args[0].value if args else None,
                   args[0].lin if args and target.is_int else Linear(const_known=False, nonlinear=atoms_of(args)))
    if (simple in walker.aliases or simple in _SCALAR_TYPE_NAMES) and len(args) == 1 and simple not in walker.callees:
        # a functional cast: `Real_t(0.5)`, `float(i)`
        target = walker.aliases.get(simple) or parse_type(simple, walker.aliases)
        operand = args[0]
        return Val(target, operand.value, operand.lin if target.is_int else operand.lin.opaque(), static=operand.static)
    return None


def user_call(walker: Walker, fn: Node | None, simple: str, args: list[Val], arg_nodes: list[Node] | None = None) -> Val:
    """A `__device__` function, inlined when visible; otherwise a function of its inputs."""
    local = walker.lambdas.get(simple) if fn is not None and fn.type == "identifier" else None
    if local is not None and simple not in walker.inline_stack and len(walker.inline_stack) < MAX_INLINE_DEPTH:
        lambda_, captures = local
        return inline_call(walker, simple, lambda_, args, captures=captures if captures is not None else walker.scopes)
    callee = walker.callees.get(simple)
    if callee is not None and simple not in walker.inline_stack and len(walker.inline_stack) < MAX_INLINE_DEPTH:
        template_args = []
        if fn is not None and fn.type in ("template_function", "qualified_identifier"):
            targs = next((c for c in _walk_named(fn) if c.type == "template_argument_list"), None)
            if targs is not None:
                template_args = [c for c in targs.named_children if c.type != "comment"]
        return inline_call(walker, simple, callee, args, template_args, arg_nodes=arg_nodes)
    if callee is None and simple and simple not in walker.said_once and simple not in ("assert", "static_cast", "reinterpret_cast"):
        walker.notes.append(Note(NoteKind.UNANALYSED_CALL, NoteSource.SOURCE,
                                 f"call to `{simple}` not analysed (definition not visible)", subject=simple))
        walker.said_once.add(simple)
    ctype = next((a.ctype for a in args if a.ctype.is_float), UNKNOWN)
    # an unknown function of indices is still an index over the same ranges (a constructor
    # `Position(x, y)`, a helper `idx(i, j)`); of nothing known, it is data
    return Val(ctype, None, Linear(nonlinear=atoms_of(args) or frozenset({"data"}), const_known=False))


def eval_atomic(walker: Walker, node: Node, arg_nodes: list[Node]) -> Val:
    if not arg_nodes:
        return UNKNOWN_VAL
    ptr = walker.eval(arg_nodes[0])
    vals = [walker.eval(a) for a in arg_nodes[1:]]
    elem = ptr.ctype.deref()
    if ptr.root is not None:
        record_access(walker, ptr, ptr.lin, elem, True, node, atomic=True)
    else:
        walker.counts.atomics += walker.mult
    walker.count_int(1.0)
    return Val(vals[0].ctype if vals else elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))


def inline_call(walker: Walker, name: str, callee: Callee, args: list[Val], template_args: list[Node] | None = None,
                captures: dict[str, Val] | list[dict[str, Val]] | None = None,
                arg_nodes: list[Node] | None = None) -> Val:
    """Walk `callee`'s body with its parameters bound to `args`; a lambda's body also sees
    `captures` (the scopes it was defined in, or a launch site's variables). An element of
    global memory passed to a non-const reference parameter (`svd(..., out[i + n])` into
    `float &u`) that the body assigns is stored to, at the call."""
    fn = callee.node
    # template arguments at the call (`fill<tile, stride>(...)`), evaluated in the caller
    bound: dict[str, Val] = {}
    aliases_added: dict[str, CType] = {}
    template = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else None
    if template is not None and template_args:
        plist = template.child_by_field_name("parameters")
        params = [p for p in plist.named_children if p.type != "comment"] if plist is not None else []
        for param, arg in zip(params, template_args):
            pname = _template_param_name(param, callee.data)
            if pname is None:
                continue
            if param.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
                aliases_added[pname] = parse_type(walker.text(arg), walker.aliases)
            else:
                # a bare name (`fill<TILE, STRIDE>(...)`) parses as a type descriptor
                name = walker.text(arg).strip() if arg.type == "type_descriptor" else ""
                val = identifier_named(walker, name) if IDENT.fullmatch(name) else walker.eval(arg)
                if val.value is not None:
                    bound[pname] = Val(INT, val.value, Linear.constant(val.value), static=True)
    declarator = fn.child_by_field_name("declarator")
    while declarator is not None and declarator.type not in ("function_declarator", "lambda_declarator"):
        declarator = declarator.child_by_field_name("declarator")
    body = fn.child_by_field_name("body")
    if body is None or (declarator is None and fn.type != "lambda_expression"):
        return UNKNOWN_VAL
    saved_data = walker.data
    saved_place = (walker.path, walker.line_offset, walker.callsites)
    if walker.path is not None:
        # the call inlined into, as the compiler's line info chains it (a function of the kernel's
        # own text too: `reduce(...)` for the grid, then again under `if (block 0)`, runs each
        # copy at its own call's weight and trip counts)
        walker.callsites = ((walker.path, walker.call_line), *walker.callsites)
    if callee.data is not walker.data:
        if callee.line_base is not None and callee.path is not None:
            walker.path, walker.line_offset = callee.path, callee.line_base
        else:
            walker.path = None  # lines of a text of its own (a lambda's copy): not tied to compiled code
    walker.data = callee.data
    scope: dict[str, Val] = {}
    param_list = declarator.child_by_field_name("parameters") if declarator is not None else None
    param_nodes = [p for p in param_list.named_children if p.type.endswith("parameter_declaration")] if param_list is not None else []
    written_through = _reference_arguments(walker, param_nodes, arg_nodes or [])
    set_through = _reference_variables(walker, param_nodes, arg_nodes or [])
    for index, param in enumerate(param_nodes):
        ptype = parse_type(walker.text(param.child_by_field_name("type")) + " " + "*" * walker.text(param).count("*"), walker.aliases)
        pname = _declared_name(walker, param)
        if pname is None:
            continue
        if index < len(args):
            actual = args[index]
            ctype = ptype if ptype.kind not in ("unknown", "struct") else actual.ctype
            # (what a bound read from memory needs to be sized travels with the value)
            scope[pname] = Val(ctype, actual.value, actual.lin, actual.root, actual.space, actual.dims,
                               loaded=actual.loaded if not ptype.pointer else None,
                               counted=actual.counted, counted_less=actual.counted_less)
            passed = arg_nodes[index] if arg_nodes and index < len(arg_nodes) else None
            if passed is not None and passed.type == "identifier" and not ptype.pointer \
                    and ptype.kind in ("struct", "unknown"):
                # a struct passed by value: its members, under the parameter's name (and not a
                # struct parameter of the kernel that happens to share that name)
                for member, val in walker.members_of(walker.text(passed)).items():
                    scope[f"{pname}.{member}"] = val
        else:
            scope[pname] = Val(ptype, None, Linear(const_known=False))
    ret_type = parse_type(walker.text(fn.child_by_field_name("type")), walker.aliases)
    scope.update(bound)
    saved_aliases = walker.aliases
    if aliases_added:
        walker.aliases = {**walker.aliases, **aliases_added}
    saved_scopes = walker.scopes
    saved_returns = walker.return_values
    if captures is None:
        walker.scopes = [scope]
    elif isinstance(captures, dict):
        walker.scopes = [captures, scope]
    else:
        walker.scopes = [*captures, scope]
    walker.return_values = []
    walker.inline_stack.append(name)
    try:
        walker.walk_statement(body)
        returned = _merged_returns(walker.return_values)
    finally:
        walker.inline_stack.pop()
        walker.scopes = saved_scopes
        walker.return_values = saved_returns
        walker.data = saved_data
        walker.path, walker.line_offset, walker.callsites = saved_place
        walker.aliases = saved_aliases
    _store_through_references(walker, callee.data[body.start_byte : body.end_byte], written_through)
    _set_through_references(walker, scope, set_through)
    if returned is None:
        # a constructor or a function whose result we did not see: it depends on its inputs
        atoms = frozenset().union(*(a.lin.atoms for a in args)) if args else frozenset()
        return Val(ret_type, None, Linear(nonlinear=atoms, const_known=False))
    return Val(ret_type if ret_type.kind not in ("unknown", "struct", "void") else returned.ctype,
               returned.value, returned.lin, returned.root, returned.space)


_MUL24 = frozenset({"__mul24", "__umul24"})
_MIN_MAX_ABS = frozenset({"min", "max", "std::min", "std::max", "umin", "umax", "llmin", "llmax", "abs", "labs", "llabs"})


_VECTOR_CONSTRUCTORS = frozenset({"dim3", "make_float2", "make_float3", "make_float4", "make_double2", "make_int2",
                                  "make_int3", "make_int4", "make_uint2", "make_uint4", "make_double3", "make_double4",
                                  "make_short2", "make_uchar4"})


_CONVERSIONS = frozenset({"__int2float_rn", "__float2int_rn", "__float2int_rz", "__int2double_rn", "__double2float_rn",
                          "__float2half", "__half2float", "__float2uint_rn", "__uint2float_rn", "float", "double", "int",
                          "__ll2float_rn", "__float_as_int", "__int_as_float", "__double_as_longlong",
                          "__longlong_as_double"})


_SCALAR_TYPE_NAMES = {"float", "double", "int", "unsigned", "long", "short", "char", "size_t", "int64_t",
                      "uint64_t", "int32_t", "uint32_t", "half", "__half", "bool"}


def _walk_named(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.named_children))


def _template_param_name(param: Node, data: bytes) -> str | None:
    name = param.child_by_field_name("name")
    if name is None:
        declarator = param.child_by_field_name("declarator")
        name = declarator
        while name is not None and name.type not in ("identifier", "type_identifier"):
            name = name.child_by_field_name("declarator") or next(iter(name.named_children), None)
    if name is None:
        name = next((c for c in param.named_children if c.type in ("type_identifier", "identifier")), None)
    return data[name.start_byte : name.end_byte].decode("utf-8", "replace") if name is not None else None


def _declared_name(walker: Walker, param: Node) -> str | None:
    node = param.child_by_field_name("declarator")
    while node is not None and node.type not in ("identifier",):
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type not in ("type_qualifier",)), None)
        node = nxt
    return walker.text(node) if node is not None else None


def _reference_arguments(walker: Walker, param_nodes: list[Node], arg_nodes: list[Node]) -> list[tuple[str, Node]]:
    """(parameter, element) for each array element passed to a non-const reference parameter."""
    found = []
    for param, arg in zip(param_nodes, arg_nodes):
        pname = _declared_name(walker, param)
        if pname is not None and arg.type == "subscript_expression" and non_const_reference(walker.text(param)):
            found.append((pname, arg))
    return found


def _reference_variables(walker: Walker, param_nodes: list[Node], arg_nodes: list[Node]) -> list[tuple[str, str]]:
    """(parameter, variable) for each local variable passed to a non-const reference parameter
    of a scalar (`int &count`): the callee may set it."""
    found = []
    for param, arg in zip(param_nodes, arg_nodes):
        pname = _declared_name(walker, param)
        text = walker.text(param)
        if pname is not None and arg.type == "identifier" and non_const_reference(text) and "*" not in text:
            found.append((pname, walker.text(arg)))
    return found


def _set_through_references(walker: Walker, scope: dict[str, Val], set_through: list[tuple[str, str]]) -> None:
    """`extrema(h, n, out, count)` into `int &count`: the caller's variable takes what the body
    left in the parameter (a constant), else a value the walk does not know (not the caller's
    `int count = 0`)."""
    for pname, variable in set_through:
        final = scope.get(pname)
        if final is not None and final.value is not None and not final.lin.atoms:
            walker.assign(variable, final)
        elif final is not None:
            walker.assign(variable, Val(final.ctype, None, Linear(const_known=False)))


def _merged_returns(values: list[Val]) -> Val | None:
    """What a call returns from its `return` statements: the last one's where they all agree
    (or there is one), else a value of unknown size over their atoms (`first_set_bit`'s `return
    i;` inside its loop and `return 0;` after it: not 0)."""
    if not values:
        return None
    last = values[-1]
    if all(v.value == last.value and v.lin == last.lin for v in values[:-1]):
        return last
    atoms = frozenset().union(*(v.lin.atoms for v in values))
    return Val(last.ctype, None, Linear(nonlinear=atoms, const_known=False), last.root, last.space)


def _store_through_references(walker: Walker, body: bytes, written_through: list[tuple[str, Node]]) -> None:
    """A store, at the call, to each element whose reference parameter the body assigns."""
    if not written_through:
        return
    text = body.decode("utf-8", errors="replace")
    for pname, element in written_through:
        if re.search(rf"(?<![\w.>]){re.escape(pname)}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", text):
            record_store(walker, element, UNKNOWN_VAL)
