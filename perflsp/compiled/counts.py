"""Dynamic counts: each block's compiled counts times how often a thread runs it.

How often comes from the source engine (`perflsp.compiled.profile`): a loop of the compiled code
is tied to the source loop whose header its closing branch (or counter step) sits on, and runs
that loop's trip count divided by how many source iterations one of its trips does (the
unrolling, read from how far its counter steps). A source loop the compiler unrolled completely
is no loop in the compiled code: its copies run as often as the code around them. Each
instruction is weighted by its statement's guard weight (the share of threads its branches let
through); a predicated instruction on a line where a guard and its body begin (an if-converted
`if (tid < s) a[tid] += a[tid + s];`) by the body's. Direct calls add the callee's counts.

The result is per thread; times the threads of the launch it is what Nsight Compute counts
(`..._pred_on` metrics), up to the branch and trip-count estimates it rests on.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perflsp.compiled.branch_shares import block_shares
from perflsp.compiled.cfg import dominators
from perflsp.compiled.linking import simple_name
from perflsp.compiled.model import INDEX, ZERO, Block, CompiledFunction, CompiledUnit, Loop, Step, Vector, add
from perflsp.compiled.names import directive_line
from perflsp.compiled.profile import LineTable, SourceProfile, same_file
from perflsp.compiled.sass import Location

MAX_CALL_DEPTH = 4
UNMATCHED_LOOP_TRIPS = 1.0  # a compiled loop no source loop explains (library code), trips not fixed by its code: once per entry
# how far a main loop's trips (the walk's over the unrolling) may stray from those its code fixes
# before the code's are taken: a remainder loop's share (a 40-trip loop unrolled 4 times by clang
# beside its remainder, 10 versus 9 trips of the main loop)
FIXED_TRIPS_SLACK = 0.25
MAX_UNROLL = 64  # the most source iterations one trip of a compiled loop does (nvcc and LLVM unroll by 4-32)


@dataclass(slots=True)
class DynamicCounts:
    per_thread: Vector
    loops: int = 0  # compiled loops of the kernel
    matched: int = 0  # ... tied to a source loop
    notes: list[str] = field(default_factory=list)

    def get(self, name: str) -> float:
        return self.per_thread[INDEX[name]]


_CONTROL_ONLY = INDEX["instructions"], INDEX["uniform"]


def _works(counts: Vector) -> bool:
    """Whether a line's instructions do any work (not only `EXIT`, `BRA`, `NOP`): the function's
    closing `EXIT` is on its last line, which every thread that stayed reaches."""
    return any(v for i, v in enumerate(counts) if i not in _CONTROL_ONLY)


@dataclass(slots=True)
class _LoopTie:
    source: int | None  # the SourceLoop index
    unroll: float = 1.0
    trips: float = UNMATCHED_LOOP_TRIPS  # per entry of the compiled loop
    wrapper: bool = False  # around a loop that is tied to the same source loop: runs once
    # blocks of the loop a trip does not reach (the way into copies of an inner loop that do not run)
    unreached: frozenset[int] = frozenset()


def dynamic_counts(unit: CompiledUnit, fn: CompiledFunction, profile: SourceProfile, parallel_trips: float | None = None,
                   shift: tuple[str, int] | None = None, continuation_lines: int = 0) -> DynamicCounts:
    """Counts per thread of `fn` (a kernel of `unit`); `parallel_trips`: the iterations of the
    OpenMP worksharing loop one thread runs; `shift`: (file, lines) the source of that file moved
    by since it was compiled (an edited buffer); `continuation_lines`: the lines an OpenMP
    directive continues onto after its first (`... map(tofrom: s) \\` then `reduction(+:s)`)."""
    table = profile.lines()
    return _Counter(unit, table, profile, parallel_trips, shift, continuation_lines).count(fn, 0)


class _Counter:
    def __init__(self, unit: CompiledUnit, table: LineTable, profile: SourceProfile, parallel_trips: float | None,
                 shift: tuple[str, int] | None = None, continuation_lines: int = 0):
        self.unit = unit
        self.table = table
        self.profile = profile
        self.parallel_trips = parallel_trips
        self.shift = shift if shift is not None and shift[1] else None
        self.continuation_lines = continuation_lines  # of the OpenMP directive, after its first line
        self._weights: dict[tuple[Location, ...], float | None] = {}
        self._callees: dict[str, Vector] = {}
        self._chains: dict[int, list[tuple[Location, ...]]] = {}
        self._slow_paths = 0  # of the functions counted
        self._linked: dict[str, str] = {}  # functions of other units counted: symbol -> their unit's source

    def chains(self, fn: CompiledFunction) -> list[tuple[Location, ...]]:
        """The function's source positions, moved where the source moved since the compile."""
        found = self._chains.get(id(fn))
        if found is None:
            if self.shift is None:
                found = fn.chains
            else:
                path, lines = self.shift
                found = [tuple((p, n + lines) if same_file(p, path) else (p, n) for p, n in chain)
                         for chain in fn.chains]
            self._chains[id(fn)] = found
        return found

    def count(self, fn: CompiledFunction, depth: int) -> DynamicCounts:
        self._slow_paths += fn.slow_paths
        ties = self._tie_loops(fn)
        chains = self.chains(fn)
        loop_trips: list[float] = []
        for i, loop in enumerate(fn.loops):
            trips = ties[i].trips
            if loop.parent is not None:
                trips *= loop_trips[loop.parent]
            loop_trips.append(trips)
        tied_loops = self._tied_by_source(fn, ties)
        runtime_line = directive_line(fn.name)
        continued = range(runtime_line + 1, runtime_line + 1 + self.continuation_lines) if runtime_line else range(0)
        shares = block_shares(fn) if runtime_line is not None else []
        caps = self._exit_caps(fn, chains)
        called = self._call_weight(fn, chains) if depth > 0 else 1.0
        total = ZERO
        resolved = [self._block_weights(block, chains) for block in fn.blocks]
        copies = _copy_weights(fn.blocks, resolved)
        arms = _guarded_arms(fn, chains)
        unreached = set().union(*(t.unreached for t in ties))
        for index, block in enumerate(fn.blocks):
            frequency = loop_trips[block.loop] if block.loop is not None else 1.0
            if frequency <= 0 or index in unreached:
                continue
            enclosing = self._enclosing(fn, block.loop)
            known, beside, beside_predicated = resolved[index]
            # (before a loop, code that touches no memory: what the compiler hoisted out of it)
            ahead = None if any(lc.counts[i] > 0 for lc in block.lines for i in _MEMORY) else block.start
            for k, lc in enumerate(block.lines):
                chain = chains[lc.chain]
                if self._peeled(fn, chain, enclosing, tied_loops, lc.counts, ahead):
                    continue
                guarded = known[k]
                if chain and runtime_line is not None and (
                        (guarded is None and chain[0][1] == runtime_line) or chain[0][1] in continued):
                    # the OpenMP device runtime's code, on the directive's lines (a clause on a
                    # continuation line: its reduction): no statement guards it, each of its
                    # branches is read as even
                    guarded = shares[index]
                elif guarded is None:
                    whole = lc.predicated == lc.counts and beside_predicated[k] is not None
                    guarded = beside_predicated[k] if whole else beside[k]
                    if guarded is None:
                        guarded = copies.get(lc.chain)
                if index in arms and chain and chain[0] == arms[index]:
                    # `if (row > k) a[row] -= p[k] * a[k];` on one line, its body a block the
                    # test branches around: the body's weight, not the test's
                    body_weight = self._predicated_body_weight(chain, guarded)
                    guarded = guarded if body_weight is None else body_weight
                weight = min(1.0 if guarded is None else guarded / called, caps[index]) * frequency
                if weight <= 0:
                    continue
                total = add(total, lc.counts, weight)
                body = self._predicated_body_weight(chain, guarded)
                if body is not None and any(lc.predicated):
                    # `if (tid < s) a[tid] += a[tid + s];` on one line, if-converted: the test
                    # runs every pass, the predicated instructions are its body's
                    total = add(total, lc.predicated, min(body / called, caps[index]) * frequency - weight)
            if depth < MAX_CALL_DEPTH:
                for k, callee in enumerate(block.calls):
                    counts = self._callee_counts(callee, depth)
                    if counts is not None:
                        at = [chains[block.call_chains[k]]] if k < len(block.call_chains) else []
                        weight = frequency * self._call_site_weight(at + [chains[lc.chain] for lc in reversed(block.lines)])
                        total = add(total, counts, weight)
        matched = sum(1 for t in ties if t.source is not None or t.wrapper)
        notes = []
        if matched < len(fn.loops):
            notes.append(f"{len(fn.loops) - matched} of {len(fn.loops)} compiled loops not tied to a source loop: "
                         "counted once per entry")
        if depth == 0 and self._linked:
            named = ", ".join(f"`{simple_name(symbol)}` ({Path(source).name})"
                              for symbol, source in list(self._linked.items())[:3])
            more = f" and {len(self._linked) - 3} more" if len(self._linked) > 3 else ""
            notes.append(f"calls device code of other units of the build (separate compilation): {named}{more}, "
                         "counted from their compiled code at the calls' weight")
        if depth == 0 and self._slow_paths:
            notes.append(f"{self._slow_paths} slow path{'s' if self._slow_paths > 1 else ''} of library trigonometric "
                         "functions not counted (the argument reduction for |x| ≥ 105615, 2^31 for doubles): "
                         "no thread runs it in practice")
        return DynamicCounts(total, len(fn.loops), matched, notes)

    def _block_weights(self, block: Block, chains: list[tuple[Location, ...]],
                       ) -> tuple[list[float | None], list[float | None], list[float | None]]:
        """The source weight of each of a block's lines (None where no statement holds it),
        then with the weight of the known code beside it filled in, then of the predicated code
        beside it (an if-converted body's inlined operator runs under that code's predicate)."""
        known = [self.source_weight(chains[lc.chain]) for lc in block.lines]
        if None not in known:
            return known, known, known
        return known, _nearest_known(known), _nearest_known([w if any(lc.predicated) else None
                                                             for w, lc in zip(known, block.lines)])

    def _exit_caps(self, fn: CompiledFunction, chains: list[tuple[Location, ...]]) -> list[float]:
        """Per block, the most of a thread's passes that run it as the early exits before it allow.

        The compiler moves code past a guard's exit where only the threads that stay need it
        (`sum` of a loop sunk below `if (tid == 0 && bid == 0)`'s `@P0 EXIT`): that code keeps
        its own source line, before the guard, which the source's weights say every thread runs.
        Past a predicated exit on line L, no more threads run than run the code of line L and
        after (in the guard or after it) that the exit leads to: the largest weight of that code."""
        caps = [1.0] * len(fn.blocks)
        exits = {x for block in fn.blocks for x in block.after_exits}
        if not exits:
            return caps
        staying: dict[int, float] = {}
        for x in exits:
            chain = fn.blocks[x].exit_chain
            if chain is None or not chains[chain]:
                continue
            where = chains[chain][0]
            found = [w for block in fn.blocks if x in block.after_exits for lc in block.lines
                     if chains[lc.chain] and same_file(chains[lc.chain][0][0], where[0]) and _works(lc.counts)
                     and chains[lc.chain][0][1] >= where[1]
                     and (w := self._past_exit_weight(chains[lc.chain], where)) is not None]
            if found:
                staying[x] = max(found)
        for b, block in enumerate(fn.blocks):
            for x in block.after_exits:
                if x in staying:
                    caps[b] = min(caps[b], staying[x])
        return caps

    def _predicated_body_weight(self, chain: tuple[Location, ...], guarded: float | None) -> float | None:
        """The weight of the predicated code on a line where a guard and the work it guards
        begin together (less often than the line's test runs); None elsewhere."""
        if not chain or guarded is None:
            return None
        work = self.table.work_weight_at(chain[0], chain[1:])
        return work if work is not None and work < guarded else None

    def _past_exit_weight(self, chain: tuple[Location, ...], exit_at: Location) -> float | None:
        """The weight of code past a guard's exit at `exit_at`: on the guard's own line, that of
        the work its line holds (the body of `if (i < n) y[i] = x[i];`, not its test)."""
        if chain[0][1] == exit_at[1]:
            work = self.table.work_weight_at(chain[0], chain[1:])
            if work is not None:
                return work
        return self.source_weight(chain)

    @staticmethod
    def _tied_by_source(fn: CompiledFunction, ties: list[_LoopTie]) -> dict[int, set[int]]:
        """Source loop -> the compiled loops tied to it."""
        found: dict[int, set[int]] = {}
        for i, tie in enumerate(ties):
            if tie.source is not None:
                found.setdefault(tie.source, set()).add(i)
        return found

    @staticmethod
    def _enclosing(fn: CompiledFunction, loop: int | None) -> set[int]:
        out: set[int] = set()
        while loop is not None:
            out.add(loop)
            loop = fn.loops[loop].parent
        return out

    def _peeled(self, fn: CompiledFunction, chain: tuple[Location, ...], enclosing: set[int],
                tied: dict[int, set[int]], counts: Vector, ahead: int | None = None) -> bool:
        """Code of a source loop's body outside every compiled loop tied to that loop: a copy
        unrolling peeled off (its iterations are the main loop's, counted there). On the line
        of a loop written on one line (`for (j = 0; j < m; j++) t += x[j];`), the code that
        loads or computes in floating point: the header's own code (the trip count's
        arithmetic) does neither. Code laid out before the loop that touches no memory (`ahead`:
        its block's offset) is no copy of it but a loop invariant hoisted out of it (`nu * dt /
        (dx * dx)`), which runs once per entry; a copy after the loop (the remainder of an
        unrolling) stays one."""
        if not chain or not tied:
            return False
        path, line = chain[0]
        around = self.table.loops_around(chain[0])
        # the copy of the loop inlined where this code is (a function's loop inlined twice)
        around = [i for i in around if _same_chain(self.profile.loops[i].callsites, chain[1:])] or around
        for source in around:
            if source not in tied:
                continue
            lp = self.profile.loops[source]
            one_line = line == lp.first == lp.last and any(
                counts[INDEX[name]] > 0 for name in ("fp32", "fp64", "fp16", "load_bytes"))
            in_body = line > lp.body or (line == lp.body and lp.body != lp.first) or one_line
            if in_body and not (tied[source] & enclosing) and same_file(path, lp.path):
                hoisted = ahead is not None and all(ahead < fn.blocks[fn.loops[t].header].start for t in tied[source])
                return not hoisted
        return False

    def _call_weight(self, fn: CompiledFunction, chains: list[tuple[Location, ...]]) -> float:
        """The source weight a called function's own code carries that is its calls' (the guards
        around them): its largest outside its loops, which every call runs. Its lines' weights
        are over it: the call site's weight counts the calls (`_callee_counts`)."""
        found = [w for block in fn.blocks if block.loop is None for lc in block.lines
                 if chains[lc.chain] and (w := self.source_weight(chains[lc.chain])) is not None and w > 0]
        return max(found) if found else 1.0

    def _call_site_weight(self, chains: list[tuple[Location, ...]]) -> float:
        """The weight of a call at the first of `chains` (then its block's code, last first): of
        the work its line does (the body of `if (i < n) y[i] = f(x[i]);`, not its test), else
        the line's; past a position no statement holds, the next."""
        for chain in chains:
            if not chain:
                continue
            work = self.table.work_weight_at(chain[0], chain[1:])
            if work is not None:
                return work
            found = self.source_weight(chain)
            if found is not None:
                return found
        return 1.0

    def _callee_counts(self, name: str, depth: int) -> Vector | None:
        if name not in self._callees:
            callee = self.unit.functions.get(name)
            if callee is not None and name in self.unit.linked:
                self._linked[name] = self.unit.linked[name]
            self._callees[name] = self.count(callee, depth + 1).per_thread if callee is not None else ZERO
        return self._callees[name]

    # -- guard weights ------------------------------------------------------------------------

    def weight(self, chain: tuple[Location, ...]) -> float:
        """Share of a thread's passes (per trip of its loops) that run code from `chain`."""
        found = self.source_weight(chain)
        return 1.0 if found is None else found

    def source_weight(self, chain: tuple[Location, ...]) -> float | None:
        """`weight` as the source's guards give it; None where no statement of the source holds
        the code."""
        if chain not in self._weights:
            self._weights[chain] = self._weight(chain)
        return self._weights[chain]

    def _weight(self, chain: tuple[Location, ...]) -> float | None:
        for depth, location in enumerate(chain):
            found = self.table.weight_at(location, chain[depth + 1:])
            if found is not None:
                return found
        return None

    # -- loops ---------------------------------------------------------------------------------

    def _tie_loops(self, fn: CompiledFunction) -> list[_LoopTie]:
        ties = [_LoopTie(None) for _ in fn.loops]
        claimed: dict[int, set[int]] = {}  # compiled loop -> source loops it or its nested loops hold
        depth: dict[int, int] = {}
        for i, loop in enumerate(fn.loops):
            depth[i] = 0 if loop.parent is None else depth[loop.parent] + 1
        # innermost first: a source loop belongs to the innermost compiled loop that closes on its header
        for i in sorted(range(len(fn.loops)), key=lambda k: depth[k], reverse=True):
            loop = fn.loops[i]
            below = set().union(*(claimed.get(j, set()) for j, other in enumerate(fn.loops) if other.parent == i))
            candidates = self._candidates(fn, i)
            free = [c for c in candidates if c not in below]
            if free:
                chosen = self._one_line_nest_loop(fn, i, free)
                ties[i] = _LoopTie(chosen)
                claimed[i] = below | {chosen}
            else:
                claimed[i] = below
                if candidates:  # only loops of nested compiled loops: a wrapper around them (runs once)
                    ties[i] = _LoopTie(None, 1.0, 1.0, wrapper=True)
                    parallel = [c for c in candidates if self.profile.loops[c].parallel]
                    if parallel:
                        # OpenMP's distribute loop around its parallel-for loop: a thread's
                        # iterations are chunks of the distribute loop, one pass of the inner
                        # loop each (both loops' code runs per iteration): the outer runs them
                        ties[i] = _LoopTie(parallel[0])
                        inner = [j for j in self._descendants(fn, i) if ties[j].source == parallel[0]]
                        for j in inner:
                            ties[j] = _LoopTie(None, 1.0, 1.0, wrapper=True)
                        if self.profile.loops[parallel[0]].default_schedule:
                            self._one_iteration_copy(fn, ties, i, [j for j in inner if _holds_body_code(fn, j)])
        # the compiled loops of each source loop (under the same compiled parent)
        groups: dict[tuple[int, int | None], list[int]] = {}
        for i, tie in enumerate(ties):
            if tie.source is not None:
                groups.setdefault((tie.source, fn.loops[i].parent), []).append(i)
        tied_sources = {source for source, _ in groups}
        for (source, _), members in groups.items():
            for m in members:
                ties[m].unroll = self._unroll(fn, m, source, len(members) > 1, tied_sources)
        # trips: the most unrolled compiled loop of a source loop runs its trips; the others (the
        # remainder loops unrolling leaves) the few that are left over
        for (source, _), members in groups.items():
            # the main loop (the most unrolled) does all of the source loop's trips at its cost
            # per source iteration; the remainder loops and peeled copies unrolling leaves do the
            # few left over at about the same cost: they are not counted (see `_peeled`)
            # (of versions unrolled alike, the largest: the general case beside a fast path); a
            # version without the inner loops the source runs is the compiler's fast path for
            # their not running (`for (j2...) { s = 0; for (i = 0; i < n; i++) ...}` beside a
            # copy for n <= 0): the version holding them is the main loop
            trip = self._trip(source)
            main = max(members, key=lambda m: (self._inner_loops_run(fn, ties, m), ties[m].unroll,
                                               fn.loops[m].own_counts[INDEX["instructions"]]))
            for m in members:
                ties[m].trips = trip / ties[m].unroll if m == main else 0.0
        # a loop whose own code fixes its trips (`cfg.static_trips`) runs them where the source
        # walk does not know better: a loop it did not reach (code of another unit), one whose
        # trip count it did not take for a compile-time constant (a guess, a size it did not
        # resolve), each copy of a loop inlined at different calls (`rounds(x, 3); rounds(x, 7);`),
        # and a main loop whose trips over its unrolling stray from them by more than a remainder
        # (`FIXED_TRIPS_SLACK`: the unrolling misread). Within that, the walk's trips hold the
        # iterations the remainder loop does, which the main loop's own count leaves out.
        chains = self.chains(fn)
        inlined = {source for (source, _), members in groups.items()
                   if len({chains[c][1:] for m in members for c in fn.loops[m].latch_chains}) > 1}
        for i, tie in enumerate(ties):
            fixed = fn.loops[i].static_trips
            if fixed is None or tie.wrapper:
                continue
            if tie.source is None or tie.source in inlined or not self.profile.loops[tie.source].static_trip \
                    or (tie.trips > 0 and abs(tie.trips - fixed) > max(1.0, FIXED_TRIPS_SLACK * fixed)):
                tie.trips = fixed
        return ties

    def _one_line_nest_loop(self, fn: CompiledFunction, index: int, free: list[int]) -> int:
        """Of the source loops compiled loop `index` may be (innermost first), the innermost,
        unless it is a loop of a constant trip count that no reading of the compiled loop's
        register steps fits while an outer loop on the same line fits one: `for (a = 0; a < n;
        ++a) for (b = 0; b < 11; ++b) ...` on one line, the inner loop unrolled whole into the
        outer one (stepped 2 a trip and 2 x 11 elements: no trip of a loop of 11)."""
        first = free[0]
        if len(free) < 2 or not self.profile.loops[first].static_trip or self._fits(fn.loops[index], first):
            return first
        line = (self.profile.loops[first].path, self.profile.loops[first].first)
        same_line = [c for c in free[1:] if (self.profile.loops[c].path, self.profile.loops[c].first) == line]
        return next((c for c in same_line if self._fits(fn.loops[index], c)), first)

    def _fits(self, loop: Loop, source: int) -> bool:
        """Whether a 32-bit register step of the compiled loop is a step of source loop `source`
        (its counter's, one, or an index's) times a number of iterations a trip could do (for a
        constant trip count, a divisor of it)."""
        lp = self.profile.loops[source]
        trip = self._trip(source) if lp.static_trip else 0.0
        steps = {abs(lp.step) if lp.step else 1.0, 1.0, *lp.index_steps}
        return any(a % s == 0 and 1 <= a / s <= MAX_UNROLL and _divides(a / s, trip)
                   for a in (st.amount for st in loop.steps if not st.wide) for s in steps if s > 0)

    @staticmethod
    def _one_iteration_copy(fn: CompiledFunction, ties: list[_LoopTie], outer: int, inner: list[int]) -> None:
        """Of the copies clang makes of an OpenMP parallel-for loop inside its distribute loop (a
        vectorized or unrolled main loop, the remainder loop), only the one doing an iteration a
        trip runs: with clang's GPU defaults (the directive names no `schedule`), the distribute
        loop hands a team chunks of as many iterations as it has threads and the parallel-for
        loop each thread one iteration of a chunk, so the trip-count tests leading into the other
        copies fail. The copies are the inner loops that access global memory; the one that runs
        accesses the fewest bytes a trip. The other copies, and the blocks of the distribute loop
        a trip passes only on the way into them, do not run."""
        memory = (INDEX["load_bytes"], INDEX["store_bytes"])
        copies = [j for j in inner if fn.loops[j].parent == outer and any(fn.loops[j].own_counts[k] > 0 for k in memory)]
        if len(copies) < 2:
            return
        runs = min(copies, key=lambda j: (sum(fn.loops[j].own_counts[k] for k in memory),
                                          fn.loops[j].own_counts[INDEX["instructions"]]))
        for j in copies:
            if j != runs:
                ties[j].trips = 0.0
        loop = fn.loops[outer]
        dom = dominators(fn.blocks)
        kept = dom[fn.loops[runs].header]
        latches = [b for b in loop.blocks if loop.header in fn.blocks[b].successors]
        # the way into the copies that do not run: the blocks dominated by a block that
        # dominates such a copy but neither the copy that runs nor the way back to the header
        # (blocks before the loop dominate all of them)
        doors = {d for j in copies if j != runs for d in dom[fn.loops[j].header]
                 if d not in kept and not any(d in dom[b] for b in latches)}
        ties[outer].unreached = frozenset(b for b in loop.blocks if doors & dom[b])

    def _inner_loops_run(self, fn: CompiledFunction, ties: list[_LoopTie], index: int) -> int:
        """How many of the compiled loops inside loop `index` are source loops that run."""
        sources = [ties[j].source for j in self._descendants(fn, index)]
        return sum(1 for source in sources if source is not None and self._trip(source) > 0)

    @staticmethod
    def _descendants(fn: CompiledFunction, index: int) -> list[int]:
        found = []
        for j, loop in enumerate(fn.loops):
            parent = loop.parent
            while parent is not None and parent != index:
                parent = fn.loops[parent].parent
            if parent == index:
                found.append(j)
        return found

    def _trip(self, source: int) -> float:
        loop = self.profile.loops[source]
        if loop.parallel:
            return self.parallel_trips if self.parallel_trips is not None else 1.0
        return max(0.0, loop.collapsed_trip if loop.collapsed_trip is not None else loop.trip)

    def _candidates(self, fn: CompiledFunction, index: int) -> list[int]:
        """Source loops a compiled loop may be, innermost first: those whose header its closing
        branches (or its counter steps) sit on, else those around most of its own code."""
        loop = fn.loops[index]
        # the branches that close it say which loop it is; failing those, its counters' steps
        shifted = self.chains(fn)
        for chains in ([shifted[c] for c in loop.latch_chains], [shifted[s.chain] for s in loop.steps]):
            found: list[int] = []
            for chain in (known for written in chains for known in self._inline_chains(fn, written)):
                for depth, location in enumerate(chain):
                    at = self.table.loops_at(location)
                    if at:
                        exact = [i for i in at if _same_chain(self.profile.loops[i].callsites, chain[depth + 1:])]
                        for i in exact or at:
                            if i not in found:
                                found.append(i)
                        break
            if found:
                return sorted(found, key=lambda i: self.profile.loops[i].depth, reverse=True)
        # the code of the loop's own blocks: the outermost source loop around at least half of it
        votes: dict[int, float] = {}
        total = 0.0
        for b in loop.blocks:
            block = fn.blocks[b]
            if block.loop != index:
                continue
            for lc in block.lines:
                chain = shifted[lc.chain]
                size = lc.counts[INDEX["instructions"]]
                total += size
                for i in self._loops_around(fn, chain):
                    votes[i] = votes.get(i, 0.0) + size
        # innermost first, as above: the compiler's loops nest as the source's do, so the
        # innermost source loop not already taken by a loop nested in this one is this one
        held = [i for i, v in votes.items() if total and v >= total / 2]
        return sorted(held, key=lambda i: self.profile.loops[i].depth, reverse=True)

    def _inline_chains(self, fn: CompiledFunction, chain: tuple[Location, ...]) -> list[tuple[Location, ...]]:
        """`chain`, and where clang compiled the kernel `fn` (its line info names no call a line
        was inlined through) and the walk inlined statements of the line, the chain of each such
        copy: a device function's loop step or code then finds the loops around its call. (nvcc
        names the calls: its single locations are code of the function itself; a function not
        inlined is counted at its calls' weight, so its own loops keep its own.)"""
        if len(chain) != 1 or not fn.is_entry or "clang" not in self.unit.compiler:
            return [chain]
        return [chain, *((chain[0], *s.callsites) for s in self.table.statements_at(chain[0]) if s.callsites)]

    def _loops_around(self, fn: CompiledFunction, chain: tuple[Location, ...]) -> set[int]:
        """The source loops around the line of code at `chain`; where clang's line info names no
        call the line was inlined through, around each call the walk inlined it through too (a
        device function's code runs inside its caller's loops), each the loop walked at that
        chain of calls where the profile tells them apart."""
        chains = self._inline_chains(fn, chain)
        if len(chains) == 1:
            return set(self.table.loops_around(chain[0])) if chain else set()
        found: set[int] = set()
        for known in chains:
            for depth, location in enumerate(known):
                around = self.table.loops_around(location)
                exact = [i for i in around if _same_chain(self.profile.loops[i].callsites, known[depth + 1:])]
                found.update(exact or around)
        return found

    def _unroll(self, fn: CompiledFunction, index: int, source: int, remainder: bool,
                tied_sources: Collection[int] = ()) -> float:
        """How many source iterations one trip of the compiled loop does: the smallest constant
        its counters step by (on the source loop's header, else where the loop closes) over the
        source step; without a 32-bit counter, how many iterations' loads a trip does.
        `remainder`: another compiled loop does the same source loop (unrolling's leftover);
        `tied_sources`: the source loops a compiled loop of the function does."""
        lp = self.profile.loops[source]
        if lp.parallel or lp.step is None or lp.step == 0:
            return 1.0
        loop = fn.loops[index]
        chains = self.chains(fn)
        steps = [s for s in loop.steps if any(
            self.table.loops_at(loc) and source in self.table.loops_at(loc) for loc in chains[s.chain][:1])]
        if not steps:
            # no counter on the header: the one stepped where the loop closes (clang puts a
            # rotated loop's counter and closing branch on the line before the loop)
            latches = {chains[c][0] for c in loop.latch_chains if chains[c]}
            steps = [s for s in loop.steps if chains[s.chain] and chains[s.chain][0] in latches]
        if not steps:
            # nor there: the counter a statement of the body steps (`j++;` at the end of a
            # `while (j < n)` loop), on a line of the loop no loop nested in it holds
            steps = [s for s in loop.steps if chains[s.chain] and self._own_line(source, chains[s.chain][0])]
        step = abs(lp.step)
        # a 32-bit register stepped by a multiple of the source step, by no more than any
        # unrolling would: the counter (larger steps are addresses: `a[i].field`)
        counters = [s.amount for s in steps
                    if not s.wide and not s.address and step >= 1 and s.amount <= MAX_UNROLL * step
                    and s.amount % step == 0]
        # the loads say how many iterations a trip does, in an innermost loop (around a nested
        # loop the compiler unrolled completely, a trip also does the nested loop's loads)
        innermost = not any(other.depth > lp.depth and any(
            same_file(path, lp.path) and lp.first <= line <= lp.last for path, line in ((other.path, other.first), *other.callsites))
            for other in self.profile.loops)
        # only where a 64-bit offset or pointer stands for the counter (clang's loops): its step
        # is no iteration count, the loads say how many a trip does
        pointer_counted = any(s.wide for s in steps)
        # nor where the source steps by a register (a grid- or block-stride loop: nvcc unrolls
        # it with the stride's multiples in registers, no constant counter step)
        # (beside the remainder loop unrolling leaves: a loop kept whole has none)
        register_strided = step >= 32 and not counters and remainder
        compiled_bytes = loop.own_counts[INDEX["load_bytes"]]
        by_loads = self._unroll_by_loads(compiled_bytes, lp.load_bytes) \
            if innermost and (pointer_counted or register_strided) else None
        # the source's steps, and the compiler's own trip counter (a canonical induction variable
        # stepped by one: `for (j = 0; j < n; j += 2)` counted as 16 and 32 a trip of 16)
        source_steps = (step, *(abs(s) for s in lp.induction_steps if s), 1.0)
        # a 32-bit register stepped by a multiple of an index's step (`acof[k + 6 * q]`, stepped 6
        # a trip of one iteration, 24 a trip of 4) where a counter's reading would not fit the
        # trip count the compiler knows (6 iterations a trip of a loop of 8)
        trip = self._trip(source) if lp.static_trip else 0.0
        indexed = _index_unroll([s.amount for s in steps if not s.wide and not s.address], lp.index_steps, trip)
        if counters:
            counted = _consistent_unroll(counters, source_steps)
            if indexed is not None and not _divides(counted, trip):
                return indexed
            # the counter may be the compiler's trip counter, stepped by one an iteration, or the
            # source's, stepped by its step (`j += 2` with a register stepped 16: 8 or 16 a trip):
            # an index register stepped that many iterations' elements says which
            confirmed = _indexed_reading(counters, source_steps, [s.amount for s in loop.steps if not s.wide],
                                         lp.index_steps)
            return confirmed if confirmed is not None else counted
        # around nested loops the compiler unrolled completely (none of them a compiled loop):
        # a trip does their loads too (`for (a...) for (b = 0; b < 5; b++) t += x[a * 7 + b]`,
        # its counter stepped by 7 times the unrolling)
        # (where a register steps by that many iterations times the source's step: the loads
        # alone are no evidence where the source misreads a load's width; before an address's
        # step, which may count the nest's elements, not bytes: `a * 7` stepped 140 a trip of 20)
        if not innermost:
            whole = self._unrolled_nest_load_bytes(source, tied_sources)
            nested = self._unroll_by_loads(compiled_bytes, whole) if whole else None
            if nested is not None and any(s.amount % (nested * step) == 0 for s in loop.steps):
                return nested
        # no counter, nor global loads to count iterations by: clang's loop stepping an address
        # (a 32-bit shared or local one, `s[i]` of floats by 32 a trip: 8 iterations) against
        # the bytes between its elements (a struct member's stride the source may misread: not
        # where global loads say it)
        addressed = _unroll_by_addresses([s.amount for s in steps if s.address and not s.wide], lp.access_strides,
                                         source_steps) if lp.load_bytes <= 0 else None
        if addressed is not None:
            return addressed
        # no such counter (clang counts by a 64-bit byte offset or pointer, whose step is the
        # unrolling times an element's size): the loads
        if by_loads is not None:
            return by_loads
        # no counter at all: an index register stepped by the unrolling times a stride (a `short`
        # counter's loop stepping `j * 16384` by 8 of them): the loads, where a register steps by
        # a multiple of as many iterations
        if innermost:
            loaded = self._unroll_by_loads(compiled_bytes, lp.load_bytes)
            if loaded is not None and loaded > 1 and _steps_strides(loop.steps, loaded, lp.access_strides):
                return loaded
        # nothing else: the index register (`acof[k + 48 * m]` stepped 192 a trip of 4)
        if indexed is not None:
            return indexed
        # nor loads: a 64-bit counter that addresses nothing (`unsigned long long j`, `size_t`)
        # steps by the iterations a trip does
        wide_counters = [s.amount for s in steps if s.wide and not s.address and step >= 1
                         and s.amount <= MAX_UNROLL * step and s.amount % step == 0]
        return _consistent_unroll(wide_counters, source_steps) if wide_counters else 1.0

    def _own_line(self, source: int, location: Location) -> bool:
        """Whether `location` is a line of source loop `source` outside the loops nested in it."""
        path, line = location
        lp = self.profile.loops[source]
        if not same_file(path, lp.path) or not lp.first < line <= lp.last:
            return False
        return not any(other.depth > lp.depth and same_file(other.path, lp.path) and other.first <= line <= other.last
                       and lp.first <= other.first <= lp.last for other in self.profile.loops)

    def _unrolled_nest_load_bytes(self, source: int, tied_sources: Collection[int]) -> float | None:
        """The global load bytes of one iteration of source loop `source` with the loops nested
        in it, each run its trips; None where one of those is a compiled loop of its own (or
        its trips are not known)."""
        loops = self.profile.loops
        lp = loops[source]
        inside = [i for i, other in enumerate(loops) if other.depth > lp.depth and same_file(other.path, lp.path)
                  and lp.first <= other.first <= lp.last]
        if any(i in tied_sources or loops[i].parallel or loops[i].trip <= 0 for i in inside):
            return None

        def bytes_of(index: int) -> float:
            loop = loops[index]
            children = [i for i in inside if loops[i].depth == loop.depth + 1
                        and loop.first <= loops[i].first <= loop.last]
            return loop.load_bytes + sum(loops[c].trip * bytes_of(c) for c in children)

        return bytes_of(source)

    @staticmethod
    def _unroll_by_loads(compiled_bytes: float, source_bytes: float) -> float | None:
        """Iterations per trip of a loop whose trip loads `compiled_bytes` from global memory
        where one source iteration loads `source_bytes` (a power of two; 1 when the compiler
        kept loads out of the loop); None when either loads nothing."""
        if compiled_bytes <= 0 or source_bytes <= 0:
            return None
        ratio = compiled_bytes / source_bytes
        if ratio < 1.5:
            return 1.0
        # a whole number of iterations' loads (6 a trip of a loop of 300: unrolled by a divisor
        # of its known trip count), else the power of two nearest (some loads hoisted or shared)
        if abs(ratio - round(ratio)) < 1e-6:
            return float(min(MAX_UNROLL, round(ratio)))
        return float(min(MAX_UNROLL, 2 ** round(math.log2(ratio))))


