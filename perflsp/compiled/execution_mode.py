"""The execution mode of an OpenMP offload kernel, which the kernel's code fixes: the arms for the
other mode are cut off.

LLVM's OpenMP device runtime runs a target region in SPMD mode (every thread runs the region) or
in generic mode (the team's main thread runs it and hands parallel regions to the workers through
a state machine). Where a unit's kernels do not all run in one mode, the runtime code they share
tests the mode at run time: the kernel's entry stores it in the shared `IsSPMDMode` (`@!P0 STS
[`(IsSPMDMode)], R0` after `@!P0 IMAD.MOV.U32 R0, RZ, RZ, 0x1`) and each parallel region,
barrier and worksharing loop loads and tests it (`LDS R0, [`(IsSPMDMode)]`, `ISETP.NE.AND P0, PT,
R0, RZ, PT`, `@!P0 BRA`). The region's body is then compiled once for each mode; counted both
times, its operations counted twice (Nsight Compute counts one copy: the mode the entry stored is
the one that runs).

The variable is named in relocatable code (clang's offload driver assembles device code with
`ptxas -c`): directly (`[`(IsSPMDMode)]`, sm_80/sm_86) or through a register that holds its
address (`UMOV UR4, `(IsSPMDMode)`, then `UIADD3`/`ULEA`/`VIADD`/`LEA` with the thread block's
shared-memory window: sm_90, whose shared memory is addressed within a cluster). Linked code
addresses it by number and is left as it is.
"""

from __future__ import annotations

import bisect
import re
import struct

from perflsp.compiled.sass import Instruction

# (nvdisasm writes a relocated name without the closing quote: `(IsSPMDMode)`)
_NAME = "`(IsSPMDMode)"
_ADDRESS = re.compile(r"^\[(" + re.escape(_NAME) + r"|U?R\d+)\]$")
_DESTINATION = re.compile(r"^(U?[RP]\w+)")
_REGISTER = re.compile(r"U?R\d+")
# what adds an address and a register (or a shift of one): its result is still that address
_ADDRESS_ARITHMETIC = frozenset({"IADD3", "UIADD3", "VIADD", "IADD", "LEA", "ULEA", "IMAD"})
# `IMAD.MOV.U32 R0, RZ, RZ, 0x1`, `MOV R0, 0x1`
_SET = re.compile(r"^(R\d+),\s*(?:RZ,\s*RZ,\s*)?(0x[0-9a-f]+|\d+)\s*$")
# `HFMA2.MMA R0, -RZ, RZ, 0, 5.9604644775390625e-08`: a constant put in a register as two halves
_HALVES = re.compile(r"^(R\d+),\s*-RZ,\s*RZ,\s*([-+0-9.e]+),\s*([-+0-9.e]+)\s*$")
# `ISETP.NE.AND P0, PT, R0, RZ, PT` (either side)
_TEST = re.compile(r"^(P\d),\s*PT,\s*(R\w+|RZ)(?:\.reuse)?,\s*(R\w+|RZ)(?:\.reuse)?,\s*PT\s*$")


def _operands(ins: Instruction) -> list[str]:
    return [op.strip() for op in ins.operands.split(",")]


class _Addresses:
    """The registers holding the address of `IsSPMDMode`, followed in instruction order."""

    def __init__(self) -> None:
        self.held: set[str] = set()

    def names(self, memory: str) -> bool:
        """Whether the memory operand `[...]` is the variable."""
        m = _ADDRESS.match(memory.strip())
        return m is not None and (m.group(1) == _NAME or m.group(1) in self.held)

    def follow(self, ins: Instruction) -> None:
        operands = _operands(ins)
        written = _DESTINATION.match(ins.operands)
        if written is None or ins.base.startswith(("ST", "BRA", "BAR", "RED", "ATOM")):
            return
        destination = written.group(1)
        sources = operands[1:]
        named = ins.base in ("MOV", "UMOV") and sources[:1] == [_NAME]
        derived = ins.base in _ADDRESS_ARITHMETIC and any(
            _REGISTER.fullmatch(op.split(".")[0]) and op.split(".")[0] in self.held for op in sources)
        if named or derived:
            self.held.add(destination)
        else:
            self.held.discard(destination)


