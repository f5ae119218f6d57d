"""Counting what one work item of a kernel does: operations by precision, integer instructions,
and every memory access with its index as a linear form.

The walker interprets the (macro-expanded) syntax tree abstractly: loops multiply what their
body does by a trip count, branches weight their arms, calls to `__device__` functions are
inlined (depth-limited), and values are tracked only as far as the verdict needs (type,
constant value, linear form over thread indices and loop variables, which array a pointer
points into).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from tree_sitter import Node

from perflsp.analysis.block_bounds import at_fixed_atoms
from perflsp.analysis.costs import CostModel
from perflsp.analysis.ctype import BOOL, INT, UNKNOWN, CType, guessed_type_notes, parse_type
from perflsp.analysis.linear import Linear
from perflsp.analysis.models import LoopFact, OpCounts
from perflsp.analysis.notes import Note, NoteKind, NoteSource
from perflsp.analysis.struct_layout import Layout
from perflsp.analysis.walk_accesses import eval_field, eval_pointer, eval_subscript
from perflsp.analysis.walk_branches import walk_if, walk_switch
from perflsp.analysis.walk_calls import eval_call
from perflsp.analysis.walk_expressions import (
    eval_assignment,
    eval_binary,
    eval_cast,
    eval_comma,
    eval_conditional,
    eval_identifier,
    eval_initializer_list,
    eval_number,
    eval_parenthesized,
    eval_sizeof,
    eval_unary,
    eval_update,
)
from perflsp.analysis.walk_loops import walk_do, walk_for, walk_range_for, walk_while
from perflsp.analysis.walk_profile import record_statement
from perflsp.analysis.walk_tensor import eval_asm, fragment_declaration
from perflsp.analysis.walk_values import MAX_NODES, THREAD_ATOMS, UNKNOWN_VAL, Access, Callee, LaunchShape, Val, WalkResult, type_is_auto
from perflsp.compiled.profile import SourceProfile
from perflsp.kernels.host_fills import HostFill


class KernelWalker:
    """The state of one walk (counts, accesses, loops, scopes, the multiplier of the statement
    walked) and the driver: statements and expressions are dispatched by node type to their
    handlers, which live by concern in `walk_loops`, `walk_branches`, `walk_expressions`,
    `walk_accesses`, `walk_calls` and `walk_tensor`; `walk_profile` records the source profile,
    `folding` folds constants."""

    def __init__(
        self,
        data: bytes,
        cost: CostModel,
        launch: LaunchShape,
        type_aliases: dict[str, CType] | None = None,
        callees: Mapping[str, Callee] | None = None,
        line_offset: int = 0,
        loop_bound_resolver: Callable[[str], float | None] | None = None,
        constant_lookup: Callable[[str], tuple[float, str] | None] | None = None,
        path: str | None = None,
        profile: SourceProfile | None = None,
    ):
        self.data = data
        self.cost = cost
        self.launch = launch
        self.aliases = type_aliases or {}
        self.callees = callees or {}
        self.line_offset = line_offset
        self.counts = OpCounts()
        self.accesses: list[Access] = []
        self.loops: list[LoopFact] = []
        self.assumptions: list[Note] = []
        self.notes: list[Note] = []
        self.mult = 1.0
        self.scopes: list[dict[str, Val]] = [{}]
        self.cardinality: dict[str, float] = {}
        # the indices of OpenMP worksharing loops whose iteration count is known as the walk reads
        # them: split into tiles like a thread index (an unknown count is settled after the walk)
        self.counted_parallel_atoms: set[str] = set()
        self.loop_depth = 0
        self.loop_counter = 0
        self.loop_atoms: list[str] = []
        self.shared_bytes = 0.0  # static __shared__ arrays declared by the kernel
        self.unrolled_atoms: set[str] = set()
        self.guessed_atoms: set[str] = set()  # counters of loops of a guessed trip count
        self.geometric_loops: dict[str, float] = {}  # loop atom -> trip count of `s *= 2` style loops
        self.trip_is_static = False
        self.last_step_kind: str | None = None
        self.inline_stack: list[str] = []
        self.return_values: list[Val] = []
        # the members of the struct an inlined call returned (`Matrix sub = sub_matrix(a, r, c)`
        # reads `sub.elements` as the callee set it), kept until the declaration that takes them
        self.returned_members: dict[str, Val] = {}
        # callables the body names: `auto f = [=] __device__ (int i) {...}` and lambdas passed
        # to the kernel, with the scope their captures read (None: the scopes where they are called)
        self.lambdas: dict[str, tuple[Callee, dict[str, Val] | None]] = {}
        self.members: dict[str, dict[str, Val]] = {}  # struct parameter -> its members
        self.visited = 0
        self.truncated = False
        # scalar parameters that may be read as the problem size when they bound the thread index
        # (`if (i < n)`, set by the caller when the size is assumed): name -> None until learned
        self.size_parameters: set[str] = set()
        self.learned_sizes: set[str] = set()
        self.shape_assumed = False  # the launch shape is the engine's guess (`cuda_facts.production_shape`)
        # under a guessed shape, the known sizes that bound the flat thread index (`if (i < n)`,
        # a grid-stride loop up to `n`): the caller sizes the guessed grid to cover them once
        self.thread_extents: list[float] = []
        self.learned_extents: dict[str, tuple[float, str | None]] = {}  # learned size -> (its extent, the loop it bounds)
        # a pointer moved by a value not known while a size was still to be learned (`p + n`
        # before `if (i < n)`): the caller walks again with the sizes bound from the start
        self.offset_before_size = False
        # kernel parameters the launch's grid is computed from (`analysis.grid_sizes`), asked
        # only by a grid-stride loop over a size not known (it reads the host function's text)
        self.grid_sized: Callable[[], frozenset[str]] = frozenset
        self.resolve_bound = loop_bound_resolver
        self.array_extents: dict[str, tuple[float | None, bool]] = {}  # array -> (allocated bytes, host memory)
        # what the host stores in an array, asked only for a loop bound read from it (the
        # caller knows which host array a kernel's array is a copy of)
        self.host_fill: Callable[[str], HostFill | None] = _no_fill
        self.layouts: dict[str, Layout] = {}  # array of structs -> the layout the source shows of its element
        self.constant_lookup = constant_lookup  # macros/constants left unexpanded in the text
        self.said_once: set[str] = set()  # assumptions made and calls noted, each said once
        self.declared_types: dict[str, str] = {}  # local of a class type -> its type's text (`x128 v;`)
        self.first_statement: Node | None = None  # the kernel's body (its function's text names its types)
        self.fragments: dict[str, tuple[str, tuple[float | None, ...], str]] = {}  # wmma fragments: use, m×n×k, type
        # where the statements walked are, and how often each runs (for tying compiled code to them)
        self.path = path
        self.profile = profile
        self.callsites: tuple[tuple[str, int], ...] = ()  # the calls inlined into, innermost first
        self.call_line = 0  # the line of the call being evaluated
        self.trip_product = 1.0  # product of the trip counts of the loops around the statement walked
        self.exited_share = 0.0  # of the last `if` walked: the passes its arm sent out of the block
        self.profile_loops: list[int] = []  # their records in the profile, innermost last
        self.outer_trip_products: list[float] = []
        self.profile_load_bytes: list[float] = []  # global load bytes of each open loop's own body
        self.profile_load_keys: list[set[tuple[object, ...]]] = []  # ... and the elements counted
        self.fixed_atoms: dict[str, float] = {}  # block indices held at one block's values (block_bounds)
        for dim, atoms in THREAD_ATOMS.items():
            shape = launch.block if dim == "threadIdx" else launch.grid
            for axis, atom in enumerate(atoms):
                self.cardinality[atom] = shape[axis] if shape else (256.0 if axis == 0 and dim == "threadIdx" else 1.0)

    # -- results ----------------------------------------------------------------------------

    def result(self) -> WalkResult:
        if self.first_statement is not None:
            root = self.first_statement.parent or self.first_statement
            for note in guessed_type_notes(self.text(root), self.aliases):
                self.assume(note)
        return WalkResult(self.counts, self.accesses, self.loops, self.assumptions, self.cardinality, self.notes,
                          self.truncated, self.shared_bytes, self.layouts)

    def assume(self, note: Note) -> None:
        if note.text not in self.said_once:
            self.said_once.add(note.text)
            self.assumptions.append(note)

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def line(self, node: Node) -> int:
        # the tree's own row (LF-counted): cheap, and exact for the LF files compilers see
        return node.start_point[0] + 1 + self.line_offset

    # -- scopes -----------------------------------------------------------------------------

    def bind(self, name: str, val: Val) -> None:
        self.scopes[-1][name] = val

    def lookup(self, name: str) -> Val | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def members_of(self, name: str) -> dict[str, Val]:
        """The members known of the struct variable `name`: those the walk assigned (`r.data =
        ...`, kept as `r.data`) over those of a struct parameter of the kernel."""
        found = dict(self.members.get(name, {}))
        prefix = name + "."
        for scope in self.scopes:
            for key, val in scope.items():
                if key.startswith(prefix) and "." not in key[len(prefix):]:
                    found[key[len(prefix):]] = val
        return found

    def assign(self, name: str, val: Val) -> None:
        for scope in reversed(self.scopes):
            if name in scope:
                scope[name] = val
                return
        self.scopes[-1][name] = val

    # -- counting ---------------------------------------------------------------------------

    def count_op(self, ctype: CType, flops: float = 1.0, ints: float = 0.0) -> None:
        m = self.mult
        lanes = max(1, ctype.lanes)
        if ctype.pointer:
            self.counts.int32 += flops * m * 2  # 64-bit pointer arithmetic
        elif ctype.kind == "f64":
            self.counts.fp64 += flops * m * lanes
        elif ctype.kind == "f32":
            self.counts.fp32 += flops * m * lanes
        elif ctype.kind == "f16":
            self.counts.fp16 += flops * m * lanes
        elif ctype.kind in ("int", "bool"):
            self.counts.int32 += flops * m * (2 if ctype.wide else 1) * lanes
        else:
            self.counts.fp32 += flops * m * 0.5  # unknown operand types: split the difference
            self.counts.int32 += flops * m * 0.5
        if ints:
            self.counts.int32 += ints * m

    def count_int(self, n: float) -> None:
        self.counts.int32 += n * self.mult

    def count_math(self, fp: float, special: float, ints: float, precision: CType) -> None:
        m = self.mult
        if precision.kind == "f64":
            self.counts.fp64 += fp * m
        elif precision.kind == "f16":
            self.counts.fp16 += fp * m
        else:
            self.counts.fp32 += fp * m
        self.counts.special += special * m
        self.counts.int32 += ints * m

    # -- statements -------------------------------------------------------------------------

    def walk_statement(self, node: Node | None) -> None:
        if node is None or self.truncated:
            return
        if self.first_statement is None:
            self.first_statement = node
        self.visited += 1
        if self.visited > MAX_NODES:
            self.truncated = True
            self.notes.append(Note(NoteKind.WORK_LIMIT, NoteSource.SOURCE,
                                   "the kernel is too large to analyse completely: counted up to a work limit"))
            return
        kind = node.type
        if self.profile is not None and self.path is not None and kind != "comment":
            record_statement(self, node)
        handler = _STATEMENTS.get(kind)
        if handler is not None:
            handler(self, node)
        elif kind.endswith("_expression") or kind in ("identifier", "number_literal", "call_expression"):
            self.eval(node)
        else:
            for child in node.named_children:
                self.walk_statement(child)

    def _compound(self, node: Node) -> None:
        """A block; after `if (c) continue;` (or `break`, `return`) the rest of it runs only for
        the passes the test let through."""
        self.scopes.append({})
        saved = self.mult
        try:
            for child in node.named_children:
                self.exited_share = 0.0
                self.walk_statement(child)
                if child.type == "if_statement" and self.exited_share > 0.0:
                    self.mult *= 1.0 - min(1.0, self.exited_share)
                self.exited_share = 0.0
        finally:
            self.mult = saved
            self.scopes.pop()

    def _expression_statement(self, node: Node) -> None:
        for child in node.named_children:
            self.eval(child)

    def walk_declaration(self, node: Node) -> None:
        type_node = node.child_by_field_name("type")
        type_text = self.text(type_node)
        storage = " ".join(self.text(c) for c in node.children if c.type in ("storage_class_specifier", "type_qualifier"))
        raw = self.text(node)
        shared = "__shared__" in raw.split("=", 1)[0]
        constant = "__constant__" in raw.split("=", 1)[0]
        base = parse_type(type_text, self.aliases)
        if "fragment" in type_text:
            fragment_declaration(self, type_text, node)
        for declarator in node.children_by_field_name("declarator"):
            self._declarator(declarator, base, shared, constant, storage)
            if base.kind in ("struct", "unknown") and not base.pointer:
                named = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                if named is not None and named.type == "identifier":
                    self.declared_types[self.text(named)] = " ".join(type_text.split())

    def _declarator(self, declarator: Node, base: CType, shared: bool, constant: bool, storage: str) -> None:
        value_node: Node | None = None
        target = declarator
        if declarator.type == "init_declarator":
            value_node = declarator.child_by_field_name("value")
            target = declarator.child_by_field_name("declarator") or declarator
        pointers = 0
        dims: list[float] = []
        name_node: Node | None = target
        while name_node is not None and name_node.type not in ("identifier", "field_identifier"):
            if name_node.type == "pointer_declarator":
                pointers += 1
            elif name_node.type == "array_declarator":
                size = name_node.child_by_field_name("size")
                size_val = self.eval(size).value if size is not None else None
                dims.insert(0, size_val if size_val else 0.0)
            elif name_node.type == "reference_declarator":
                pass
            nxt = name_node.child_by_field_name("declarator")
            if nxt is None:
                nxt = next((c for c in name_node.named_children if c.type not in ("type_qualifier",)), None)
            name_node = nxt
        if name_node is None:
            return
        name = self.text(name_node)
        ctype = CType(base.kind, base.size_bytes, base.lanes, base.pointer + pointers, base.wide)
        if dims:
            space = "shared" if shared else ("const" if constant else "local")
            if shared and all(dims) and ctype.kind not in ("unknown", "struct", "void"):
                self.shared_bytes += math.prod(dims) * (8 if ctype.pointer else ctype.size_bytes)
            self.bind(name, Val(CType(ctype.kind, ctype.size_bytes, ctype.lanes, ctype.pointer + len(dims), ctype.wide),
                                root=name, space=space, dims=tuple(dims)))
            if value_node is not None:
                self.eval(value_node)
            return
        if value_node is not None and value_node.type == "lambda_expression":
            # walked where it is called, per call, with the enclosing scopes it captures
            self.bind_lambda(name, Callee(value_node, self.data))
            return
        if value_node is None:
            if shared:
                self.bind(name, Val(ctype, root=name, space="shared"))
            else:
                self.bind(name, Val(ctype, lin=Linear(const_known=False)))
            return
        lanes = _vector_lanes(self, value_node, ctype)
        if lanes is not None:
            # `int2 idx = make_int2(x, y)`, `float3 p = {a, b, c}`: each lane keeps its own value,
            # read back as `idx.x` (as a member the kernel assigns)
            self.bind(name, Val(ctype, lin=Linear(const_known=False)))
            element = ctype.element if ctype.lanes > 1 else None  # (`make_float2(1.0, x)`: float lanes)
            for lane, val in zip("xyzw", (self.eval(c) for c in lanes)):
                self.scopes[-1][f"{name}.{lane}"] = Val(element or val.ctype, val.value, val.lin, static=val.static)
            return
        if value_node.type in ("initializer_list", "argument_list"):
            vals = [self.eval(c) for c in value_node.named_children]
            val = vals[0] if len(vals) == 1 else Val(ctype, lin=Linear(const_known=False))
        else:
            self.returned_members = {}
            val = self.eval(value_node)
            for member, member_val in self.returned_members.items():
                self.scopes[-1][f"{name}.{member}"] = member_val
            self.returned_members = {}
        if type_is_auto(base):
            ctype = val.ctype
        elif val.ctype.kind != ctype.kind and ctype.is_float and val.ctype.is_float:
            pass  # a conversion instruction, not FP work
        keeps_array = ctype.pointer or type_is_auto(base)  # a scalar declaration drops the array
        self.bind(name, Val(ctype, val.value, val.lin if keeps_array or not val.root else Linear(const_known=False),
                            val.root if keeps_array else None, val.space if keeps_array else None,
                            val.dims if keeps_array else (), static=val.static,
                            loaded=None if keeps_array else val.loaded, counted=None if keeps_array else val.counted,
                            most=None if keeps_array else val.most))

    def bind_members(self, name: str, members: dict[str, Val]) -> None:
        """`name.member` reads `members[member]` (a struct of arrays passed by value)."""
        self.members[name] = members
        self.bind(name, Val(UNKNOWN))

    def bind_lambda(self, name: str, lambda_: Callee, captures: dict[str, Val] | None = None) -> None:
        """`name(...)` inlines `lambda_` (a `lambda_expression`); its captured names are read
        from `captures` (a launch site's variables) or, when None, from the calling scopes."""
        self.lambdas[name] = (lambda_, captures)
        self.bind(name, Val(UNKNOWN))

    def _type_definition(self, node: Node) -> None:
        """`typedef int4 copy_t;` / `using copy_t = int4;` in a body: the name is that type
        (a pointer cast to it has that element's width)."""
        type_node = node.child_by_field_name("type")
        if type_node is None:
            return
        declarators = node.children_by_field_name("declarator") if node.type == "type_definition" \
            else [node.child_by_field_name("name")]
        for declarator in declarators:
            if declarator is None:
                continue
            text = self.text(declarator)
            name = "".join(c for c in text if c.isalnum() or c == "_")
            self.aliases[name] = parse_type(self.text(type_node) + "*" * text.count("*"), self.aliases)

    @staticmethod
    def _is_const(storage: str) -> bool:
        return "const" in storage

    def _labeled(self, node: Node) -> None:
        for child in node.named_children[1:]:
            self.walk_statement(child)

    def _return(self, node: Node) -> None:
        for child in node.named_children:
            val = self.eval(child)
            if self.inline_stack:
                self.return_values.append(val)
                if child.type == "identifier" and val.ctype.kind in ("struct", "unknown") and not val.ctype.pointer:
                    self.returned_members = self.members_of(self.text(child))
                elif child.type != "call_expression":  # (`return sub(...)`: what that call returned)
                    self.returned_members = {}

    # -- expressions ------------------------------------------------------------------------

    def eval(self, node: Node | None) -> Val:
        if node is None:
            return UNKNOWN_VAL
        self.visited += 1
        if self.visited > MAX_NODES:
            self.truncated = True
            return UNKNOWN_VAL
        handler = _EXPRESSIONS.get(node.type)
        if handler is not None:
            val = handler(self, node)
            return at_fixed_atoms(val, self.fixed_atoms) if self.fixed_atoms else val
        for child in node.named_children:
            self.eval(child)
        return UNKNOWN_VAL


_STATEMENTS: dict[str, Callable[[KernelWalker, Node], None]] = {
    "compound_statement": KernelWalker._compound,
    "expression_statement": KernelWalker._expression_statement,
    "declaration": KernelWalker.walk_declaration,
    "if_statement": walk_if,
    "for_statement": walk_for,
    "for_range_loop": walk_range_for,
    "while_statement": walk_while,
    "do_statement": walk_do,
    "switch_statement": walk_switch,
    "return_statement": KernelWalker._return,
    "comment": lambda self, node: None,
    "preproc_call": lambda self, node: None,
    "type_definition": KernelWalker._type_definition,
    "alias_declaration": KernelWalker._type_definition,
    "break_statement": lambda self, node: None,
    "continue_statement": lambda self, node: None,
    "goto_statement": lambda self, node: None,
    "labeled_statement": KernelWalker._labeled,
}


_EXPRESSIONS: dict[str, Callable[[KernelWalker, Node], Val]] = {
    "number_literal": eval_number,
    "identifier": eval_identifier,
    "field_expression": eval_field,
    "parenthesized_expression": eval_parenthesized,
    "condition_clause": eval_parenthesized,
    "binary_expression": eval_binary,
    "unary_expression": eval_unary,
    "update_expression": eval_update,
    "assignment_expression": eval_assignment,
    "subscript_expression": eval_subscript,
    "pointer_expression": eval_pointer,
    "cast_expression": eval_cast,
    "conditional_expression": eval_conditional,
    "call_expression": eval_call,
    "gnu_asm_expression": eval_asm,
    "sizeof_expression": eval_sizeof,
    "comma_expression": eval_comma,
    "initializer_list": eval_initializer_list,
    "char_literal": lambda self, node: Val(INT, None, Linear(const_known=False)),
    "string_literal": lambda self, node: UNKNOWN_VAL,
    "true": lambda self, node: Val(BOOL, 1.0, Linear.constant(1.0)),
    "false": lambda self, node: Val(BOOL, 0.0, Linear.constant(0.0)),
    "null": lambda self, node: Val(INT, 0.0, Linear.constant(0.0)),
    "this": lambda self, node: UNKNOWN_VAL,
    "qualified_identifier": lambda self, node: eval_identifier(self, node),
    "template_function": lambda self, node: UNKNOWN_VAL,
    "lambda_expression": lambda self, node: UNKNOWN_VAL,
}


# `make_int2(...)`, `make_float4(...)`: CUDA's built-in vector constructors
_MAKE_VECTOR = re.compile(r"make_(?:u?char|u?short|u?int|u?long|u?longlong|float|double|half)([1-4])")


def _no_fill(_array: str) -> HostFill | None:
    return None


def _vector_lanes(walker: KernelWalker, value: Node, ctype: CType) -> list[Node] | None:
    """The lane expressions of a built-in vector initialised lane by lane (`make_int2(x, y)`, or
    `{x, y}` for a vector type); None for any other initialiser."""
    if ctype.pointer:
        return None
    if value.type == "call_expression":
        function = value.child_by_field_name("function")
        arguments = value.child_by_field_name("arguments")
        match = _MAKE_VECTOR.fullmatch(walker.text(function)) if function is not None else None
        if match is None or arguments is None or len(arguments.named_children) != int(match.group(1)):
            return None
        return list(arguments.named_children)
    if value.type == "initializer_list" and ctype.lanes > 1 and len(value.named_children) == ctype.lanes:
        return list(value.named_children)
    return None
