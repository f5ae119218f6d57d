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
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from tree_sitter import Node

from perflsp.analysis import costs
from perflsp.analysis.costs import CostModel
from perflsp.analysis.ctype import BOOL, F16, F32, F64, INT, LONG, UNKNOWN, CType, common_type, guessed_type_notes, parse_type
from perflsp.analysis.linear import Linear, distinct_values
from perflsp.analysis.models import LoopFact, OpCounts
from perflsp.compiled.profile import SourceLoop, SourceProfile, SourceStatement

THREAD_ATOMS = {"threadIdx": ("tx", "ty", "tz"), "blockIdx": ("bx", "by", "bz")}
# OpenMP's runtime calls inside a target region play the roles of CUDA's built-ins
OMP_THREAD_API = {"omp_get_thread_num": ("tx", None), "omp_get_team_num": ("bx", None),
                  "omp_get_num_threads": (None, "block"), "omp_get_num_teams": (None, "grid")}
DIM_NAMES = {"blockDim": "block", "gridDim": "grid"}
# HIP's older spellings of the built-ins (`hipThreadIdx_x` = `threadIdx.x`)
HIP_BUILTINS = {f"hip{family[0].upper()}{family[1:]}_{axis}": (family, "xyz".index(axis))
                for family in ("threadIdx", "blockIdx", "blockDim", "gridDim") for axis in "xyz"}
MAX_INLINE_DEPTH = 4
# where a loop's trip count came from (models.LoopFact.origin)
LoopOrigin = Literal["constant", "launch", "arguments", "grid-stride", "assumed", "data-dependent"]
MAX_NODES = 200_000  # work budget per kernel: pathological inputs stop, not hang


@dataclass(slots=True)
class Val:
    ctype: CType
    value: float | None = None
    lin: Linear = field(default_factory=lambda: Linear(const_known=False))
    root: str | None = None  # the array a pointer value points into
    space: str | None = None  # global | shared | local | const
    dims: tuple[float, ...] = ()  # remaining array dimensions (local/shared arrays)
    static: bool = False  # a compile-time constant (the compiler can fold it), not just a known value

    @property
    def known(self) -> bool:
        return self.value is not None


UNKNOWN_VAL = Val(UNKNOWN, lin=Linear(const_known=False))


@dataclass(slots=True)
class Access:
    array: str
    space: str
    elem_bytes: int
    is_store: bool
    lin: Linear
    count: float  # per work item
    atomic: bool = False
    line: int = 0
    loops: frozenset[str] = frozenset()  # atoms of the loops enclosing the access


@dataclass(slots=True)
class LaunchShape:
    grid: tuple[float, float, float] | None
    block: tuple[float, float, float] | None


@dataclass
class Callee:
    node: Node  # function_definition
    data: bytes
    path: str | None = None  # its file (None: not known, or the text it is bound in)
    line_base: int | None = None  # the file's 0-based row of `data`'s first line (None: lines not known)


@dataclass
class WalkResult:
    counts: OpCounts
    accesses: list[Access]
    loops: list[LoopFact]
    assumptions: list[str]
    cardinality: dict[str, float]
    notes: list[str]
    truncated: bool = False
    shared_bytes: float = 0.0


