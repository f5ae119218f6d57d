"""Read Nsight Compute CSV output: `ncu --csv --page raw --print-units base` (one row per launch,
one column per metric, the first data row holding units) and the long `--page details` form
(one row per metric). ncu's own `==PROF==` lines and the application's output may surround the
table; they are skipped. Malformed or truncated tables raise a ProfilingError naming the line.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from perflsp.kernels.models import Dim3
from perflsp.profiling import metrics as M
from perflsp.profiling.errors import ProfilingError

IDENTITY_COLUMNS = frozenset(
    {
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Kernel Time",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
        "Section Name",
        "Function Name",
        "Demangled Name",
    }
)
_MESSAGE = re.compile(r"^==(PROF|WARNING|ERROR|INFO)==")
_DIM3 = re.compile(r"^\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?$")
_STRICT = frozenset(m for m in M.ROOFLINE_METRICS if m not in M.TEXT_METRICS)


@dataclass(frozen=True)
class NcuLaunch:
    """One profiled kernel launch; metric values in base units (bytes, ns, Hz, %)."""

    launch_id: str
    kernel_name: str
    process_name: str = ""
    device: str = ""
    block: Dim3 | None = None
    grid: Dim3 | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    text: Mapping[str, str] = field(default_factory=dict)  # non-numeric metrics (device name, ...)

    def metric(self, name: str, default: float = 0.0) -> float:
        return self.metrics.get(name, default)


@dataclass(frozen=True)
class NcuTable:
    launches: tuple[NcuLaunch, ...]
    messages: tuple[str, ...] = ()  # ncu's ==PROF==/==WARNING==/==ERROR== lines
    has_units: bool = True  # False: no units row; values taken as base units


def parse_dim3(text: str) -> Dim3 | None:
    match = _DIM3.match(text.strip())
    if not match:
        return None
    x, y, z = (int(g) for g in match.groups())
    return (x, y, z)


def find_messages(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _MESSAGE.match(line.strip())]


def _header_index(lines: list[str]) -> int | None:
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith('"ID"') and not stripped.startswith("ID,"):
            continue
        try:
            cells = next(csv.reader([stripped]))
        except csv.Error:
            continue
        if cells and cells[0] == "ID" and "Kernel Name" in cells:
            return index
    return None


def parse_ncu_csv(text: str, source: str = "ncu output") -> NcuTable:
    lines = text.splitlines()
    messages = find_messages(text)
    start = _header_index(lines)
    if start is None:
        raise ProfilingError(
            "parse",
            f'{source}: no Nsight Compute CSV table found (expected a header row starting with "ID" '
            'and a "Kernel Name" column, as printed by ncu --csv --page raw --print-units base)',
        )
    body = [
        (n, line)
        for n, line in enumerate(lines[start:], start + 1)
        if line.strip() and not _MESSAGE.match(line.strip())
    ]
    header, data = _read_rows(body, source)
    if "Metric Name" in header and "Metric Value" in header:
        launches = _long_form(header, data, source)
        return NcuTable(tuple(launches), tuple(messages), has_units=True)
    units: dict[str, str] = {}
    has_units = False
    if data and not data[0][1][header.index("ID")].strip():
        units = dict(zip(header, data[0][1], strict=True))
        data = data[1:]
        has_units = True
    launches = [_wide_launch(header, cells, units, line_no, source) for line_no, cells in data]
    return NcuTable(tuple(launches), tuple(messages), has_units)


def _read_rows(body: list[tuple[int, str]], source: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header cells and the data rows with their line numbers in the original text."""
    joined = "\n".join(line for _, line in body)
    reader = csv.reader(io.StringIO(joined), strict=True)
    rows: list[tuple[int, list[str]]] = []
    try:
        for cells in reader:
            line_no = body[min(reader.line_num, len(body)) - 1][0]
            rows.append((line_no, cells))
    except csv.Error as exc:
        line_no = body[min(reader.line_num, len(body)) - 1][0]
        raise ProfilingError(
            "parse", f"{source}: malformed CSV at line {line_no} ({exc}); the output looks truncated"
        ) from None
    header_line, header = rows[0]
    if len(set(header)) != len(header):
        raise ProfilingError("parse", f"{source}: line {header_line}: duplicate column names in the header")
    for line_no, cells in rows[1:]:
        if len(cells) != len(header):
            raise ProfilingError(
                "parse",
                f"{source}: line {line_no} has {len(cells)} fields but the header has {len(header)}; "
                "the output looks truncated or garbled",
            )
    return header, rows[1:]


def _value(metric: str, raw: str, unit: str, where: str) -> float | None:
    try:
        number = M.parse_number(raw)
        return None if number is None else M.to_base_unit(metric, number, unit)
    except ValueError as exc:
        raise ProfilingError("parse", f"{where}: {metric}: {exc}") from None


def _wide_launch(header: list[str], cells: list[str], units: Mapping[str, str], line_no: int, source: str) -> NcuLaunch:
    row = dict(zip(header, cells, strict=True))
    where = f"{source}: line {line_no}"
    if not row["ID"].strip() or not row["Kernel Name"].strip():
        raise ProfilingError("parse", f"{where}: a launch row without an ID or kernel name")
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    for column, raw in row.items():
        if column in IDENTITY_COLUMNS:
            continue
        if column in _STRICT:
            value = _value(column, raw, units.get(column, ""), where)
            if value is not None:
                numbers[column] = value
            continue
        try:
            number = M.parse_number(raw)
        except ValueError:
            texts[column] = raw
            continue
        if number is not None:
            numbers[column] = number
    return NcuLaunch(
        launch_id=row["ID"].strip(),
        kernel_name=row["Kernel Name"].strip(),
        process_name=row.get("Process Name", ""),
        device=row.get("Device", ""),
        block=parse_dim3(row.get("Block Size", "")),
        grid=parse_dim3(row.get("Grid Size", "")),
        metrics=numbers,
        text=texts,
    )


def _long_form(header: list[str], data: list[tuple[int, list[str]]], source: str) -> list[NcuLaunch]:
    grouped: dict[str, dict] = {}
    for line_no, cells in data:
        row = dict(zip(header, cells, strict=True))
        where = f"{source}: line {line_no}"
        launch = grouped.setdefault(
            row["ID"],
            {"row": row, "numbers": {}, "texts": {}},
        )
        metric, raw, unit = row["Metric Name"], row["Metric Value"], row.get("Metric Unit", "")
        if metric in _STRICT:
            value = _value(metric, raw, unit, where)
            if value is not None:
                launch["numbers"][metric] = value
        else:
            try:
                number = M.parse_number(raw)
            except ValueError:
                launch["texts"][metric] = raw
            else:
                if number is not None:
                    launch["numbers"][metric] = number
    return [
        NcuLaunch(
            launch_id=launch_id,
            kernel_name=g["row"]["Kernel Name"].strip(),
            process_name=g["row"].get("Process Name", ""),
            device=g["row"].get("Device", ""),
            block=parse_dim3(g["row"].get("Block Size", "")),
            grid=parse_dim3(g["row"].get("Grid Size", "")),
            metrics=g["numbers"],
            text=g["texts"],
        )
        for launch_id, g in grouped.items()
    ]
