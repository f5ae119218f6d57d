"""DRAM traffic of one launch, from the accesses the walker recorded.

Two figures bound what DRAM sees for each group of accesses (same array, same index shape):
- the *footprint*: the distinct bytes all work items touch (sector-granular), what DRAM moves
  when every reuse hits in a cache;
- the *streamed* bytes: what the warps request from L2 (32-byte sectors per warp access:
  a broadcast costs one sector, a coalesced float access four, a strided one up to 32), what
  DRAM moves when no reuse survives.
Which one applies depends on whether the data reused fits in L2: footprints that fit are read
once; larger ones are streamed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from perflsp.analysis.costs import CostModel
from perflsp.analysis.linear import UNKNOWN_COEFF, Linear, base_atom, distinct_values, tile_parts, tile_value
from perflsp.analysis.models import KernelFacts
from perflsp.analysis.notes import Note, NoteKind
from perflsp.analysis.walk_values import Access

WARP = 32


@dataclass(slots=True)
class GroupTraffic:
    array: str
    is_store: bool
    footprint_bytes: float
    streamed_bytes: float
    accessed_bytes: float
    atomic: bool
    # the index form its footprint was counted over (None: gathered or data-placed elements)
    form: Linear | None = None
    reread_bytes: float = 0.0  # read again by blocks too far apart to share them in L2 (`reuse_window`)
    # the elements its accesses are shifted by from the form (`x[i - n]`, `x[i]`, `x[i + n]`)
    offsets: tuple[float, ...] = ()
    # the atoms of the loops around its accesses (`pass_rereads`: those its form does not follow)
    loops: frozenset[str] = frozenset()
    element_bytes: float = 0.0  # one access's element (0: not known)


@dataclass(slots=True)
class Traffic:
    dram_bytes: float
    footprint_bytes: float
    streamed_bytes: float
    accessed_bytes: float
    groups: list[GroupTraffic]
    note: str  # how the bytes were found, then its remarks ("; "-separated)
    remarks: tuple[str, ...] = ()  # what the note adds beyond the figures (a floor assumed)
    cardinality: dict[str, float] | None = None  # each atom's range, as the footprints were counted
    # the launch's blocks in the order they start, fastest axis first: (index atom, values of it
    # one block covers, blocks along it). CUDA: (`bx`, 1, gridDim.x), ...; OpenMP: the collapsed
    # nest's loops, innermost first, a team's iterations split over them
    block_order: tuple[tuple[str, float, float], ...] = ()
    fast_atom: str = "tx"  # the index a warp's neighbouring lanes differ by


def dram_traffic(accesses: list[Access], cardinality: dict[str, float], work_items: float, cost: CostModel,
                 fast_atom: str = "tx",
                 extents: dict[str, tuple[float | None, bool]] | None = None, *,
                 data_offsets: bool = False, layout_remarks: list[str] | None = None,
                 block_atoms: tuple[str, ...] = (), block_items: float | None = None,
                 shape_assumed: bool = False) -> Traffic:
    """`extents`: array -> (allocated bytes or None, lives in mapped host memory). `data_offsets`:
    an index with a thread- or loop-dependent part and a data-dependent one (`out[i * 8 + bucket]`,
    `key[begin[s] + tid]`) lands where its affine part says, the data moving it within a small
    neighbourhood: its footprint and sectors are those of the affine part (CUDA so far). Without
    it, and for pure gathers (`a[idx[i]]`), every access counts its own element (see below).
    `layout_remarks`: what the note says of the element sizes it used (structs laid out).
    `block_atoms`: the launch's block indices in the order its blocks start (CUDA: x fastest),
    kept with the forms for `reuse_window`, which finds the reads that blocks far apart repeat.
    `block_items`: where the atoms are the loops of an OpenMP nest (innermost first), the
    iterations one team's block takes at a time; None: each block is one value of each atom.
    `shape_assumed`: the launch shape is the engine's guess (`cuda_facts.production_shape`); see
    `_own_elements`."""
    extents = extents or {}
    grouped: dict[tuple[Any, ...], list[Access]] = defaultdict(list)
    for access in accesses:
        if access.space != "global":
            continue
        grouped[(access.array, access.is_store, access.lin.coeffs, access.lin.nonlinear, access.elem_bytes,
                 access.loops)].append(access)
    own_elements = _own_elements(accesses, cardinality) if shape_assumed else set()
    groups: list[GroupTraffic] = []
    gapped: dict[str, float] = {}  # array -> elements between neighbouring accesses, under a sector
    spans: dict[int, float] = {}  # group -> its footprint with the gaps between its elements
    widened: set[str] = set()  # arrays whose bytes include such gaps
    gathers: list[int] = []  # groups indexed by values read from memory
    elems: list[int] = []  # each group's element bytes
    by_index: dict[str, float] = {}  # array of no known size -> the most its thread-indexed groups reach
    for (array, is_store, _, _, elem, loops), members in grouped.items():
        form = members[0].lin
        gap_filled = 0.0
        count = max(sum(m.count for m in members) * work_items, 1.0)
        # a loop that does not move the address re-reads the same element: L1/registers serve it
        reuse_in_thread = 1.0
        for loop in loops - form.atoms:
            reuse_in_thread *= max(1.0, cardinality.get(loop, 1.0))
        segment = False  # a dense run from a data-dependent start: each access distinct, by sectors
        placed: Linear | None = None  # the form the footprint counts, where the launch places every element
        if data_offsets and "data" in form.nonlinear and len(form.nonlinear) == 1 and form.coeffs:
            affine = Linear(coeffs=form.coeffs, const=form.const, const_known=form.const_known)
            spanned = {a for a in _BLOCK_ATOMS if cardinality.get(a, 1.0) > 1.0}
            if spanned and spanned <= affine.atoms:
                # every block's place comes from its block index: the data moves it within that place
                form = affine
            elif _dense(affine, elem, cost, fast_atom):
                form, segment = affine, True
        # the members' constant offsets from the array's start (`x[i]`, `x[i + n]`, `x[i + 2 * n]`: one
        # range each): a pointer's own address is never known, so the forms say `const_known=False`
        # even where the offset is; a part the source does not know adds nothing (counted as 0)
        span = _span(form, cardinality)
        shifted = _shifted_extra(span, [m.lin.const for m in members])
        if "data" in form.nonlinear:
            # an index read from memory (`a[idx[i]]`, `x[nodes[k]]`, a scatter by rank) lands near its
            # neighbours' in practice (permutations, neighbour lists, sorted keys): over the launch
            # the sectors it touches fill, so each access moves its own element, not a sector
            footprint = count * elem
            if not form.coeffs:
                gathers.append(len(groups))  # a pure gather (`pos[nbr[k]]`): no part placed by the launch
        elif segment:
            step = _sub_sector_step(form, elem, cardinality, cost)
            if step > 1.0:
                # each access its own element, `step` apart: the gaps its neighbours' offsets leave move too
                residues = {m.lin.const % step for m in members}
                footprint = count / reuse_in_thread * elem * max(1.0, step / len(residues))
                if step > len(residues):
                    gapped.setdefault(array, step)
                    widened.add(array)
            else:
                footprint = count / reuse_in_thread * elem * _sector_factor(form, elem, cardinality, cost, fast_atom)
        else:
            step = _sub_sector_step(form, elem, cardinality, cost)
            one_range = max(distinct_values(form, cardinality, count),
                            _owned(form, loops, own_elements, members, work_items))
            # of the range's elements, those reached
            distinct = min(one_range + _shifted_reach(form, cardinality, elem, cost, one_range, span, shifted,
                                                      [m.lin.const for m in members]), count)
            if step > 1.0:
                # elements `step` apart: every sector of the range they span moves, the gaps too
                # (offsets within a step fill the gaps between elements: only those further apart add)
                length = one_range * step
                apart = _shifted_extra(length, [m.lin.const for m in members], least=step)
                gap_filled = min(length + apart, count * step) * elem
                gapped.setdefault(array, step)
                footprint = distinct * elem
            else:
                footprint = distinct * elem * _sector_factor(form, elem, cardinality, cost, fast_atom,
                                                             [m.lin.const for m in members])
            placed = form
        streamed = count / reuse_in_thread / WARP * _warp_bytes(form, elem, cost, fast_atom)
        size, host_memory = extents.get(array.rstrip("[]"), (None, False))
        capped = _capped(footprint, streamed, count * elem, size, host_memory, cost)
        if host_memory:
            streamed = 0.0  # read over the bus from host memory, not from DRAM
        elems.append(elem)
        groups.append(GroupTraffic(array, is_store, capped, streamed, count * elem,
                                   any(m.atomic for m in members), placed,
                                   offsets=tuple(sorted({m.lin.const for m in members})) if placed is not None else (),
                                   loops=loops, element_bytes=float(elem)))
        if size is None and "data" not in form.nonlinear and {base_atom(a) for a in form.atoms} & {fast_atom, *_BLOCK_ATOMS}:
            by_index[array] = max(by_index.get(array, 0.0), capped)
        if gap_filled > 0.0:
            spans[len(groups) - 1] = _capped(gap_filled, streamed, count * elem, size, host_memory, cost)
    _share_overlaps(groups, cardinality, elems, spans)
    widened |= _fill_gaps(groups, spans)
    bounded = _bound_gathers(groups, gathers, by_index)
    _bound_by_allocation(groups, extents)
    footprint_total = _union(groups, "footprint_bytes")
    streamed_total = sum(g.streamed_bytes for g in groups)
    accessed_total = sum(g.accessed_bytes for g in groups)
    dram = combine(groups)
    note = (f"footprint {_bytes(footprint_total)}, {_bytes(streamed_total)} requested by warps "
            f"({_bytes(accessed_total)} accessed)")
    remarks: tuple[str, ...] = tuple(layout_remarks or ())
    gapped = {a: step for a, step in gapped.items() if a in widened}
    if gapped:
        shown = ", ".join(f"`{a}` {step:g}" for a, step in list(gapped.items())[:3])
        remarks += (f"elements apart by less than a sector ({shown} elements): the bytes between them move too",)
    if bounded:
        shown = ", ".join(f"`{a}`" for a in bounded[:3])
        remarks += (f"gathered elements of {shown} assumed among those the launch reads by thread index "
                    "(the array's size not known): at most as many bytes again",)
    if dram < cost.min_dram_bytes:
        remarks += (f"at least {_bytes(cost.min_dram_bytes)} assumed (every launch moves some)",)
    order = block_axes(block_atoms, cardinality, block_items)
    return Traffic(max(dram, cost.min_dram_bytes, 1.0), footprint_total, streamed_total, accessed_total, groups,
                   "; ".join([note, *remarks]), remarks, dict(cardinality), order, fast_atom)


def with_dram_added(facts: KernelFacts, added: float, remark: str, assumption: Note) -> KernelFacts:
    """The facts with `added` bytes on top of their DRAM bytes (a per-GPU rule's: local memory,
    other clients of the DRAM), the DRAM note and evidence line saying `remark`, and the rule's
    `assumption`."""
    dram = facts.dram_bytes + added
    note = f"{facts.dram_note}; {remark}" if facts.dram_note else remark
    evidence = [replace(n, detail=f"DRAM: {note}", value=dram) if n.kind == NoteKind.DRAM_TRAFFIC else n
                for n in facts.evidence]
    traffic = facts.traffic
    if isinstance(traffic, Traffic):
        traffic = replace(traffic, dram_bytes=dram, note=note, remarks=(*traffic.remarks, remark))
    return replace(facts, dram_bytes=dram, dram_note=note, dram_remarks=(*facts.dram_remarks, remark),
                   traffic=traffic, evidence=evidence, assumptions=[*facts.assumptions, assumption])


def block_axes(atoms: tuple[str, ...], cardinality: dict[str, float],
               block_items: float | None = None) -> tuple[tuple[str, float, float], ...]:
    """The launch's blocks along each atom, fastest first: (atom, values of it one block covers,
    blocks along it). Without `block_items` each block is one value of each atom (CUDA's block
    indices). With it, a block takes that many consecutive iterations of a nest whose atoms are
    its loops, innermost first (an OpenMP `collapse` nest: a team's threads take consecutive
    iterations): the innermost loop's values first, what is left of the block spread over the next."""
    axes = []
    left = block_items
    for atom in atoms:
        values = max(1.0, cardinality.get(atom, 1.0))
        if left is None:
            axes.append((atom, 1.0, values))
            continue
        per_block = min(values, max(1.0, left))
        axes.append((atom, per_block, max(1.0, values / per_block)))
        left = max(1.0, left / per_block)
    return tuple(axes)


