"""How often each basic block runs per trip of its innermost loop, from the control-flow graph
alone: the share of passes that reach it when every two-way branch goes either way as often.

Source guards say how often the program's own statements run (`compiled/profile.py`). Code
that no statement of the program holds has no guard to read: the OpenMP device runtime's
worksharing and reduction code (placed on the directive's line), library code inlined without
call sites. Counted as if every block of it ran on every pass, both arms of each of its
branches are counted (a reduction's warp-shuffle loop for team sizes that are no multiple of
32 as well as the unrolled one for those that are). Reading an unknown branch as even, the
static estimate compilers use without a profile, counts one arm's worth.
"""

from __future__ import annotations

from collections import defaultdict

from perflsp.compiled.model import CompiledFunction


def block_shares(fn: CompiledFunction) -> list[float]:
    """Per block: the share of the passes through its innermost loop (or of the function's
    runs, outside loops) that run it, in (0, 1]. A nested loop counts as one step that passes
    all it receives on to where it exits; a region whose graph is not a clean DAG once the
    back edges go (irreducible flow) keeps share 1 for all its blocks."""
    shares = [1.0] * len(fn.blocks)
    owner: dict[int, int | None] = {b: block.loop for b, block in enumerate(fn.blocks)}
    regions: list[int | None] = [None, *range(len(fn.loops))]
    for region in regions:
        _propagate(fn, region, owner, shares)
    return shares


def _node(fn: CompiledFunction, block: int, region: int | None, owner: dict[int, int | None]) -> tuple[str, int] | None:
    """The region's node that `block` belongs to: the block itself, the child loop holding it,
    or None when it lies outside the region."""
    loop = owner[block]
    if loop == region:
        return ("block", block)
    while loop is not None:
        parent = fn.loops[loop].parent
        if parent == region:
            return ("loop", loop)
        loop = parent
    return None


def _propagate(fn: CompiledFunction, region: int | None, owner: dict[int, int | None], shares: list[float]) -> None:
    if region is None:
        entry: tuple[str, int] | None = _node(fn, 0, None, owner) if fn.blocks else None
        header = None
    else:
        header = fn.loops[region].header
        entry = ("block", header)
    if entry is None:
        return
    members = [b for b, loop in owner.items() if loop == region]
    children = [i for i, loop in enumerate(fn.loops) if loop.parent == region]
    edges: dict[tuple[str, int], set[tuple[str, int]]] = defaultdict(set)
    sources: list[tuple[tuple[str, int], int]] = [(("block", b), b) for b in members]
    sources += [(("loop", c), b) for c in children for b in fn.loops[c].blocks]
    for node, block in sources:
        for successor in fn.blocks[block].successors:
            target = _node(fn, successor, region, owner)
            if target is None or target == node or successor == header:
                continue  # leaves the region, stays in the child loop, or closes the region's loop
            edges[node].add(target)
    order = _topological(entry, edges)
    if order is None:
        return
    reach: dict[tuple[str, int], float] = defaultdict(float)
    reach[entry] = 1.0
    for node in order:
        out = edges.get(node, set())
        for target in out:
            reach[target] += reach[node] / len(out)
    for b in members:
        shares[b] = min(1.0, reach.get(("block", b), 0.0)) or 1.0


def _topological(entry: tuple[str, int], edges: dict[tuple[str, int], set[tuple[str, int]]]
                 ) -> list[tuple[str, int]] | None:
    """The nodes reachable from `entry` in an order where each comes after all its
    predecessors; None when they form a cycle."""
    seen = {entry}
    stack = [entry]
    while stack:
        for target in edges.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    indegree = {node: 0 for node in seen}
    for node in seen:
        for target in edges.get(node, ()):
            indegree[target] += 1
    ready = [node for node in seen if indegree[node] == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for target in edges.get(node, ()):
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    return order if len(order) == len(seen) else None
