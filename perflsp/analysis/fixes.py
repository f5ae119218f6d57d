"""Validated edit builders: the one place where perflsp turns a decision into source text.

Lint fixes, LSP code actions and LLM proposals all go through these functions, so every edit
the user is offered has been checked the same way: inputs in range, and the edited document
re-parses with no new syntax errors (and, where a value was foldable before, extraction folds the
new value afterwards). A builder that cannot produce a safe edit raises `EditError` with a
sentence saying why; callers then simply offer no fix.

Edits are `ByteEdit`s (byte offsets into the document as given); `apply_edits` applies them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from tree_sitter import Node, Tree

from perflsp.analysis.exprtypes import FLIT, call_name, double_literals, literal_kind, math_base_name
from perflsp.analysis.models import ByteEdit, Finding, Fix, FixRequest
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, best_block_size, occupancy
from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.extract import extract
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite, OmpRegion, Span
from perflsp.kernels.text import blank_comments_and_strings
from perflsp.source.parser import parse

MAX_THREADS_PER_BLOCK = 1024  # every CUDA GPU since Fermi, and AMD/Intel work-groups
MAX_MIN_BLOCKS_PER_SM = 32  # the largest resident-blocks limit of any supported architecture
MAX_NUM_TEAMS = 2**31 - 1


class EditError(ValueError):
    """No safe edit exists for the request; the message says why."""


# --------------------------------------------------------------------------- basics


def apply_edits(data: bytes, edits: Iterable[ByteEdit]) -> bytes:
    """Apply non-overlapping edits (identical duplicates are applied once)."""
    unique: list[ByteEdit] = []
    for edit in edits:
        if edit not in unique:
            unique.append(edit)
    ordered = sorted(unique, key=lambda e: (e.start_byte, e.end_byte))
    out: list[bytes] = []
    pos = 0
    for edit in ordered:
        if not 0 <= edit.start_byte <= edit.end_byte <= len(data):
            raise EditError(f"edit [{edit.start_byte}, {edit.end_byte}) lies outside the document ({len(data)} bytes)")
        if edit.start_byte < pos:
            raise EditError(f"edits overlap at byte {edit.start_byte}")
        out.append(data[pos:edit.start_byte])
        out.append(edit.text.encode("utf-8"))
        pos = edit.end_byte
    out.append(data[pos:])
    return b"".join(out)


def syntax_error_count(tree: Tree) -> int:
    """ERROR and MISSING nodes in a tree (descending only where errors are)."""
    count = 0
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        if node.has_error:
            stack.extend(node.children)
    return count


def validated_fix(data: bytes, tree: Tree, title: str, edits: Sequence[ByteEdit], *,
                  kind: str = "quickfix", preferred: bool = False,
                  check: Callable[[bytes, Tree], None] | None = None) -> Fix:
    """A Fix whose edits apply and re-parse with no new syntax errors (and pass `check`)."""
    if not edits:
        raise EditError("nothing to change")
    new_data = apply_edits(data, edits)
    new_tree = _reparse(data, tree, edits, new_data)
    before, after = syntax_error_count(tree), syntax_error_count(new_tree)
    if after > before:
        raise EditError(f"the edited text would not parse cleanly ({after - before} new syntax error(s))")
    if check is not None:
        check(new_data, new_tree)
    return Fix(title=title, edits=tuple(edits), kind=kind, preferred=preferred)  # type: ignore[arg-type]


def _reparse(data: bytes, tree: Tree, edits: Sequence[ByteEdit], new_data: bytes) -> Tree:
    """Parse the edited text incrementally from a copy of the old tree (the caller's tree is
    left untouched)."""
    from tree_sitter import Point

    def point(offset: int) -> Point:
        return Point(data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1))

    old = tree.copy()
    unique = sorted({(e.start_byte, e.end_byte, e.text) for e in edits}, reverse=True)
    for start, end, text in unique:  # last first: earlier offsets stay valid
        inserted = text.encode("utf-8")
        start_point = point(start)
        lines = inserted.count(b"\n")
        if lines:
            new_end_point = Point(start_point.row + lines, len(inserted) - (inserted.rfind(b"\n") + 1))
        else:
            new_end_point = Point(start_point.row, start_point.column + len(inserted))
        old.edit(start_byte=start, old_end_byte=end, new_end_byte=start + len(inserted),
                 start_point=start_point, old_end_point=point(end), new_end_point=new_end_point)
    return parse(new_data, old)


def _check_int(what: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EditError(f"{what} must be a whole number (got {value!r})")
    if not low <= value <= high:
        raise EditError(f"{what} must be between {low} and {high} (got {value})")
    return value


def _text(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", "replace")


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _node_at(tree: Tree, start: int, end: int) -> Node | None:
    node = tree.root_node.named_descendant_for_byte_range(start, end)
    while node is not None and node.parent is not None and (node.start_byte, node.end_byte) == (
            node.parent.start_byte, node.parent.end_byte) and node.parent.type != "translation_unit":
        node = node.parent
    return node


def _unwrap(node: Node) -> Node:
    """Strip parentheses and casts: `((float)B)` -> `B`."""
    while True:
        value = node.child_by_field_name("value") if node.type == "cast_expression" else None
        if node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[-1]
        elif value is not None:
            node = value
        else:
            return node


def _reextract(data: bytes, tree: Tree, *, kernels: bool = False, launches: bool = False,
               regions: bool = False) -> FileKernels:
    """Extraction of an edited text, limited to what a check needs (a whole `extract` of a big
    file costs more than the rest of a fix)."""
    from perflsp.kernels.context import ExtractionContext
    from perflsp.kernels.cuda import extract_functions
    from perflsp.kernels.launches import extract_launches
    from perflsp.kernels.omp import extract_regions
    from perflsp.kernels.symbols import file_env
    from perflsp.source.positions import LineIndex

    ctx = ExtractionContext(data=data, tree=tree, lines=LineIndex(data))
    env = file_env(ctx)
    result = FileKernels(path=None)
    if kernels or launches:
        result.kernels, result.device_functions = extract_functions(ctx, env)
    if launches:
        result.launches = extract_launches(ctx, env, result.kernels)
    if regions:
        result.omp_regions = extract_regions(ctx, env)
    return result


def _reextract_definition(data: bytes, tree: Tree, offset: int) -> CudaFunction | None:
    """The function whose definition contains `offset` in an edited text, extracted alone."""
    from perflsp.kernels.context import ExtractionContext
    from perflsp.kernels.cuda import from_definition, macro_aliases
    from perflsp.kernels.symbols import file_env
    from perflsp.source.positions import LineIndex

    node: Node | None = tree.root_node.descendant_for_byte_range(offset, offset)
    while node is not None and node.type != "function_definition":
        node = node.parent
    if node is None:
        return None
    ctx = ExtractionContext(data=data, tree=tree, lines=LineIndex(data))
    env = file_env(ctx)
    return from_definition(ctx, node, env, macro_aliases(env))


# --------------------------------------------------------------------------- precision fixes


def float_literal_fix(data: bytes, tree: Tree, literal: Span) -> Fix:
    """`0.5` -> `0.5f`."""
    text = _text(data, literal.start_byte, literal.end_byte)
    if literal_kind(text) != FLIT:
        raise EditError(f"`{text}` is not an unsuffixed floating-point literal")
    return validated_fix(data, tree, f"Write `{text}f` (single precision)",
                         [ByteEdit(literal.end_byte, literal.end_byte, "f")], preferred=True)


def float_function_fix(data: bytes, tree: Tree, call: Span, language: str = "cpp") -> Fix:
    """`pow(x, 2.0)` -> `powf(x, 2.0f)`: the float function, with the double literals in its
    arguments made single precision. `std::` names keep their name (the float overload is
    chosen once no argument is double)."""
    node = _node_at(tree, call.start_byte, call.end_byte)
    if node is None or node.type != "call_expression":
        raise EditError("no function call at the given range")
    name = call_name(node)
    if name is None:
        raise EditError("the callee is not a plain function name")
    fn = node.child_by_field_name("function")
    args = node.child_by_field_name("arguments")
    base = math_base_name(name)
    edits: list[ByteEdit] = []
    new_name = name
    if fn is not None and (not name.startswith("std::") or language == "c"):
        new_name = name[: len(name) - len(base)] + base + "f"
        edits.append(ByteEdit(fn.start_byte, fn.end_byte, new_name))
    for literal in double_literals(args) if args is not None else ():
        edits.append(ByteEdit(literal.end_byte, literal.end_byte, "f"))
    if not edits:
        raise EditError(f"`{name}` has no single-precision spelling to switch to")
    title = f"Use `{new_name}`" + (" with float literals" if len(edits) > (new_name != name) else "")
    return validated_fix(data, tree, title, edits, preferred=base != "pow")


_SIMPLE_OPERAND = re.compile(r"^[A-Za-z_][\w.]*(?:\s*(?:\[[^\[\]()=;,]*\]|->\s*\w+|\.\s*\w+))*$")


def square_fix(data: bytes, tree: Tree, call: Span) -> Fix:
    """`pow(x[i], 2.0)` -> `(x[i] * x[i])`: no call at all, and no FP64."""
    node = _node_at(tree, call.start_byte, call.end_byte)
    if node is None or node.type != "call_expression":
        raise EditError("no function call at the given range")
    name = call_name(node) or ""
    args_node = node.child_by_field_name("arguments")
    args = [a for a in args_node.named_children if a.type != "comment"] if args_node is not None else []
    if math_base_name(name) != "pow" or len(args) != 2:
        raise EditError("only `pow(x, 2)` can become `x * x`")
    exponent, _ = try_evaluate(_text(data, args[1].start_byte, args[1].end_byte))
    if exponent != 2:
        raise EditError("the exponent is not 2")
    base = _text(data, args[0].start_byte, args[0].end_byte).strip()
    if not _SIMPLE_OPERAND.match(base) or "++" in base or "--" in base:
        raise EditError(f"`{base}` is not a simple operand: evaluating it twice could change the result")
    parent = node.parent
    bare = parent is not None and parent.type in ("argument_list", "init_declarator", "expression_statement",
                                                  "parenthesized_expression", "return_statement",
                                                  "assignment_expression")
    product = f"{base} * {base}" if bare else f"({base} * {base})"
    return validated_fix(data, tree, f"Replace with `{product}`", [ByteEdit(node.start_byte, node.end_byte, product)],
                         preferred=True)


# --------------------------------------------------------------------------- launch bounds


def set_launch_bounds(data: bytes, tree: Tree, kernel: CudaFunction, max_threads: int,
                      min_blocks: int | None = None, *, keep_min_blocks: bool = True,
                      file_kernels: FileKernels | None = None) -> Fix:
    """Insert `__launch_bounds__(max_threads[, min_blocks])` before the kernel's name, or replace
    the existing one. `min_blocks=None` keeps an existing second argument unless
    `keep_min_blocks=False`. Refuses a bound below a block size the file launches it with."""
    _check_int("__launch_bounds__ max threads", max_threads, 1, MAX_THREADS_PER_BLOCK)
    if min_blocks is not None:
        _check_int("__launch_bounds__ min blocks per SM", min_blocks, 1, MAX_MIN_BLOCKS_PER_SM)
    if not kernel.is_kernel:
        raise EditError(f"`{kernel.name}` is not a __global__ kernel")
    fk = file_kernels if file_kernels is not None else extract(data, tree)
    for site in fk.launches_of(kernel):
        threads = _threads(site.block.value)
        if threads is not None and threads > max_threads:
            raise EditError(f"the launch at line {site.line} uses {threads} threads per block: "
                            f"__launch_bounds__({max_threads}) would make it fail")
    args = [str(max_threads)]
    existing = kernel.launch_bounds
    if min_blocks is not None:
        args.append(str(min_blocks))
    elif existing is not None and existing.min_blocks is not None and keep_min_blocks:
        args.append(existing.min_blocks.text)
    if existing is not None and existing.max_blocks_cluster is not None:
        if len(args) == 1:
            args.append("1")  # a third argument needs a second one
        args.append(existing.max_blocks_cluster.text)
    text = f"__launch_bounds__({', '.join(args)})"
    if existing is not None and existing.span is not None:
        edit = ByteEdit(existing.span.start_byte, existing.span.end_byte, text)
        title = f"Set `{text}` on `{kernel.name}`"
    else:
        edit = ByteEdit(_declarator_start(tree, kernel), _declarator_start(tree, kernel), text + " ")
        title = f"Add `{text}` to `{kernel.name}`"
    def check(new_data: bytes, new_tree: Tree) -> None:
        # only the edited definition is extracted again: a whole-file extraction per fix made
        # building every fix of a file quadratic in its size
        after = _reextract_definition(new_data, new_tree, edit.start_byte)
        if after is None or after.qualified_name != kernel.qualified_name or not after.is_kernel:
            raise EditError(f"after the edit `{kernel.name}` is no longer a kernel definition")
        bounds = after.launch_bounds
        if bounds is None:
            raise EditError("the edited kernel has no __launch_bounds__")
        if bounds.max_threads.known and bounds.max_threads.value != max_threads:
            raise EditError(f"after the edit __launch_bounds__ folds to {bounds.max_threads.value}")

    return validated_fix(data, tree, title, [edit], kind="quickfix", check=check)


def _declarator_start(tree: Tree, kernel: CudaFunction) -> int:
    """Where `__launch_bounds__(...)` goes: just before the declarator naming the kernel
    (`__global__ void __launch_bounds__(256) ns::k(...)`), as CUDA requires."""
    if kernel.recovered:
        raise EditError(f"`{kernel.name}` sits in code the parser could not read; edit it by hand")
    node = tree.root_node.named_descendant_for_byte_range(kernel.name_span.start_byte, kernel.name_span.end_byte)
    while node is not None and node.type != "function_declarator":
        node = node.parent
    if node is None:
        raise EditError(f"cannot find the declarator of `{kernel.name}`")
    return node.start_byte


def _index_of(items: list, item) -> int:
    for i, candidate in enumerate(items):
        if candidate is item or candidate == item:
            return i
    raise EditError("the item is not part of this document's extraction (stale?)")


def _threads(value) -> int | None:
    if isinstance(value, tuple):
        x, y, z = value
        return x * y * z
    if isinstance(value, int):
        return value
    return None


# --------------------------------------------------------------------------- block size


def best_block_for(kernel: CudaFunction | None, gpu: Gpu, regs_per_thread: int | None = None,
                   static_smem_bytes: int = 0, dynamic_smem_bytes: int = 0) -> int:
    """The occupancy-best block size (a multiple of the warp size) for a kernel on one GPU,
    capped by the kernel's `__launch_bounds__` when it has a known one."""
    cap = None
    if kernel is not None and kernel.launch_bounds is not None and isinstance(kernel.launch_bounds.max_threads.value, int):
        cap = kernel.launch_bounds.max_threads.value
    try:
        best = best_block_size(gpu, regs_per_thread if regs_per_thread is not None else 32, static_smem_bytes,
                               dynamic_smem_bytes, max_threads_per_block=cap)
    except OccupancyInputError as exc:
        raise EditError(str(exc)) from None
    warp = gpu.warp_size
    return max(warp, best.block_size - best.block_size % warp)