WIDTHS = (1, 2, 4, 8, 16)  # the widths of a global load or store (LDG.U8 ... LDG.128)


def with_compiled_widths(accesses: list[Access],
                         widths: dict[tuple[int, bool], tuple[float, float]]) -> tuple[list[Access], list[str]]:
    """The accesses with the element size the compiled code loads or stores at their line, and
    a note per line changed. A line is read only when its global accesses of that kind are all
    of a known type or all of an unknown one:
    - of known types sharing one size: the compiled width where it is wider (a template type or
      typedef the source did not resolve) and the compiled code has at least as many
      instructions there as the source has accesses (fewer: the compiler merged neighbouring
      elements into one wide access), and no access of another line lies within the wider
      element (`p[i].x = g; ... p[i].w = 255;`: four byte stores merged into one on the last
      line). A narrower width is no evidence: a struct or vector element is loaded field by field;
    - of a struct or type the source does not know (4 B assumed): the bytes the compiled code
      moves there, shared among them (a struct copied from memory is loaded field by field)."""
    by_line: dict[tuple[int, bool], list[Access]] = defaultdict(list)
    offsets: dict[tuple[Any, ...], set[tuple[int, float]]] = defaultdict(set)  # (line, offset) per element form
    for access in accesses:
        if access.space == "global" and not access.atomic:
            by_line[(access.line, access.is_store)].append(access)
            offsets[_element_form(access)].add((access.line, access.lin.const))
    changed: dict[int, int] = {}  # id(access) -> compiled size
    notes = []
    for (line, is_store), members in sorted(by_line.items()):
        count, nbytes = widths.get((line, is_store), (0.0, 0.0))
        elems = {a.elem_bytes for a in members}
        sized = {a.sized for a in members}
        if count <= 0 or len(elems) != 1 or len(sized) != 1:
            continue
        elem = elems.pop()
        if sized.pop():
            distinct = {(a.array, a.lin.coeffs, a.lin.nonlinear, a.lin.const) for a in members}
            if nbytes / count not in WIDTHS or nbytes / count <= elem or count < len(distinct) \
                    or any(_merged(a, offsets, nbytes / count) for a in members):
                continue
            size, what = int(nbytes / count), "per element"
        else:
            size = round(nbytes / len(members))
            if size <= elem:
                continue
            what = "per access of an element whose type the source does not size"
        for a in members:
            changed[id(a)] = size
        notes.append(f"line {line}: the compiled code {'stores' if is_store else 'loads'} {size} B {what} "
                     f"(the source read {elem} B)")
    if not changed:
        return accesses, []
    return [replace(a, elem_bytes=changed[id(a)]) if id(a) in changed else a for a in accesses], notes


