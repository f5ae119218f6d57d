"""Where inlined library code runs, when the compiler does not say.

nvcc's line info gives inlined code its call sites (`line 307 inlined at "k.cu", line 12`), and so
does LLVM from version 20. LLVM 19 and older print only the innermost position: the code of an
inlined math function (`sinf`) stands at its line in clang's wrapper header, with no trace of the
statement that called it, and would be weighted as if it ran on every pass of the kernel. Such an
instruction is placed at the position of the program's own code nearest before it (the calling
statement), as if inlined there: the nearest after it in its own basic block (the caller uses
the result: `y = a * sinf(x)` multiplies after the call), else before it in the block, else the
nearest after it and last the nearest before it (a `case` of a `switch` starts with the call: the
code before it is the switch's).

Only code of files outside the program (toolchain and system headers: not the translation unit,
not a header of its own folders) is placed: a function of the program itself keeps its own lines,
which the source engine knows.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable

from perflsp.compiled.sass import Instruction, Location, SassFunction


def place_library_code(functions: Iterable[SassFunction], own_files: Iterable[str]) -> None:
    """Give each lone library position of `functions` the call site it was inlined at (see above)."""
    own = {_normal(p) for p in own_files}
    normal: dict[str, str] = {}

    def is_own(location: Location) -> bool:
        path = location[0]
        if path not in normal:
            normal[path] = _normal(path)
        return normal[path] in own

    for fn in functions:
        instructions = fn.instructions
        lone = [i for i, ins in enumerate(instructions) if len(ins.chain) == 1 and not is_own(ins.chain[0])]
        if not lone:
            continue
        if len(lone) == len(instructions) or not any(ins.chain and is_own(ins.chain[-1]) for ins in instructions):
            continue  # nothing of the program's own to place it at (a library function)
        forward, backward = range(len(instructions)), range(len(instructions) - 1, -1, -1)
        before, after = _nearest_own(instructions, is_own, forward), _nearest_own(instructions, is_own, backward)
        block_before = _nearest_own(instructions, is_own, forward, within_blocks=True)
        block_after = _nearest_own(instructions, is_own, backward, within_blocks=True)
        for i in lone:
            site = block_after[i] or block_before[i] or after[i] or before[i]
            if site:
                instructions[i] = dataclasses.replace(instructions[i], chain=(instructions[i].chain[0], *site))


_ENDS_BLOCK = frozenset({"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL"})


def _nearest_own(instructions: list[Instruction], is_own: Callable[[Location], bool], order: range,
                 within_blocks: bool = False) -> list[tuple[Location, ...] | None]:
    """For each instruction, the chain of the nearest instruction of the program's own code met
    before it in `order` (`within_blocks`: in the same basic block)."""
    found: list[tuple[Location, ...] | None] = [None] * len(instructions)
    last: tuple[Location, ...] | None = None
    for i in order:
        if within_blocks and _block_boundary(instructions, i, order.step > 0):
            last = None
        found[i] = last
        chain = instructions[i].chain
        if chain and is_own(chain[-1]) and is_own(chain[0]):
            last = chain
    return found


def _block_boundary(instructions: list[Instruction], i: int, forward: bool) -> bool:
    """Whether a basic block ends between instruction `i` and the one before it in the walk."""
    if forward:
        return bool(instructions[i].labels) or (i > 0 and instructions[i - 1].base in _ENDS_BLOCK)
    return i + 1 < len(instructions) and (bool(instructions[i + 1].labels) or instructions[i].base in _ENDS_BLOCK)


def _normal(path: str) -> str:
    return os.path.realpath(path)