def preferred_block_size(gpus: Sequence[Gpu], regs_per_thread: int = 32, static_smem_bytes: int = 0,
                         dynamic_smem_bytes: int = 0, warp_size: int = 32) -> int | None:
    """A conventional block size (128, 256, 512, 1024 first, then any warp multiple) that reaches
    the best occupancy every GPU can give this kernel; None without GPUs."""
    if not gpus:
        return None
    candidates = [128, 256, 512, 1024] + [b for b in range(warp_size, MAX_THREADS_PER_BLOCK + 1, warp_size)
                                          if b not in (128, 256, 512, 1024)]

    def occ(gpu: Gpu, block: int) -> float:
        try:
            return occupancy(gpu, block, regs_per_thread, static_smem_bytes, dynamic_smem_bytes).occupancy
        except OccupancyInputError:
            return 0.0

    best = {g.id: max(occ(g, b) for b in candidates) for g in gpus}
    for block in candidates:
        if all(occ(g, block) >= best[g.id] - 1e-9 for g in gpus):
            return block
    return max(candidates, key=lambda b: min(occ(g, b) for g in gpus))


@dataclass
class _Expr:
    """Expression nodes from some parse (the document's, or a snippet's) and the offset that
    maps their bytes to the document's."""

    nodes: list[Node]
    base: int

    def start(self, node: Node) -> int:
        return node.start_byte + self.base

    def end(self, node: Node) -> int:
        return node.end_byte + self.base