def _element_form(access: Access) -> tuple[Any, ...]:
    return (access.array, access.is_store, access.lin.coeffs, access.lin.nonlinear, access.elem_bytes)


def _merged(access: Access, offsets: dict[tuple[Any, ...], set[tuple[int, float]]], width: float) -> bool:
    """Whether an access of another line lies within `width` bytes of `access`'s element: the
    compiler's wide access there holds both."""
    return any(line != access.line and 0 < abs(const - access.lin.const) * access.elem_bytes < width
               for line, const in offsets[_element_form(access)])


_UNBOUNDED_SPAN = float("inf")


def _own_elements(accesses: list[Access], cardinality: dict[str, float]) -> set[tuple[tuple[str, float], ...]]:
    """Index forms each thread of the launch has its own element at: those of plain stores over
    every launch index that varies and every loop around them (`df[k * mx * my + j * mx + i]` with
    `i`, `k` from `threadIdx` and `blockIdx`, `j` from them or a loop's counter). Two threads
    storing to one element would race, so the real
    launch gives each thread its own; a launch shape the engine assumes (16x16 blocks where the
    code's rows are 64 wide) can overlap them, and would count their elements as shared. Accesses
    at the same form (the load of `f[globalIdx]` beside that store) reach as many."""
    varying = {a for a in (*_THREAD_ATOMS, *_BLOCK_ATOMS) if cardinality.get(a, 1.0) > 1.0}
    forms: set[tuple[tuple[str, float], ...]] = set()
    for access in accesses:
        lin = access.lin
        if access.space == "global" and access.is_store and not access.atomic and access.loops <= lin.atoms \
                and not lin.nonlinear and varying and varying <= _whole_atoms(lin.atoms):
            forms.add(lin.coeffs)
    return forms


