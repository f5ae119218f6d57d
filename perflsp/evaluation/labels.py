"""Reading a labels CSV (the format of the RTX 3080 roofline labels).

The predictor side only ever sees `KernelRow` (location, launch shape, program arguments): the
measured columns and the label are read into a separate `Answer`, which only the scorer touches.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

Dim3 = tuple[int, int, int]
# Columns a predictor may use (what the study gave its LLMs): never the measured ones.
PREDICTOR_COLUMNS = ("target", "language", "kernel", "kernel_signature", "file", "line", "block", "grid", "exe_args")
REQUIRED_COLUMNS = ("target", "language", "kernel", "file", "line", "label")
# Measured per-kernel quantities (answers, like the label): read into `Answer`, for the scorer only.
MEASURED_COLUMNS = ("dram_bytes", "fp32_ops", "fp64_ops", "int_ops", "xtime_ns")


class LabelsError(ValueError):
    """The labels file is missing, unreadable or not in the expected format."""


@dataclass(frozen=True, slots=True)
class KernelRow:
    target: str
    language: str  # "cuda" | "omp"
    kernel: str
    signature: str
    file: str
    line: int
    block: Dim3 | None
    grid: Dim3 | None
    exe_args: str


@dataclass(frozen=True, slots=True)
class Answer:
    label: str  # "compute" | "bandwidth"
    # the representative execution's measurements (None when the file has no such column or cell)
    dram_bytes: float | None = None
    fp32_ops: float | None = None
    fp64_ops: float | None = None
    int_ops: float | None = None
    xtime_ns: float | None = None


def _measured(raw: dict[str, str], column: str) -> float | None:
    text = (raw.get(column) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _dim3(text: str) -> Dim3 | None:
    nums = [int(x) for x in re.findall(r"\d+", text or "")]
    if not nums:
        return None
    nums = ([*nums, 1, 1, 1])[:3]
    return (nums[0], nums[1], nums[2])


def read_labels(path: Path) -> list[tuple[KernelRow, Answer]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise LabelsError(f"{path}: not a labels CSV (missing column(s) {', '.join(missing)})")
            rows = []
            for number, raw in enumerate(reader, start=2):
                try:
                    row = KernelRow(
                        target=raw["target"], language=raw["language"], kernel=raw["kernel"],
                        signature=raw.get("kernel_signature", ""), file=raw["file"], line=int(raw["line"]),
                        block=_dim3(raw.get("block", "")), grid=_dim3(raw.get("grid", "")),
                        exe_args=raw.get("exe_args", "") or "",
                    )
                except (TypeError, ValueError) as exc:
                    raise LabelsError(f"{path}:{number}: bad row ({exc})") from None
                answer = Answer(label=raw["label"].strip().lower(),
                                **{column: _measured(raw, column) for column in MEASURED_COLUMNS})
                rows.append((row, answer))
            return rows
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise LabelsError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise LabelsError(f"{path}: malformed CSV ({exc})") from None