def _constant(ins: Instruction, register: str) -> int | None:
    """The constant `ins` puts in `register`, None where it puts another value."""
    if ins.base in ("MOV", "IMAD") and (s := _SET.match(ins.operands)) is not None and s.group(1) == register:
        return int(s.group(2), 0)
    if ins.base == "HFMA2" and (h := _HALVES.match(ins.operands)) is not None and h.group(1) == register:
        high, low = (int(struct.unpack("<H", struct.pack("<e", float(v)))[0]) for v in (h.group(2), h.group(3)))
        return high << 16 | low
    return None


def stored_mode(instructions: list[Instruction]) -> int | None:
    """The value the kernel stores into `IsSPMDMode` (1: SPMD, 0: generic), None where it stores
    none, or several, or one this reading cannot tell."""
    values: set[int] = set()
    addresses = _Addresses()
    for at, ins in enumerate(instructions):
        if ins.base == "STS":
            memory, _, register = ins.operands.rpartition(",")
            register = register.strip()
            if addresses.names(memory):
                if register in ("RZ", "URZ"):
                    values.add(0)
                    continue
                value = None
                for earlier in reversed(instructions[max(0, at - 12):at]):
                    written = _DESTINATION.match(earlier.operands)
                    if written is None or written.group(1) != register:
                        continue
                    if earlier.predicate == ins.predicate:
                        value = _constant(earlier, register)
                    break
                if value is None:
                    return None
                values.add(value)
        addresses.follow(ins)
    return values.pop() if len(values) == 1 else None


def other_mode_arms(instructions: list[Instruction], starts: list[int],
                    successors: list[list[int]]) -> dict[int, int]:
    """Block -> the successor its closing branch takes only in the mode the kernel does not run
    in (see the module's doc); empty where the kernel stores no mode this reading can tell."""
    mode = stored_mode(instructions)
    if mode is None:
        return {}
    addresses = _Addresses()
    loaded: set[str] = set()  # registers holding the mode
    known: dict[str, bool] = {}  # predicate -> its value in the mode the kernel runs in
    arms: dict[int, int] = {}
    for at, ins in enumerate(instructions):
        if ins.base == "BRA" and ins.predicate is not None and ins.predicated:
            name = ins.predicate.lstrip("!")
            if name in known:
                taken = known[name] != ins.predicate.startswith("!")
                block = bisect.bisect_right(starts, at) - 1
                targets = successors[block]
                if len(targets) == 2 and block + 1 < len(starts) and starts[block + 1] == at + 1:
                    # (successors are [taken, following] for a conditional branch)
                    arms[block] = targets[1] if taken else targets[0]
            continue
        operands = _operands(ins)
        if ins.base == "LDS" and not ins.predicated and len(operands) == 2 and addresses.names(operands[1]):
            loaded.add(operands[0])
            known.pop(operands[0], None)
            continue
        if ins.base == "ISETP" and not ins.predicated and (t := _TEST.match(ins.operands)) is not None:
            compared = {t.group(2), t.group(3)}
            if "RZ" in compared and compared & loaded and ins.modifiers[:1] in (("NE",), ("EQ",)) \
                    and ins.modifiers[-1] == "AND":
                holds = mode != 0
                known[t.group(1)] = holds if ins.modifiers[0] == "NE" else not holds
                continue
        written = _DESTINATION.match(ins.operands)
        if written is not None and not ins.base.startswith(("ST", "BRA", "BAR", "RED", "ATOM")):
            loaded.discard(written.group(1))
            known.pop(written.group(1), None)
        addresses.follow(ins)
    return arms