def _whole_atoms(atoms: frozenset[str]) -> set[str]:
    """The atoms, with each thread index whose tiles all enter (`tx % 32` and `tx / 32`)."""
    whole = set(atoms)
    tiles: dict[str, dict[int, float]] = defaultdict(dict)  # thread index -> low -> values
    for atom in atoms:
        parts = tile_parts(atom)
        if parts is not None:
            tiles[parts[0]][parts[1]] = parts[2]
    for base, by_low in tiles.items():
        low = 1
        while low in by_low and by_low[low] != math.inf:
            low *= int(by_low[low])
        if by_low.get(low) == math.inf:
            whole.add(base)
    return whole


def _owned(form: Linear, loops: frozenset[str], own_elements: set[tuple[tuple[str, float], ...]],
           members: list[Access], work_items: float) -> float:
    """The elements an access at one of `own_elements`' forms reaches: one per thread and pass that
    makes it, whatever the assumed shape overlaps (the neighbours a stencil reads at constant offsets
    from it are counted apart, as shifted ranges); 0 for other accesses."""
    if not loops <= form.atoms or form.coeffs not in own_elements:
        return 0.0
    return max(m.count for m in members) * work_items


def _span(form: Linear, cardinality: dict[str, float]) -> float:
    """Elements from the least to the greatest value the form takes (inf where a coefficient is
    not known, or where an atom enters it non-linearly)."""
    if any(cardinality.get(atom, 1.0) > 1.0 for atom in form.nonlinear):
        return _UNBOUNDED_SPAN
    span = 1.0
    for atom, coeff in form.coeffs:
        card = max(1.0, cardinality.get(atom, 1.0))
        if card > 1.0:
            if coeff == UNKNOWN_COEFF:
                return _UNBOUNDED_SPAN
            span += abs(coeff) * (card - 1.0)
    return span


