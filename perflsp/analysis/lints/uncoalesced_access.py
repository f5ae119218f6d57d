"""`memory/uncoalesced-access`: global memory accesses where neighbouring threads touch addresses far apart (uncoalesced).

What the rule reports, why, its fix and its example are declared once, in `RULE` below: the
registry (`perflsp.analysis.rules`) and docs/rules/ are generated from it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from perflsp.analysis.ctype import INT, CType
from perflsp.analysis.exprtypes import has_precision, type_of
from perflsp.analysis.lints.context import Instantiation, LintContext, walk
from perflsp.analysis.models import Finding
from perflsp.analysis.ruledef import Example, RuleInfo
from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.models import CudaFunction, Span

_DOC = """\
## What it reports

A global-memory access whose address moves by more than a sector from one thread to the next,
i.e. whose index is *strided* by `threadIdx.x`:

```cuda
const int row = blockIdx.x * blockDim.x + threadIdx.x;   // one thread per row
for (int c = 0; c < cols; ++c)
    s += a[row * cols + c];          // neighbouring threads: `cols` floats apart
```

The index is followed through local variables (`tid`, `row = tid`, `const float *p = a + tid * n`
then `p[k]`) as a polynomial, and the coefficient of `threadIdx.x` in the element offset is
judged:

- a run-time value (`cols`, `stride`, `blockDim.y`): reported ("unless it is 1");
- a constant whose distance in bytes is at least 32 (`a[threadIdx.x * 8]` on floats): reported;
- 1 or a small constant (`a[2 * tid]` on floats, `float4` loads): not reported.

Only memory reached through a kernel's pointer parameters counts as global; `__shared__`,
`__constant__` and local arrays are not checked. An index the rule cannot follow (`%`, `/`,
function calls, data-dependent indices) is never reported.

## Why it matters on GPUs

A warp's 32 loads are served together. `a[tid]` on floats needs four 32-byte sectors for the
whole warp; `a[tid * cols]` needs one sector per thread: 32 transactions for the same useful
bytes, 8x the DRAM/L2 traffic, and 7/8 of every sector fetched for nothing. The roofline
intensity computed from useful bytes then overstates the kernel badly.

## What to do

Give consecutive threads consecutive addresses: one warp per row with lanes striding over
columns, a shared-memory tile that is read row-wise and written column-wise (transpose), or a
structure-of-arrays layout instead of an array of structures.

## Options

