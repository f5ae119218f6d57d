"""The compiled facts of a translation unit: per function, basic blocks with what their
instructions count for (per source position), the loops of the control-flow graph, and calls.

Counts are kept per block and per source position (an instruction's inline chain), so that
the analysis can weight each by how often that code runs (`perflsp.compiled.counts`). The model
is plain data: it is cached as JSON and built without any source knowledge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perflsp.compiled.sass import Location

# the classes a block's counts carry, in this order (see perflsp.compiled.isa.Cost)
CLASSES = ("fp32", "fp64", "fp16", "tensor_fp16", "tensor_tf32", "tensor_bf16", "tensor_fp64", "tensor_int8",
           "integer", "special", "conversion", "load_bytes", "store_bytes", "loads", "stores", "atomics",
           "shared", "local", "local_bytes", "uniform", "instructions")
INDEX = {name: i for i, name in enumerate(CLASSES)}
Vector = tuple[float, ...]
ZERO: Vector = (0.0,) * len(CLASSES)


def add(a: Vector, b: Vector, scale: float = 1.0) -> Vector:
    return tuple(x + y * scale for x, y in zip(a, b))


@dataclass(slots=True)
class LineCounts:
    """The instructions of one block that come from one source position."""

    chain: int  # index into CompiledFunction.chains
    counts: Vector  # every instruction, as if its predicate were on
    predicated: Vector  # the part of `counts` from predicated instructions (`@P0 ...`)


@dataclass(slots=True)
class Block:
    start: int  # offset of the first instruction
    lines: list[LineCounts]
    successors: list[int]  # block indices
    loop: int | None = None  # innermost loop holding the block
    calls: list[str] = field(default_factory=list)  # functions called (direct calls), in order
    indirect_calls: int = 0
    # the source position of the predicated `EXIT` that ends the block (`@P0 EXIT`: the threads
    # a guard sends home), where the block is outside every loop; None otherwise
    exit_chain: int | None = None
    # the blocks ending in such an exit that every path to this one passes: only the threads
    # that did not leave there run it, whatever source line its code comes from
    after_exits: list[int] = field(default_factory=list)
    call_chains: list[int] = field(default_factory=list)  # the source position of each of `calls`


@dataclass(slots=True)
class Step:
    """A register the loop adds a constant to each trip (`IADD3 R7, R7, 0x10, RZ`)."""

    amount: int
    chain: int
    # the low half of a 64-bit add (`IADD3 R4, P0, R4, 0x4, RZ`, its carry into an `IADD3.X`):
    # an address, or a byte offset clang made of an index, more often than a counter
    wide: bool = False
    # the register addresses memory itself (`LDL R4, [R8]`, `c[0x3][R8]`): a byte offset clang
    # made of an index (`data[j]` of 16-byte elements steps 16), not a count of iterations
    address: bool = False


@dataclass(slots=True)
class Loop:
    header: int  # block index
    blocks: list[int]  # every block of the loop, nested loops' included
    parent: int | None
    latch_chains: list[int]  # source positions of the branches that close the loop
    steps: list[Step]
    own_counts: Vector = ZERO  # what one trip executes outside nested loops (all positions)
    # the trips per entry the code itself fixes (a counter set to a constant before the loop,
    # stepped by a constant and tested against one: `UMOV UR8, 0x3` ... `UIADD3 UR8, UP0, UR8,
    # -0x1, URZ` ... `ISETP.NE.U32.AND P0, PT, RZ, UR8, PT`); None where it does not
    static_trips: float | None = None


@dataclass(slots=True)
class CompiledFunction:
    name: str  # mangled symbol
    is_entry: bool
    registers: int | None
    chains: list[tuple[Location, ...]]
    blocks: list[Block]
    loops: list[Loop]
    slow_paths: int = 0  # library math slow paths (huge trigonometric arguments) cut off, not counted
    frame_bytes: int = 0  # the function's own stack frame per thread (local arrays, spills), from its prologue

    def global_accesses(self) -> dict[tuple[Location, bool], tuple[float, float]]:
        """(source position, is a store) -> (instructions, bytes) of the global loads or stores the
        function's own code issues there, each counted once (not weighted by how often it runs);
        positions that also hold atomics are left out (an atomic's bytes are not an element's)."""
        found: dict[tuple[Location, bool], tuple[float, float]] = {}
        atomic: set[Location] = set()
        loads, load_bytes = INDEX["loads"], INDEX["load_bytes"]
        stores, store_bytes = INDEX["stores"], INDEX["store_bytes"]
        for block in self.blocks:
            for lc in block.lines:
                if not self.chains[lc.chain]:
                    continue
                where = self.chains[lc.chain][0]
                if lc.counts[INDEX["atomics"]]:
                    atomic.add(where)
                for is_store, n, nbytes in ((False, loads, load_bytes), (True, stores, store_bytes)):
                    if lc.counts[n]:
                        count, total = found.get((where, is_store), (0.0, 0.0))
                        found[(where, is_store)] = (count + lc.counts[n], total + lc.counts[nbytes])
        return {key: value for key, value in found.items() if key[0] not in atomic}

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "entry": self.is_entry, "registers": self.registers,
            "chains": [[list(loc) for loc in chain] for chain in self.chains],
            "blocks": [[b.start, [[lc.chain, list(lc.counts), list(lc.predicated)] for lc in b.lines], b.successors,
                        b.loop, b.calls, b.indirect_calls, b.exit_chain, b.after_exits, b.call_chains] for b in self.blocks],
            "loops": [[lp.header, lp.blocks, lp.parent, lp.latch_chains, [[s.amount, s.chain, s.wide, s.address] for s in lp.steps],
                       list(lp.own_counts), lp.static_trips] for lp in self.loops],
            "slow_paths": self.slow_paths, "frame_bytes": self.frame_bytes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompiledFunction:
        chains = [tuple((str(p), int(n)) for p, n in chain) for chain in data["chains"]]
        blocks = [Block(start, [LineCounts(c, tuple(v), tuple(pv)) for c, v, pv in lines], succ, loop, calls, ind,
                        rest[0] if rest else None, list(rest[1]) if len(rest) > 1 else [],
                        list(rest[2]) if len(rest) > 2 else [])
                  for start, lines, succ, loop, calls, ind, *rest in data["blocks"]]
        loops = [Loop(h, bl, parent, latches, [Step(*step) for step in steps], tuple(own), rest[0] if rest else None)
                 for h, bl, parent, latches, steps, own, *rest in data["loops"]]
        return cls(data["name"], bool(data["entry"]), data["registers"], chains, blocks, loops,
                   int(data.get("slow_paths", 0)), int(data.get("frame_bytes", 0)))


_CALL_DEPTH = 8  # levels of calls followed for a stack's depth


@dataclass(slots=True)
class CompiledUnit:
    """One translation unit compiled for one architecture."""

    source: str  # the file compiled (absolute)
    arch: str  # "sm_86"
    compiler: str  # "nvcc 13.0.88", "clang 16.0.6"
    functions: dict[str, CompiledFunction]
    dependencies: list[str] = field(default_factory=list)  # files the unit read (for cache checks)
    seconds: float = 0.0
    # functions of other units of the build this unit's code calls (separate compilation), by
    # symbol -> the source of the unit compiled for them (`linking.py`); not cached with the unit
    linked: dict[str, str] = field(default_factory=dict, compare=False)
    # names.py's index of the entry functions by simple name (built on the first lookup)
    entries: dict[str, list[Any]] | None = field(default=None, repr=False, compare=False)

    def stack_bytes(self, fn: CompiledFunction) -> int:
        """A thread's stack at its deepest while `fn` runs: its own frame and the largest of its
        callees' (functions of other units included where `linked` brought them); a recursive
        call adds nothing more (its depth is the data's)."""
        known: dict[str, int] = {}

        def deepest(f: CompiledFunction, depth: int) -> int:
            if f.name in known:
                return known[f.name]
            known[f.name] = 0  # while its callees are read: a call back into it adds nothing
            below = 0
            if depth < _CALL_DEPTH:
                for callee in {name for block in f.blocks for name in block.calls}:
                    found = self.functions.get(callee)
                    if found is not None:
                        below = max(below, deepest(found, depth + 1))
            known[f.name] = f.frame_bytes + below
            return known[f.name]

        return deepest(fn, 0)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "arch": self.arch, "compiler": self.compiler, "seconds": self.seconds,
                "dependencies": self.dependencies,
                "functions": [fn.to_json() for fn in self.functions.values()]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompiledUnit:
        functions = [CompiledFunction.from_json(f) for f in data["functions"]]
        return cls(data["source"], data["arch"], data["compiler"], {f.name: f for f in functions},
                   list(data.get("dependencies", [])), float(data.get("seconds", 0.0)))


@dataclass(frozen=True, eq=False)
class CompiledSource:
    """What compiling a file gave, per architecture: its unit, or why there is none (said once
    per file). Held by the analysis options of that file."""

    units: dict[str, CompiledUnit] = field(default_factory=dict)  # "sm_86" -> unit
    failures: dict[str, str] = field(default_factory=dict)  # "sm_86" -> why nothing was compiled
    # the text compiled, when it may have changed since (an editor's buffer): each kernel's
    # normalised-text hash -> its first line (0-based) then; None: the analysed text is the one compiled
    kernels: dict[str, int] | None = None

    def unit(self, arch: str | None) -> CompiledUnit | None:
        return self.units.get(arch) if arch else None

    def line_shift(self, body_hash: str, first_line: int) -> int | None:
        """How far a kernel moved since the compile (lines), or None when its text changed (its
        compiled code is not what the source now says)."""
        if self.kernels is None:
            return 0
        then = self.kernels.get(body_hash)
        return None if then is None else first_line - then

    def failure(self, arch: str | None) -> str | None:
        return self.failures.get(arch) if arch else None

    def __repr__(self) -> str:  # part of analysis keys: what was compiled, not the whole model
        return f"CompiledSource({sorted((a, u.source, id(u)) for a, u in self.units.items())}, {sorted(self.failures)})"
