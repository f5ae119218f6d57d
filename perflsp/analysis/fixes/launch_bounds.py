"""The `__launch_bounds__` fix: add or change a kernel's `__launch_bounds__(max threads, min
blocks)`."""

from __future__ import annotations

from typing import Any

from tree_sitter import Tree

from perflsp.analysis.fixes.document import (
    MAX_MIN_BLOCKS_PER_SM,
    MAX_THREADS_PER_BLOCK,
    EditError,
    _check_int,
    validated_fix,
)
from perflsp.analysis.models import ByteEdit, Fix
from perflsp.kernels.models import CudaFunction
from perflsp.kernels.program import ProgramModel


def set_launch_bounds(model: ProgramModel, kernel: CudaFunction, max_threads: int,
                      min_blocks: int | None = None, *, keep_min_blocks: bool = True) -> Fix:
    """Insert `__launch_bounds__(max_threads[, min_blocks])` before the kernel's name, or replace
    the existing one. `min_blocks=None` keeps an existing second argument unless
    `keep_min_blocks=False`. Refuses a bound below a block size the file launches it with."""
    _check_int("__launch_bounds__ max threads", max_threads, 1, MAX_THREADS_PER_BLOCK)
    if min_blocks is not None:
        _check_int("__launch_bounds__ min blocks per SM", min_blocks, 1, MAX_MIN_BLOCKS_PER_SM)
    if not kernel.is_kernel:
        raise EditError(f"`{kernel.name}` is not a __global__ kernel")
    data, tree = model.data, model.tree
    for site in model.kernels.launches_of(kernel):
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
        # only the edited definition is read again: a whole-file extraction per fix made
        # building every fix of a file quadratic in its size
        after = model.edited_definition(new_data, new_tree, edit.start_byte)
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


def _index_of(items: list[Any], item: object) -> int:
    for i, candidate in enumerate(items):
        if candidate is item or candidate == item:
            return i
    raise EditError("the item is not part of this document's extraction (stale?)")


def _threads(value: object) -> int | None:
    if isinstance(value, tuple):
        x, y, z = value
        return int(x * y * z)
    if isinstance(value, int):
        return value
    return None
    return None
