"""Reading `nvdisasm -c -gi` output: each function's SASS instructions with their source lines.

nvdisasm prints, per function section, the instructions (`/*0040*/  @!P0 IMAD.WIDE R2, ... ;`),
labels (`.L_x_5:`) and, with `-gi`, the source position of what follows
(`//## File "k.cu", line 3 inlined at "k.cu", line 8`). A function whose `.other` line says
`STO_CUDA_ENTRY` is a kernel (a `__global__` function or an OpenMP offload entry).

This module only reads text: no toolchain is run here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Location = tuple[str, int]  # (source path as the compiler saw it, 1-based line)


@dataclass(frozen=True, slots=True)
class Instruction:
    offset: int
    opcode: str  # "IMAD.WIDE.U32"
    operands: str  # "R2, R3, R4, c[0x0][0x160]" (without the trailing ';')
    predicate: str | None  # "P0", "!P0", "PT" ... (None: not predicated)
    chain: tuple[Location, ...]  # innermost source position first, then the call sites it is inlined at
    labels: tuple[str, ...] = ()  # labels that name this instruction's address (branch targets)
    # an indirect branch's targets, as nvdisasm lists them (`BRX R4 -0x3a70 (*"BRANCH_TARGETS
    # .L_x_1,.L_x_2"*)`: a switch's jump table)
    targets: tuple[str, ...] = ()

    @property
    def base(self) -> str:
        """The opcode without modifiers ("IMAD.WIDE.U32" -> "IMAD")."""
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def predicated(self) -> bool:
        """Executed by only the threads whose predicate holds (`@P0`, `@!P1`; `@PT` is always)."""
        return self.predicate is not None and self.predicate not in ("PT", "!PT")

    @property
    def location(self) -> Location | None:
        return self.chain[0] if self.chain else None


@dataclass(slots=True)
class SassFunction:
    name: str  # the symbol (mangled)
    is_entry: bool  # a kernel: launched from the host
    registers: int | None
    instructions: list[Instruction] = field(default_factory=list)


_SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
_OTHER = re.compile(r'^\s*\.other\s+(\S+?),\s*@"([^"]*)"')
_REGISTERS = re.compile(r'^\s*\.sectioninfo\s+@"SHI_REGISTERS=(\d+)"')
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@(!?U?P\w+)\s+)?([A-Z][A-Za-z0-9_.]*)\s*([^;]*);")
_LINE = re.compile(r'^\s*//## File "([^"]*)", line (\d+)(.*)$')
_INLINED = re.compile(r'inlined at "([^"]*)", line (\d+)')
_LABEL = re.compile(r"^(\.L_x_\d+|\$[\w.$]+):\s*$")
_BRANCH_TARGETS = re.compile(r'\(\*"BRANCH_TARGETS\s+([^"]+)"\*\)')


def parse_sass(text: str) -> list[SassFunction]:
    """Every function of a disassembled cubin, in the order nvdisasm prints them."""
    functions: list[SassFunction] = []
    current: SassFunction | None = None
    entries: set[str] = set()
    chain: tuple[Location, ...] = ()
    previous_was_line = False
    labels: list[str] = []
    for raw in text.splitlines():
        if m := _INSTRUCTION.match(raw):
            if current is not None:
                operands = m.group(4)
                listed = _BRANCH_TARGETS.search(operands)
                if listed:
                    operands = operands[:listed.start()]
                current.instructions.append(Instruction(int(m.group(1), 16), m.group(3), operands.strip(),
                                                        m.group(2), chain, tuple(labels),
                                                        tuple(t.strip() for t in listed.group(1).split(",")) if listed else ()))
            labels = []
            previous_was_line = False
            continue
        if m := _LINE.match(raw):
            location = (m.group(1), int(m.group(2)))
            inlined = tuple((p, int(n)) for p, n in _INLINED.findall(m.group(3)))
            new_chain = (location, *inlined)
            # nvdisasm -gi prints the whole chain, then the outermost position on a line of its own
            if not (previous_was_line and not inlined and chain and chain[-1] == location and len(chain) > 1):
                chain = new_chain
            previous_was_line = True
            continue
        previous_was_line = False
        if m := _LABEL.match(raw.strip()):
            labels.append(m.group(1))
            continue
        if m := _SECTION.match(raw):
            name = m.group(1)
            current = SassFunction(name, False, None)
            functions.append(current)
            chain, labels = (), []
            continue
        if m := _REGISTERS.match(raw):
            if current is not None:
                current.registers = int(m.group(1))
            continue
        if (m := _OTHER.match(raw)) and "STO_CUDA_ENTRY" in m.group(2):
            entries.add(m.group(1))
    for fn in functions:
        fn.is_entry = fn.name in entries
    return functions


_BRANCH_TARGET = re.compile(r"`\(([^)]+)\)")


def branch_target(instruction: Instruction) -> str | None:
    """The label or symbol a direct branch or call names (`BRA `(.L_x_5)``), else None."""
    m = _BRANCH_TARGET.search(instruction.operands)
    return m.group(1) if m else None
