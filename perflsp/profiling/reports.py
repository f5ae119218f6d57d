"""Import Nsight Compute results someone already has: a CSV export or a `.ncu-rep` report.

`.ncu-rep` files are read with NVIDIA's `ncu-report` Python package (the optional extra
`perflsp[ncu]`); without it, an `ncu` executable can convert the report to CSV instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perflsp.profiling import metrics as M
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.ncu_csv import NcuLaunch, NcuTable, parse_dim3, parse_ncu_csv
from perflsp.profiling.process import run_program, tail

MAX_REPORT_BYTES = 512 * 1024 * 1024
REPORT_SUFFIXES = (".ncu-rep", ".ncu-repz")


@dataclass(frozen=True)
class ImportedReport:
    path: Path
    table: NcuTable
    ncu_version: str | None
    reader: str  # "csv", "ncu_report" or "ncu --import"


def read_csv_report(path: Path) -> ImportedReport:
    raw = _read_bytes(path)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = raw.decode("utf-16", errors="replace")
    else:
        text = raw.decode("utf-8-sig", errors="replace")
    return ImportedReport(path, parse_ncu_csv(text, source=str(path)), None, "csv")


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_REPORT_BYTES:
            raise ProfilingError("io", f"{path} is larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB")
        return path.read_bytes()
    except FileNotFoundError:
        raise ProfilingError("io", f"no such report: {path}") from None
    except IsADirectoryError:
        raise ProfilingError("io", f"{path} is a directory, not a report") from None
    except PermissionError:
        raise ProfilingError("io", f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise ProfilingError("io", f"cannot read {path}: {exc.strerror or exc}") from None


def ncu_report_available() -> bool:
    try:
        import ncu_report  # noqa: F401
    except ImportError:
        return False
    return True


def read_ncu_rep(path: Path, *, ncu_argv: Sequence[str] | None = None, timeout_s: float = 300.0) -> ImportedReport:
    """Read a `.ncu-rep` with the `ncu_report` package, else convert it with `ncu_argv` (for
    example `["ncu"]`, the user's configured ncu). Raises `missing-extra` when neither exists."""
    _read_bytes_check(path)
    if ncu_report_available():
        return _read_with_package(path)
    if ncu_argv:
        argv = [*ncu_argv, "--import", str(path.resolve()), "--csv", "--page", "raw", "--print-units", "base"]
        result = run_program(argv, timeout_s=timeout_s, output_cap_bytes=MAX_REPORT_BYTES, what="ncu --import")
        if result.returncode != 0:
            raise ProfilingError(
                "exit-status",
                f"ncu --import {path} exited with status {result.returncode}: "
                + tail(result.stderr or result.stdout, 3),
            )
        return ImportedReport(path, parse_ncu_csv(result.stdout, source=f"ncu --import {path}"), None, "ncu --import")
    raise ProfilingError(
        "missing-extra",
        f"reading {path.name} needs NVIDIA's ncu-report package (pip install 'perflsp[ncu]') "
        "or an ncu executable; or export a CSV with ncu --import REPORT --csv --page raw --print-units base",
    )


def _read_bytes_check(path: Path) -> None:
    if not path.exists():
        raise ProfilingError("io", f"no such report: {path}")
    if not path.is_file():
        raise ProfilingError("io", f"{path} is not a file")


def _read_with_package(path: Path) -> ImportedReport:
    import ncu_report

    try:
        context = ncu_report.load_report(str(path))
    except FileNotFoundError as exc:
        raise ProfilingError("io", f"cannot load {path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the SWIG layer raises RuntimeError and others for damaged files
        raise ProfilingError("parse", f"cannot load {path} as an Nsight Compute report: {exc}") from None
    launches: list[NcuLaunch] = []
    for range_index in range(context.num_ranges()):
        report_range = context.range_by_idx(range_index)
        for action_index in range(report_range.num_actions()):
            action = report_range.action_by_idx(action_index)
            launches.append(_launch_from_action(action, str(len(launches)), ncu_report.IAction.NameBase_DEMANGLED))
    if not launches:
        raise ProfilingError(
            "no-kernels", f"{path} holds no profiled kernel launches (is it an Nsight Compute report?)"
        )
    version = None
    try:
        version = str(context.get_version()) or None
    except Exception:  # noqa: BLE001 - old report formats lack a version; it is informational only
        version = None
    return ImportedReport(path, NcuTable(tuple(launches)), version, "ncu_report")


def _launch_from_action(action, launch_id: str, demangled_base) -> NcuLaunch:
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        value = metric.value()
        if value is None:
            continue
        if isinstance(value, str):
            texts[name] = value
            continue
        try:
            numbers[name] = M.to_base_unit(name, float(value), metric.unit() or "")
        except ValueError as exc:
            raise ProfilingError("parse", f"launch {launch_id}: {exc}") from None
    return NcuLaunch(
        launch_id=launch_id,
        kernel_name=action.name(demangled_base),
        device=texts.get(M.DEVICE_NAME, ""),
        block=_dim(numbers, "launch__block_dim"),
        grid=_dim(numbers, "launch__grid_dim"),
        metrics=numbers,
        text=texts,
    )


def _dim(numbers: dict[str, float], prefix: str):
    parts = [numbers.get(f"{prefix}_{axis}") for axis in "xyz"]
    whole = [p for p in parts if p is not None]
    if len(whole) != len(parts):
        return None
    return parse_dim3(", ".join(str(int(p)) for p in whole))


def import_report(path: Path, *, ncu_argv: Sequence[str] | None = None) -> ImportedReport:
    """Read a `.ncu-rep`/`.ncu-repz` report or an ncu CSV export (any other suffix)."""
    if path.name.endswith(REPORT_SUFFIXES):
        return read_ncu_rep(path, ncu_argv=ncu_argv)
    return read_csv_report(path)