def _divides(unroll: float, trip: float) -> bool:
    """Whether `unroll` iterations a trip fit a loop of `trip` iterations, a compile-time
    constant (a whole number of trips); any unrolling fits a trip count the compiler does not
    know (0: a remainder loop does what is left)."""
    if trip < 1 or trip != int(trip):
        return True
    return unroll <= trip and trip % unroll == 0


def _index_unroll(amounts: Sequence[float], index_steps: Collection[float], trip: float) -> float | None:
    """The fewest iterations a trip that make every one of `amounts` an index step times it and
    fit the loop's trip count, a whole number known; None where none does."""
    if not amounts or not index_steps or trip < 1 or trip != int(trip):
        return None
    found = _explaining_unroll(amounts, tuple(index_steps), min(MAX_UNROLL, trip))
    return found if found is not None and _divides(found, trip) else None


def _indexed_reading(counters: Sequence[float], source_steps: tuple[float, ...], amounts: Sequence[float],
                     index_steps: Collection[float]) -> float | None:
    """Of the readings of `counters` (each some source step times the iterations a trip
    does), the fewest iterations a trip whose index steps times it are among the 32-bit
    registers' step `amounts`; None where no reading is borne out so (or no index is stepped)."""
    readings = sorted({a / s for a in counters for s in source_steps if s > 0 and a % s == 0 and 1 <= a / s <= MAX_UNROLL})
    for u in readings:
        if all(any(abs(a - s * u) < 1e-9 for s in source_steps) for a in counters) \
                and any(abs(a - step * u) < 1e-9 for a in amounts for step in index_steps):
            return u
    return None


