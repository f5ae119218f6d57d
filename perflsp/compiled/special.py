"""The compiler's code for special operands: what runs only for operands a fast path does not
handle (denormals, zeros, infinities, NaNs, a 64-bit division's operands beyond 32 bits).

Nsight Compute counts the instructions of the threads that run them (`..._pred_on`); for the
ordinary operands a kernel computes on, this code is branched around or predicated off. Counted
as if it ran, a division or a square root counted two to four times its cost.
"""

from __future__ import annotations

import re

from perflsp.compiled.sass import Instruction

# `FSETP.GEU.AND P0, PT, |R4|, 1.175494350822287508e-38, PT`: an operand (or a double's high
# word, read as a float: 1.469367938527859385e-39) against the smallest normal float
_TINY_TEST = re.compile(r"^(P\d),\s*PT,\s*(?:\|R\d+\||-?R\d+)(?:\.reuse)?,\s*(\d[0-9.]*e-(\d+))\s*,")
# `ISETP.GE.U32.AND P0, PT, R8, 0x7f800000, PT`: a float (or double high word) infinite or NaN.
# (A double's denormal test on its high word, `ISETP.GT.AND P1, PT, R15, 0xfffff`, is not read:
# the same instruction tests `i >= 1 << 20`.)
_WORD_TEST = re.compile(r"^(P\d),\s*PT,\s*R\d+(?:\.reuse)?,\s*(0x[0-9a-f]+)\s*,")
_SPECIAL_FROM = frozenset({0x7F800000, 0x7F7FFFFF, 0x7FF00000, 0x7FEFFFFF})  # from which infinite/NaN
_WRITES_PREDICATE = re.compile(r"^(?:U?R\w+,\s*)?(P\d)\b")


def special_operand_instructions(instructions: list[Instruction]) -> set[int]:
    """Indices of the instructions predicated on a special-operand test (`@!P0 FMUL R4, R4,
    16777216` scaling a denormal up before `MUFU.RCP`): the predicate reads a comparison with
    the smallest normal float (or a double's high word read as one) or the infinities'
    exponent. The tests are followed in instruction order; a predicate written by anything else
    is forgotten."""
    rare_when: dict[str, bool] = {}  # predicate -> the value it has for special operands
    found: set[int] = set()
    for at, ins in enumerate(instructions):
        if ins.predicated and ins.predicate is not None:
            name = ins.predicate.lstrip("!")
            if name in rare_when and rare_when[name] == (not ins.predicate.startswith("!")):
                found.add(at)
                continue
        written = _WRITES_PREDICATE.match(ins.operands)
        if written is None or written.group(1) == "PT":
            continue
        name = written.group(1)
        rare = _special_when(ins)
        if rare is None or ins.predicated:
            rare_when.pop(name, None)
        else:
            rare_when[name] = rare
    return found


def _special_when(ins: Instruction) -> bool | None:
    """The value of the predicate a special-operand test sets for special operands; None when
    `ins` is no such test."""
    if ins.base not in ("FSETP", "ISETP") or len(ins.modifiers) < 2:
        return None
    relation = ins.modifiers[0]
    above = relation in ("GE", "GEU", "GT", "GTU")
    if not above and relation not in ("LT", "LTU", "LE", "LEU"):
        return None
    if ins.base == "FSETP":
        m = _TINY_TEST.match(ins.operands)
        # (the predicate says "normal" when it tests above the threshold)
        return (not above) if m and 37 <= int(m.group(3)) <= 39 else None
    m = _WORD_TEST.match(ins.operands)
    if m is None:
        return None
    return above if int(m.group(2), 16) in _SPECIAL_FROM else None


def fix_up_arms(instructions: list[Instruction], starts: list[int], successors: list[list[int]]) -> set[int]:
    """Blocks that a conditional forward branch of the same source statement skips: the arm of
    a test the compiler adds inside one statement, where the inline fast path's result is
    checked and the special operands (a division's denormal or huge ones, a 64-bit division
    whose operands do not fit in 32 bits) are handed to a subroutine. Its code runs for those
    operands only; a test the source writes sits on its own line (its arm's weight is the
    source walk's)."""
    found: set[int] = set()
    bounds = [*starts, len(instructions)]
    for b, succ in enumerate(successors):
        last = instructions[bounds[b + 1] - 1]
        if last.base != "BRA" or not last.predicated or len(succ) != 2:
            continue
        for arm in succ:
            if arm <= b:
                continue  # a loop's back edge
            if any(ins.base == "CALL" and ins.chain == last.chain for ins in instructions[bounds[arm]:bounds[arm + 1]]):
                found.add(arm)
    return found