def _shifted_extra(span: float, offsets: list[float], least: float = 0.0) -> float:
    """Elements (of address space) that copies of one range `span` long, shifted by each offset,
    cover beyond the first: their union. Neighbours (`x[i - 1]`, `x[i]`, `x[i + 1]`) add their
    shifts; ranges further apart than their length (`x[i]`, `x[i + n]` over n threads; the first
    and the last row of a grid) add a whole range each, not what lies between them. Shifts under
    `least` are left out."""
    shifts = sorted(set(offsets))
    return sum(min(after - before, span) for before, after in pairwise(shifts) if after - before >= least)


def _shifted_reach(form: Linear, cardinality: dict[str, float], elem: int, cost: CostModel, elements: float,
                   span: float, shifted: float, offsets: list[float]) -> float:
    """Elements the copies of a form shifted by `offsets` reach beyond its own `elements`: runs
    with gaps between them (`g[idx + k * blockDim.x]`, `idx = blockIdx.x * blockDim.x * 8 +
    threadIdx.x`) fill the gaps each shift reaches; any other form adds the `shifted` elements of
    its range, at the share of the range it reaches."""
    runs = _runs(form, cardinality, elem, cost) if len(set(offsets)) > 1 else None
    if runs is not None:
        return _shifted_runs(runs, elements, offsets)
    density = min(1.0, elements / span) if span < _UNBOUNDED_SPAN else 1.0
    return shifted * density


def _runs(form: Linear, cardinality: dict[str, float], elem: int, cost: CostModel) -> tuple[float, float] | None:
    """(run, period) of a form whose values are runs of consecutive elements, whole sectors
    long, repeating further apart than their length (`blockIdx.x * 8192 + threadIdx.x`: runs of
    the block's 1,024 elements every 8,192); None for a form with no gaps between its runs, with
    runs shorter than a sector (strides: `_sub_sector_step`), or not plainly affine."""
    if form.nonlinear or not form.coeffs:
        return None
    varying = sorted((abs(c), max(1.0, cardinality.get(a, 1.0))) for a, c in form.coeffs
                     if cardinality.get(a, 1.0) > 1.0)
    if not varying or any(c == UNKNOWN_COEFF or c <= 0 for c, _ in varying):
        return None
    run = 1.0
    for coeff, card in varying:
        if coeff == run:
            run *= card
        elif coeff > run:
            return (run, coeff) if run * elem >= cost.sector_bytes else None
        else:
            return None
    return None  # one dense range


def _shifted_runs(runs: tuple[float, float], elements: float, offsets: list[float]) -> float:
    """Elements that copies of a form made of runs (`_runs`), shifted by each offset, reach
    beyond the first copy: a shift of q periods and r elements lands each run on the one q runs
    later, r in: min(r, run, period - r) new elements a run, and whole runs beyond the last."""
    run, period = runs
    count = max(1.0, elements / run)
    added = 0.0
    for before, after in pairwise(sorted(set(offsets))):
        whole, rest = divmod(after - before, period)
        beyond = min(count, whole)
        added += beyond * run + (count - beyond) * min(rest, run, period - rest)
    return added