The 32-byte threshold is `LintOptions.strided_access_min_bytes`.
"""

_BAD = """\
// one thread per row: neighbouring threads read `cols` floats apart
__global__ void row_sums(int rows, int cols, const float *a, float *sums)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float s = 0.0f;
        for (int c = 0; c < cols; ++c)
            s += a[row * cols + c];
        sums[row] = s;
    }
}
"""

_GOOD = """\
// one warp per row: neighbouring lanes read neighbouring columns
__global__ void row_sums(int rows, int cols, const float *a, float *sums)
{
    int row = blockIdx.x;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32)
        s += a[row * cols + c];
    for (int offset = 16; offset > 0; offset /= 2)
        s += __shfl_down_sync(0xffffffffu, s, offset);
    if (threadIdx.x == 0)
        sums[row] = s;
}
"""

RULE = RuleInfo(
    code="memory/uncoalesced-access",
    name="uncoalesced-access",
    default_severity="warning",
    has_fix=False,
    summary="neighbouring threads access global memory far apart (strided by `threadIdx.x`)",
    fix_note="needs a different work distribution",
    applies_to="kernels (accesses through their pointer parameters)",
    doc=_DOC,
    example=Example(bad=_BAD, good=_GOOD),
)
CODE = RULE.code
NAME = RULE.name
DEFAULT_SEVERITY = RULE.default_severity

TX = "threadIdx.x"
SECTOR_BYTES = 32
Mono = tuple[str, ...]
Poly = dict[Mono, int]


class _TxUnknown:
    """The value depends on threadIdx.x in a way the rule cannot follow."""


TX_UNKNOWN = _TxUnknown()
_BUILTINS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def check(ctx: LintContext) -> list[Finding]:
    findings: list[Finding] = []
    for kernel in ctx.kernels.kernels:
        node = ctx.function_node(kernel)
        if node is None:
            continue
        seen: set[int] = set()
        for inst in ctx.instantiations(kernel):
            analysis = _KernelIndexes(ctx, kernel, node, inst)
            for finding in analysis.findings():
                if finding.span.start_byte not in seen:
                    seen.add(finding.span.start_byte)
                    findings.append(finding)
    return findings


@dataclass
class _Pointer:
    base: str  # the kernel parameter it points into
    offset: Poly | _TxUnknown
    element_bytes: int


class _KernelIndexes:
    def __init__(self, ctx: LintContext, kernel: CudaFunction, node: Node, inst: Instantiation):
        self.ctx = ctx
        self.kernel = kernel
        self.node = node
        self.inst = inst
        self.env: ConstEnv = ctx.value_env(inst)
        aliases = ctx.instantiation_aliases(inst)
        self.scope = ctx.scope_of(node, aliases)
        self.aliases = aliases
        self.params = {p.name for p in kernel.params if p.name}
        self.defs: dict[str, list[tuple[str, Node | None]]] = defaultdict(list)
        self.shared: set[str] = set()
        self._collect()
        self._memo: dict[str, Poly | _TxUnknown] = {}
        self._active: set[str] = set()
        self._fresh = 0

    # -- definitions of locals -----------------------------------------------------------

    def _collect(self) -> None:
        body = self.node.child_by_field_name("body")
        if body is None:
            return
        for node in self.ctx.descendants(body):
            kind = node.type
            if kind == "declaration":
                text = node.text or b""
                is_shared = b"__shared__" in text or b"__constant__" in text
                for declarator in node.children_by_field_name("declarator"):
                    name_node, value = _declared(declarator)
                    if name_node is None:
                        continue
                    name = _text(name_node)
                    inner = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
                    if is_shared or declarator.type == "array_declarator" or (
                            inner is not None and inner.type == "array_declarator"):
                        self.shared.add(name)  # shared, constant or a local array: not global memory
                    self.defs[name].append(("init", value))
            elif kind == "assignment_expression":
                left = node.child_by_field_name("left")
                op = node.child_by_field_name("operator")
                if left is not None and left.type == "identifier" and op is not None:
                    self.defs[_text(left)].append((op.type, node.child_by_field_name("right")))
            elif kind == "update_expression":
                arg = node.child_by_field_name("argument")
                if arg is not None and arg.type == "identifier":
                    self.defs[_text(arg)].append(("++", None))
            elif kind == "pointer_expression":
                op = node.child_by_field_name("operator")
                arg = node.child_by_field_name("argument")
                if op is not None and op.type == "&" and arg is not None and arg.type == "identifier":
                    self.defs[_text(arg)].append(("&", None))

    # -- polynomials -----------------------------------------------------------------------

    def fresh(self, label: str) -> Poly:
        self._fresh += 1
        return {(f"({label})#{self._fresh}",): 1}

    def poly(self, node: Node | None) -> Poly | _TxUnknown:
        if node is None:
            return TX_UNKNOWN
        kind = node.type
        if kind == "number_literal":
            number, _ = try_evaluate(_text(node))
            return {(): number} if isinstance(number, int) else self.fresh(_text(node))
        if kind == "parenthesized_expression":
            return self.poly(node.named_children[-1]) if node.named_children else TX_UNKNOWN
        if kind == "cast_expression":
            type_node = node.child_by_field_name("type")
            value = self.poly(node.child_by_field_name("value"))
            if type_node is not None and any(w in (type_node.text or b"") for w in (b"float", b"double")):
                return self._opaque(value, node)
            return value
        if kind == "field_expression":
            arg = node.child_by_field_name("argument")
            field = node.child_by_field_name("field")
            if arg is not None and field is not None and arg.type == "identifier" and _text(arg) in _BUILTINS:
                return {(f"{_text(arg)}.{_text(field)}",): 1}
            return self.fresh(_text(node))
        if kind == "identifier":
            return self.variable(_text(node))
        if kind == "unary_expression":
            op = node.child_by_field_name("operator")
            value = self.poly(node.child_by_field_name("argument"))
            if op is not None and op.type == "-":
                return _scale(value, -1)
            if op is not None and op.type == "+":
                return value
            return self._opaque(value, node)
        if kind == "binary_expression":
            op = node.child_by_field_name("operator")
            left = self.poly(node.child_by_field_name("left"))
            right = self.poly(node.child_by_field_name("right"))
            if op is None:
                return TX_UNKNOWN
            if op.type == "+":
                return _add(left, right)
            if op.type == "-":
                return _add(left, _scale(right, -1))
            if op.type == "*":
                return _mul(left, right)
            if op.type == "<<" and isinstance(right, dict) and set(right) <= {()}:
                return _scale(left, 1 << right.get((), 0)) if 0 <= right.get((), 0) < 31 else TX_UNKNOWN
            return self._opaque(_add(left, right), node)
        if kind == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            items = [a for a in args.named_children if a.type != "comment"] if args is not None else []
            if fn is not None and len(items) == 1 and (
                    fn.type == "primitive_type" or has_precision(type_of(_text(fn), self.aliases), INT)):
                return self.poly(items[0])  # `Index_t(8)`, `int(x)`: an integer conversion
        return self._opaque(self._any_tx(node), node)

    def _any_tx(self, node: Node) -> Poly | _TxUnknown:
        for child in walk(node):
            if child.type in ("identifier", "field_expression") and child is not node:
                value = self.poly(child)
                if isinstance(value, _TxUnknown) or _has_tx(value):
                    return TX_UNKNOWN
        return {}

    def _opaque(self, value: Poly | _TxUnknown, node: Node) -> Poly | _TxUnknown:
        if isinstance(value, _TxUnknown) or _has_tx(value):
            return TX_UNKNOWN
        return self.fresh(" ".join(self.ctx.text(node).split()))

    def variable(self, name: str) -> Poly | _TxUnknown:
        if name in self._memo:
            return self._memo[name]
        if name in self._active:
            return self.fresh(name)  # `i = i + 1`: the old value, tx-free by assumption
        folded, _ = try_evaluate(name, self.env)
        if isinstance(folded, int) and name not in self.defs:
            return {(): folded}
        defs = self.defs.get(name)
        if not defs:
            return {(name,): 1}  # a parameter or a name from elsewhere: a run-time, thread-uniform value
        self._active.add(name)
        try:
            result = self._combine(name, defs)
        finally:
            self._active.discard(name)
        self._memo[name] = result
        return result

    def _combine(self, name: str, defs: list[tuple[str, Node | None]]) -> Poly | _TxUnknown:
        values: list[Poly] = []
        modified = False
        for op, node in defs:
            if op in ("init", "="):
                if node is None:
                    modified = True
                    continue
                value = self.poly(node)
                if isinstance(value, _TxUnknown):
                    return TX_UNKNOWN
                values.append(value)
            elif op in ("+=", "-=", "++"):
                modified = True
                if node is not None:
                    value = self.poly(node)
                    if isinstance(value, _TxUnknown) or _has_tx(value):
                        return TX_UNKNOWN
            else:  # *=, /=, <<=, &: anything may happen
                modified = True
                if any(_has_tx(v) for v in values):
                    return TX_UNKNOWN
                return {(name,): 1}
        if not values:
            return {(name,): 1}
        if len(values) == 1 and not modified:
            return values[0]
        coefficients = {_freeze(_tx_coefficient(v)) for v in values}
        if len(coefficients) != 1:
            return TX_UNKNOWN
        coefficient = _tx_coefficient(values[0])
        result = {(*mono, TX): c for mono, c in coefficient.items()}
        return _add(result, {(f"{name}'",): 1})  # same thread-dependence, some uniform offset

    # -- pointers and accesses ----------------------------------------------------------------

    def pointer(self, node: Node | None) -> _Pointer | None:
        if node is None:
            return None
        kind = node.type
        if kind == "parenthesized_expression" and node.named_children:
            return self.pointer(node.named_children[-1])
        if kind == "cast_expression":
            inner = self.pointer(node.child_by_field_name("value"))
            if inner is not None:
                type_node = node.child_by_field_name("type")
                cast_to = type_of(_text(type_node), self.aliases) if type_node is not None else None
                size = self._element_bytes(cast_to) if cast_to is not None else None
                if size is not None and size != inner.element_bytes:
                    return None  # reinterpreted: element offsets change meaning
            return inner
        if kind == "identifier":
            name = _text(node)
            if name in self.shared:
                return None
            if name in self.params and name not in self.defs:
                ty = self.scope.lookup(name)
                if isinstance(ty, CType) and ty.pointer >= 1:
                    return _Pointer(name, {}, self._element_bytes(ty) or 4)
                return None
            defs = self.defs.get(name, [])
            if len(defs) == 1 and defs[0][0] == "init" and defs[0][1] is not None:
                return self.pointer(defs[0][1])
            return None
        if kind == "binary_expression":
            op = node.child_by_field_name("operator")
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op is None or op.type not in ("+", "-"):
                return None
            base = self.pointer(left)
            if base is not None:
                offset = self.poly(right)
                return _Pointer(base.base, _add(base.offset, _scale(offset, -1 if op.type == "-" else 1)), base.element_bytes)
            base = self.pointer(right) if op.type == "+" else None
            if base is not None:
                return _Pointer(base.base, _add(base.offset, self.poly(left)), base.element_bytes)
            return None
        if kind == "pointer_expression":
            op = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            if op is not None and op.type == "&" and arg is not None and arg.type == "subscript_expression":
                base = self.pointer(arg.child_by_field_name("argument"))
                if base is not None:
                    return _Pointer(base.base, _add(base.offset, self.poly(_index(arg))), base.element_bytes)
        return None

    def _element_bytes(self, ty: CType) -> int | None:
        """The bytes of what a pointer of type `ty` points to (None: a struct or unknown)."""
        if ty.pointer > 1:
            return 8
        element = ty.deref()
        return element.size_bytes if element.kind in ("int", "bool", "f16", "f32", "f64") else None

    def findings(self) -> list[Finding]:
        """One finding per array: the first strided access, the others as related locations."""
        first: dict[str, Finding] = {}
        others: dict[str, list[tuple[Span, str]]] = defaultdict(list)
        for base, finding in self._accesses():
            if base in first:
                others[base].append((finding.span, "another access with the same stride"))
            else:
                first[base] = finding
        out = []
        for base, finding in first.items():
            related = tuple(others[base])
            if related:
                finding = Finding(finding.code, f"{finding.message} ({len(related)} more access(es) to `{base}` alike)",
                                  finding.span, finding.severity, finding.fixes, related, finding.kernel)
            out.append(finding)
        return out

    def _accesses(self) -> Iterator[tuple[str, Finding]]:
        body = self.node.child_by_field_name("body")
        if body is None:
            return
        for node in self.ctx.descendants(body):
            if node.type == "subscript_expression":
                base_node = node.child_by_field_name("argument")
                if base_node is None or base_node.type == "subscript_expression":
                    continue
                pointer = self.pointer(base_node)
                if pointer is None:
                    continue
                total = _add(pointer.offset, self.poly(_index(node)))
                finding = self._judge(node, pointer, total, self.ctx.text(base_node))
                shown = self.ctx.text(base_node)
            elif node.type == "pointer_expression":
                op = node.child_by_field_name("operator")
                arg = node.child_by_field_name("argument")
                if op is None or op.type != "*" or arg is None:
                    continue
                pointer = self.pointer(arg)
                if pointer is None:
                    continue
                finding = self._judge(node, pointer, pointer.offset, pointer.base)
                shown = pointer.base
            else:
                continue
            if finding is not None:
                yield shown, finding

    def _judge(self, node: Node, pointer: _Pointer, total: Poly | _TxUnknown, shown: str) -> Finding | None:
        if isinstance(total, _TxUnknown) or any(mono.count(TX) > 1 for mono in total):
            return None
        coefficient = _tx_coefficient(total)
        if not coefficient:
            return None
        element = pointer.element_bytes
        if set(coefficient) == {()}:
            stride = abs(coefficient[()])
            if stride * element < self.ctx.options.strided_access_min_bytes:
                return None
            sectors = min(32, math.ceil(32 * stride * element / SECTOR_BYTES))
            ideal = max(1, math.ceil(32 * element / SECTOR_BYTES))
            apart = f"{stride} elements ({stride * element} bytes) apart"
        else:
            shown_stride = _render(coefficient)
            sectors, ideal = 32, max(1, math.ceil(32 * element / SECTOR_BYTES))
            apart = f"`{shown_stride}` elements apart"
        where = f" in `{self.inst.label}`" if self.inst.label else ""
        message = (f"uncoalesced access: neighbouring threads (threadIdx.x) {_verb(node)} `{shown}` {apart}{where}; "
                   f"one warp-wide access touches up to {sectors} sectors of 32 bytes instead of {ideal}")
        return Finding(code=CODE, message=message, span=self.ctx.span(node), severity=DEFAULT_SEVERITY,
                       kernel=self.kernel.qualified_name)


def _verb(node: Node) -> str:
    """How the access uses memory: `write` (assigned), `read and write` (updated in place), `pass`
    (its address goes to a call, which may do either), else `read`."""
    parent, child = node.parent, node
    while parent is not None and parent.type == "parenthesized_expression":
        child = parent
        parent = parent.parent
    if parent is None:
        return "read"
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == child:
        operator = parent.child_by_field_name("operator")
        return "write" if operator is not None and operator.type == "=" else "read and write"
    if parent.type == "update_expression":
        return "read and write"
    if parent.type == "pointer_expression" and (parent.child_by_field_name("operator") or parent).type == "&":
        return "pass the address of"
    return "read"


def _declared(declarator: Node) -> tuple[Node | None, Node | None]:
    value = None
    node: Node | None = declarator
    while node is not None:
        if node.type == "init_declarator":
            value = node.child_by_field_name("value")
            node = node.child_by_field_name("declarator")
        elif node.type in ("pointer_declarator", "array_declarator", "reference_declarator"):
            node = node.child_by_field_name("declarator") or next(
                (c for c in node.named_children if c.type == "identifier"), None)
        elif node.type == "identifier":
            return node, value
        else:
            return None, value
    return None, value


def _index(subscript: Node) -> Node | None:
    index = subscript.child_by_field_name("indices") or subscript.child_by_field_name("index")
    if index is not None and index.type == "subscript_argument_list":
        items = [c for c in index.named_children if c.type != "comment"]
        return items[0] if len(items) == 1 else None
    return index


def _has_tx(value: Poly | _TxUnknown) -> bool:
    return isinstance(value, _TxUnknown) or any(TX in mono for mono in value)


def _add(a: Poly | _TxUnknown, b: Poly | _TxUnknown) -> Poly | _TxUnknown:
    if isinstance(a, _TxUnknown) or isinstance(b, _TxUnknown):
        return TX_UNKNOWN
    out = dict(a)
    for mono, c in b.items():
        out[mono] = out.get(mono, 0) + c
        if out[mono] == 0:
            del out[mono]
    return out


def _scale(a: Poly | _TxUnknown, factor: int) -> Poly | _TxUnknown:
    if isinstance(a, _TxUnknown):
        return TX_UNKNOWN
    return {mono: c * factor for mono, c in a.items()}


def _mul(a: Poly | _TxUnknown, b: Poly | _TxUnknown) -> Poly | _TxUnknown:
    if isinstance(a, _TxUnknown) or isinstance(b, _TxUnknown):
        return TX_UNKNOWN
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            mono = tuple(sorted(ma + mb))
            out[mono] = out.get(mono, 0) + ca * cb
            if out[mono] == 0:
                del out[mono]
    return out


def _tx_coefficient(poly: Poly) -> Poly:
    out: Poly = {}
    for mono, c in poly.items():
        if mono.count(TX) == 1:
            rest = list(mono)
            rest.remove(TX)
            out[tuple(rest)] = out.get(tuple(rest), 0) + c
    return {m: c for m, c in out.items() if c}


def _freeze(poly: Poly) -> frozenset[tuple[Any, Any]]:
    return frozenset(poly.items())


def _render(poly: Poly) -> str:
    terms = []
    for mono, c in sorted(poly.items(), key=lambda item: (len(item[0]), item[0])):
        names = [_symbol_text(s) for s in mono]
        factor = " * ".join(names)
        if not names:
            terms.append(str(c))
        elif c == 1:
            terms.append(factor)
        elif c == -1:
            terms.append(f"-{factor}")
        else:
            terms.append(f"{c} * {factor}")
    return " + ".join(terms).replace("+ -", "- ")


def _symbol_text(symbol: str) -> str:
    if symbol.startswith("(") and "#" in symbol:
        return symbol[1:symbol.rindex(")")]
    return symbol.rstrip("'")
