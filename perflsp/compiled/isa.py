"""What each SASS instruction counts for, in the classes Nsight Compute reports.

Nsight Compute's instruction-mix metrics count executed SASS instructions per thread whose
predicate is on (`smsp__sass_thread_inst_executed_op_*_pred_on`): FP32 operations are
`fadd + fmul + 2 × ffma`, FP64 and FP16 likewise, and `op_integer` counts the integer
instruction class of the ISA reference (IADD3, IMAD and its move/shift forms, LOP3, SHF, LEA,
ISETP, IMNMX, POPC, FLO, ...). Moves (MOV, SEL, PRMT), conversions, predicate logic and
uniform-datapath instructions are other classes.

`classify` maps one instruction to a `Cost`: what one thread that executes it adds to each class,
with global loads and stores by width (the traffic model's input).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from perflsp.compiled.sass import Instruction

# the ISA reference's integer instructions (Volta to Blackwell), as Nsight's `op_integer` counts them
INTEGER = frozenset({
    "IADD", "IADD3", "IADD32I", "IMAD", "IMUL", "IMUL32I", "ISCADD", "ISCADD32I", "LEA", "LOP", "LOP3",
    "LOP32I", "SHF", "SHL", "SHR", "ISETP", "IMNMX", "IABS", "POPC", "FLO", "BREV", "BMSK", "SGXT", "IDP",
    "IDP4A", "VABSDIFF", "VABSDIFF4", "VIADD", "VIADDMNMX", "VIMNMX", "VIMNMX3", "IADD64", "IMUL64", "ISETP64",
})
FP32_ADD = frozenset({"FADD", "FADD32I"})
FP32_MUL = frozenset({"FMUL", "FMUL32I"})
FP32_FMA = frozenset({"FFMA", "FFMA32I"})
FP64_ADD, FP64_MUL, FP64_FMA = frozenset({"DADD"}), frozenset({"DMUL"}), frozenset({"DFMA"})
FP16_ADD = frozenset({"HADD2", "HADD2_32I"})
FP16_MUL = frozenset({"HMUL2", "HMUL2_32I"})
FP16_FMA = frozenset({"HFMA2", "HFMA2_32I"})
SPECIAL = frozenset({"MUFU"})
CONVERSION = frozenset({"F2F", "F2I", "I2F", "I2I", "F2FP", "FRND", "I2FP", "F2IP"})
TENSOR = frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA"})
GLOBAL_LOADS = frozenset({"LDG", "LD", "LDGSTS"})  # LD: generic, global in practice for kernel data
GLOBAL_STORES = frozenset({"STG", "ST"})
GLOBAL_ATOMICS = frozenset({"ATOM", "ATOMG", "RED", "REDG"})
SHARED = frozenset({"LDS", "STS", "ATOMS", "LDSM"})
LOCAL = frozenset({"LDL", "STL"})
CONTROL = frozenset({"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BREAK", "KILL"})

_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}
# the m·n·k of a matrix instruction's shape modifier (HMMA.16816 is m16 n8 k16)
_TENSOR_SHAPES = {"16816": (16, 8, 16), "16832": (16, 8, 32), "16864": (16, 8, 64), "168256": (16, 8, 256),
                  "1688": (16, 8, 8), "1684": (16, 8, 4), "8816": (8, 8, 16), "8832": (8, 8, 32), "884": (8, 8, 4)}

_SPELLED_SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)")


@dataclass(frozen=True, slots=True)
class Cost:
    """What one thread executing one instruction adds (FP in operations, FMA = 2)."""

    fp32: float = 0.0
    fp64: float = 0.0
    fp16: float = 0.0
    tensor: float = 0.0  # tensor-core operations per thread (m·n·k·2 per warp / 32)
    tensor_kind: str | None = None  # "fp16" | "tf32" | "bf16" | "fp64" | "int8"
    integer: float = 0.0
    special: float = 0.0
    conversion: float = 0.0
    load_bytes: float = 0.0  # global (and generic) loads, by width
    store_bytes: float = 0.0
    loads: float = 0.0
    stores: float = 0.0
    atomics: float = 0.0
    shared: float = 0.0
    local: float = 0.0
    local_bytes: float = 0.0  # local (stack, spill) loads and stores, by width
    uniform: float = 0.0  # uniform-datapath instructions (once per warp)
    instructions: float = 1.0


NOTHING = Cost(instructions=1.0)


def _width(modifiers: tuple[str, ...]) -> int:
    for m in modifiers:
        if m in _WIDTH:
            return _WIDTH[m]
    return 4


def _tensor(base: str, modifiers: tuple[str, ...]) -> tuple[float, str]:
    """Operations per thread of one warp-wide matrix instruction, and its precision."""
    m = n = k = 0
    for mod in modifiers:
        if mod in _TENSOR_SHAPES:
            m, n, k = _TENSOR_SHAPES[mod]
            break
        spelled = _SPELLED_SHAPE.fullmatch(mod)  # DMMA.8x8x4, HMMA on some architectures
        if spelled:
            m, n, k = (int(g) for g in spelled.groups())
            break
    kind = {"DMMA": "fp64", "IMMA": "int8", "BMMA": "int8"}.get(base, "fp16")
    if base == "HMMA" and "TF32" in modifiers:
        kind = "tf32"
    elif base == "HMMA" and "BF16" in modifiers:
        kind = "bf16"
    return 2.0 * m * n * k / 32.0, kind


@lru_cache(maxsize=4096)
def _classify_opcode(opcode: str) -> Cost:
    base, *mods = opcode.split(".")
    modifiers = tuple(mods)
    if base in INTEGER:
        return Cost(integer=1.0)
    if base in FP32_FMA:
        return Cost(fp32=2.0)
    if base in FP32_ADD or base in FP32_MUL:
        return Cost(fp32=1.0)
    if base in FP64_FMA:
        return Cost(fp64=2.0)
    if base in FP64_ADD or base in FP64_MUL:
        return Cost(fp64=1.0)
    if base in FP16_FMA:
        return Cost(fp16=2.0 * (1 if "F32" in modifiers else 2))
    if base in FP16_ADD or base in FP16_MUL:
        return Cost(fp16=1.0 * (1 if "F32" in modifiers else 2))
    if base in SPECIAL:
        return Cost(special=1.0)
    if base in CONVERSION:
        return Cost(conversion=1.0)
    if base in TENSOR:
        ops, kind = _tensor(base, modifiers)
        return Cost(tensor=ops, tensor_kind=kind)
    if base in GLOBAL_LOADS:
        width = _width(modifiers)
        return Cost(load_bytes=width, loads=1.0)
    if base in GLOBAL_STORES:
        width = _width(modifiers)
        return Cost(store_bytes=width, stores=1.0)
    if base in GLOBAL_ATOMICS:
        width = 8 if "64" in modifiers or "F64" in modifiers else 4
        return Cost(atomics=1.0, load_bytes=width, store_bytes=width)
    if base in SHARED:
        return Cost(shared=1.0)
    if base in LOCAL:
        return Cost(local=1.0, local_bytes=_width(modifiers))
    if base.startswith("U") and base[1:] in INTEGER:
        return Cost(uniform=1.0)
    return NOTHING


def classify(instruction: Instruction) -> Cost:
    """What one executing thread adds for `instruction` (its predicate aside)."""
    if instruction.opcode.startswith("HFMA2") and _zero_product(instruction.operands):
        return NOTHING
    return _classify_opcode(instruction.opcode)


def _zero_product(operands: str) -> bool:
    """An FMA whose multiplicand is the zero register (`HFMA2.MMA R7, -RZ, RZ, 0, 2.38e-07`):
    ptxas's way to put a constant in a register on Ampere and later (it issues on the idle
    tensor pipe), a move and no half-precision arithmetic."""
    parts = [p.strip().lstrip("-|").rstrip("|") for p in operands.split(",")]
    return len(parts) >= 3 and "RZ" in (parts[1], parts[2])