def _capped(footprint: float, streamed: float, accessed: float, size: float | None, host_memory: bool,
            cost: CostModel) -> float:
    """A group's footprint within what its warps request and its array's allocation."""
    footprint = min(footprint, max(streamed, accessed))
    if host_memory:
        return 0.0
    return min(footprint, max(size, cost.sector_bytes)) if size is not None else footprint


def _share_overlaps(groups: list[GroupTraffic], cardinality: dict[str, float], elems: list[int],
                     spans: dict[int, float]) -> None:
    """An array read (or written) at several index forms over the same elements (each thread's own
    point, and every point in a loop; a row read by the thread's index and again by a loop's):
    groups that each fill their range move the sectors of the ranges' union once, not once per
    group. The largest keeps its footprint, the others share the rest of the union. Groups of
    elements apart (`spans`, `_fill_gaps`) and gathers are left as they are: their elements may
    be another's gaps."""
    dense: dict[tuple[str, bool, int], list[tuple[int, float, float]]] = defaultdict(list)
    for i, g in enumerate(groups):
        if g.form is None or i in spans or g.footprint_bytes <= 0.0:
            continue
        reach = _range(g.form, g.offsets, cardinality)
        if reach is not None and g.footprint_bytes >= (reach[1] - reach[0] + 1.0) * elems[i]:
            dense[(g.array, g.is_store, elems[i])].append((i, *reach))
    for (_, _, elem), members in dense.items():
        if len(members) < 2:
            continue
        union, end = 0.0, -math.inf
        for _, low, high in sorted(members, key=lambda m: m[1]):
            union += max(0.0, high + 1.0 - max(low, end))
            end = max(end, high + 1.0)
        # as `_bound_by_allocation` does: the largest keeps its footprint (what `reuse_window` reads
        # again is counted from it), the others share what the union holds beyond it
        largest = max((i for i, _, _ in members), key=lambda i: groups[i].footprint_bytes)
        others = sum(groups[i].footprint_bytes for i, _, _ in members if i != largest)
        left = max(0.0, union * elem - groups[largest].footprint_bytes)
        if others > left:
            for i, _, _ in members:
                if i != largest:
                    groups[i].footprint_bytes *= left / others


def _range(form: Linear, offsets: tuple[float, ...], cardinality: dict[str, float]) -> tuple[float, float] | None:
    """The least and the greatest element a form reaches with its offsets; None where a
    coefficient is not known or an atom enters it non-linearly."""
    if form.nonlinear or not offsets:
        return None
    low, high = min(offsets), max(offsets)
    for atom, coeff in form.coeffs:
        card = max(1.0, cardinality.get(atom, 1.0))
        if coeff == UNKNOWN_COEFF or not math.isfinite(card):
            return None
        low += min(0.0, coeff * (card - 1.0))
        high += max(0.0, coeff * (card - 1.0))
    return low, high


def _fill_gaps(groups: list[GroupTraffic], spans: dict[int, float]) -> set[str]:
    """Strided groups (`spans`: their footprints with the gaps between their elements) move the
    range they span. The gaps of one group may be another group's elements (`a[2 * i]` and
    `a[2 * i + s]`, a red-black sweep, the members of an array of structs read on different
    lines): an array's groups in one direction move together the larger of the range the widest
    strided group spans and the elements they all touch. Returns the arrays whose bytes grew."""
    widened: set[str] = set()
    if not spans:
        return widened
    by_array: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by_array[(g.array, g.is_store)].append(i)
    for members in by_array.values():
        strided = [i for i in members if i in spans]
        if not strided:
            continue
        touched = sum(groups[i].footprint_bytes for i in members)
        target = max(touched, max(spans[i] for i in strided))
        plain = sum(groups[i].footprint_bytes for i in strided)
        if plain <= 0.0 or target <= touched:
            continue
        scale = (plain + target - touched) / plain
        for i in strided:
            groups[i].footprint_bytes *= scale
        widened.add(groups[strided[0]].array)
    return widened