def _steps_strides(steps: Sequence[Step], iterations: float, strides: Collection[float]) -> bool:
    """Whether a register steps by `iterations` times the distance between the elements one
    iteration and the next access (`strides`, in bytes), counted in elements of 1 to 16 bytes:
    the index of such an access, stepped a trip's iterations."""
    return any(abs(step.amount * size - iterations * stride) < 1e-6
               for step in steps for stride in strides for size in (1, 2, 4, 8, 16))


def _consistent_unroll(amounts: Sequence[float], source_steps: tuple[float, ...]) -> float:
    """The fewest source iterations per compiled trip that make each register step `amounts`
    some variable's source step times it (`z += 7` each iteration, kept whole: 7 is `z`'s step,
    not seven iterations of the counter); without one, the smallest amount over the counter's
    step (`source_steps[0]`)."""
    found = _explaining_unroll(amounts, source_steps)
    return found if found is not None else max(1.0, min(amounts) / source_steps[0])


def _unroll_by_addresses(amounts: Sequence[float], strides: Collection[float],
                         source_steps: tuple[float, ...] = ()) -> float | None:
    """The fewest iterations a trip (at most `MAX_UNROLL`) that make each address step some
    access's stride times it, or a source step times it (the counter itself, where it also
    indexes: `iv[16 * tid + j]` with `j -= 2` and the address `-= 8` a trip of 2); None without
    address steps or strides, or where none does."""
    if not amounts or not strides:
        return None
    return _explaining_unroll(amounts, (*strides, *source_steps), MAX_UNROLL, tuple(strides))