def _parse_args(data: bytes, start: int, end: int) -> _Expr:
    """Parse `data[start:end]` (a parenthesised argument list) as call arguments."""
    prefix = b"void __perflsp_f(void) { __perflsp_g"
    text = data[start:end]
    if text.startswith(b"{") and text.endswith(b"}"):
        text = b"(" + text[1:-1] + b")"  # `dim3 grid{a, b}`: same bytes, read as arguments
    snippet = prefix + text + b"; }"
    root = parse(snippet).root_node
    call = next((n for n in _walk(root) if n.type == "call_expression"), None)
    args = call.child_by_field_name("arguments") if call is not None else None
    if args is None or args.has_error:
        raise EditError(f"cannot read `{_text(data, start, end)}` as arguments")
    return _Expr([a for a in args.named_children if a.type != "comment"], start - len(prefix))


def _parse_text_expression(data: bytes, start: int, end: int) -> _Expr:
    prefix = b"void __perflsp_f(void) { __perflsp_g("
    snippet = prefix + data[start:end] + b"); }"
    root = parse(snippet).root_node
    call = next((n for n in _walk(root) if n.type == "call_expression"), None)
    args = call.child_by_field_name("arguments") if call is not None else None
    if args is None or args.has_error or len(args.named_children) != 1:
        raise EditError(f"cannot read `{_text(data, start, end)}` as an expression")
    return _Expr([args.named_children[0]], start - len(prefix))


def _walk(node: Node):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _int_value(node: Node) -> int | None:
    if node.type != "number_literal":
        return None
    value, _ = try_evaluate(_node_text(node))
    return value if isinstance(value, int) else None


class _Refs:
    """Rewrites the block size inside a grid (or num_teams) expression: `(n + B - 1) / B`,
    `(n + 255) / 256`, `ceil(n / (float)B)`, `div_up(n, B)`, `(n - 1) / B + 1`.

    A reference is the old size as a literal, or a name for it (`is_block_name`)."""

    def __init__(self, old: int | None, new: int, is_block_name: Callable[[str], bool]):
        self.old = old
        self.new = new
        self.is_block_name = is_block_name

    def is_ref(self, node: Node | None) -> bool:
        if node is None:
            return False
        node = _unwrap(node)
        if node.type == "identifier":
            return self.is_block_name(_node_text(node))
        return self.old is not None and _int_value(node) == self.old

    def rewrite(self, expr: _Expr, what: str) -> list[ByteEdit]:
        edits: dict[int, ByteEdit] = {}
        handled: set[tuple[int, int]] = set()

        def set_ref(node: Node, value: int) -> None:
            node = _unwrap(node)
            edits[node.start_byte] = ByteEdit(expr.start(node), expr.end(node), str(value))
            handled.add((node.start_byte, node.end_byte))

        for root in expr.nodes:
            for node in _walk(root):
                if node.type == "binary_expression" and _op(node) == "/" and self.is_ref(node.child_by_field_name("right")):
                    if self._ceiling_division(node, set_ref):
                        set_ref(node.child_by_field_name("right"), self.new)
                elif node.type == "call_expression":
                    name = (call_name(node) or "").lower()
                    args = node.child_by_field_name("arguments")
                    items = [a for a in args.named_children if a.type != "comment"] if args is not None else []
                    if len(items) >= 2 and re.search(r"div|ceil|up", name) and self.is_ref(items[-1]):
                        set_ref(items[-1], self.new)  # div_up(n, B), iDivUp(n, B), ceil_div(n, B)
        for root in expr.nodes:
            for node in _walk(root):
                if (node.start_byte, node.end_byte) in handled:
                    continue
                if node.type == "identifier" and self.is_ref(node):
                    raise EditError(f"{what} uses `{_node_text(node)}` outside a ceiling division; rewrite it by hand")
                parent = node.parent
                if (self.old is not None and _int_value(node) == self.old and parent is not None
                        and parent.type == "binary_expression" and _op(parent) == "/"
                        and _unwrap(parent.child_by_field_name("right")) == node):
                    raise EditError(f"{what} divides by {self.old} without rounding up; rewrite it by hand")
        return list(edits.values())

    def rewrite_all(self, expr: _Expr) -> list[ByteEdit]:
        """Every mention of the block size (a dynamic shared-memory size: `B * sizeof(float)`)."""
        edits = []
        for root in expr.nodes:
            for node in _walk(root):
                if node.type in ("identifier", "number_literal") and self.is_ref(node):
                    edits.append(ByteEdit(expr.start(node), expr.end(node), str(self.new)))
        return edits

    def _ceiling_division(self, div: Node, set_ref) -> bool:
        dividend = div.child_by_field_name("left")
        if dividend is None:
            return False
        terms = _sum_terms(_unwrap(dividend))
        plus_refs = [t for t, sign in terms if sign > 0 and self.is_ref(t)]
        minus_one = [t for t, sign in terms if sign < 0 and _int_value(_unwrap(t)) == 1]
        minus_one_literal = [t for t, sign in terms if sign > 0 and self.old is not None
                             and _int_value(_unwrap(t)) == self.old - 1]
        if plus_refs and minus_one:  # (n + B - 1) / B
            set_ref(plus_refs[0], self.new)
            return True
        if minus_one_literal:  # (n + 255) / 256
            set_ref(minus_one_literal[0], self.new - 1)
            return True
        parent = div.parent
        while parent is not None and parent.type in ("parenthesized_expression", "cast_expression"):
            parent = parent.parent
        if parent is not None and parent.type == "binary_expression" and _op(parent) == "+" and any(
                c is not None and _int_value(_unwrap(c)) == 1
                for c in (parent.child_by_field_name("left"), parent.child_by_field_name("right"))) and any(
                sign < 0 and _int_value(_unwrap(t)) == 1 for t, sign in terms):
            return True  # (n - 1) / B + 1
        ancestor = div.parent
        while ancestor is not None and ancestor.type in ("parenthesized_expression", "cast_expression", "argument_list",
                                                         "binary_expression"):
            ancestor = ancestor.parent
        if ancestor is not None and ancestor.type == "call_expression" and re.fullmatch(
                r"(std::)?ceilf?", call_name(ancestor) or ""):
            return True  # ceil(n / (float)B)
        if parent is not None and parent.type == "binary_expression" and _op(parent) == "+":
            other = parent.child_by_field_name("right")
            if other is not None and other != div:
                for node in _walk(other):  # n / B + (n % B != 0)
                    if node.type == "binary_expression" and _op(node) == "%" and self.is_ref(node.child_by_field_name("right")):
                        set_ref(node.child_by_field_name("right"), self.new)
                        return True
        return False