class KernelWalker:
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
        self.assumptions: list[str] = []
        self.notes: list[str] = []
        self.mult = 1.0
        self.scopes: list[dict[str, Val]] = [{}]
        self.cardinality: dict[str, float] = {}
        self.loop_depth = 0
        self.loop_counter = 0
        self.loop_atoms: list[str] = []
        self.shared_bytes = 0.0  # static __shared__ arrays declared by the kernel
        self.unrolled_atoms: set[str] = set()
        self.geometric_loops: dict[str, float] = {}  # loop atom -> trip count of `s *= 2` style loops
        self.trip_is_static = False
        self.last_step_kind: str | None = None
        self.inline_stack: list[str] = []
        self.return_values: list[Val] = []
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
        self.resolve_bound = loop_bound_resolver
        self.constant_lookup = constant_lookup  # macros/constants left unexpanded in the text
        self._assumed: set[str] = set()
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
        self._trip_products: list[float] = []
        for dim, atoms in THREAD_ATOMS.items():
            shape = launch.block if dim == "threadIdx" else launch.grid
            for axis, atom in enumerate(atoms):
                self.cardinality[atom] = shape[axis] if shape else (256.0 if axis == 0 and dim == "threadIdx" else 1.0)

    # -- results ---------------------------------------------------------------------------

    def result(self) -> WalkResult:
        if self.first_statement is not None:
            root = self.first_statement.parent or self.first_statement
            for note in guessed_type_notes(self.text(root), self.aliases):
                self.assume(note)
        return WalkResult(self.counts, self.accesses, self.loops, self.assumptions, self.cardinality, self.notes,
                          self.truncated, self.shared_bytes)

    def assume(self, text: str) -> None:
        if text not in self._assumed:
            self._assumed.add(text)
            self.assumptions.append(text)

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def line(self, node: Node) -> int:
        # the tree's own row (LF-counted): cheap, and exact for the LF files compilers see
        return node.start_point[0] + 1 + self.line_offset

    # -- scopes ----------------------------------------------------------------------------

    def bind(self, name: str, val: Val) -> None:
        self.scopes[-1][name] = val

    def lookup(self, name: str) -> Val | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def assign(self, name: str, val: Val) -> None:
        for scope in reversed(self.scopes):
            if name in scope:
                scope[name] = val
                return
        self.scopes[-1][name] = val

    # -- counting --------------------------------------------------------------------------

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

    def record_access(self, base: Val, index_lin: Linear, elem: CType, is_store: bool, node: Node,
                      atomic: bool = False) -> None:
        if base.space in (None, "local") or base.root is None:
            return
        size = elem.size_bytes if elem.kind not in ("unknown", "struct", "void") else 4
        if elem.pointer:
            size = 8
        access = Access(base.root, base.space or "global", size, is_store, index_lin, self.mult, atomic, self.line(node),
                        frozenset(self.loop_atoms))
        self.accesses.append(access)
        # an address that a loop does not change is computed once, outside that loop
        invariant = 1.0
        for atom in self.loop_atoms:
            if atom not in index_lin.atoms or (atom in self.unrolled_atoms and atom not in index_lin.nonlinear):
                invariant *= max(1.0, self.cardinality.get(atom, 1.0))
        address_mult = self.mult / invariant
        if base.space == "shared":
            self.counts.int32 += self.cost.int_per_shared_access * address_mult
            self.counts.int_address += self.cost.int_per_shared_access * address_mult
            self.counts.shared_accesses += self.mult
            if atomic:
                pass  # counted under atomics
            elif is_store:
                self.counts.shared_store_bytes += size * self.mult
            else:
                self.counts.shared_load_bytes += size * self.mult
        elif base.space == "global":
            self.counts.int32 += self.cost.int_per_global_access * address_mult
            self.counts.int_address += self.cost.int_per_global_access * address_mult
            if size < 4:
                self.count_int(self.cost.int_per_byte_element)
            if atomic:
                pass  # counted under atomics; the access still counts for DRAM traffic
            elif is_store:
                self.counts.global_store_bytes += size * self.mult
                self.counts.global_stores += self.mult
            else:
                self.counts.global_load_bytes += size * self.mult
                self.counts.global_loads += self.mult
        if atomic:
            self.counts.atomics += self.mult

    # -- statements --------------------------------------------------------------------------

    def walk_statement(self, node: Node | None) -> None:
        if node is None or self.truncated:
            return
        if self.first_statement is None:
            self.first_statement = node
        self.visited += 1
        if self.visited > MAX_NODES:
            self.truncated = True
            self.notes.append("the kernel is too large to analyse completely: counted up to a work limit")
            return
        kind = node.type
        if self.profile is not None and self.path is not None and kind != "comment":
            self._record_statement(node)
        handler = _STATEMENTS.get(kind)
        if handler is not None:
            handler(self, node)
        elif kind.endswith("_expression") or kind in ("identifier", "number_literal", "call_expression"):
            self.eval(node)
        else:
            for child in node.named_children:
                self.walk_statement(child)

    def _record_statement(self, node: Node) -> None:
        assert self.profile is not None and self.path is not None
        weight = self.mult / self.trip_product if self.trip_product > 0 else 0.0
        self.profile.statements.append(SourceStatement(
            self.path, self.line(node), node.end_point[0] + 1 + self.line_offset, weight,
            self.profile_loops[-1] if self.profile_loops else None, self.callsites))

    def begin_profile_loop(self, node: Node, body: Node | None, trip: float, step: float | None,
                           parallel: bool = False, first_line: int | None = None) -> int | None:
        """Record a loop the walk enters (`end_profile_loop` when it leaves); None when not
        profiling. `first_line`: where its header starts when not on the loop statement (the
        directive of an OpenMP worksharing loop, whose runtime loops the compiler puts there)."""
        if self.profile is None or self.path is None:
            return None
        weight = self.mult / self.trip_product if self.trip_product > 0 else 0.0
        index = len(self.profile.loops)
        self.profile.loops.append(SourceLoop(
            self.path, first_line or self.line(node), self.line(body) if body is not None else self.line(node),
            node.end_point[0] + 1 + self.line_offset, trip, weight * self.trip_product, step,
            len(self.profile_loops), self.callsites, parallel))
        self.profile_loops.append(index)
        self._trip_products.append(self.trip_product)
        if not parallel:
            self.trip_product *= trip
        return index

    def end_profile_loop(self, index: int | None) -> None:
        if index is None:
            return
        self.profile_loops.pop()
        self.trip_product = self._trip_products.pop()

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

    def _declaration(self, node: Node) -> None:
        type_node = node.child_by_field_name("type")
        type_text = self.text(type_node)
        storage = " ".join(self.text(c) for c in node.children if c.type in ("storage_class_specifier", "type_qualifier"))
        raw = self.text(node)
        shared = "__shared__" in raw.split("=", 1)[0]
        constant = "__constant__" in raw.split("=", 1)[0]
        base = parse_type(type_text, self.aliases)
        if "fragment" in type_text:
            self._fragment_declaration(type_text, node)
        for declarator in node.children_by_field_name("declarator"):
            self._declarator(declarator, base, shared, constant, storage)

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
        if value_node.type in ("initializer_list", "argument_list"):
            vals = [self.eval(c) for c in value_node.named_children]
            val = vals[0] if len(vals) == 1 else Val(ctype, lin=Linear(const_known=False))
        else:
            val = self.eval(value_node)
        if type_is_auto(base):
            ctype = val.ctype
        elif val.ctype.kind != ctype.kind and ctype.is_float and val.ctype.is_float:
            pass  # a conversion instruction, not FP work
        keeps_array = ctype.pointer or type_is_auto(base)  # a scalar declaration drops the array
        self.bind(name, Val(ctype, val.value, val.lin if keeps_array or not val.root else Linear(const_known=False),
                            val.root if keeps_array else None, val.space if keeps_array else None,
                            val.dims if keeps_array else (), static=val.static))

    def bind_members(self, name: str, members: dict[str, Val]) -> None:
        """`name.member` reads `members[member]` (a struct of arrays passed by value)."""
        self.members[name] = members
        self.bind(name, Val(UNKNOWN))

    def bind_lambda(self, name: str, lambda_: Callee, captures: dict[str, Val] | None = None) -> None:
        """`name(...)` inlines `lambda_` (a `lambda_expression`); its captured names are read
        from `captures` (a launch site's variables) or, when None, from the calling scopes."""
        self.lambdas[name] = (lambda_, captures)
        self.bind(name, Val(UNKNOWN))

    @staticmethod
    def _is_const(storage: str) -> bool:
        return "const" in storage

    def _if(self, node: Node) -> None:
        cond = node.child_by_field_name("condition")
        if self.size_parameters:
            self._learn_sizes(cond)
        cval = self.eval(cond)
        weight = self._branch_weight(cond, cval)
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        saved = self.mult
        if cval.known:
            weight = 1.0 if cval.value else 0.0
        self.mult = saved * weight
        if weight > 0:
            self.walk_statement(consequence)
        if alternative is not None and weight < 1.0:
            self.mult = saved * (1.0 - weight)
            self.walk_statement(alternative)
        self.mult = saved
        # the share of passes that leave the block here (`if (c) continue;`), for `_compound`
        self.exited_share = weight if alternative is None and _jumps_away(consequence) else 0.0

    def _learn_sizes(self, cond: Node | None) -> None:
        """A bounds guard of the thread index against a size parameter (`if (i < n)`, `if (i >= n)
        return;`, joined by `&&`/`||`) says the launch covers that size: at an assumed launch shape,
        the parameter is the number of distinct indices the threads reach (so that a later
        `for (j = 0; j < n; j++)` runs over the same problem the grid does)."""
        while cond is not None and cond.type in ("parenthesized_expression", "condition_clause") \
                and cond.named_child_count == 1:
            cond = cond.named_children[0]
        if cond is None or cond.type != "binary_expression":
            return
        op = self.text(cond.child_by_field_name("operator"))
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        if op in ("&&", "||"):
            self._learn_sizes(left)
            self._learn_sizes(right)
            return
        if op not in ("<", "<=", ">", ">=") or left is None or right is None:
            return
        for size_node, index_node in ((right, left), (left, right)):
            name = self.text(size_node).strip()
            if size_node.type != "identifier" or name not in self.size_parameters:
                continue
            current = self.lookup(name)
            if current is None or current.value is not None or not current.ctype.is_int:
                continue
            saved = self.mult
            self.mult = 0.0  # evaluated again, and counted, as the condition
            index = self.eval(index_node)
            self.mult = saved
            atoms = index.lin.atoms
            if not atoms or not atoms <= _THREAD_INDEX_ATOMS:
                continue
            extent = distinct_values(index.lin, {a: self.cardinality.get(a, 1.0) for a in atoms}, math.inf)
            if extent > 1.0:
                self._learn_size(name, extent)

    def _learn_size(self, name: str, extent: float) -> None:
        """Bind the size parameter `name` (still unknown) to the extent the threads cover."""
        current = self.lookup(name) if name in self.size_parameters else None
        if current is None or current.value is not None or not current.ctype.is_int:
            return
        self.size_parameters.discard(name)
        self.learned_sizes.add(name)
        self.assign(name, Val(current.ctype, extent, Linear.constant(extent)))
        self.assume(f"`{name}` bounds the thread index: read as the extent the threads cover, {extent:,.0f}")

    def _branch_weight(self, cond: Node | None, cval: Val) -> float:
        """Fraction of work items that take the `then` arm."""
        text = self.text(cond)
        thread_atoms = {a for a in cval.lin.atoms if a in ("tx", "ty", "tz", "bx", "by", "bz") or a.startswith("o")}
        if "==" in text and thread_atoms and "&&" not in text and "||" not in text:
            card = 1.0
            for atom in thread_atoms:
                card *= max(1.0, self.cardinality.get(atom, 1.0))
            return 1.0 / card
        if thread_atoms and re.search(r"<|>", text) and "==" not in text:
            halving = [a for a in cval.lin.atoms if a in self.geometric_loops]
            if halving:
                # `if (tid < s)` in `for (s = n / 2; s > 0; s >>= 1)`: half the threads, then a
                # quarter, ...: about one full pass over the whole loop
                return 1.0 / max(1.0, self.geometric_loops[halving[0]])
            # a bounds guard: (nearly) every item is in bounds; the `then` arm is that side
            # unless the condition tests for being out of them (`if (x >= n) {...} else {...}`)
            return 0.0 if self._out_of_bounds_test(cond) else 1.0
        return self.cost.branch_weight

    def _out_of_bounds_test(self, cond: Node | None) -> bool:
        """Whether a bounds guard holds for the few items outside the bounds: a thread index
        above a runtime size (`i >= n`, `n <= i`) or below zero (`i < 0`), joined by `||`
        (`x >= w || y >= h`) or `&&`; False for `i < n`, `i > 0` and anything unclear."""
        while cond is not None and cond.type in ("parenthesized_expression", "condition_clause") \
                and cond.named_child_count == 1:
            cond = cond.named_children[0]
        if cond is None or cond.type != "binary_expression":
            return False
        op = self.text(cond.child_by_field_name("operator"))
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        if op in ("||", "&&"):
            sides = [self._out_of_bounds_test(left), self._out_of_bounds_test(right)]
            return any(sides) if op == "||" else all(sides)
        if op not in ("<", "<=", ">", ">=") or left is None or right is None:
            return False
        saved = self.mult
        self.mult = 0.0  # evaluated again, and counted, as the condition
        lval, rval = self.eval(left), self.eval(right)
        self.mult = saved
        if _thread_dependent(lval) and not _thread_dependent(rval):
            index_above = op in (">", ">=")  # `i >= bound`
            bound = rval
        elif _thread_dependent(rval) and not _thread_dependent(lval):
            index_above = op in ("<", "<=")  # `bound <= i`
            bound = lval
        else:
            return False
        if bound.static:
            # a compile-time constant: only a test below zero is an edge (`i < 0`); `i > 0`,
            # `tid >= 32` are not
            return not index_above and bound.value is not None and bound.value <= 0
        return index_above  # a size: `i >= n` holds past the end

    def _switch(self, node: Node) -> None:
        self.eval(node.child_by_field_name("condition"))
        body = node.child_by_field_name("body")
        if body is None:
            return
        cases = [c for c in body.named_children if c.type == "case_statement"]
        saved = self.mult
        self.mult = saved / max(1, len(cases))
        for case in cases:
            for child in case.named_children:
                if child.type != "number_literal" and child != case.child_by_field_name("value"):
                    self.walk_statement(child)
        self.mult = saved

    def _labeled(self, node: Node) -> None:
        for child in node.named_children[1:]:
            self.walk_statement(child)

    def _return(self, node: Node) -> None:
        for child in node.named_children:
            val = self.eval(child)
            if self.inline_stack:
                self.return_values.append(val)

    # -- loops -----------------------------------------------------------------------------

    def _for(self, node: Node) -> None:
        self.scopes.append({})
        try:
            init = node.child_by_field_name("initializer")
            cond = node.child_by_field_name("condition")
            update = node.child_by_field_name("update")
            body = node.child_by_field_name("body")
            var, start = self._loop_init(init)
            if var is None:
                # `int i = tid; for (; i < n; i += stride)`: the index was declared before the loop
                var, start = self._condition_variable(cond)
            trip, origin, note, step_val = self._trip_count(var, start, cond, update, node)
            pragma = node.prev_named_sibling
            asked = pragma is not None and pragma.type == "preproc_call" and "unroll" in self.text(pragma)
            unrolled = self.trip_is_static and (trip <= self.cost.unroll_limit or asked)
            if self.last_step_kind in ("mul", "div"):
                self.geometric_loops[f"L{self.loop_counter + 1}"] = max(1.0, trip)
            self._run_loop(node, var, start, step_val, trip, origin, note, cond, update, body, unrolled)
        finally:
            self.scopes.pop()

    def _condition_variable(self, cond: Node | None) -> tuple[str | None, Val | None]:
        """The variable a loop condition compares (`i < n` -> i), when it is already bound."""
        while cond is not None and cond.type in ("parenthesized_expression", "condition_clause") \
                and cond.named_child_count == 1:
            cond = cond.named_children[0]
        if cond is None or cond.type != "binary_expression":
            return None, None
        for side in ("left", "right"):
            operand = cond.child_by_field_name(side)
            if operand is not None and operand.type == "identifier":
                value = self.lookup(self.text(operand))
                if value is not None:
                    return self.text(operand), value
        return None, None

    def _loop_init(self, init: Node | None) -> tuple[str | None, Val | None]:
        if init is None:
            return None, None
        if init.type == "declaration":
            self._declaration(init)
            decl = init.child_by_field_name("declarator")
            if decl is not None and decl.type == "init_declarator":
                name = self.text(decl.child_by_field_name("declarator"))
                return name, self.lookup(name)
            return None, None
        if init.type == "assignment_expression":
            left = init.child_by_field_name("left")
            self.eval(init)
            name = self.text(left)
            return name, self.lookup(name)
        self.eval(init)
        return None, None

    def _trip_count(self, var: str | None, start: Val | None, cond: Node | None, update: Node | None,
                    loop: Node) -> tuple[float, LoopOrigin, str, Val | None]:
        """(trip count per work item, origin, note, step value); sets `trip_is_static` when the
        compiler knows the trip count too (it can then unroll the loop)."""
        self.trip_is_static = False
        self.last_step_kind = None
        if cond is None:
            self.assume(f"line {self.line(loop)}: loop without a condition: assumed {self.cost.assumed_while_trips:g} iterations")
            return self.cost.assumed_while_trips, "assumed", "no condition", None
        op = None
        bound_node = None
        if cond.type == "binary_expression":
            left = cond.child_by_field_name("left")
            right = cond.child_by_field_name("right")
            op = self.text(cond.child_by_field_name("operator"))
            if var is not None and self.text(right) == var:
                left, right = right, left
                op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            if var is None and left is not None and left.type == "identifier":
                var = self.text(left)
                start = self.lookup(var)
            if var is not None and self.text(left) == var:
                bound_node = right
        if bound_node is None or var is None or op not in ("<", "<=", ">", ">=", "!="):
            self.assume(f"line {self.line(loop)}: loop bound `{self.text(cond)}` not understood: "
                        f"assumed {self.cost.assumed_trip_count:g} iterations")
            return self.cost.assumed_trip_count, "assumed", self.text(cond), None
        saved_mult = self.mult
        self.mult = 0.0  # evaluate without counting (the condition is counted per iteration later)
        bound = self.eval(bound_node)
        step_kind, step = self._step(var, update)
        self.last_step_kind = step_kind
        self.mult = saved_mult
        bound_value = bound.value
        if bound_value is None and self.resolve_bound is not None:
            bound_value = self.resolve_bound(self.text(bound_node))
        start_value = start.value if start is not None else None
        thread_start = start is not None and bool({a for a in start.lin.atoms if a in ("tx", "ty", "tz", "bx", "by", "bz")})
        if start_value is None and (thread_start or (start is not None and start.lin.const_known)):
            start_value = start.lin.const if start is not None else 0.0
        bound_name = self.text(bound_node).strip()
        # a size read from the launch by a bounds guard (`if (i < n)` before the loop): a
        # grid-stride loop says the launch does not cover it
        launch_read = bound_value is not None and bound_name in self.learned_sizes
        if (bound_value is None or launch_read) and thread_start and step_kind == "add" and step is not None \
                and step.value and step.value >= max(32.0, self._stride_extent()):
            # a grid-stride loop over a size the source does not say: the production size
            trip = max(1.0, self.cost.assumed_problem_size / step.value)
            # the loop's bound is the problem size the loop is assumed to cover
            if launch_read:
                current = self.lookup(bound_name)
                assert current is not None
                size = self.cost.assumed_problem_size
                self.assign(bound_name, Val(current.ctype, size, Linear.constant(size)))
            else:
                self._learn_size(bound_name, self.cost.assumed_problem_size)
            self.assume(f"line {self.line(loop)}: grid-stride loop over an unknown size (`{self.text(bound_node)}`): "
                        f"assumed the production size, {trip:g} iteration(s) per thread")
            return trip, "assumed", f"{var} {op} {self.text(bound_node)}", step
        if bound_value is None:
            data_dependent = "data" in bound.lin.atoms
            origin: LoopOrigin = "data-dependent" if data_dependent else "assumed"
            trip = self.cost.assumed_trip_count
            self.assume(f"line {self.line(loop)}: trip count of the `{var}` loop unknown (`{self.text(bound_node)}`): assumed {trip:g}")
            if thread_start and step_kind == "add" and step is not None and step.value:
                # a block-stride loop over a size parameter: the size is what the assumed loop covers
                self._learn_size(self.text(bound_node).strip(), trip * abs(step.value))
            return trip, origin, f"{var} {op} {self.text(bound_node)}", step
        if start_value is None:
            start_value = 0.0
            self.assume(f"line {self.line(loop)}: start of the `{var}` loop unknown: assumed 0")
        inclusive = 1.0 if op in ("<=", ">=") else 0.0
        self.trip_is_static = bool(bound.static and start is not None and start.static and step is not None and step.static)
        if step_kind == "add" and step is not None and step.value:
            s = step.value
            span = (bound_value - start_value + (inclusive if s > 0 else -inclusive))
            if thread_start:
                # threads start spread over one stride (grid-/block-stride loops): on average
                # span / stride iterations each, not the ceiling of it
                trip = max(0.0, span / s) if (span > 0) == (s > 0) else 0.0
            else:
                trip = max(0.0, math.ceil(span / s)) if (span > 0) == (s > 0) else 0.0
            origin = "grid-stride" if thread_start and step.lin.is_constant() and s >= 32 else ("constant" if bound.known else "arguments")
            if self.learned_sizes and self.learned_sizes & set(_IDENT.findall(self.text(bound_node))):
                origin = "assumed"  # over a size read from the assumed launch
            return trip, origin, f"{var} {op} {self.text(bound_node)}", step
        if step_kind in ("mul", "div") and step is not None and step.value and step.value > 1:
            lo, hi = sorted((max(start_value, 1.0), max(bound_value, 1.0)))
            trip = max(0.0, math.ceil(math.log(hi / lo, step.value) + (inclusive or 0.0))) if hi > lo else 0.0
            return trip, "constant" if bound.known else "arguments", f"{var} {op} {self.text(bound_node)}", None
        self.assume(f"line {self.line(loop)}: step of the `{var}` loop not understood: assumed {self.cost.assumed_trip_count:g} iterations")
        return self.cost.assumed_trip_count, "assumed", f"{var} {op} {self.text(bound_node)}", None

    def _stride_extent(self) -> float:
        """The smallest stride of a grid-stride loop: the threads of one launch dimension
        (`gridDim.x * blockDim.x` in a grid whose `y` picks the row or the dimension)."""
        if self.launch.grid is None or self.launch.block is None:
            return math.inf
        extents = [g * b for g, b in zip(self.launch.grid, self.launch.block) if g * b > 1]
        return min(extents) if extents else 1.0

    def _step(self, var: str, update: Node | None) -> tuple[str | None, Val | None]:
        if update is None:
            return None, None
        if update.type == "comma_expression":
            for child in update.named_children:
                kind, val = self._step(var, child)
                if kind:
                    return kind, val
            return None, None
        if update.type == "update_expression":
            arg = update.child_by_field_name("argument")
            if self.text(arg) != var:
                return None, None
            sign = -1.0 if "--" in self.text(update) else 1.0
            return "add", Val(INT, sign, Linear.constant(sign), static=True)
        if update.type == "assignment_expression":
            left = update.child_by_field_name("left")
            if self.text(left) != var:
                return None, None
            op = self.text(update.child_by_field_name("operator"))
            right = update.child_by_field_name("right")
            val = self.eval(right)
            if op == "+=":
                return "add", val
            if op == "-=":
                return "add", Val(val.ctype, -val.value if val.value is not None else None, val.lin.scale(-1.0))
            if op in ("*=", "<<="):
                factor = val.value if op == "*=" else _pow2(val.value)
                return "mul", Val(INT, factor)
            if op in ("/=", ">>="):
                factor = val.value if op == "/=" else _pow2(val.value)
                return "div", Val(INT, factor)
            if op == "=" and right is not None and right.type == "binary_expression":
                rop = self.text(right.child_by_field_name("operator"))
                rl = right.child_by_field_name("left")
                rr = right.child_by_field_name("right")
                other = rr if self.text(rl) == var else (rl if self.text(rr) == var and rop in ("+", "*") else None)
                if other is None:
                    return None, None
                oval = self.eval(other)
                if rop == "+":
                    return "add", oval
                if rop == "-":
                    return "add", Val(oval.ctype, -oval.value if oval.value is not None else None, oval.lin.scale(-1.0))
                if rop in ("*", "<<"):
                    return "mul", Val(INT, oval.value if rop == "*" else _pow2(oval.value))
                if rop in ("/", ">>"):
                    return "div", Val(INT, oval.value if rop == "/" else _pow2(oval.value))
        return None, None

    def _run_loop(self, node: Node, var: str | None, start: Val | None, step: Val | None, trip: float, origin: LoopOrigin,
                  note: str, cond: Node | None, update: Node | None, body: Node | None, unrolled: bool = False) -> None:
        """Walk a loop body `trip` times. An unrolled loop has no counter or compare, and the
        addresses it steps through become immediate offsets."""
        self.loop_counter += 1
        atom = f"L{self.loop_counter}"
        self.cardinality[atom] = max(1.0, trip)
        self.loops.append(LoopFact(self.line(node), var, trip, origin, note))
        saved = self.mult
        if var is not None and start is not None:
            lin = start.lin
            if step is not None and step.value is not None:
                lin = lin.add(Linear.atom(atom).scale(step.value))
            elif step is not None:
                lin = lin.add(step.lin.mul(Linear.atom(atom)) if not step.lin.is_constant() else Linear.atom(atom).scale(None))
            else:
                lin = Linear(nonlinear=frozenset({atom}) | start.lin.atoms, const_known=False)
            self.assign(var, Val(start.ctype if start.ctype.kind != "unknown" else INT, None, lin, start.root, start.space))
        elif var is not None:
            self.assign(var, Val(INT, None, Linear(nonlinear=frozenset({atom}), const_known=False)))
        entry = {name: val for name in self._stepped_names(body, var, update) if (val := self.lookup(name)) is not None}
        inductions = self._induction_variables(body, var, atom, update)
        self.mult = saved * trip
        self.loop_depth += 1
        self.loop_atoms.append(atom)
        if unrolled:
            self.unrolled_atoms.add(atom)
        self.mult = saved
        profiled = self.begin_profile_loop(node, body, trip, step.value if step is not None else None)
        self.mult = saved * trip
        try:
            if not unrolled:
                self.count_int(self.cost.int_per_loop_iteration)
                self.counts.int_loop += self.cost.int_per_loop_iteration * self.mult
            self.counts.loop_iterations += self.mult
            if cond is not None:
                self.eval(cond)
            self.walk_statement(body)
            if update is not None:
                self.mult = 0.0  # the counter update is part of int_per_loop_iteration
                self.eval(update)
        finally:
            self.end_profile_loop(profiled)
            self.loop_depth -= 1
            self.loop_atoms.pop()
            self.mult = saved
        if var is not None:
            current = self.lookup(var)
            if current is not None:
                self.assign(var, Val(current.ctype, None, Linear(const_known=False), current.root, current.space))
        for name in inductions:
            # after the loop: the entry value moved by an unknown multiple of the step (the
            # thread indices it held still hold)
            before = entry[name]
            self.assign(name, Val(before.ctype, None, Linear(coeffs=before.lin.coeffs, nonlinear=before.lin.nonlinear,
                                                               const_known=False), before.root, before.space))

    @staticmethod
    def _step_expressions(body: Node | None, update: Node | None) -> list[Node]:
        """The expression statements of a loop body, and the expressions of its update clause
        (`t++, p += n` steps `p` as well as the counter)."""
        found: list[Node] = []
        statements = (body.named_children if body.type == "compound_statement" else [body]) if body is not None else []
        for statement in statements:
            if statement.type == "expression_statement" and statement.named_child_count:
                found.append(statement.named_children[0])
        pending = [update] if update is not None else []
        while pending:
            expression = pending.pop(0)
            if expression.type == "comma_expression":
                pending[:0] = [c for c in (expression.child_by_field_name("left"), expression.child_by_field_name("right"))
                               if c is not None]
            else:
                found.append(expression)
        return found

    def _stepped_names(self, body: Node | None, var: str | None, update: Node | None = None) -> list[str]:
        names = []
        for expression in self._step_expressions(body, update):
            target = expression.child_by_field_name("left") if expression.type == "assignment_expression" \
                else expression.child_by_field_name("argument") if expression.type == "update_expression" else None
            if target is not None and target.type == "identifier" and self.text(target) != var:
                names.append(self.text(target))
        return names

    def _induction_variables(self, body: Node | None, var: str | None, atom: str, update: Node | None = None) -> list[str]:
        """Variables the body or the update clause steps by a loop-invariant amount
        (`index += stride;`, `p += n;`, `k++;` as statements of the body, `t++, p += n` in the
        update): during the loop they are their entry value plus the iteration times the step,
        like the loop's own counter."""
        found: list[str] = []
        saved = self.mult
        self.mult = 0.0  # reading the step costs nothing here; the statement is counted in the body
        try:
            for expression in self._step_expressions(body, update):
                target = expression.child_by_field_name("left") if expression.type == "assignment_expression" \
                    else expression.child_by_field_name("argument") if expression.type == "update_expression" else None
                name = self.text(target) if target is not None and target.type == "identifier" else None
                if name is None or name == var or name in found:
                    continue
                current = self.lookup(name)
                kind, step = self._step(name, expression)
                if current is None or kind != "add" or step is None:
                    continue
                if step.lin.atoms & {atom, *self.loop_atoms} or "data" in step.lin.nonlinear:
                    continue  # the step itself moves inside the loop, or comes from memory
                if step.value is not None:
                    moved = Linear.atom(atom).scale(step.value)
                elif step.lin.atoms:
                    moved = step.lin.mul(Linear.atom(atom))
                else:
                    moved = Linear.atom(atom).scale(None)  # a runtime stride (`idx += stride_z`)
                self.assign(name, Val(current.ctype, None, current.lin.add(moved), current.root, current.space))
                found.append(name)
        finally:
            self.mult = saved
        return found

    def _while(self, node: Node) -> None:
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        if node.type == "while_statement" and self._counted_while(node, cond, body):
            return
        trip = self.cost.assumed_while_trips
        self.assume(f"line {self.line(node)}: `while` loop with a data-dependent condition: assumed {trip:g} iterations")
        self._run_loop(node, None, None, None, trip, "data-dependent", self.text(cond), cond, None, body)

    def _counted_while(self, node: Node, cond: Node | None, body: Node | None) -> bool:
        """`while (i < n) { ...; i += stride; }`: a counted loop whose update is the body's last
        statement; walked like the equivalent `for`."""
        var, start = self._condition_variable(cond)
        if var is None or body is None:
            return False
        statements = [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else [body]
        last = statements[-1] if statements else None
        update = last.named_children[0] if last is not None and last.type == "expression_statement" and last.named_child_count else None
        if update is None or self._step(var, update)[0] is None:
            return False
        inner = cond
        while inner is not None and inner.type in ("parenthesized_expression", "condition_clause") \
                and inner.named_child_count == 1:
            inner = inner.named_children[0]
        self.scopes.append({})
        try:
            trip, origin, note, step_val = self._trip_count(var, start, inner, update, node)
            self._run_loop(node, var, start, step_val, trip, origin, note, inner, None, body)
        finally:
            self.scopes.pop()
        return True

    def _do(self, node: Node) -> None:
        self._while(node)

    def _range_for(self, node: Node) -> None:
        self.assume(f"line {self.line(node)}: range-based loop: assumed {self.cost.assumed_trip_count:g} iterations")
        self._run_loop(node, None, None, None, self.cost.assumed_trip_count, "assumed", self.text(node.child_by_field_name("right")),
                       None, None, node.child_by_field_name("body"))

    # -- expressions -------------------------------------------------------------------------

    def eval(self, node: Node | None) -> Val:
        if node is None:
            return UNKNOWN_VAL
        self.visited += 1
        if self.visited > MAX_NODES:
            self.truncated = True
            return UNKNOWN_VAL
        handler = _EXPRESSIONS.get(node.type)
        if handler is not None:
            return handler(self, node)
        for child in node.named_children:
            self.eval(child)
        return UNKNOWN_VAL

    def _number(self, node: Node) -> Val:
        return _number_literal(self.text(node))

    def _identifier(self, node: Node) -> Val:
        return self._identifier_named(self.text(node))

    def _identifier_named(self, name: str) -> Val:
        val = self.lookup(name)
        if val is not None:
            return val
        if name in ("true", "false"):
            return Val(BOOL, float(name == "true"), Linear.constant(float(name == "true")))
        if name in ("NULL", "nullptr"):
            return Val(INT, 0.0, Linear.constant(0.0))
        if name in HIP_BUILTINS:
            family, axis = HIP_BUILTINS[name]
            if family in THREAD_ATOMS:
                return Val(INT, None, Linear.atom(THREAD_ATOMS[family][axis]))
            shape = self.launch.block if family == "blockDim" else self.launch.grid
            if shape is not None:
                return Val(INT, float(shape[axis]), Linear.constant(float(shape[axis])))
            return Val(INT, None, Linear(const_known=False))
        if name == "warpSize":
            return Val(INT, 32.0, Linear.constant(32.0), static=True)
        if self.constant_lookup is not None:
            constant = self.constant_lookup(name)
            if constant is not None:
                value, kind = constant
                ctype = {"int": INT, "f32": F32}.get(kind, F64)
                return Val(ctype, value, Linear.constant(value), static=True)
        if name in LIBRARY_CONSTANTS:
            # <math.h>/<float.h> constants: compile-time constants of their type
            value, ctype = LIBRARY_CONSTANTS[name]
            return Val(ctype, value, Linear.constant(value), static=True)
        return Val(UNKNOWN, None, Linear(const_known=False))

    def _field(self, node: Node) -> Val:
        arg = node.child_by_field_name("argument")
        field_name = self.text(node.child_by_field_name("field"))
        base_text = self.text(arg)
        if base_text in THREAD_ATOMS and field_name in ("x", "y", "z"):
            atom = THREAD_ATOMS[base_text]["xyz".index(field_name)]
            return Val(INT, None, Linear.atom(atom))
        if base_text in DIM_NAMES and field_name in ("x", "y", "z"):
            shape = self.launch.block if base_text == "blockDim" else self.launch.grid
            axis = "xyz".index(field_name)
            if shape is not None:
                return Val(INT, float(shape[axis]), Linear.constant(float(shape[axis])))
            if axis == 0:
                self.assume(f"{base_text}.x unknown: the launch shape is not visible")
            return Val(INT, None, Linear(const_known=False))
        operator = self.text(node.child_by_field_name("operator"))
        if operator == "." and base_text in self.members and field_name in self.members[base_text]:
            return self.members[base_text][field_name]
        if operator == "->" and base_text == "this":
            # `this->a` in a method (an OpenMP region over the class's member arrays): the member
            member = self.lookup(field_name)
            if member is not None:
                return member
        if operator == "." and arg is not None and arg.type == "subscript_expression":
            element, lin, elem = self._subscript_address(arg)
            if element is not None and element.space in ("global", "shared") and not (element.dims and len(element.dims) > 1):
                # `p[i].field`: the element's size is unknown, so elements are far apart
                address = lin.scale(None) if lin.atoms else lin
                parent = node.parent
                if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                    return Val(CType("unknown", 4, pointer=1), None, address, element.root, element.space)
                field_type = self._field_type(elem, field_name)
                self.record_access(element, address, field_type, False, node)
                return Val(field_type, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        base = self.eval(arg)
        if operator == "." and base.root is not None and base.space == "global" and base.dims:
            # a member of an accessor/struct parameter (`pitched.ptr`, `t.data`): same memory
            return Val(CType("unknown", 4, pointer=1), None, base.lin, base.root, base.space, base.dims)
        if operator == "->" and base.root is not None and base.space == "global":
            parent = node.parent
            if parent is not None and parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node:
                # `p->a[i]`: an array member of the struct (or the array a pointer member points to),
                # indexed like any global array
                return Val(CType("unknown", 4, pointer=1), None, Linear.constant(0.0), f"{base.root}->{field_name}", base.space)
            elem = self._field_type(base.ctype, field_name)
            self.record_access(base, base.lin, elem, False, node)
            return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        if base.ctype.lanes > 1 and field_name in ("x", "y", "z", "w"):
            return Val(base.ctype.element, None, base.lin.opaque() if base.lin.atoms else base.lin)
        return Val(self._field_type(base.ctype, field_name), None, base.lin.opaque() if base.lin.atoms else Linear(const_known=False))

    @staticmethod
    def _field_type(base: CType, field_name: str) -> CType:
        if base.lanes > 1:
            return base.element
        if base.kind in ("f64", "f32", "f16", "int"):
            return CType(base.kind, base.size_bytes, 1, 0, base.wide)
        return UNKNOWN

    def _parenthesized(self, node: Node) -> Val:
        inner = [c for c in node.named_children if c.type != "comment"]
        val = UNKNOWN_VAL
        for child in inner:
            val = self.eval(child)
        return val

    def _comma(self, node: Node) -> Val:
        val = UNKNOWN_VAL
        for child in node.named_children:
            val = self.eval(child)
        return val

    def _binary(self, node: Node) -> Val:
        op = self.text(node.child_by_field_name("operator"))
        left_node = node.child_by_field_name("left")
        misparsed = self._misparsed_cast(left_node)
        if misparsed is not None and op in ("*", "/", "%"):
            # `(i) + (j) * N` parsed as `((i) +(j)) * N`: rebuild `i + ((j) * N)`
            variable, unary_op, argument = misparsed
            inner = self._combine(op, self.eval(argument), self.eval(node.child_by_field_name("right")))
            return self._combine(unary_op, variable, inner)
        left = self.eval(left_node)
        right = self.eval(node.child_by_field_name("right"))
        return self._combine(op, left, right)

    def _misparsed_cast(self, node: Node | None) -> tuple[Val, str, Node] | None:
        """`(name) + x` where `name` is a variable: the grammar reads a cast of `+x`."""
        if node is None or node.type != "cast_expression":
            return None
        variable = self.lookup(self.text(node.child_by_field_name("type")).strip())
        value = node.child_by_field_name("value")
        if variable is None or value is None or value.type not in ("unary_expression", "pointer_expression"):
            return None
        op = self.text(value.child_by_field_name("operator"))
        argument = value.child_by_field_name("argument")
        if op not in ("+", "-", "*", "&") or argument is None:
            return None
        return variable, op, argument

    def _combine(self, op: str, left: Val, right: Val) -> Val:
        value = _fold(op, left.value, right.value)
        if op in ("&&", "||"):
            return Val(BOOL, value, Linear(const_known=value is not None, const=value or 0.0,
                                           nonlinear=left.lin.atoms | right.lin.atoms))
        if op in ("<", ">", "<=", ">=", "==", "!="):
            ctype = common_type(left.ctype, right.ctype)
            if not (left.static and right.static) and (ctype.is_int or ctype.pointer):
                self.count_int(1.0)
            lin = Linear(const_known=value is not None, const=value or 0.0, nonlinear=left.lin.atoms | right.lin.atoms)
            return Val(BOOL, value, lin)
        # pointer arithmetic keeps the array
        if left.ctype.pointer and op in ("+", "-") and not right.ctype.pointer:
            self.count_int(1.0)
            return Val(left.ctype, None, left.lin.add(right.lin, 1.0 if op == "+" else -1.0), left.root, left.space, left.dims)
        if right.ctype.pointer and op == "+" and (right.root is not None or left.root is None):
            self.count_int(1.0)
            return Val(right.ctype, None, right.lin.add(left.lin), right.root, right.space, right.dims)
        if left.ctype.pointer and op == "+":
            self.count_int(1.0)
            return Val(left.ctype, None, left.lin.add(right.lin), left.root, left.space, left.dims)
        ctype = common_type(left.ctype, right.ctype)
        static = left.static and right.static
        if not static:
            self._count_binary(op, ctype, left, right)
        lin = _linear(op, left.lin, right.lin, left.value, right.value)
        if ctype.is_float and lin.atoms:
            lin = lin.opaque()  # float values are not indices
        return Val(ctype, value, lin, static=static)

    def _count_binary(self, op: str, ctype: CType, left: Val, right: Val) -> None:
        if ctype.kind == "f64" and op == "*" and _exact_float_scale(left, right):
            ctype = F32  # float × 0.5 is exact in float: nvcc keeps it single precision
        if op in ("/", "%"):
            if ctype.is_float:
                divisor = right.value if right.static else None
                if divisor is not None and divisor != 0 and math.log2(abs(divisor)).is_integer():
                    self.count_op(ctype, 1.0)
                elif ctype.kind == "f64":
                    fp, sfu, ints = costs.FP64_DIV
                    self.count_math(fp, sfu, ints, F64)
                else:
                    fp, sfu, ints = costs.FP32_DIV
                    self.count_math(fp, sfu, ints, F32 if ctype.kind != "f16" else F16)
                return
            if right.static and right.value is not None and right.value > 0 and math.log2(right.value).is_integer():
                self.count_int(1.0)
            elif right.static and right.value is not None:
                self.count_int(costs.INT_DIV_BY_CONSTANT)
            else:
                self.count_int(costs.INT64_DIV if ctype.wide else costs.INT32_DIV)
            return
        if op in ("+", "-", "*", "<<", ">>", "&", "|", "^"):
            if op in ("+", "-", "*") and (ctype.is_float or ctype.kind == "unknown"):
                self.count_op(ctype, 1.0)
            else:
                self.count_op(ctype if not ctype.is_float else INT, 1.0)

    def _unary(self, node: Node) -> Val:
        op = self.text(node.child_by_field_name("operator"))
        arg = self.eval(node.child_by_field_name("argument"))
        if arg.value is not None:
            if op == "~":  # (of an integer: a float operand, infinity among them, has no complement)
                value = float(~int(arg.value)) if math.isfinite(arg.value) else None
            else:
                value = {"-": -arg.value, "+": arg.value, "!": float(not arg.value)}.get(op)
            if not arg.static and op in ("!", "~"):
                self.count_int(1.0)
            return Val(arg.ctype, value, Linear.constant(value), static=arg.static)
        if op in ("!", "~") and arg.ctype.is_int:
            self.count_int(1.0)
        if op == "-":
            return Val(arg.ctype, None, arg.lin.scale(-1.0), arg.root, arg.space)
        return Val(arg.ctype if op != "!" else BOOL, None, arg.lin.opaque())

    def _update(self, node: Node) -> Val:
        target = node.child_by_field_name("argument")
        val = self._lvalue_load(target, compound=True)
        self.count_op(val.ctype if val.ctype.kind != "unknown" else INT, 1.0)
        if target is not None and target.type == "identifier":
            name = self.text(target)
            current = self.lookup(name)
            if current is not None:
                self.assign(name, Val(current.ctype, None, current.lin.opaque() if current.lin.atoms else Linear(const_known=False),
                                      current.root, current.space, current.dims))
        return val

    def _assignment(self, node: Node) -> Val:
        left = node.child_by_field_name("left")
        op = self.text(node.child_by_field_name("operator"))
        right = self.eval(node.child_by_field_name("right"))
        compound = op != "="
        target = self._lvalue_load(left, compound=compound) if compound else self._lvalue_type(left)
        if compound:
            arith = op[:-1]
            ctype = common_type(target.ctype, right.ctype)
            self._count_binary(arith, ctype if not target.ctype.pointer else INT, target, right)
        self._store(left, right if not compound else Val(target.ctype))
        if left is not None and left.type == "identifier":
            name = self.text(left)
            current = self.lookup(name)
            if compound:
                if current is not None:
                    if op in ("+=", "-=") and current.ctype.pointer:
                        new_lin = current.lin.add(right.lin, 1.0 if op == "+=" else -1.0)
                    else:
                        new_lin = Linear(const_known=False, nonlinear=current.lin.atoms | right.lin.atoms)
                    self.assign(name, Val(current.ctype, None, new_lin, current.root, current.space, current.dims))
            else:
                ctype = current.ctype if current is not None and current.ctype.kind != "unknown" else right.ctype
                root = right.root if right.root is not None else (current.root if current is not None and not ctype.pointer else None)
                value = right.value if self.loop_depth == 0 else None
                space = right.space if right.root else (current.space if current else None)
                self.assign(name, Val(ctype, value, right.lin, root, space, right.dims))
        return right

    def _lvalue_type(self, node: Node | None) -> Val:
        if node is None:
            return UNKNOWN_VAL
        if node.type == "identifier":
            return self.lookup(self.text(node)) or UNKNOWN_VAL
        return UNKNOWN_VAL

    def _lvalue_load(self, node: Node | None, compound: bool) -> Val:
        """Read an lvalue (for `+=`, `++`): counts the load of an array element."""
        if node is None:
            return UNKNOWN_VAL
        return self.eval(node)

    def _store(self, node: Node | None, value: Val) -> None:
        if node is None:
            return
        if node.type == "subscript_expression":
            base, index, elem = self._subscript_address(node)
            if base is not None:
                self.record_access(base, index, elem, True, node)
        elif node.type == "pointer_expression" and self.text(node.child_by_field_name("operator")) == "*":
            target = self.eval(node.child_by_field_name("argument"))
            if target.root is not None:
                self.record_access(target, target.lin, target.ctype.deref(), True, node)
        elif node.type == "field_expression":
            arg = node.child_by_field_name("argument")
            if arg is not None and arg.type == "subscript_expression":
                base, index, elem = self._subscript_address(arg)
                if base is not None:
                    self.record_access(base, index, self._field_type(elem, ""), True, node)
            elif self.text(node.child_by_field_name("operator")) == "->":
                base = self.eval(arg)
                if base.root is not None:
                    self.record_access(base, base.lin, UNKNOWN, True, node)
        elif node.type == "parenthesized_expression":
            for child in node.named_children:
                self._store(child, value)

    def _subscript_address(self, node: Node) -> tuple[Val | None, Linear, CType]:
        """(array base, element index, element type) of `a[i]` / `a[i][j]` without loading."""
        arg = node.child_by_field_name("argument")
        indices = node.child_by_field_name("indices")
        index_node = next((c for c in indices.named_children if c.type != "comment"), None) if indices is not None else None
        base = self.eval(arg) if arg is None or arg.type != "subscript_expression" else self._partial_subscript(arg)
        index = self.eval(index_node)
        if base.root is None:
            return None, Linear(), UNKNOWN
        lin = base.lin.add(index.lin)
        if base.dims and len(base.dims) > 1:
            stride: float | None = 1.0
            for d in base.dims[1:]:
                stride = stride * d if stride is not None and d else None  # an unknown dimension
            lin = base.lin.add(index.lin.scale(stride))
        return base, lin, base.ctype.deref()

    def _partial_subscript(self, node: Node) -> Val:
        """`a[i]` where `a` is a multi-dimensional array: an address, not a load."""
        base, lin, elem = self._subscript_address(node)
        if base is None or base.root is None:
            return UNKNOWN_VAL
        if base.dims and len(base.dims) > 1:
            return Val(elem, None, lin, base.root, base.space, base.dims[1:])
        # a pointer loaded from memory (`float **rows`): load the row pointer, then index it
        self.record_access(base, lin, elem, False, node)
        return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False), base.root + "[]", base.space)

    def _subscript(self, node: Node) -> Val:
        base, lin, elem = self._subscript_address(node)
        if base is None:
            return Val(UNKNOWN, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        if base.dims and len(base.dims) > 1:
            return Val(elem, None, lin, base.root, base.space, base.dims[1:])
        self.record_access(base, lin, elem, False, node)
        if base.space == "const" or base.space == "local":
            return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        return Val(elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))

    def _pointer(self, node: Node) -> Val:
        op = self.text(node.child_by_field_name("operator"))
        arg_node = node.child_by_field_name("argument")
        if op == "&":
            if arg_node is not None and arg_node.type == "subscript_expression":
                base, lin, elem = self._subscript_address(arg_node)
                if base is not None:
                    return Val(elem.address_of(), None, lin, base.root, base.space)
            arg = self.eval(arg_node)
            return Val(arg.ctype.address_of(), None, arg.lin, arg.root, arg.space)
        target = self.eval(arg_node)
        if target.root is not None:
            self.record_access(target, target.lin, target.ctype.deref(), False, node)
        return Val(target.ctype.deref(), None, Linear(nonlinear=frozenset({"data"}), const_known=False))

    def _cast(self, node: Node) -> Val:
        type_text = self.text(node.child_by_field_name("type"))
        value_node = node.child_by_field_name("value")
        misparsed = self._misparsed_cast(node)
        if misparsed is not None:
            variable, op, argument = misparsed
            return self._combine(op, variable, self.eval(argument))
        val = self.eval(value_node)
        ctype = parse_type(type_text, self.aliases)
        if ctype.kind == "unknown" or ctype.kind == "struct":
            return val
        value = val.value
        if value is not None and ctype.is_int:
            value = float(int(value))
        lin = val.lin if ctype.is_int or ctype.pointer else val.lin.opaque()
        return Val(ctype, value, lin, val.root if ctype.pointer else None, val.space if ctype.pointer else None,
                   static=val.static)

    def _conditional(self, node: Node) -> Val:
        cond = self.eval(node.child_by_field_name("condition"))
        saved = self.mult
        if cond.known:
            chosen = node.child_by_field_name("consequence") if cond.value else node.child_by_field_name("alternative")
            return self.eval(chosen)
        weight = self._branch_weight(node.child_by_field_name("condition"), cond)
        self.mult = saved * weight
        a = self.eval(node.child_by_field_name("consequence"))
        self.mult = saved * (1.0 - weight)
        b = self.eval(node.child_by_field_name("alternative"))
        self.mult = saved
        self.count_int(1.0)  # select
        ctype = common_type(a.ctype, b.ctype)
        return Val(ctype, None, Linear(const_known=False, nonlinear=a.lin.atoms | b.lin.atoms | cond.lin.atoms),
                   a.root or b.root, a.space or b.space)

    def _sizeof(self, node: Node) -> Val:
        type_node = node.child_by_field_name("type")
        ctype = parse_type(self.text(type_node), self.aliases) if type_node is not None else UNKNOWN
        value_node = node.child_by_field_name("value")
        if type_node is None and value_node is not None:
            # `sizeof(int4)`, `sizeof(T)`, `sizeof(x)`: the grammar reads a parenthesised name as
            # an expression; it names a type, or a variable whose type we know
            name = self.text(value_node).strip("() \t")
            if re.fullmatch(r"[A-Za-z_]\w*", name):
                ctype = parse_type(name, self.aliases)
                known = self.lookup(name)
                if ctype.kind in ("unknown", "struct") and known is not None:
                    ctype = known.ctype
        size = float(ctype.value_bytes) if ctype.kind not in ("unknown", "struct") else 4.0
        return Val(LONG, size, Linear.constant(size), static=True)

    def _initializer_list(self, node: Node) -> Val:
        for child in node.named_children:
            self.eval(child)
        return UNKNOWN_VAL

    def _call(self, node: Node) -> Val:
        self.call_line = self.line(node)
        fn = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        arg_nodes = [c for c in args_node.named_children if c.type != "comment"] if args_node is not None else []
        name = self.text(fn).replace(" ", "")
        simple = re.sub(r"<.*>", "", name).split("::")[-1] if name else ""
        if fn is not None and fn.type == "field_expression":
            return self._method_call(fn, arg_nodes)
        special = self._call_on_nodes(node, name, simple, arg_nodes)
        if special is not None:
            return special
        args = [self.eval(a) for a in arg_nodes]
        builtin = self._math_call(simple, args)
        if builtin is None:
            builtin = self._builtin_call(simple, args)
        if builtin is not None:
            return builtin
        return self._user_call(fn, simple, args)

    def _method_call(self, fn: Node, arg_nodes: list[Node]) -> Val:
        """`v.load()`, `cg::this_grid().sync()`: evaluate the object, unknown result."""
        obj = self.eval(fn.child_by_field_name("argument"))
        method = self.text(fn.child_by_field_name("field"))
        if method in ("data", "get", "ptr", "begin") and obj.root is not None:
            return Val(obj.ctype if obj.ctype.pointer else obj.ctype.address_of(), None, obj.lin, obj.root, obj.space)
        callee = self.callees.get(method)
        if callee is not None and method not in self.inline_stack and len(self.inline_stack) < MAX_INLINE_DEPTH:
            return self._inline(method, callee, [self.eval(a) for a in arg_nodes])
        for a in arg_nodes:
            self.eval(a)
        return Val(UNKNOWN, None, Linear(nonlinear=frozenset({"data"}), const_known=False))

    def _call_on_nodes(self, node: Node, name: str, simple: str, arg_nodes: list[Node]) -> Val | None:
        """Calls that read their argument nodes themselves (casts, atomics, tensor cores, cache
        hints, the OpenMP thread API); None for any other call."""
        if simple in ("reinterpret_cast", "static_cast", "const_cast", "dynamic_cast") and arg_nodes:
            cast_target = re.search(r"<(.*)>", name)
            val = self.eval(arg_nodes[0])
            ctype = parse_type(cast_target.group(1), self.aliases) if cast_target else val.ctype
            if ctype.kind in ("unknown", "struct") and not ctype.pointer:
                return val
            return Val(ctype, val.value if not ctype.pointer else None, val.lin if (ctype.is_int or ctype.pointer) else val.lin.opaque(),
                       val.root if ctype.pointer else None, val.space if ctype.pointer else None, static=val.static)
        if simple in costs.ATOMIC_FUNCTIONS:
            return self._atomic(node, arg_nodes)
        if simple == "mma_sync" and len(arg_nodes) >= 4:
            return self._mma_sync(arg_nodes)
        if simple in ("load_matrix_sync", "store_matrix_sync") and len(arg_nodes) >= 3:
            return self._matrix_sync(node, arg_nodes, simple == "store_matrix_sync")
        if simple in costs.LOAD_FUNCTIONS and arg_nodes:
            ptr = self.eval(arg_nodes[0])
            if ptr.root is not None:
                self.record_access(ptr, ptr.lin, ptr.ctype.deref(), False, node)
            return Val(ptr.ctype.deref(), None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        if simple in costs.STORE_FUNCTIONS and len(arg_nodes) >= 2:
            ptr = self.eval(arg_nodes[0])
            self.eval(arg_nodes[1])
            if ptr.root is not None:
                self.record_access(ptr, ptr.lin, ptr.ctype.deref(), True, node)
            return UNKNOWN_VAL
        if simple in OMP_THREAD_API:
            atom, dim = OMP_THREAD_API[simple]
            if atom is not None:
                return Val(INT, None, Linear.atom(atom))
            shape = self.launch.block if dim == "block" else self.launch.grid
            value = float(shape[0]) if shape is not None else None
            return Val(INT, value, Linear.constant(value))
        return None

    def _math_call(self, simple: str, args: list[Val]) -> Val | None:
        """Synchronisation, warp intrinsics, math library and half-precision intrinsics; None for
        any other call."""
        if simple in costs.SYNC_FUNCTIONS:
            return UNKNOWN_VAL
        if simple in costs.WARP_FUNCTIONS:
            self.count_int(1.0)
            ctype = args[1].ctype if len(args) > 1 else INT
            return Val(ctype, None, Linear(nonlinear=frozenset({"data"}), const_known=False))
        if args and all(a.static for a in args) and (simple in costs.MATH_FP32 or simple in costs.MATH_FP64):
            # `sqrtf(2.0f / M_PI)`: every operand is a compile-time constant, the compiler folds it
            precision = F32 if simple in costs.MATH_FP32 else F64
            if simple in costs.OVERLOADED and all(a.ctype.kind == "f32" for a in args):
                precision = F32
            value = _fold_math(simple, args)
            return Val(precision, value, Linear.constant(value) if value is not None else Linear(const_known=False),
                       static=True)
        if simple in costs.MATH_FP32:
            fp, sfu, ints = costs.MATH_FP32[simple]
            self.count_math(fp, sfu, ints, F32)
            return Val(F32, _fold_math(simple, args), Linear(const_known=False))
        if simple in costs.MATH_FP64:
            precision = F64
            if simple in costs.OVERLOADED and args and args[0].ctype.kind == "f32" and all(a.ctype.kind != "f64" for a in args):
                precision = F32  # `sqrt(float)` is the float overload in CUDA C++
                table = costs.MATH_FP32.get(simple + "f", costs.MATH_FP64[simple])
                fp, sfu, ints = table
            else:
                fp, sfu, ints = costs.MATH_FP64[simple]
            self.count_math(fp, sfu, ints, precision)
            return Val(precision, _fold_math(simple, args), Linear(const_known=False))
        if simple in costs.HALF_INTRINSICS:
            self.count_math(costs.HALF_INTRINSICS[simple], 0, 0, F16)
            return Val(F16)
        return None

    def _builtin_call(self, simple: str, args: list[Val]) -> Val | None:
        """min/max/abs, vector constructors, conversion intrinsics and functional casts; None for
        any other call."""
        if simple in _MIN_MAX_ABS:
            ctype = common_type(args[0].ctype, args[1].ctype) if len(args) > 1 else (args[0].ctype if args else INT)
            values = [a.value for a in args if a.value is not None]
            if values and len(values) == len(args):
                folded = (min if "min" in simple else max)(values) if simple not in ("abs", "labs", "llabs") else abs(values[0])
                return Val(ctype, folded, Linear.constant(folded))
            if ctype.is_int:
                self.count_int(1.0)
            return Val(ctype, None, Linear(const_known=False, nonlinear=_atoms_of(args)))
        if simple in _VECTOR_CONSTRUCTORS:
            return Val(parse_type(simple.replace("make_", ""), self.aliases))
        if simple in _CONVERSIONS:
            target = {"float": F32, "double": F64, "int": INT}.get(simple)
            if target is None:
                target = _conversion_target(simple)
            return Val(target, args[0].value if args else None, args[0].lin if args and target.is_int else Linear(const_known=False))
        if (simple in self.aliases or simple in _SCALAR_TYPE_NAMES) and len(args) == 1 and simple not in self.callees:
            # a functional cast: `Real_t(0.5)`, `float(i)`
            target = self.aliases.get(simple) or parse_type(simple, self.aliases)
            operand = args[0]
            return Val(target, operand.value, operand.lin if target.is_int else operand.lin.opaque(), static=operand.static)
        return None

    def _user_call(self, fn: Node | None, simple: str, args: list[Val]) -> Val:
        """A `__device__` function, inlined when visible; otherwise a function of its inputs."""
        local = self.lambdas.get(simple) if fn is not None and fn.type == "identifier" else None
        if local is not None and simple not in self.inline_stack and len(self.inline_stack) < MAX_INLINE_DEPTH:
            lambda_, captures = local
            return self._inline(simple, lambda_, args, captures=captures if captures is not None else self.scopes)
        callee = self.callees.get(simple)
        if callee is not None and simple not in self.inline_stack and len(self.inline_stack) < MAX_INLINE_DEPTH:
            template_args = []
            if fn is not None and fn.type in ("template_function", "qualified_identifier"):
                targs = next((c for c in _walk_named(fn) if c.type == "template_argument_list"), None)
                if targs is not None:
                    template_args = [c for c in targs.named_children if c.type != "comment"]
            return self._inline(simple, callee, args, template_args)
        if callee is None and simple and simple not in self._assumed and simple not in ("assert", "static_cast", "reinterpret_cast"):
            self.notes.append(f"call to `{simple}` not analysed (definition not visible)")
            self._assumed.add(simple)
        ctype = next((a.ctype for a in args if a.ctype.is_float), UNKNOWN)
        # an unknown function of indices is still an index over the same ranges (a constructor
        # `Position(x, y)`, a helper `idx(i, j)`); of nothing known, it is data
        return Val(ctype, None, Linear(nonlinear=_atoms_of(args) or frozenset({"data"}), const_known=False))

    # -- tensor cores ------------------------------------------------------------------------

    def _fragment_declaration(self, type_text: str, node: Node) -> None:
        """`wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a, b[2];`: remember
        each name's use, shape and element type."""
        m = _FRAGMENT.search(type_text)
        if m is None:
            return
        parts = [p.strip() for p in m.group(1).split(",")]
        if len(parts) < 4:
            return
        use = parts[0].split("::")[-1]
        shape = tuple(self._fragment_dim(p) for p in parts[1:4])
        element = self._tensor_type_name(parts[4]) if len(parts) > 4 else ""
        for declarator in node.children_by_field_name("declarator"):
            name = re.match(r"\W*(\w+)", self.text(declarator))
            if name:
                self.fragments[name.group(1)] = (use, shape, element)

    def _tensor_type_name(self, text: str) -> str:
        """A fragment's element type as written, or the scalar a template parameter or alias
        stands for (`In` bound to `double`)."""
        if _tensor_field(text, "float") is not None or "precision" in text:
            return text
        ctype = parse_type(text, self.aliases)
        return {"f64": "double", "f16": "half", "f32": "float"}.get(ctype.kind, text) if ctype.lanes == 1 else text

    def _fragment_dim(self, text: str) -> float | None:
        value = _int_literal(text)
        if value is not None:
            return value
        bound = self.lookup(text)
        if bound is not None and bound.value is not None:
            return bound.value
        if self.constant_lookup is not None:
            found = self.constant_lookup(text)
            if found is not None:
                return found[0]
        return None

    def _mma_sync(self, arg_nodes: list[Node]) -> Val:
        """`wmma::mma_sync(d, a, b, c)`: one m×n×k multiply-accumulate per warp, 2·m·n·k
        operations in the precision of `a` (and, for FP16, of the accumulator)."""
        for a in arg_nodes:
            self.eval(a)
        names = [re.match(r"\W*(\w+)", self.text(a)) for a in arg_nodes]
        fragments = [self.fragments.get(n.group(1)) if n else None for n in names]
        a_frag, acc = fragments[1], fragments[0] or fragments[3]
        declared = a_frag[1] if a_frag is not None else (acc[1] if acc is not None else (None, None, None))
        if any(d is None for d in declared):
            self.assume("tensor-core fragment shape unknown: assumed 16×16×16")
        shape = tuple(d if d is not None else 16.0 for d in declared)
        element = a_frag[2] if a_frag is not None else "half"
        if a_frag is None:
            self.assume("tensor-core fragment types not visible: assumed FP16 inputs")
        accumulator = acc[2] if acc is not None else "float"
        self._count_tensor(2.0 * shape[0] * shape[1] * shape[2] / WARP_SIZE, _tensor_field(element, accumulator))
        return UNKNOWN_VAL

    def _matrix_sync(self, node: Node, arg_nodes: list[Node], is_store: bool) -> Val:
        """`wmma::load_matrix_sync(frag, ptr, ldm)` / `store_matrix_sync(ptr, frag, ldm, layout)`:
        the warp moves the fragment's tile; each thread its share of the elements."""
        ptr_node, frag_node = (arg_nodes[0], arg_nodes[1]) if is_store else (arg_nodes[1], arg_nodes[0])
        for a in arg_nodes:
            if a is not ptr_node:
                self.eval(a)
        ptr = self.eval(ptr_node)
        name = re.match(r"\W*(\w+)", self.text(frag_node))
        fragment = self.fragments.get(name.group(1)) if name else None
        if ptr.root is None:
            return UNKNOWN_VAL
        dims = [d for d in fragment[1] if d is not None] if fragment is not None else []
        if fragment is not None and len(dims) == len(fragment[1]):
            m, n, k = dims
            use = fragment[0]
            rows_cols = m * k if use == "matrix_a" else (k * n if use == "matrix_b" else m * n)
            element = parse_type(fragment[2], self.aliases) if fragment[2] else ptr.ctype.deref()
            if element.kind in ("unknown", "struct") or "precision" in fragment[2]:
                element = ptr.ctype.deref()
        else:
            rows_cols, element = 256.0, ptr.ctype.deref()
        per_thread = max(1, int(rows_cols / WARP_SIZE))
        size = element.size_bytes if element.kind not in ("unknown", "struct", "void") else 2
        tile = CType(element.kind, size * per_thread, per_thread)
        self.record_access(ptr, ptr.lin, tile, is_store, node)
        return UNKNOWN_VAL

    def _count_tensor(self, ops_per_thread: float, field_name: str | None) -> None:
        if field_name is None:
            return
        setattr(self.counts, field_name, getattr(self.counts, field_name) + ops_per_thread * self.mult)

    def _asm(self, node: Node) -> Val:
        """Inline PTX: `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` is one warp-wide
        multiply-accumulate of 2·m·n·k operations."""
        text = self.text(node)
        for m in _PTX_MMA.finditer(text):
            types = m.group(4).split(".")
            inputs = next((t for t in types[1:] if t in _PTX_TYPES), types[-1] if types else "f16")
            accumulator = "half" if types and types[0] == "f16" else "float"
            element = _PTX_TYPES.get(inputs, "half")
            self._count_tensor(2.0 * int(m.group(1)) * int(m.group(2)) * int(m.group(3)) / WARP_SIZE,
                               _tensor_field(element, accumulator))
        for child in node.named_children:
            if child.type != "string_literal":
                self.eval(child)
        return UNKNOWN_VAL

    def _atomic(self, node: Node, arg_nodes: list[Node]) -> Val:
        if not arg_nodes:
            return UNKNOWN_VAL
        ptr = self.eval(arg_nodes[0])
        vals = [self.eval(a) for a in arg_nodes[1:]]
        elem = ptr.ctype.deref()
        if ptr.root is not None:
            self.record_access(ptr, ptr.lin, elem, True, node, atomic=True)
        else:
            self.counts.atomics += self.mult
        self.count_int(1.0)
        return Val(vals[0].ctype if vals else elem, None, Linear(nonlinear=frozenset({"data"}), const_known=False))

    def _inline(self, name: str, callee: Callee, args: list[Val], template_args: list[Node] | None = None,
                captures: dict[str, Val] | list[dict[str, Val]] | None = None) -> Val:
        """Walk `callee`'s body with its parameters bound to `args`; a lambda's body also sees
        `captures` (the scopes it was defined in, or a launch site's variables)."""
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
                    aliases_added[pname] = parse_type(self.text(arg), self.aliases)
                else:
                    # a bare name (`fill<TILE, STRIDE>(...)`) parses as a type descriptor
                    name = self.text(arg).strip() if arg.type == "type_descriptor" else ""
                    val = self._identifier_named(name) if _IDENT.fullmatch(name) else self.eval(arg)
                    if val.value is not None:
                        bound[pname] = Val(INT, val.value, Linear.constant(val.value), static=True)
        declarator = fn.child_by_field_name("declarator")
        while declarator is not None and declarator.type not in ("function_declarator", "lambda_declarator"):
            declarator = declarator.child_by_field_name("declarator")
        body = fn.child_by_field_name("body")
        if body is None or (declarator is None and fn.type != "lambda_expression"):
            return UNKNOWN_VAL
        saved_data = self.data
        saved_place = (self.path, self.line_offset, self.callsites)
        if callee.data is not self.data:
            if self.path is not None:
                self.callsites = ((self.path, self.call_line), *self.callsites)
            if callee.line_base is not None and callee.path is not None:
                self.path, self.line_offset = callee.path, callee.line_base
            else:
                self.path = None  # lines of a text of its own (a lambda's copy): not tied to compiled code
        self.data = callee.data
        scope: dict[str, Val] = {}
        param_list = declarator.child_by_field_name("parameters") if declarator is not None else None
        param_nodes = [p for p in param_list.named_children if p.type.endswith("parameter_declaration")] if param_list is not None else []
        for index, param in enumerate(param_nodes):
            ptype = parse_type(self.text(param.child_by_field_name("type")) + " " + "*" * self.text(param).count("*"), self.aliases)
            pname = _declared_name(self, param)
            if pname is None:
                continue
            if index < len(args):
                actual = args[index]
                ctype = ptype if ptype.kind not in ("unknown", "struct") else actual.ctype
                scope[pname] = Val(ctype, actual.value, actual.lin, actual.root, actual.space, actual.dims)
            else:
                scope[pname] = Val(ptype, None, Linear(const_known=False))
        ret_type = parse_type(self.text(fn.child_by_field_name("type")), self.aliases)
        scope.update(bound)
        saved_aliases = self.aliases
        if aliases_added:
            self.aliases = {**self.aliases, **aliases_added}
        saved_scopes = self.scopes
        saved_returns = self.return_values
        if captures is None:
            self.scopes = [scope]
        elif isinstance(captures, dict):
            self.scopes = [captures, scope]
        else:
            self.scopes = [*captures, scope]
        self.return_values = []
        self.inline_stack.append(name)
        try:
            self.walk_statement(body)
            returned = self.return_values[-1] if self.return_values else None
        finally:
            self.inline_stack.pop()
            self.scopes = saved_scopes
            self.return_values = saved_returns
            self.data = saved_data
            self.path, self.line_offset, self.callsites = saved_place
            self.aliases = saved_aliases
        if returned is None:
            # a constructor or a function whose result we did not see: it depends on its inputs
            atoms = frozenset().union(*(a.lin.atoms for a in args)) if args else frozenset()
            return Val(ret_type, None, Linear(nonlinear=atoms, const_known=False))
        return Val(ret_type if ret_type.kind not in ("unknown", "struct", "void") else returned.ctype,
                   returned.value, returned.lin, returned.root, returned.space)


_MIN_MAX_ABS = frozenset({"min", "max", "std::min", "std::max", "umin", "umax", "llmin", "llmax", "abs", "labs", "llabs"})
_VECTOR_CONSTRUCTORS = frozenset({"dim3", "make_float2", "make_float3", "make_float4", "make_double2", "make_int2",
                                  "make_int3", "make_int4", "make_uint2", "make_uint4", "make_double3", "make_double4",
                                  "make_short2", "make_uchar4"})
_CONVERSIONS = frozenset({"__int2float_rn", "__float2int_rn", "__float2int_rz", "__int2double_rn", "__double2float_rn",
                          "__float2half", "__half2float", "__float2uint_rn", "__uint2float_rn", "float", "double", "int",
                          "__ll2float_rn", "__float_as_int", "__int_as_float", "__double_as_longlong",
                          "__longlong_as_double"})


@lru_cache(maxsize=8192)
def _number_literal(written: str) -> Val:
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


def _conversion_target(name: str) -> CType:
    """The result type of a conversion intrinsic, from its name (`__int2float_rn` -> float)."""
    if "2half" in name:
        return F16
    if "2float" in name or "as_float" in name:
        return F32
    return F64 if "double" in name.split("2")[-1] else INT


def _atoms_of(args: list[Val]) -> frozenset[str]:
    """The index atoms any of the values depends on."""
    return frozenset().union(*(a.lin.atoms for a in args)) if args else frozenset()


_SCALAR_TYPE_NAMES = {"float", "double", "int", "unsigned", "long", "short", "char", "size_t", "int64_t",
                      "uint64_t", "int32_t", "uint32_t", "half", "__half", "bool"}


def _pow2(exponent: float | None) -> float | None:
    """2**exponent for a shift amount; None when it is unknown or not a sane shift."""
    if exponent is None or not 0 <= exponent < 63:
        return None
    return float(2 ** int(exponent))


def _exact_float_scale(left: Val, right: Val) -> bool:
    """One side is a float value, the other a double literal power of two."""
    for a, b in ((left, right), (right, left)):
        if a.ctype.kind == "f32" and b.ctype.kind == "f64" and b.static and b.value:
            exponent = math.log2(abs(b.value))
            if exponent.is_integer():
                return True
    return False


def _walk_named(node: Node):
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


def _declared_name(walker: KernelWalker, param: Node) -> str | None:
    node = param.child_by_field_name("declarator")
    while node is not None and node.type not in ("identifier",):
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in node.named_children if c.type not in ("type_qualifier",)), None)
        node = nxt
    return walker.text(node) if node is not None else None