def _explaining_unroll(amounts: Sequence[float], steps: tuple[float, ...], most: float = math.inf,
                       evidence: tuple[float, ...] | None = None) -> float | None:
    """The fewest iterations a compiled trip (at most `most`) that make every one of `amounts`
    one of `steps` times it, one of `evidence` (default: `steps`) giving it; None where none does."""
    candidates = sorted({a / s for a in amounts for s in (steps if evidence is None else evidence)
                         if s > 0 and a % s == 0 and 1 <= a / s <= most})
    return next((u for u in candidates if all(any(abs(a - s * u) < 1e-9 for s in steps) for a in amounts)), None)


# what a copy of a loop's body peeled off its loop does and code hoisted out of it does not
_MEMORY = tuple(INDEX[name] for name in ("loads", "stores", "atomics", "shared", "local"))


def _copy_weights(blocks: Sequence[Block], resolved: Sequence[tuple[list[float | None], ...]]) -> dict[int, float]:
    """The mean weight each source position took, where no statement holds it, from the known
    code beside it: code with no known statement in its own block takes what its other copies
    in the function took (the last copy of an unrolled loop's operator body, alone in its block)."""
    found: dict[int, list[float]] = {}
    for block, (known, beside, beside_predicated) in zip(blocks, resolved):
        for k, lc in enumerate(block.lines):
            weight = beside_predicated[k] if lc.predicated == lc.counts and beside_predicated[k] is not None else beside[k]
            if known[k] is None and weight is not None:
                found.setdefault(lc.chain, []).append(weight)
    return {chain: sum(weights) / len(weights) for chain, weights in found.items()}