def _bound_gathers(groups: list[GroupTraffic], gathers: list[int], by_index: dict[str, float]) -> list[str]:
    """An array of no known size that the launch reads both by thread index (`pos[i]`) and through
    indices read from memory (`pos[neighbours[k]]`): the gathered elements are assumed to be among
    those its thread-indexed accesses reach (the same particles, cells, nodes), so the gathers move
    at most that many bytes again. Returns the arrays bounded so."""
    per_array: dict[str, list[int]] = defaultdict(list)
    for i in gathers:
        if groups[i].array in by_index:
            per_array[groups[i].array].append(i)
    bounded = []
    for array, members in per_array.items():
        total = sum(groups[i].footprint_bytes for i in members)
        bound = by_index[array]
        if bound <= 0.0 or total <= bound:
            continue
        for i in members:
            groups[i].footprint_bytes *= bound / total
        bounded.append(array)
    return bounded


def _bound_by_allocation(groups: list[GroupTraffic], extents: dict[str, tuple[float | None, bool]]) -> None:
    """The groups of one array read (or written) at index forms that cannot be merged (a
    stencil's centre, its neighbours wrapped around with `%`): together they reach at most the
    array's allocated bytes. The largest keeps its footprint (what `reuse_window` reads again
    is counted from it); the others share what is left of the array."""
    sizes = {array: size for array, (size, host_memory) in extents.items() if size is not None and not host_memory}
    by_array: dict[tuple[str, bool], list[GroupTraffic]] = defaultdict(list)
    for g in groups:
        if g.array.rstrip("[]") in sizes:
            by_array[(g.array.rstrip("[]"), g.is_store)].append(g)
    for (array, _), members in by_array.items():
        largest = max(members, key=lambda g: g.footprint_bytes)
        others = sum(g.footprint_bytes for g in members if g is not largest)
        left = max(0.0, sizes[array] - largest.footprint_bytes)
        if others > left:
            for g in members:
                if g is not largest:
                    g.footprint_bytes *= left / others


def combine(groups: list[GroupTraffic]) -> float:
    """DRAM bytes of one launch: the compulsory traffic of an ideal cache. Every distinct sector
    read comes from DRAM once (the footprint); bytes that warps request again (reuse across
    threads or loop iterations) are served by L1/L2. Every distinct sector written reaches DRAM
    (what a launch whose data fit in the judged GPU's L2 leaves there is `l2_writes`, per GPU).

    Measured against Nsight Compute's DRAM bytes on the study split, a capacity-miss model for the
    re-requests (a share 1 - L2/footprint missing) agreed worse (its re-requests mostly come from
    neighbouring, concurrently running threads), and so did a share of writes held back in L2 in
    every launch (0.5: 297 of 704 kernels within 2x, all written: 303). What blocks far apart in
    launch order read again, once L2 has let it go, is `reuse_window`'s `reread_bytes`, counted
    here in place of the footprint where it is larger."""
    return sum(max(g.footprint_bytes, g.reread_bytes) for g in groups)


def _union(groups: list[GroupTraffic], attribute: str) -> float:
    """Footprint of all groups: different index shapes of one array overlap (the same matrix
    read by rows and by columns), so each array counts with its largest group."""
    per_array: dict[tuple[str, bool], float] = {}
    for g in groups:
        key = (g.array, g.is_store)
        per_array[key] = max(per_array.get(key, 0.0), getattr(g, attribute))
    return sum(per_array.values())


_BLOCK_ATOMS = ("bx", "by", "bz")
_THREAD_ATOMS = ("tx", "ty", "tz")


def _dense(form: Linear, elem: int, cost: CostModel, fast_atom: str) -> bool:
    """Neighbouring threads step through the form within a sector of each other."""
    coeff = _neighbour_coeff(form, fast_atom)
    return coeff is not None and coeff != UNKNOWN_COEFF and 0 < abs(coeff) * elem <= cost.sector_bytes


def _warp_bytes(form: Linear, elem: int, cost: CostModel, fast_atom: str) -> float:
    """Bytes of sectors one warp's access requests."""
    sector = cost.sector_bytes
    if "data" in form.nonlinear or fast_atom in form.nonlinear:
        return WARP * sector
    tiled = _tile_lane_offsets(form, fast_atom)
    if tiled is not None:
        return _sectors_reached(tiled, elem, sector) * sector
    coeff = form.coeff_map().get(fast_atom, 0.0)
    if coeff == 0.0:
        return sector * max(1.0, elem / sector)  # every lane reads the same element
    if coeff == UNKNOWN_COEFF:
        return WARP * sector
    span = WARP * abs(coeff) * elem
    sectors = min(float(WARP) * max(1.0, elem / sector), max(1.0, span / sector))
    return sectors * sector