def type_is_auto(ctype: CType) -> bool:
    return ctype.kind in ("unknown", "struct")


def _fold(op: str, a: float | None, b: float | None) -> float | None:
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


def _fold_math(name: str, args: list[Val]) -> float | None:
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


def _linear(op: str, a: Linear, b: Linear, av: float | None, bv: float | None) -> Linear:
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


_STATEMENTS: dict[str, Callable[[KernelWalker, Node], None]] = {
    "compound_statement": KernelWalker._compound,
    "expression_statement": KernelWalker._expression_statement,
    "declaration": KernelWalker._declaration,
    "if_statement": KernelWalker._if,
    "for_statement": KernelWalker._for,
    "for_range_loop": KernelWalker._range_for,
    "while_statement": KernelWalker._while,
    "do_statement": KernelWalker._do,
    "switch_statement": KernelWalker._switch,
    "return_statement": KernelWalker._return,
    "comment": lambda self, node: None,
    "preproc_call": lambda self, node: None,
    "type_definition": lambda self, node: None,
    "break_statement": lambda self, node: None,
    "continue_statement": lambda self, node: None,
    "goto_statement": lambda self, node: None,
    "labeled_statement": KernelWalker._labeled,
}

_EXPRESSIONS: dict[str, Callable[[KernelWalker, Node], Val]] = {
    "number_literal": KernelWalker._number,
    "identifier": KernelWalker._identifier,
    "field_expression": KernelWalker._field,
    "parenthesized_expression": KernelWalker._parenthesized,
    "condition_clause": KernelWalker._parenthesized,
    "binary_expression": KernelWalker._binary,
    "unary_expression": KernelWalker._unary,
    "update_expression": KernelWalker._update,
    "assignment_expression": KernelWalker._assignment,
    "subscript_expression": KernelWalker._subscript,
    "pointer_expression": KernelWalker._pointer,
    "cast_expression": KernelWalker._cast,
    "conditional_expression": KernelWalker._conditional,
    "call_expression": KernelWalker._call,
    "gnu_asm_expression": KernelWalker._asm,
    "sizeof_expression": KernelWalker._sizeof,
    "comma_expression": KernelWalker._comma,
    "initializer_list": KernelWalker._initializer_list,
    "char_literal": lambda self, node: Val(INT, None, Linear(const_known=False)),
    "string_literal": lambda self, node: UNKNOWN_VAL,
    "true": lambda self, node: Val(BOOL, 1.0, Linear.constant(1.0)),
    "false": lambda self, node: Val(BOOL, 0.0, Linear.constant(0.0)),
    "null": lambda self, node: Val(INT, 0.0, Linear.constant(0.0)),
    "this": lambda self, node: UNKNOWN_VAL,
    "qualified_identifier": lambda self, node: self._identifier(node),
    "template_function": lambda self, node: UNKNOWN_VAL,
    "lambda_expression": lambda self, node: UNKNOWN_VAL,
}


WARP_SIZE = 32.0
_IDENT = re.compile(r"[A-Za-z_]\w*")
_THREAD_INDEX_ATOMS = frozenset(("tx", "ty", "tz", "bx", "by", "bz"))


_JUMPS = frozenset({"continue_statement", "break_statement", "return_statement", "goto_statement"})


def _jumps_away(node: Node | None) -> bool:
    """Whether a statement ends by leaving its block (`continue;`, `{ ...; return; }`)."""
    while node is not None and node.type == "compound_statement":
        statements = [c for c in node.named_children if c.type != "comment"]
        node = statements[-1] if statements else None
    return node is not None and node.type in _JUMPS


def _thread_dependent(val: Val) -> bool:
    return any(a in _THREAD_INDEX_ATOMS or a.startswith("o") for a in val.lin.atoms)
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


def _int_literal(text: str) -> float | None:
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