def _nearest_known(weights: Sequence[float | None]) -> list[float | None]:
    """For each source position of a block (in the order its code appears), the weight of the
    nearest position after it whose weight the source gives, else the nearest before it.

    Code the source walk recorded no statement for (an overloaded operator's body, `a += b` on a
    struct; a function reached by a call the walk does not follow), compiled without inline call
    sites (LLVM 19 and older print only the innermost position), runs where it was inlined: in
    the same basic block as the statement that called it, under the same guards. Read as
    running on every pass instead, the work of a tree reduction's `if (tid < s) v[tid] +=
    v[tid + s];` counts for every thread of every halving step."""
    found: list[float | None] = [None] * len(weights)
    following: float | None = None
    for i in range(len(weights) - 1, -1, -1):
        found[i] = following
        if weights[i] is not None:
            following = weights[i]
    preceding: float | None = None
    for i, weight in enumerate(weights):
        if found[i] is None:
            found[i] = preceding
        if weight is not None:
            preceding = weight
    return found


def _holds_body_code(fn: CompiledFunction, index: int) -> bool:
    """Whether compiled loop `index` of OpenMP entry `fn` runs code of a line other than the
    directive's: the device runtime's own loops (a thread-state lock's spin, its list walks) sit on
    the directive's line and are no copy of the loop it outlines."""
    line = directive_line(fn.name)
    return line is None or any(
        chain and chain[0][1] != line for b in fn.loops[index].blocks
        for chain in (fn.chains[lc.chain] for lc in fn.blocks[b].lines))