def _op(node: Node) -> str | None:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else None


def _sum_terms(node: Node, sign: int = 1) -> list[tuple[Node, int]]:
    """Flatten `a + (b - 1)` into [(a, +1), (b, +1), (1, -1)]."""
    node = node if node.type != "parenthesized_expression" else _unwrap_parens(node)
    if node.type == "binary_expression" and _op(node) in ("+", "-"):
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is not None and right is not None:
            return _sum_terms(left, sign) + _sum_terms(right, sign if _op(node) == "+" else -sign)
    return [(node, sign)]


def _unwrap_parens(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[-1]
    return node


@dataclass
class _Definition:
    """Where a name used as a launch value is defined, and whether its value can be edited."""

    name: str
    value_start: int  # the literal's bytes (editable only when it is a plain integer literal)
    value_end: int
    editable: bool
    scope: tuple[int, int]  # where its uses are counted (file, or the enclosing function)
    declaration: tuple[int, int]  # the defining construct, excluded from the uses
    is_args: bool = False  # the value is a parenthesised argument list: `dim3 grid(a, b)`
    local: bool = False  # a variable of the launching function (not a file-level constant/macro)


class _Document:
    def __init__(self, data: bytes, tree: Tree, fk: FileKernels, blanked: bytes | None = None):
        self.data = data
        self.tree = tree
        self.fk = fk
        self.blanked = blanked if blanked is not None else blank_comments_and_strings(data)
        self._env: ConstEnv | None = None

    def fold(self, name: str) -> object:
        """The value of a file-level constant or macro, or None."""
        if self._env is None:
            from perflsp.kernels.context import ExtractionContext
            from perflsp.kernels.symbols import file_env
            from perflsp.source.positions import LineIndex

            self._env = file_env(ExtractionContext(data=self.data, tree=self.tree, lines=LineIndex(self.data)))
        value, _ = try_evaluate(name, self._env)
        return value

    def uses(self, name: str, scope: tuple[int, int]) -> list[int]:
        pattern = re.compile(rb"(?<![\w$])" + re.escape(name.encode()) + rb"(?![\w$])")
        return [m.start() for m in pattern.finditer(self.blanked, scope[0], scope[1])]

    def enclosing_function(self, byte: int) -> Node | None:
        node = self.tree.root_node.named_descendant_for_byte_range(byte, byte)
        while node is not None and node.type != "function_definition":
            node = node.parent
        return node

    def definition(self, name: str, before: int) -> _Definition | None:
        """A local declared before `before` in the enclosing function, a file-scope constant or an
        object-like `#define` in this file."""
        function = self.enclosing_function(before)
        if function is not None:
            found = self._local(function, name, before)
            if found is not None:
                return found
        return self._file_level(name)

    def _local(self, function: Node, name: str, before: int) -> _Definition | None:
        body = function.child_by_field_name("body")
        if body is None:
            return None
        last = None
        for node in _walk(body):
            if node.start_byte >= before:
                break
            if node.type == "declaration":
                for declarator in node.children_by_field_name("declarator"):
                    target = (declarator.child_by_field_name("declarator")
                              if declarator.type in ("init_declarator", "function_declarator") else declarator)
                    if target is not None and _node_text(target) == name:
                        last = (node, declarator)
        if last is None:
            return None
        decl, declarator = last
        value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        scope = (decl.start_byte, body.end_byte)
        if self._modified(name, decl.end_byte, body.end_byte):
            return _Definition(name, 0, 0, False, scope, (decl.start_byte, decl.end_byte), local=True)
        if value is None:
            args = declarator.child_by_field_name("parameters") if declarator.type == "function_declarator" else None
            if args is not None:  # `dim3 block(256)`: the most vexing parse
                return _Definition(name, args.start_byte, args.end_byte, False, scope, (decl.start_byte, decl.end_byte),
                                   is_args=True, local=True)
            return _Definition(name, 0, 0, False, scope, (decl.start_byte, decl.end_byte), local=True)
        editable = _int_value(value) is not None
        return _Definition(name, value.start_byte, value.end_byte, editable, scope, (decl.start_byte, decl.end_byte),
                           is_args=value.type in ("argument_list", "initializer_list"), local=True)

    def _modified(self, name: str, start: int, end: int) -> bool:
        pattern = re.compile(rb"(?<![\w$.>])" + re.escape(name.encode())
                             + rb"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*" + re.escape(name.encode())
                             + rb"(?![\w$])|(?<![\w$])" + re.escape(name.encode()) + rb"\s*(?:\+\+|--)")
        return pattern.search(self.blanked, start, end) is not None

    def _file_level(self, name: str) -> _Definition | None:
        scope = (0, len(self.data))
        for node in self.tree.root_node.named_children:
            if node.type == "preproc_def":
                macro = node.child_by_field_name("name")
                value = node.child_by_field_name("value")
                if macro is None or _node_text(macro) != name:
                    continue
                if value is None:
                    return _Definition(name, 0, 0, False, scope, (node.start_byte, node.end_byte))
                m = re.match(rb"\s*(?:\(\s*)?(\d+)[uUlL]*(?:\s*\))?\s*(?://.*|/\*.*)?$",
                             self.data[value.start_byte:value.end_byte], re.DOTALL)
                if m is None:
                    return _Definition(name, 0, 0, False, scope, (node.start_byte, node.end_byte))
                start = value.start_byte + m.start(1)
                return _Definition(name, start, start + len(m.group(1)), True, scope, (node.start_byte, node.end_byte))
            if node.type == "declaration" and re.search(rb"\b(const|constexpr)\b", node.text or b""):
                for declarator in node.children_by_field_name("declarator"):
                    target = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
                    value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
                    if target is not None and _node_text(target) == name and value is not None:
                        editable = _int_value(value) is not None
                        return _Definition(name, value.start_byte, value.end_byte, editable, scope,
                                           (node.start_byte, node.end_byte))
        return None


def _reads(body: bytes, word: str) -> bool:
    """`body` (blanked) mentions `threadIdx.x`-like `word` (spaces around the dot allowed)."""
    return re.search(rb"\b" + word.encode().replace(b".", rb"\s*\.\s*") + rb"\b", body) is not None


def _kernel_assumes_block(doc: _Document, site: LaunchSite, kernel: CudaFunction, old: int | None) -> str | None:
    """Why `kernel`'s code is written for the block size `site` launches it with (1-D, `old`
    threads): a change of that size would change what it computes, not only how fast. None when
    nothing says so."""
    body = doc.blanked[kernel.body_span.start_byte:kernel.body_span.end_byte]
    shown = "its current" if old is None else str(old)
    name = site.name
    if old is not None and kernel.template_params and any(try_evaluate(arg)[0] == old for arg in site.template_args):
        return f"`{site.callee}` passes {old} as a template argument too: change both by hand"
    if not _reads(body, "threadIdx.x"):
        return f"`{name}` never reads threadIdx.x: it is written for {shown} thread(s) per block"
    if _reads(body, "blockIdx.x") and not _reads(body, "blockDim.x"):
        return f"`{name}` indexes with blockIdx.x but never reads blockDim.x: it assumes {shown} threads per block"
    if old is not None and old >= 16 and re.search(rb"(?<![\w.])" + str(old).encode() + rb"(?![\w.])", body):
        return (f"`{name}` uses the number {old} in its code (an array or index sized to the block?): "
                "change the block size by hand")
    return None


_NOT_NAMES = frozenset({b"dim3", b"int", b"unsigned", b"long", b"size_t", b"float", b"double", b"const",
                        b"static_cast", b"ceil", b"min", b"max", b"std"})


def _names_behind(doc: _Document, span: Span, depth: int = 2) -> set[bytes]:
    """The identifiers a launch argument is computed from: its own, and those of the local
    variables and object-like macros it names (`depth` levels deep)."""
    text = doc.blanked[span.start_byte:span.end_byte]
    names = {n for n in re.findall(rb"[A-Za-z_]\w*", text) if n not in _NOT_NAMES}
    frontier = set(names)
    for _ in range(depth):
        found: set[bytes] = set()
        for name in frontier:
            definition = doc.definition(name.decode(), span.start_byte)
            values: list[bytes] = []
            if definition is not None and definition.value_end > definition.value_start:
                values.append(doc.blanked[definition.value_start:definition.value_end])
            macro = re.search(rb"^[ \t]*#[ \t]*define[ \t]+" + re.escape(name) + rb"[ \t]+(.+)$", doc.blanked, re.MULTILINE)
            if macro is not None:
                values.append(macro.group(1))
            for value in values:
                found |= {n for n in re.findall(rb"[A-Za-z_]\w*", value) if n not in _NOT_NAMES}
        frontier = found - names
        names |= found
    return names


def _grid_follows_block(doc: _Document, site: LaunchSite) -> bool:
    """The grid is computed from the block size (a name both are built from, or a division by the
    block's literal), or is not a constant at all (then nothing says it is fixed)."""
    if not isinstance(site.grid.value, (int, tuple)) or site.grid.span is None or site.block.span is None:
        return True
    grid_names = _names_behind(doc, site.grid.span)
    if grid_names & _names_behind(doc, site.block.span):
        return True
    threads = _threads(site.block.value)
    grid_text = doc.blanked[site.grid.span.start_byte:site.grid.span.end_byte]
    return threads is not None and re.search(rb"/\s*\(?\s*" + str(threads).encode() + rb"(?![\w.])", grid_text) is not None


def launch_document(data: bytes, tree: Tree, fk: FileKernels, blanked: bytes | None = None) -> _Document:
    """What `block_size_assumed` and `grid_strided` read, built once for several launches."""
    return _Document(data, tree, fk, blanked)


def block_size_assumed(data: bytes, tree: Tree, fk: FileKernels, site: LaunchSite,
                       doc: _Document | None = None) -> str | None:
    """Why the block size of `site` is part of what its kernel computes, so that another size
    would change the result or repeat the work rather than run the same work faster; None when
    nothing in the file says so (or the kernel is not defined in it). What the lints about block
    sizes (`launch/block-size-not-warp-multiple`, `occupancy/low`) ask before they report a size."""
    value = site.block.value
    threads = _threads(value)
    fixed_grid = isinstance(site.grid.value, (int, tuple))
    if threads == 1 and fixed_grid and _threads(site.grid.value) == 1:
        return f"`{site.name}` runs as a single thread: the launch is serial by design"
    kernel = next((k for k in fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    if kernel is None or kernel.recovered:
        return None
    doc = doc or _Document(data, tree, fk)
    body = doc.blanked[kernel.body_span.start_byte:kernel.body_span.end_byte]
    shown = f"{threads} thread{'s' if threads != 1 else ''}" if threads is not None else "its block size"
    if not any(_reads(body, f"threadIdx.{axis}") for axis in "xyz"):
        if not fixed_grid:  # `k<<<n, 1>>>`: one block per item over the data is the slip to report
            return None
        return (f"`{site.name}` never reads threadIdx and runs a fixed grid: it is written for {shown} per block "
                "(more would repeat its work)")
    if isinstance(value, int) or (isinstance(value, tuple) and value[1:] == (1, 1)):
        reason = _kernel_assumes_block(doc, site, kernel, value if isinstance(value, int) else value[0])
        if reason is not None:
            return reason
    if not _strides_by_grid(body) and not _grid_follows_block(doc, site):
        return (f"the launch runs a fixed grid of {site.grid.text.strip()} blocks of {shown}, which does not follow the "
                f"block size, and `{site.name}` is not a grid-stride loop: another block size changes the work done")
    return None


def grid_strided(data: bytes, tree: Tree, fk: FileKernels, site: LaunchSite, doc: _Document | None = None) -> bool:
    """The launched kernel strides over its work by the grid size (reads `gridDim`), so that more
    blocks share the same work; False when it does not or is not defined in the file."""
    kernel = next((k for k in fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    if kernel is None or kernel.recovered:
        return False
    blanked = doc.blanked if doc is not None else blank_comments_and_strings(data)
    return _strides_by_grid(blanked[kernel.body_span.start_byte:kernel.body_span.end_byte])


def _strides_by_grid(body: bytes) -> bool:
    """The kernel body (blanked) steps through its work by the grid size: `i += blockDim.x * gridDim.x`,
    or a step variable computed from `gridDim` (`i += stride`, `i = i + stride`); a grid-stride loop,
    which more blocks share. `gridDim` only in an index, a print or a launch of its own
    (`child<<<gridDim.x, ...>>>`) is no stride."""
    text = re.sub(rb"<<<.*?>>>", b"", body, flags=re.DOTALL)
    if re.search(rb"\bgridDim\b", text) is None:
        return False
    terms = [rb"gridDim"]
    for match in re.finditer(rb"([A-Za-z_]\w*)\s*=(?!=)([^;]*)", text):
        if re.search(rb"\bgridDim\b", match.group(2)):
            terms.append(re.escape(match.group(1)))
    term = rb"\b(?:" + b"|".join(terms) + rb")\b"
    if re.search(rb"(?:\+=|-=)[^;)]*" + term, text):
        return True
    return re.search(rb"\b([A-Za-z_]\w*)\s*=\s*\1\s*[-+][^;)]*" + term, text) is not None


def set_block_size(data: bytes, tree: Tree, site: LaunchSite, block: int, *, warp_size: int = 32,
                   allow_any_size: bool = False, file_kernels: FileKernels | None = None) -> Fix:
    """Launch `site` with `block` threads per block (1-D blocks).

    Edits the constant, `#define` or `dim3` the block size comes from when every use of it belongs
    to this kernel and its launches; otherwise edits the launch site. A grid computed as a
    ceiling division by the old size (`(n + B - 1) / B`, `(n + 255) / 256`, `ceil(n / (float)B)`,
    `div_up(n, B)`) is adjusted to the new one, and a `__launch_bounds__` below the new size is
    raised. Raises EditError when any of that cannot be done safely."""
    _check_int("block size", block, 1, MAX_THREADS_PER_BLOCK)
    if not allow_any_size and block % warp_size:
        raise EditError(f"block size {block} is not a multiple of the warp size {warp_size}")
    fk = file_kernels if file_kernels is not None else extract(data, tree)
    index = _index_of(fk.launches, site)
    kernel = next((k for k in fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    plan = _BlockPlan(_Document(data, tree, fk), site, kernel, block)
    edits = plan.build()
    title = f"Launch `{site.name}` with {block} threads per block"

    def check(new_data: bytes, new_tree: Tree) -> None:
        after = _reextract(new_data, new_tree, launches=True)
        if len(after.launches) != len(fk.launches):
            raise EditError("the edit changed which launches the file contains")
        new_site = after.launches[index]
        if new_site.block.known and _threads(new_site.block.value) != block:
            raise EditError(f"after the edit the block folds to {new_site.block.value}, not {block}")
        old_grid, new_grid = _threads(site.grid.value), _threads(new_site.grid.value)
        old_block = _threads(site.block.value)
        if (plan.grid_rewritten and old_grid and new_grid and old_block
                and new_grid * block < old_grid * old_block - old_block + 1):
            raise EditError(f"the rewritten grid ({new_grid} blocks) would launch fewer threads than before")
        if kernel is not None:
            new_kernel = next((k for k in after.kernels if k.qualified_name == kernel.qualified_name), None)
            bound = new_kernel.launch_bounds if new_kernel is not None else None
            if bound is not None and isinstance(bound.max_threads.value, int) and bound.max_threads.value < block:
                raise EditError(f"__launch_bounds__({bound.max_threads.value}) would make the launch fail")

    return validated_fix(data, tree, title, edits, check=check)


class _BlockPlan:
    def __init__(self, doc: _Document, site: LaunchSite, kernel: CudaFunction | None, block: int):
        self.doc = doc
        self.site = site
        self.block = block
        self.edits: list[ByteEdit] = []
        self.grid_rewritten = False
        self.old: int | None = None
        value = site.block.value
        if isinstance(value, tuple):
            if value[1] != 1 or value[2] != 1:
                raise EditError(f"the block is {value[0]}x{value[1]}x{value[2]}: choose a multi-dimensional shape by hand")
            self.old = value[0]
        if self.old == block:
            raise EditError(f"the launch already uses {block} threads per block")
        self.kernel: CudaFunction = self._check_kernel_adapts(kernel)

    def _check_kernel_adapts(self, kernel: CudaFunction | None) -> CudaFunction:
        """The launched kernel; refuses kernels whose code assumes the current block size."""
        name = self.site.name
        if kernel is None:
            raise EditError(f"`{name}` is not defined in this file: perflsp cannot check that it works with "
                            "another block size")
        if kernel.recovered:
            raise EditError(f"`{name}` sits in code the parser could not read; change its launch by hand")
        reason = _kernel_assumes_block(self.doc, self.site, kernel, self.old)
        if reason is not None:
            raise EditError(reason)
        return kernel

    # -- ranges that belong to this kernel -----------------------------------------------

    def _owned_ranges(self) -> list[tuple[int, int]]:
        ranges = [(self.site.config_span.start_byte, self.site.config_span.end_byte)]
        if self.kernel is not None:
            ranges.append((self.kernel.span.start_byte, self.kernel.span.end_byte))
            for other in self.doc.fk.launches_of(self.kernel):
                ranges.append((other.config_span.start_byte, other.config_span.end_byte))
        return ranges

    def _owned(self, definition: _Definition, extra: Sequence[tuple[int, int]] = ()) -> bool:
        ranges = self._owned_ranges() + list(extra)
        for use in self.doc.uses(definition.name, definition.scope):
            if definition.declaration[0] <= use < definition.declaration[1]:
                continue
            if not any(start <= use < end for start, end in ranges):
                return False
        return True

    def _used_in_kernel_body(self, name: str) -> bool:
        if self.kernel is None:
            return False
        body = self.kernel.body_span
        return bool(self.doc.uses(name, (body.start_byte, body.end_byte)))

    # -- the plan ----------------------------------------------------------------------------

    def build(self) -> list[ByteEdit]:
        data = self.doc.data
        node = _node_at(self.doc.tree, self.site.block.span.start_byte, self.site.block.span.end_byte) if self.site.block.span else None
        if node is None:
            raise EditError("cannot find the block argument of the launch")
        node = _unwrap_parens(node)
        edited_name = self._block_value(node, data)
        self._grid(edited_name)
        self._launch_bounds(edited_name)
        return self.edits

    def _block_value(self, node: Node, data: bytes) -> str | None:
        """Edit where the block size comes from; returns the name whose definition was edited."""
        self.block_name: str | None = None
        if node.type == "number_literal":
            self.edits.append(ByteEdit(node.start_byte, node.end_byte, str(self.block)))
            return None
        if node.type == "call_expression" and (call_name(node) or "") == "dim3":
            args = node.child_by_field_name("arguments")
            items = [a for a in args.named_children if a.type != "comment"] if args is not None else []
            if not items:
                raise EditError("`dim3()` without arguments")
            return self._block_value(_unwrap_parens(items[0]), data)
        if node.type != "identifier":
            self.edits.append(ByteEdit(node.start_byte, node.end_byte, str(self.block)))
            return None
        name = _node_text(node)
        self.block_name = name
        definition = self.doc.definition(name, node.start_byte)
        if definition is not None and _is_dim3_definition(data, definition):
            return self._dim3_variable(node, definition)
        if definition is not None and definition.editable and self._owned(definition, self._grid_var_ranges()):
            self.edits.append(ByteEdit(definition.value_start, definition.value_end, str(self.block)))
            return name
        if self._used_in_kernel_body(name):
            raise EditError(f"`{name}` is also used inside `{self.kernel.name}` (it assumes that block size) and elsewhere: "
                            f"change `{name}` by hand")
        self.edits.append(ByteEdit(node.start_byte, node.end_byte, str(self.block)))
        return None

    def _dim3_variable(self, node: Node, definition: _Definition) -> str | None:
        uses = [u for u in self.doc.uses(definition.name, definition.scope)
                if not definition.declaration[0] <= u < definition.declaration[1]]
        config = self.site.config_span
        if any(not config.start_byte <= u < config.end_byte for u in uses):
            raise EditError(f"the block variable `{definition.name}` is used by other launches or code; edit it by hand")
        if definition.value_end <= definition.value_start:
            raise EditError(f"cannot read how `{definition.name}` is built")
        args = _parse_args(self.doc.data, definition.value_start, definition.value_end)
        if not args.nodes:
            raise EditError(f"`{definition.name}` has no x size")
        for extra in args.nodes[1:]:
            value, _ = try_evaluate(_text(self.doc.data, args.start(extra), args.end(extra)), None)
            if value != 1:
                raise EditError(f"`{definition.name}` is a multi-dimensional block: choose its shape by hand")
        x = _unwrap_parens(args.nodes[0])
        if x.type == "number_literal":
            self.edits.append(ByteEdit(args.start(x), args.end(x), str(self.block)))
            return None
        if x.type == "identifier":
            inner = self.doc.definition(_node_text(x), args.start(x))
            self.block_name = _node_text(x)
            if inner is not None and inner.editable and self._owned(inner, [definition.declaration, *self._grid_var_ranges()]):
                self.edits.append(ByteEdit(inner.value_start, inner.value_end, str(self.block)))
                return inner.name
            if self._used_in_kernel_body(inner.name if inner else _node_text(x)):
                raise EditError(f"`{_node_text(x)}` is also used inside `{self.kernel.name}`: change it by hand")
        self.edits.append(ByteEdit(args.start(x), args.end(x), str(self.block)))
        return None

    def _dependent_spans(self) -> list[tuple[Span, str]]:
        spans = [(self.site.grid.span, "grid")]
        if self.site.shared_mem_bytes is not None and self.site.shared_mem_bytes.span is not None:
            spans.append((self.site.shared_mem_bytes.span, "shared memory size"))
        return [(span, what) for span, what in spans if span is not None]

    def _grid_var_ranges(self) -> list[tuple[int, int]]:
        """Declarations of grid / shared-memory variables used only by this launch (their inits
        may name the block size)."""
        ranges = []
        for span, _ in self._dependent_spans():
            var = self._variable_at(span)
            if var is not None and var[1]:
                ranges.append(var[0].declaration)
        return ranges

    def _variable_at(self, span: Span) -> tuple[_Definition, bool] | None:
        """The local variable a launch argument names, and whether this launch is its only use."""
        node = _node_at(self.doc.tree, span.start_byte, span.end_byte)
        if node is None or _unwrap_parens(node).type != "identifier":
            return None
        node = _unwrap_parens(node)
        definition = self.doc.definition(_node_text(node), node.start_byte)
        if definition is None or not definition.local:
            return None  # file-level: not a variable of the launching function
        uses = [u for u in self.doc.uses(definition.name, definition.scope)
                if not definition.declaration[0] <= u < definition.declaration[1]]
        config = self.site.config_span
        return definition, all(config.start_byte <= u < config.end_byte for u in uses)

    def _grid(self, edited_name: str | None) -> None:
        refs = _Refs(self.old, self.block, lambda name: name != edited_name and (
            name == self.block_name or (self.old is not None and self.doc.fold(name) == self.old)))
        for span, what in self._dependent_spans():
            edits = self._dependent(span, what, refs, edited_name)
            if edits and what == "grid":
                self.grid_rewritten = True
        if not self.grid_rewritten and not self._grid_follows_name(edited_name) and not self._grid_stride():
            grid = self.site.grid.text.strip()
            raise EditError(f"the grid `{grid}` does not follow the block size and `{self.site.name}` is not a "
                            "grid-stride loop: the launch would cover a different number of threads; scale the grid "
                            "by hand")

    def _grid_follows_name(self, edited_name: str | None) -> bool:
        """The grid is computed from the constant whose definition was edited."""
        if edited_name is None or self.site.grid.span is None:
            return False
        span = self.site.grid.span
        texts = [self.doc.blanked[span.start_byte:span.end_byte]]
        var = self._variable_at(span)
        if var is not None:
            texts.append(self.doc.blanked[var[0].declaration[0]:var[0].declaration[1]])
        pattern = re.compile(rb"(?<![\w$])" + re.escape(edited_name.encode()) + rb"(?![\w$])")
        return any(pattern.search(text) for text in texts)

    def _grid_stride(self) -> bool:
        """The kernel strides over its data by the grid size: any grid covers it."""
        body = self.kernel.body_span
        return re.search(rb"\bgridDim\b", self.doc.blanked[body.start_byte:body.end_byte]) is not None

    def _dependent(self, span: Span, what: str, refs: _Refs, edited_name: str | None) -> list[ByteEdit]:
        """Rewrite a launch argument that depends on the block size: the grid (ceiling divisions
        only) or the dynamic shared memory (every mention)."""
        data = self.doc.data
        found = _node_at(self.doc.tree, span.start_byte, span.end_byte)
        if found is None:
            raise EditError(f"no {what} expression at the launch")
        node = _unwrap_parens(found)

        def rewrite(expr: _Expr, label: str) -> list[ByteEdit]:
            return refs.rewrite(expr, label) if what == "grid" else refs.rewrite_all(expr)

        var = self._variable_at(span) if node.type == "identifier" else None
        if var is None:
            if node.type == "identifier":
                definition = self.doc.definition(_node_text(node), node.start_byte)
                if definition is not None and definition.value_end > definition.value_start and self._mentions_block(
                        definition.value_start, definition.value_end, edited_name, what):
                    raise EditError(f"the {what} `{definition.name}` is computed from the block size elsewhere; "
                                    "edit it by hand")
                return []
            edits = rewrite(_Expr([node], 0), f"the {what} `{_text(data, node.start_byte, node.end_byte)}`")
            self.edits.extend(edits)
            return edits
        definition, only_here = var
        if definition.value_end <= definition.value_start:
            if self._mentions_block(definition.scope[0], node.start_byte, edited_name, what):
                raise EditError(f"the {what} `{definition.name}` changes after it is computed; edit it by hand")
            return []
        is_args = definition.is_args
        expr = (_parse_args(data, definition.value_start, definition.value_end) if is_args
                else _parse_text_expression(data, definition.value_start, definition.value_end))
        edits = rewrite(expr, f"the {what} `{definition.name}`")
        if not edits:
            return []
        if only_here:
            self.edits.extend(edits)
            return edits
        # The variable serves other launches too: inline the rewritten expression here.
        if any(self.doc._modified(ident, definition.declaration[1], node.start_byte)
               for ident in set(re.findall(r"[A-Za-z_]\w*", _text(data, definition.value_start, definition.value_end)))):
            raise EditError(f"the {what} `{definition.name}` is shared with other launches and its inputs change "
                            "before this one; edit it by hand")
        shifted = [ByteEdit(e.start_byte - definition.value_start, e.end_byte - definition.value_start, e.text) for e in edits]
        text = apply_edits(data[definition.value_start:definition.value_end], shifted).decode("utf-8", "replace")
        if is_args:
            text = "dim3(" + text[1:-1] + ")"
        elif re.search(r"[<>,]", text):
            text = f"({text})"  # keep `>` and `,` from reading as the end of `<<<...>>>`
        edit = ByteEdit(node.start_byte, node.end_byte, text)
        self.edits.append(edit)
        return [edit]

    def _mentions_block(self, start: int, end: int, edited_name: str | None, what: str = "grid") -> bool:
        text = self.doc.blanked[start:end]
        if self.block_name and edited_name is None and re.search(
                rb"(?<![\w$])" + re.escape(self.block_name.encode()) + rb"(?![\w$])", text):
            return True
        if self.old is None:
            return False
        if what == "grid":  # a division by the old size
            return re.search(rb"/\s*(?:\(\s*\w+\s*\)\s*)?" + str(self.old).encode() + rb"(?![\w.])", text) is not None
        return re.search(rb"(?<![\w.])" + str(self.old).encode() + rb"(?![\w.])", text) is not None

    def _launch_bounds(self, edited_name: str | None) -> None:
        bounds = self.kernel.launch_bounds if self.kernel is not None else None
        if bounds is None or bounds.max_threads.span is None:
            return
        arg_text = bounds.max_threads.text.strip()
        if edited_name is not None and arg_text == edited_name:
            return  # the bound names the constant just edited: it follows
        current = bounds.max_threads.value
        if not isinstance(current, int):
            folded, _ = try_evaluate(arg_text, None)
            current = folded if isinstance(folded, int) else None
        if current is None:
            if any(p.name == arg_text for p in self.kernel.template_params):
                raise EditError(f"`{self.kernel.name}` takes its block size as the template argument `{arg_text}`: "
                                "change the template argument and the launch together by hand")
            raise EditError(f"`{self.kernel.name}` has __launch_bounds__({arg_text}), which perflsp cannot fold: "
                            "check it allows the new block size")
        if current >= self.block:
            return
        if re.fullmatch(r"[A-Za-z_]\w*", arg_text):
            definition = self.doc.definition(arg_text, bounds.max_threads.span.start_byte)
            if definition is not None and definition.editable and self._owned(definition):
                self.edits.append(ByteEdit(definition.value_start, definition.value_end, str(self.block)))
                return
        span = bounds.max_threads.span
        self.edits.append(ByteEdit(span.start_byte, span.end_byte, str(self.block)))


def _is_dim3_definition(data: bytes, definition: _Definition) -> bool:
    return re.match(rb"\s*(?:const\s+)?dim3\b", data[definition.declaration[0]:definition.declaration[1]]) is not None


# --------------------------------------------------------------------------- OpenMP clauses


_CLAUSE = re.compile(rb"([A-Za-z_]\w*)\s*\(")


def _pragma_clauses(blanked: bytes, start: int, end: int) -> dict[str, tuple[int, int]]:
    """Clause name -> byte range of its argument (inside the parentheses), for top-level clauses."""
    found: dict[str, tuple[int, int]] = {}
    pos = start
    while True:
        m = _CLAUSE.search(blanked, pos, end)
        if m is None:
            return found
        depth = 0
        i = m.end() - 1
        while i < end:
            ch = blanked[i]
            if ch == ord("("):
                depth += 1
            elif ch == ord(")"):
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if depth != 0:
            raise EditError("the directive has unbalanced parentheses")
        found.setdefault(m.group(1).decode(), (m.end(), i))
        pos = i + 1


def _check_teams_directive(region: OmpRegion) -> None:
    """Refuse directives whose team shape cannot be changed by editing their clauses."""
    words = region.directive.split()
    if "teams" not in words:
        raise EditError(f"`{region.directive}` has no teams construct: thread_limit/num_teams need `teams`")
    if "distribute" not in words and "loop" not in words:
        raise EditError(f"`{region.directive}` shares out its work by hand (no `distribute` or `loop`): its code may "
                        "assume the current team and thread counts; change them by hand")
    if not region.pragma_text.lstrip().startswith("#"):
        raise EditError("the directive is written through `_Pragma` or a macro: change its clauses by hand")
    if "teams" not in region.pragma_text.split():
        raise EditError("`teams` is on a separate directive after `target`: add thread_limit/num_teams there by hand")


def set_omp_clauses(data: bytes, tree: Tree, region: OmpRegion, thread_limit: int | None = None,
                    num_teams: int | None = None, *, file_kernels: FileKernels | None = None) -> Fix:
    """Add or replace `thread_limit(...)` / `num_teams(...)` on a `teams` directive. A
    `num_teams` computed as a ceiling division by the old thread limit follows a new one."""
    if thread_limit is None and num_teams is None:
        raise EditError("give a thread_limit, a num_teams or both")
    if thread_limit is not None:
        _check_int("thread_limit", thread_limit, 1, MAX_THREADS_PER_BLOCK)
    if num_teams is not None:
        _check_int("num_teams", num_teams, 1, MAX_NUM_TEAMS)
    _check_teams_directive(region)
    fk = file_kernels if file_kernels is not None else extract(data, tree)
    index = _index_of(fk.omp_regions, region)
    blanked = blank_comments_and_strings(data)
    start, end = region.span.start_byte, region.span.end_byte
    clauses = _pragma_clauses(blanked, start, end)
    insert_at = _directive_end(blanked, start, end)
    edits: list[ByteEdit] = []
    additions: list[str] = []
    parts: list[str] = []

    if thread_limit is not None:
        parts.append(f"thread_limit({thread_limit})")
        old = clauses.get("thread_limit")
        if old is not None:
            old_text = _text(data, *old).strip()
            edits.append(ByteEdit(old[0], old[1], str(thread_limit)))
            teams = clauses.get("num_teams")
            if num_teams is None and teams is not None:
                limit_clause = region.clause("thread_limit")
                old_value = limit_clause.value if limit_clause is not None else None
                refs = _Refs(old_value.value if old_value is not None and isinstance(old_value.value, int) else None,
                             thread_limit, lambda name: name == old_text)
                try:
                    edits.extend(refs.rewrite(_parse_text_expression(data, *teams), "num_teams"))
                except EditError:
                    pass  # num_teams is a request, not a correctness matter: leave it as written
        else:
            additions.append(f"thread_limit({thread_limit})")
    if num_teams is not None:
        parts.append(f"num_teams({num_teams})")
        old = clauses.get("num_teams")
        if old is not None:
            edits.append(ByteEdit(old[0], old[1], str(num_teams)))
        else:
            additions.append(f"num_teams({num_teams})")
    if additions:
        edits.append(ByteEdit(insert_at, insert_at, " " + " ".join(additions)))

    def check(new_data: bytes, new_tree: Tree) -> None:
        regions = _reextract(new_data, new_tree, regions=True).omp_regions
        if len(regions) != len(fk.omp_regions):
            raise EditError("the edit changed which OpenMP regions the file contains")
        new_region = regions[index]
        for name, wanted in (("thread_limit", thread_limit), ("num_teams", num_teams)):
            if wanted is None:
                continue
            clause = new_region.clause(name)
            if clause is None:
                raise EditError(f"the edited directive has no {name} clause")
            if clause.value is not None and clause.value.known and clause.value.value != wanted:
                raise EditError(f"after the edit {name} folds to {clause.value.value}")

    return validated_fix(data, tree, f"Set {' '.join(parts)} on the target region at line {region.line}", edits,
                         kind="refactor", check=check)


def _directive_end(blanked: bytes, start: int, end: int) -> int:
    """End of the directive's text: before trailing spaces and a trailing comment (which the
    blanked text shows as spaces)."""
    pos = end
    while pos > start and blanked[pos - 1:pos] in (b" ", b"\t", b"\\", b"\r", b"\n"):
        pos -= 1
    return pos


# --------------------------------------------------------------------------- fix requests
# Lints describe their fixes as `FixRequest`s (data only); the edits are built and validated here
# when an editor's code action, `perflsp check`'s output or a test asks for them.


def build_fix(request: FixRequest, data: bytes, tree: Tree, file_kernels: FileKernels) -> Fix:
    """The validated edit a request describes, on the text it was made for (EditError when none
    is safe). `file_kernels` is the whole file's extraction: edits are checked against it."""
    span = request.span
    if request.action == "float-literal":
        return float_literal_fix(data, tree, span)
    if request.action == "float-function":
        return float_function_fix(data, tree, span, request.language)
    if request.action == "square":
        return square_fix(data, tree, span)
    value = request.value
    if value is None:
        raise EditError(f"a `{request.action}` fix needs a value")
    if request.action == "block-size":
        site = _find(file_kernels.launches, span, "launch")
        return set_block_size(data, tree, site, value, warp_size=request.warp_size, file_kernels=file_kernels)
    if request.action == "launch-bounds":
        kernel = next((k for k in file_kernels.kernels if _same_span(k.name_span, span)), None)
        if kernel is None:
            raise EditError("the kernel is no longer at the given range")
        return set_launch_bounds(data, tree, kernel, value, file_kernels=file_kernels)
    region = _find(file_kernels.omp_regions, span, "OpenMP region")
    return set_omp_clauses(data, tree, region, thread_limit=value, file_kernels=file_kernels)


def build_fixes(finding: Finding, data: bytes, tree: Tree, file_kernels: FileKernels) -> tuple[Fix, ...]:
    """The finding's fixes: those it carries built, then its requests that build. A preferred
    request that cannot be built hands its preference on to the next one that can."""
    built = list(finding.fixes)
    promote = False
    for request in finding.fix_requests:
        try:
            fix = build_fix(request, data, tree, file_kernels)
        except EditError:
            promote = promote or request.preferred
            continue
        if (promote or request.preferred) and not fix.preferred:
            fix = replace(fix, preferred=True)
        promote = False
        built.append(fix)
    return tuple(built)


def with_fixes(findings: Iterable[Finding], data: bytes, tree: Tree, file_kernels: FileKernels) -> list[Finding]:
    """Findings with their requested fixes built (for output that shows the edits)."""
    return [replace(f, fixes=build_fixes(f, data, tree, file_kernels), fix_requests=()) if f.fix_requests else f
            for f in findings]


class _Spanned(Protocol):
    @property
    def span(self) -> Span: ...


_S = TypeVar("_S", bound=_Spanned)


def _find(items: Sequence[_S], span: Span, what: str) -> _S:
    for item in items:
        if _same_span(item.span, span):
            return item
    raise EditError(f"no {what} at the given range any more (stale request?)")


def _same_span(a: Span, b: Span) -> bool:
    return (a.start_byte, a.end_byte) == (b.start_byte, b.end_byte)
