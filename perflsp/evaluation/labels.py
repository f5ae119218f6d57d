"""Reading a labels CSV (the format of the RTX 3080 roofline labels).

The predictor side only ever sees `KernelRow` (location, launch shape, program arguments): the
measured columns and the label are read into a separate `Answer`, which only the scorer touches.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflsp.compiled.names import instantiation_arguments

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

    @property
    def instantiation(self) -> tuple[str, ...] | None:
        """The template arguments of the instantiation the row measured: a CUDA kernel's from
        its signature (`void k<double, 256>(T1 *, int)`), an OpenMP region's from its enclosing
        function's name (`add<double>@l104`); None for a function that is no template."""
        return instantiation_arguments(self.signature if self.language == "cuda" and self.signature else self.kernel)


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


LABELS = ("compute", "bandwidth")


def read_labels(path: Path) -> list[tuple[KernelRow, Answer]]:
    """The rows of a labels CSV. Every problem is one `LabelsError` naming the file, the line and
    what is wrong (`labels.csv:7: a quoted field opened on this line is never closed ...`)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return _read(path, csv.reader(fh, strict=True))
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise LabelsError(f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _read(path: Path, reader: Any) -> list[tuple[KernelRow, Answer]]:
    header = _record(path, reader)
    if header is None:
        raise LabelsError(f"{path}: empty file: not a labels CSV")
    header = [name.strip() for name in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise LabelsError(f"{path}:1: not a labels CSV (missing column(s) {', '.join(missing)})")
    rows: list[tuple[KernelRow, Answer]] = []
    while True:
        start = reader.line_num + 1
        values = _record(path, reader)
        if values is None:
            return rows
        if not values:  # a blank line
            continue
        if reader.line_num > start:  # (no column of a labels CSV holds a line break)
            raise LabelsError(f"{path}:{start}: a quoted field runs from this line to line {reader.line_num}: "
                              "a quote is not closed? (fields of a labels CSV hold no line breaks)")
        if len(values) != len(header):
            raise LabelsError(f"{path}:{start}: {len(values)} fields, the header has {len(header)} (a comma too "
                              "many or too few, or a field with a comma that is not quoted?)")
        raw = dict(zip(header, values))
        label = raw["label"].strip().lower()
        if label not in LABELS:
            raise LabelsError(f"{path}:{start}: label {raw['label']!r} is not one of {', '.join(LABELS)}")
        try:
            row = KernelRow(
                target=raw["target"], language=raw["language"], kernel=raw["kernel"],
                signature=raw.get("kernel_signature", ""), file=raw["file"], line=int(raw["line"]),
                block=_dim3(raw.get("block", "")), grid=_dim3(raw.get("grid", "")),
                exe_args=raw.get("exe_args", "") or "",
            )
        except ValueError:
            raise LabelsError(f"{path}:{start}: `line` must be a line number, not {raw['line']!r}") from None
        answer = Answer(label=label, **{column: _measured(raw, column) for column in MEASURED_COLUMNS})
        rows.append((row, answer))


def _record(path: Path, reader: Any) -> list[str] | None:
    """The next record (None at the end), or a `LabelsError` saying where and what is wrong."""
    start = reader.line_num + 1
    try:
        return next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        raise LabelsError(f"{path}:{start}: {_csv_problem(str(exc), start, reader.line_num)}") from None


def _csv_problem(message: str, start: int, end: int) -> str:
    """Python's csv message, said for a person editing the file."""
    if "unexpected end of data" in message or "EOF" in message:
        return (f"a quoted field opened on this line is never closed (the file ends at line {end}): "
                "close the quote, or double a quote inside a field (\"\")")
    if "expected after" in message:
        where = f"line {end}" if end != start else "this line"
        return (f"a quote ends a field on {where} but text follows it ({message}): quote the whole field "
                "and double the quotes inside it (\"a \"\"b\"\" c\")")
    if "field larger than field limit" in message:
        return f"a field runs to line {end} ({message}): a quote is not closed?"
    return f"malformed CSV: {message}"