def _sector_factor(form: Linear, elem: int, cardinality: dict[str, float], cost: CostModel, fast_atom: str,
                   offsets: Sequence[float] = ()) -> float:
    """>1 when neighbouring threads touch elements a sector or more apart and nothing else
    fills the gap (a column of a row-major matrix), times the sectors of each thread's slot
    that the form's `offsets` reach (`_slot_sectors`). (Elements less than a sector apart: see
    `_sub_sector_step`.)"""
    if _sub_sector_step(form, elem, cardinality, cost):
        return 1.0
    thread_coeff = _neighbour_coeff(form, fast_atom)
    if thread_coeff is None:
        return 1.0
    stride = cost.sector_bytes if thread_coeff == UNKNOWN_COEFF else min(cost.sector_bytes, abs(thread_coeff) * elem)
    factor = max(1.0, stride / elem)
    return factor * _slot_sectors(thread_coeff, elem, cost, offsets) if factor > 1.0 else factor


def _slot_sectors(apart: float, elem: int, cost: CostModel, offsets: Sequence[float]) -> float:
    """Sectors of one thread's slot (`apart` elements from its neighbour's, a sector or more)
    that reads at `offsets` from it reach (`in[16 * i]` ... `in[16 * i + 15]` of 4-byte elements:
    both sectors of each 64-byte slot), the slot's start taken as a sector's; 1 for one offset."""
    if apart == UNKNOWN_COEFF or len(set(offsets)) < 2:
        return 1.0
    per_sector = cost.sector_bytes / elem
    first = min(offsets)
    return float(len({(o - first) // per_sector for o in offsets if o - first < abs(apart)}))


def _neighbour_coeff(form: Linear, fast_atom: str) -> float | None:
    """Elements between the accesses of neighbouring threads: the fast index's coefficient, or
    that of its tile column (`tx % 32`); a tile row alone (`tx / 32`) moves once every `low`
    threads (its coefficient over that). None where the fast index does not enter."""
    coeffs = form.coeff_map()
    if fast_atom in coeffs:
        return coeffs[fast_atom]
    rows = None
    for atom, coeff in coeffs.items():
        parts = tile_parts(atom)
        if parts is None or parts[0] != fast_atom:
            continue
        if parts[1] == 1:
            return coeff
        rows = coeff if coeff == UNKNOWN_COEFF else coeff / parts[1]
    return rows


def _tile_lane_offsets(form: Linear, fast_atom: str) -> list[float] | None:
    """The element offsets of one warp's 32 lanes (lane = the fast index's value) where the form
    splits the fast index into tiles (`(tx / 8) * n + tx % 8`: four rows of 8 elements); None
    for a form without tile atoms of it."""
    terms = [(atom, coeff) for atom, coeff in form.coeffs if atom == fast_atom or base_atom(atom) == fast_atom]
    if all(atom == fast_atom for atom, _ in terms):
        return None
    offsets = []
    for lane in range(WARP):
        total = 0.0
        for atom, coeff in terms:
            value = lane if atom == fast_atom else tile_value(atom, lane) or 0
            total += value * (coeff if coeff != UNKNOWN_COEFF else _APART)
        offsets.append(total)
    return offsets


_APART = 1e12  # elements between the rows of an unknown stride: never in one sector


def _sectors_reached(offsets: list[float], elem: int, sector: float) -> float:
    """Sectors the elements at `offsets` (in elements of `elem` bytes) lie in."""
    reached: set[int] = set()
    for offset in offsets:
        first = math.floor(offset * elem / sector)
        last = math.floor((offset * elem + elem - 1) / sector)
        reached.update(range(first, last + 1))
    return float(len(reached))


def _sub_sector_step(form: Linear, elem: int, cardinality: dict[str, float], cost: CostModel) -> float:
    """The least distance, in elements (at least 1), between the elements an index reaches
    along its varying terms that step less than a sector; 0 when none does."""
    steps = [abs(c) for a, c in form.coeff_map().items() if c != UNKNOWN_COEFF and abs(c) * elem < cost.sector_bytes
             and cardinality.get(a, 1.0) > 1.0]
    return max(1.0, min(steps)) if steps else 0.0


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"
