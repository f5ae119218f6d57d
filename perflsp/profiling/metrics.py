"""The Nsight Compute metrics a roofline needs, and how to read their values.

Counts are SASS thread instructions with predication on; an FMA is one instruction but two
operations. Values are read in the units ncu printed (`--print-units base` makes them plain
bytes, nanoseconds, ...) and converted to the base unit named in the field.
"""

from __future__ import annotations

import re

from perflsp.analysis.roofline import Precision

_SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"

# precision -> (add, mul, fma) instruction metrics
FLOP_METRICS: dict[Precision, tuple[str, str, str]] = {
    Precision.FP64: (_SASS.format("dadd"), _SASS.format("dmul"), _SASS.format("dfma")),
    Precision.FP32: (_SASS.format("fadd"), _SASS.format("fmul"), _SASS.format("ffma")),
    Precision.FP16: (_SASS.format("hadd"), _SASS.format("hmul"), _SASS.format("hfma")),
}
INTEGER_METRIC = "smsp__sass_thread_inst_executed_op_integer_pred_on.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DURATION = "gpu__time_duration.sum"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"  # achieved occupancy, %
SM_CLOCK = "sm__cycles_elapsed.avg.per_second"  # the SM clock during the launch
BLOCK_SIZE = "launch__block_size"
GRID_SIZE = "launch__grid_size"
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
DEVICE_NAME = "device__attribute_display_name"

ROOFLINE_METRICS: tuple[str, ...] = (
    *(m for triple in FLOP_METRICS.values() for m in triple),
    INTEGER_METRIC,
    DRAM_READ,
    DRAM_WRITE,
    DURATION,
    OCCUPANCY,
    SM_CLOCK,
    BLOCK_SIZE,
    GRID_SIZE,
    REGISTERS,
    SHARED_STATIC,
    SHARED_DYNAMIC,
    DEVICE_NAME,
)
TIMING_METRICS: tuple[str, ...] = (DURATION, BLOCK_SIZE, GRID_SIZE)
TEXT_METRICS = frozenset({DEVICE_NAME})

# metric -> dimension, so a value in an unexpected unit is caught instead of misread
DIMENSION: dict[str, str] = {DRAM_READ: "bytes", DRAM_WRITE: "bytes", DURATION: "ns", SM_CLOCK: "hz", OCCUPANCY: "pct"}
DIMENSION.update({SHARED_STATIC: "bytes", SHARED_DYNAMIC: "bytes"})

_SCALE: dict[str, dict[str, float]] = {
    "bytes": {
        "byte": 1,
        "kbyte": 1e3,
        "mbyte": 1e6,
        "gbyte": 1e9,
        "tbyte": 1e12,
        "kibyte": 1024,
        "mibyte": 1024**2,
        "gibyte": 1024**3,
        "b": 1,
        "byte/block": 1,
        "kbyte/block": 1e3,
        "mbyte/block": 1e6,
    },
    "ns": {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9},
    "hz": {
        "cycle/second": 1,
        "hz": 1,
        "cycle/usecond": 1e6,
        "cycle/msecond": 1e3,
        "cycle/nsecond": 1e9,
        "khz": 1e3,
        "mhz": 1e6,
        "ghz": 1e9,
    },
    "pct": {"%": 1, "pct": 1},
}

_PLAIN = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_GROUPED = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")
_MISSING = {"", "n/a", "na", "-", "nan"}


def parse_number(text: str) -> float | None:
    """A metric value as ncu prints it: `1,605,632`, `12.5`, `3e+09`; None when not available.

    Raises ValueError for anything else, so garbage is never read as a number.
    """
    cleaned = text.strip().strip('"').strip()
    if cleaned.lower() in _MISSING:
        return None
    if _GROUPED.match(cleaned):
        cleaned = cleaned.replace(",", "")
    elif not _PLAIN.match(cleaned):
        raise ValueError(f"{text!r} is not a number")
    return float(cleaned)


def to_base_unit(metric: str, value: float, unit: str) -> float:
    """Convert `value` printed in `unit` to the base unit of the metric's dimension."""
    dimension = DIMENSION.get(metric)
    if dimension is None:
        return value
    unit_key = unit.strip().lower()
    if not unit_key:  # no units row: assume --print-units base was used
        return value
    scale = _SCALE[dimension].get(unit_key)
    if scale is None:
        raise ValueError(f"unexpected unit {unit!r} for {metric} (expected {dimension})")
    return value * scale
