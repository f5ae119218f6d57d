"""The block-size fix: launch a kernel with a given number of threads per block, rewriting the
launch's block value (or the variable it names), the grid computed from it, and the kernel's
`__launch_bounds__`; and the occupancy-best block size to offer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tree_sitter import Node, Tree

from perflsp.analysis.exprtypes import call_name
from perflsp.analysis.fixes.document import (
    MAX_THREADS_PER_BLOCK,
    EditError,
    _check_int,
    _node_at,
    _node_text,
    _text,
    apply_edits,
    validated_fix,
)
from perflsp.analysis.fixes.launch_bounds import _index_of, _threads
from perflsp.analysis.fixes.launch_document import LaunchDocument, _Definition, _kernel_assumes_block
from perflsp.analysis.fixes.launch_exprs import _Expr, _parse_args, _parse_text_expression, _Refs, _unwrap_parens
from perflsp.analysis.models import ByteEdit, Fix
from perflsp.hardware.models import Gpu
from perflsp.hardware.occupancy import OccupancyInputError, best_block_size, occupancy
from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.models import CudaFunction, LaunchSite, Span
from perflsp.kernels.program import ProgramModel


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


def set_block_size(model: ProgramModel, site: LaunchSite, block: int, *, warp_size: int = 32,
                   allow_any_size: bool = False) -> Fix:
    """Launch `site` (one of `model`'s launches) with `block` threads per block (1-D blocks).

    Edits the constant, `#define` or `dim3` the block size comes from when every use of it belongs
    to this kernel and its launches; otherwise edits the launch site. A grid computed as a
    ceiling division by the old size (`(n + B - 1) / B`, `(n + 255) / 256`, `ceil(n / (float)B)`,
    `div_up(n, B)`) is adjusted to the new one, and a `__launch_bounds__` below the new size is
    raised. Raises EditError when any of that cannot be done safely."""
    _check_int("block size", block, 1, MAX_THREADS_PER_BLOCK)
    if not allow_any_size and block % warp_size:
        raise EditError(f"block size {block} is not a multiple of the warp size {warp_size}")
    fk = model.kernels
    index = _index_of(fk.launches, site)
    kernel = next((k for k in fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    plan = _BlockPlan(LaunchDocument(model), site, kernel, block)
    edits = plan.build()
    title = f"Launch `{site.name}` with {block} threads per block"

    def check(new_data: bytes, new_tree: Tree) -> None:
        after = model.reread(new_data, new_tree).kernels
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

    return validated_fix(model.data, model.tree, title, edits, check=check)


class _BlockPlan:
    def __init__(self, doc: LaunchDocument, site: LaunchSite, kernel: CudaFunction | None, block: int):
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
