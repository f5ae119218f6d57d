"""Cooperative groups' sizes and ranks: `for (int j = warp.thread_rank(); j < n; j += warp.size())`
over a `thread_block_tile<32> warp = tiled_partition<32>(block)` steps by the tile's size, which
its type fixes; a `thread_block` (`this_thread_block()`) is the launch's block, a `grid_group`
(`this_grid()`) its grid (`grid.thread_rank()`: the thread's index in the grid). The group's
type is read from the declaration of its name in the function around the call (a local or a
parameter)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tree_sitter import Node

from perflsp.analysis.ctype import INT
from perflsp.analysis.folding import int_literal
from perflsp.analysis.linear import Linear
from perflsp.analysis.walk_values import Val

if TYPE_CHECKING:
    from perflsp.analysis.walk_api import Walker

_SIZES = ("size", "num_threads")
_RANKS = ("thread_rank",)


def group_method(walker: Walker, fn: Node, method: str) -> Val | None:
    """`g.size()`, `g.num_threads()`, `g.thread_rank()`, `g.meta_group_size()` of a tile or a
    thread block `g`; None for any other call, or a group whose type is not found."""
    if method not in (*_SIZES, *_RANKS, "meta_group_size", "meta_group_rank"):
        return None
    obj = fn.child_by_field_name("argument")
    if obj is None or obj.type != "identifier":
        return None
    kind = group_kind(walker, fn, walker.text(obj))
    if kind is None:
        return None
    block = walker.launch.block
    block_threads = block[0] * block[1] * block[2] if block is not None else None
    thread_rank = Linear.atom("tx")
    if block is not None:
        thread_rank = thread_rank.add(Linear.atom("ty").scale(block[0])).add(Linear.atom("tz").scale(block[0] * block[1]))
    if kind == "block":
        if method in _SIZES:
            return _number(block_threads)
        return Val(INT, None, thread_rank) if method in _RANKS else None
    if kind == "grid":
        grid = walker.launch.grid
        if grid is None or block_threads is None:
            return None
        if method in _SIZES:
            return _number(grid[0] * grid[1] * grid[2] * block_threads)
        if method in _RANKS:
            block_rank = Linear.atom("bx").add(Linear.atom("by").scale(grid[0])).add(
                Linear.atom("bz").scale(grid[0] * grid[1]))
            return Val(INT, None, block_rank.scale(block_threads).add(thread_rank))
        return None
    tile = float(kind)
    if method in _SIZES:
        return _number(tile)
    if method in _RANKS:
        # a tile's rank is the thread's index modulo the tile: where the tiles split the block's
        # rows, neighbouring lanes have neighbouring ranks, as `threadIdx.x` (the accesses they
        # index coalesce alike)
        lanes_in_rows = block is None or block[0] % tile == 0
        return Val(INT, None, Linear.atom("tx") if lanes_in_rows else thread_rank.opaque())
    if method == "meta_group_size":
        return _number(block_threads / tile if block_threads is not None and tile else None)
    return Val(INT, None, thread_rank.opaque())  # meta_group_rank: the tile's index in the block


# a thread block's dim3 views of the launch: `block.group_index().x` is `blockIdx.x`
_BLOCK_VIEWS = {"group_index": "blockIdx", "thread_index": "threadIdx", "group_dim": "blockDim",
                "dim_threads": "blockDim"}


def block_view(walker: Walker, call: Node) -> str | None:
    """The built-in a thread block's `group_index()`, `thread_index()` or `group_dim()` call
    stands for (`blockIdx`, `threadIdx`, `blockDim`); None for any other expression."""
    if call.type != "call_expression":
        return None
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "field_expression":
        return None
    view = _BLOCK_VIEWS.get(walker.text(fn.child_by_field_name("field")))
    obj = fn.child_by_field_name("argument")
    if view is None or obj is None or obj.type != "identifier":
        return None
    return view if group_kind(walker, fn, walker.text(obj)) == "block" else None


def _number(value: float | None) -> Val | None:
    return Val(INT, value, Linear.constant(value), static=True) if value is not None else None


def group_kind(walker: Walker, node: Node, name: str) -> float | str | None:
    """The tile size of the group `name` (`thread_block_tile<32> name`, `name = tiled_partition<32>(...)`),
    "block" for a thread block, "grid" for the grid, None when its declaration is not found or
    not folded."""
    function = node
    while function.parent is not None and function.type != "function_definition":
        function = function.parent
    text = walker.text(function)
    word = re.escape(name)
    tile = re.search(rf"thread_block_tile\s*<\s*(\w+)[^>]*>\s*&?\s*{word}\b", text) \
        or re.search(rf"\b{word}\s*=\s*(?:\w+::)*tiled_partition\s*<\s*(\w+)\s*>", text)
    if tile is not None:
        return _folded(walker, tile.group(1))
    if re.search(rf"\bthread_block\s*&?\s*{word}\b", text) \
            or re.search(rf"\b{word}\s*=\s*(?:\w+::)*this_thread_block\s*\(", text):
        return "block"
    if re.search(rf"\bgrid_group\s*&?\s*{word}\b", text) \
            or re.search(rf"\b{word}\s*=\s*(?:\w+::)*this_grid\s*\(", text):
        return "grid"
    return None


def _folded(walker: Walker, text: str) -> float | None:
    value = int_literal(text)
    if value is not None:
        return float(value)
    bound = walker.lookup(text)
    if bound is not None and bound.value is not None:
        return bound.value
    found = walker.constant_lookup(text) if walker.constant_lookup is not None else None
    return found[0] if found is not None else None
