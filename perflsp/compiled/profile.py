"""How often each source statement and loop runs per thread, as the source engine reads it:
the bridge from compiled code (instructions by source line) to dynamic counts.

The source engine records, while it walks a kernel, every statement with its *guard weight*
(the share of executions its branches let through, loops aside) and every loop with its trip
count. `perflsp.compiled.counts` ties the compiled code's blocks and loops to these by line.
Locations are (path, 1-based line); `callsites` are the positions of the calls a statement was
inlined through, innermost first, as in the compiler's line table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

from perflsp.compiled.sass import Location


@dataclass(slots=True)
class SourceLoop:
    path: str
    first: int  # the loop statement's first line
    body: int  # the line its body starts on (the header is first..body)
    last: int  # its last line
    trip: float  # iterations per entry (the mean, when entries differ)
    entries: float  # how often it is entered per work item (its statement's weight × enclosing trips)
    step: float | None  # the constant its counter advances by per iteration, if known
    depth: int
    callsites: tuple[Location, ...] = ()
    parallel: bool = False  # an OpenMP worksharing loop: its trips are the work items of a thread
    # bytes of the global loads one iteration's own body reads (nested loops' not included),
    # each written access once: what one trip of the loop would load if the compiler kept it whole
    load_bytes: float = 0.0
    # the iterations of the nest an OpenMP `collapse(n)` makes one loop of, when this loop is in
    # one (the compiler emits a single loop for it, tied to any of the nest's source loops)
    collapsed_trip: float | None = None
    # the constants the loop's other induction variables step by per iteration (`z += 7`)
    induction_steps: tuple[float, ...] = ()
    # bytes between the elements one iteration and the next access, of the arrays its body
    # indexes by its counter (`s[i]` of floats: 4): an address register stepped by a multiple
    # of one says how many iterations a compiled trip does
    access_strides: set[float] = field(default_factory=set)
    # the elements between them, in each such access's index (`acof[k + 6 * q + 48 * m]`: 6 for
    # `q`): a 32-bit index register stepped by a multiple of one, rather than a counter
    index_steps: set[float] = field(default_factory=set)
    # its trip count is a compile-time constant (`q <= 8`): the compiler unrolls it by a divisor
    static_trip: bool = False
    # an OpenMP worksharing loop without `schedule` or `dist_schedule`: clang's GPU defaults hand
    # each thread one iteration of each chunk of a team's threads
    default_schedule: bool = True


@dataclass(slots=True)
class SourceStatement:
    path: str
    first: int
    last: int
    weight: float  # guard weight: executions per entry of its innermost loop iteration (1: always)
    loop: int | None  # index of the innermost enclosing SourceLoop
    callsites: tuple[Location, ...] = ()
    # its own code is a test (`if`, `switch`) or a jump (`return`, `break`): on a line it shares
    # with other statements (`if (i < n) y[i] = x[i];`), the work there is theirs
    test_or_jump: bool = False


@dataclass(slots=True)
class SourceProfile:
    statements: list[SourceStatement] = field(default_factory=list)
    loops: list[SourceLoop] = field(default_factory=list)

    def lines(self) -> LineTable:
        return LineTable(self)


def same_file(a: str, b: str) -> bool:
    return a == b or _real(a) == _real(b)


@lru_cache(maxsize=4096)
def _real(path: str) -> str:
    """A path as the file system resolves it (asked for every line of every compiled block)."""
    return os.path.normcase(os.path.realpath(path))


class LineTable:
    """Statements and loops by (file, line): the innermost statement spanning a line."""

    def __init__(self, profile: SourceProfile):
        self.profile = profile
        self._by_file: dict[str, dict[int, list[SourceStatement]]] = {}
        # innermost first: a line belongs to the smallest statement that spans it
        for statement in sorted(profile.statements, key=lambda s: s.last - s.first, reverse=True):
            lines = self._by_file.setdefault(_key(statement.path), {})
            for line in range(statement.first, statement.last + 1):
                lines.setdefault(line, []).insert(0, statement)
        self._files = {_key(s.path) for s in profile.statements} | {_key(lp.path) for lp in profile.loops}
        # each statement's inline call sites, keyed once (weights are asked per instruction line)
        self._sites = {id(s): _sites(s) for s in profile.statements}
        self._loops_by_file: dict[str, list[int]] = {}
        for i, lp in enumerate(profile.loops):
            self._loops_by_file.setdefault(_key(lp.path), []).append(i)

    def statements_at(self, location: Location) -> list[SourceStatement]:
        """The statements recorded at `location`, innermost first (every inline copy)."""
        return self._by_file.get(_key(location[0]), {}).get(location[1], [])

    def weight_at(self, location: Location, callsites: tuple[Location, ...]) -> float | None:
        """The guard weight of the code at `location` inlined through `callsites` (innermost
        first), from the statements recorded there through those calls (else through any): the
        largest weight of those that begin on the line (`if (c) x = 1;` runs its test more often
        than its body), else, on a line that continues a statement, the innermost's. A statement
        that only spans the line (the `if` around a body line, the `switch` around a `case`) does
        not lend it its weight. None when nothing was recorded there."""
        statements = self.statements_at(location)
        if not statements:
            return None
        wanted = tuple((_key(p), n) for p, n in callsites)
        chosen = [s for s in statements if self._sites[id(s)] == wanted] or statements
        starting = [s.weight for s in chosen if s.first == location[1]]
        if starting:
            return max(starting)
        innermost: dict[tuple[tuple[str, int], ...], float] = {}
        for statement in chosen:  # innermost first: the first of each inline copy
            innermost.setdefault(self._sites[id(statement)], statement.weight)
        return max(innermost.values())

    def work_weight_at(self, location: Location, callsites: tuple[Location, ...]) -> float | None:
        """The largest guard weight of the statements that begin on the line of `location` and do
        work there (not a test or a jump): past a guard's exit on that line (`if (i < n) y[i] =
        x[i];`), only its body runs. None when no such statement begins there."""
        wanted = tuple((_key(p), n) for p, n in callsites)
        statements = self.statements_at(location)
        chosen = [s for s in statements if self._sites[id(s)] == wanted] or statements
        working = [s.weight for s in chosen if s.first == location[1] and not s.test_or_jump]
        return max(working) if working else None

    def knows_file(self, path: str) -> bool:
        return _key(path) in self._files

    def loops_at(self, location: Location) -> list[int]:
        """Loops whose header spans `location` (or whose last line it is: `} while (...)`), innermost first."""
        path, line = location
        loops = self.profile.loops
        found = [i for i in self._loops_by_file.get(_key(path), ())
                 if loops[i].first <= line <= loops[i].body or line == loops[i].last]
        return sorted(found, key=lambda i: loops[i].depth, reverse=True)

    def loops_around(self, location: Location) -> list[int]:
        """Loops whose whole statement spans `location`, innermost first."""
        path, line = location
        loops = self.profile.loops
        found = [i for i in self._loops_by_file.get(_key(path), ()) if loops[i].first <= line <= loops[i].last]
        return sorted(found, key=lambda i: loops[i].depth, reverse=True)


def _sites(statement: SourceStatement) -> tuple[tuple[str, int], ...]:
    return tuple((_key(p), n) for p, n in statement.callsites)


_KEYS: dict[str, str] = {}


def _key(path: str) -> str:
    """A file's identity for matching the compiler's paths with the engine's."""
    found = _KEYS.get(path)
    if found is None:
        found = os.path.normcase(os.path.realpath(path))
        if len(_KEYS) < 4096:
            _KEYS[path] = found
    return found
