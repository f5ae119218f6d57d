"""The slow paths of library math functions: code that runs only for arguments no kernel computes on.

`sinf`, `cosf`, `sincosf` and `tanf` reduce their argument modulo pi/2 with three FMAs when
|x| < 105615, and with the Payne-Hanek reduction (a loop over a table of 2/pi, a local-memory
array, some 150 integer instructions) above it; `sin`, `cos` and `tan` of doubles switch at
2^31. Both compilers inline the float reduction into the kernel (nvcc and clang alike); the
double one is a subroutine nvcc and libdevice name `..._slowpathd`, which is not counted either
(`cfg._subroutines`). Counted at the weight of the statement that calls the function, a
trigonometric kernel counted four to five times the integer instructions Nsight Compute
measures: in practice no thread takes that arm (arguments of 10^5 radians are no angle).

This module only reads instructions: the branch arm on the huge side of such a test is cut off
the control-flow graph, so its blocks (and the loop in them) are not counted at all.
"""

from __future__ import annotations

import re

from perflsp.compiled.sass import Instruction

# the bound above which each precision's reduction takes its slow path
_HUGE_FROM = {"FSETP": 105615.0, "DSETP": 2147483648.0}
# `FSETP.GE.AND P0, PT, |R4|, 105615, PT` (the absolute value of an operand against a constant)
_TEST = re.compile(r"^(P\d),\s*PT,\s*\|R\d+\|(?:\.reuse)?,\s*(\d[0-9.]*(?:e[+-]?\d+)?)\s*,\s*PT\s*$")
_ABOVE = frozenset({"GE", "GEU", "GT", "GTU"})
_BELOW = frozenset({"LT", "LTU", "LE", "LEU"})
_WRITES_PREDICATE = re.compile(r"^(?:U?R\w+,\s*)?(P\d)\b")


def huge_argument_arms(instructions: list[Instruction], starts: list[int],
                       successors: list[list[int]]) -> dict[int, int]:
    """Block -> the successor it branches to (or falls into) for a huge argument of a library
    trigonometric function: the conditional branch ends the block and tests a predicate set by
    the reduction's range test (`@!P0 BRA` over the slow path, after `FSETP.GE.AND P0, PT, |R4|,
    105615, PT`). Predicates are followed in instruction order; one written by anything else is
    forgotten."""
    huge_when: dict[str, bool] = {}  # predicate -> its value for a huge argument
    # a register a test's predicate was saved into (`P2R R82, PR, RZ, 0x4`), nonzero when it held
    saved: dict[str, bool] = {}
    branch_at: dict[int, tuple[str, bool]] = {}  # instruction index -> (predicate, value for huge)
    for at, ins in enumerate(instructions):
        if ins.base == "BRA" and ins.predicated and ins.predicate is not None:
            name = ins.predicate.lstrip("!")
            if name in huge_when:
                # taken when the predicate, negated or not, holds
                branch_at[at] = (name, huge_when[name] != ins.predicate.startswith("!"))
            continue
        destination = ins.operands.split(",", 1)[0].strip()
        if ins.base == "P2R" and not ins.predicated:
            value = _saved_value(ins, huge_when)
            if value is None:
                saved.pop(destination, None)
            else:
                saved[destination] = value
            continue
        if destination in saved and not destination.startswith("P"):
            del saved[destination]  # the register written again
        written = _WRITES_PREDICATE.match(ins.operands)
        if written is None or written.group(1) == "PT":
            continue
        name = written.group(1)
        value = None if ins.predicated else (_huge_when(ins) if ins.base != "ISETP" else _restored(ins, saved))
        if value is None:
            huge_when.pop(name, None)
        else:
            huge_when[name] = value
    found: dict[int, int] = {}
    bounds = [*starts, len(instructions)]
    for b, succ in enumerate(successors):
        last = bounds[b + 1] - 1
        if last not in branch_at or len(succ) != 2:
            continue
        taken_when_huge = branch_at[last][1]
        following = b + 1
        # successors list the taken target first, then the block that follows
        taken = next((s for s in succ if s != following), None)
        if taken is None or taken < b:
            continue  # a loop's back edge, or both arms the same
        found[b] = taken if taken_when_huge else following
    return found


def _saved_value(ins: Instruction, huge_when: dict[str, bool]) -> bool | None:
    """For `P2R R82, PR, RZ, 0x4` saving one range test's predicate (bit i for Pi): the value
    the register's being nonzero has for a huge argument."""
    parts = [p.strip() for p in ins.operands.split(",")]
    if len(parts) != 4 or parts[1] != "PR" or parts[2] != "RZ":
        return None
    try:
        mask = int(parts[3], 0)
    except ValueError:
        return None
    if mask <= 0 or mask & (mask - 1):
        return None  # several predicates in one register
    return huge_when.get(f"P{mask.bit_length() - 1}")


def _restored(ins: Instruction, saved: dict[str, bool]) -> bool | None:
    """For `ISETP.NE.AND P3, PT, R82, RZ, PT` on a register a range test was saved into: the
    value the predicate has for a huge argument."""
    m = re.match(r"^P\d,\s*PT,\s*(R\d+),\s*RZ,\s*PT\s*$", ins.operands)
    if m is None or m.group(1) not in saved or len(ins.modifiers) < 2 or ins.modifiers[0] not in ("NE", "EQ"):
        return None
    return saved[m.group(1)] == (ins.modifiers[0] == "NE")


def _huge_when(ins: Instruction) -> bool | None:
    """The value the predicate `ins` writes has for a huge argument, when `ins` is a reduction's
    range test; else None."""
    bound = _HUGE_FROM.get(ins.base)
    if bound is None or len(ins.modifiers) < 2:
        return None
    relation = ins.modifiers[0]
    if relation not in _ABOVE and relation not in _BELOW:
        return None
    m = _TEST.match(ins.operands)
    if m is None or float(m.group(2)) != bound:
        return None
    return relation in _ABOVE