def _same_chain(a: tuple[Location, ...], b: tuple[Location, ...]) -> bool:
    return len(a) == len(b) and all(x[1] == y[1] and same_file(x[0], y[0]) for x, y in zip(a, b))


def _guarded_arms(fn: CompiledFunction, chains: list[tuple[Location, ...]]) -> dict[int, Location]:
    """The blocks that are the body of a guard written on one line and compiled as a branch
    around them (not if-converted): each holds code of one line only, its one predecessor
    branches either to it or past it to where it goes on, and holds code of that line too (the
    test). Block -> that line's location."""
    predecessors: dict[int, list[int]] = {}
    for b, block in enumerate(fn.blocks):
        for succ in block.successors:
            predecessors.setdefault(succ, []).append(b)
    found: dict[int, Location] = {}
    for b, block in enumerate(fn.blocks):
        preds = predecessors.get(b, [])
        if len(preds) != 1 or len(block.successors) != 1:
            continue
        head = fn.blocks[preds[0]]
        if len(head.successors) != 2 or block.successors[0] not in head.successors or head.loop != block.loop:
            continue
        lines = {chains[lc.chain][0] for lc in block.lines if chains[lc.chain]}
        if len(lines) != 1:
            continue
        (line,) = lines
        if any(chains[lc.chain] and chains[lc.chain][0] == line for lc in head.lines):
            found[b] = line
    return found
