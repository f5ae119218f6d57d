"""Kernel Tuner cache files: read (plain or gzip, also an abruptly ended file), write, and the
per-workspace store under `.perflsp/tuning/`.

The format is Kernel Tuner's own (`device_name`, `kernel_name`, `problem_size`,
`tune_params_keys`, `tune_params`, `objective`, `cache: {"v1,v2,...": {param: value, ...,
"time": ms}}`), so a file perflsp writes can be read by Kernel Tuner (and replayed with
`simulation_mode=True`) and a colleague's Kernel Tuner cache can be imported as it is. perflsp
adds one key of its own, `perflsp`, with the provenance (measured here, or imported from where).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perflsp.tuning.space import Config, TuningSpace

STORE_DIR = Path(".perflsp") / "tuning"
ERROR_MARKERS = ("InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig")
# what the profiling runner says when a tool, not the configuration, failed (perflsp.profiling.process,
# .runner): entries with these errors were stored as failed configurations before tool failures
# stopped the run; a later run measures them again
TOOL_FAILURE_MARKERS = ("program not found", "permission denied executing", ": cannot execute ", "ERR_NVGPUCTRPERM",
                        "profiling is off", "no build command")


class CacheError(ValueError):
    """A file that is not a Kernel Tuner cache (the message names the file and the problem)."""


@dataclass
class TuningRecord:
    """One kernel on one device: every measured configuration and where the numbers come from."""

    device_name: str
    kernel_name: str
    tune_params: dict[str, list[Any]]
    entries: dict[str, dict[str, Any]]  # Kernel Tuner cache key -> result
    problem_size: Any = None
    objective: str = "time"
    provenance: dict[str, Any] = field(default_factory=dict)  # {"kind": "measured"|"imported", ...}
    path: Path | None = None

    # -- reading the results ----------------------------------------------------------------
    @property
    def keys_order(self) -> list[str]:
        return list(self.tune_params)

    @property
    def recorded(self) -> bool:
        """True when the numbers were imported (recorded elsewhere), not measured by this run."""
        return self.provenance.get("kind") == "imported"

    @property
    def unnamed_device(self) -> bool:
        """The cache named no device: `device_name` was taken from its file's name."""
        return bool(self.provenance.get("deviceFromFile"))

    def label(self) -> str:
        if self.recorded:
            where = self.provenance.get("source") or "an imported cache"
            unnamed = "; the cache names no device: named after its file" if self.unnamed_device else ""
            return f"recorded on {self.device_name} ({where}{unnamed})"
        return f"measured on {self.device_name}"

    def timed(self) -> list[tuple[Config, float]]:
        """(configuration, time in ms) of every configuration that ran, fastest first."""
        out = []
        for entry in self.entries.values():
            time = entry_time(entry)
            if time is not None:
                out.append(({k: entry[k] for k in self.tune_params if k in entry}, time))
        out.sort(key=lambda item: item[1])
        return out

    def time_of(self, config: Mapping[str, Any]) -> float | None:
        key = ",".join(str(config.get(k)) for k in self.tune_params)
        entry = self.entries.get(key)
        return entry_time(entry) if entry is not None else None

    def best(self) -> tuple[Config, float] | None:
        timed = self.timed()
        return timed[0] if timed else None

    def median_ms(self) -> float | None:
        times = [t for _c, t in self.timed()]
        return statistics.median(times) if times else None

    def failures(self) -> int:
        return sum(1 for e in self.entries.values() if entry_time(e) is None)

    def matches(self, space: TuningSpace) -> bool:
        """The record's parameters are the space's: the same names, in any order (a `perflsp:tune`
        marker need not list them in the cache's order)."""
        return len(self.tune_params) == len(space.tune_params) and set(self.tune_params) == set(space.tune_params)

    def ordered_as(self, names: list[str]) -> TuningRecord:
        """This record with its parameters in the order `names` (Kernel Tuner's cache keys join the
        values in parameter order): itself when the order is already that, else a copy re-keyed."""
        if list(self.tune_params) == list(names):
            return self
        if set(self.tune_params) != set(names):
            raise ValueError(f"the cache's parameters ({', '.join(self.tune_params)}) are not {', '.join(names)}")
        entries = {}
        for key, entry in self.entries.items():
            values = key.split(",")
            if len(values) == len(self.tune_params):
                by_name = dict(zip(self.tune_params, values, strict=True))
                key = ",".join(by_name[n] for n in names)
            entries[key] = entry
        return TuningRecord(self.device_name, self.kernel_name, {n: self.tune_params[n] for n in names}, entries,
                            self.problem_size, self.objective, dict(self.provenance), self.path)

    def drop_tool_failures(self) -> int:
        """Remove failed entries that earlier versions stored when a tool, not the configuration,
        failed (ncu or the compiler missing, profiling off): they are measured again. The count."""
        gone = [key for key, entry in self.entries.items()
                if entry_time(entry) is None and any(marker in str(entry.get("perflsp_error", ""))
                                                     for marker in TOOL_FAILURE_MARKERS)]
        for key in gone:
            del self.entries[key]
        return len(gone)

    # -- writing --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "device_name": self.device_name,
            "kernel_name": self.kernel_name,
            "problem_size": self.problem_size if self.problem_size is not None else [],
            "tune_params_keys": list(self.tune_params),
            "tune_params": self.tune_params,
            "objective": self.objective,
            "perflsp": self.provenance,
            "cache": self.entries,
        }

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, default=_json_default), encoding="utf-8")
        tmp.replace(path)
        self.path = path
        return path


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def entry_time(entry: Mapping[str, Any] | None) -> float | None:
    """The entry's time in ms, or None for a configuration that failed or was invalid."""
    if entry is None or "__error__" in entry:
        return None
    time = entry.get("time")
    if isinstance(time, bool) or not isinstance(time, (int, float)):
        return None
    if math.isnan(time) or time <= 0 or time > 1e12:  # NaN, nonsense
        return None
    return float(time)


def read_cache(path: Path, *, source: str | None = None) -> TuningRecord:
    """A Kernel Tuner cache file (`.json` or `.json.gz`; an unfinished file is closed first)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CacheError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise CacheError(f"{path}: not a readable gzip file ({exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CacheError(f"{path}: not UTF-8 JSON") from None
    data = _loads_lenient(text, path)
    return record_from_json(data, path, source=source)


def _loads_lenient(text: str, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # Kernel Tuner appends entries while it runs and closes the file at the end: an
        # interrupted run leaves `..."cache": {"k": {...},` without the closing braces.
        fixed = re.sub(r",\s*$", "", text.rstrip())
        for suffix in ("}}", "}\n}", "}"):
            try:
                data = json.loads(fixed + suffix)
                break
            except json.JSONDecodeError:
                continue
        else:
            raise CacheError(f"{path}: not a JSON document") from None
    if not isinstance(data, dict):
        raise CacheError(f"{path}: not a Kernel Tuner cache (the top level is not an object)")
    return data


def record_from_json(data: Mapping[str, Any], path: Path | None = None, *, source: str | None = None) -> TuningRecord:
    where = str(path) if path is not None else "cache"
    if "results" in data and "cache" not in data:
        raise CacheError(f"{where}: a Kernel Tuner results file (T4 format), not a cache file; "
                         "import the cache (`cache=` of tune_kernel) instead")
    for key in ("kernel_name", "tune_params", "cache"):
        if key not in data:
            raise CacheError(f"{where}: not a Kernel Tuner cache (no `{key}`)")
    params = data["tune_params"]
    keys = data.get("tune_params_keys") or list(params)
    if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
        raise CacheError(f"{where}: `tune_params` must map each parameter to its list of values")
    if list(keys) != list(params):
        params = {k: params[k] for k in keys if k in params}
    entries = data["cache"]
    if not isinstance(entries, dict):
        raise CacheError(f"{where}: `cache` must be an object")
    provenance = dict(data.get("perflsp") or {})
    if source is not None:
        provenance = {"kind": "imported", "source": source,
                      "imported": datetime.now(UTC).isoformat(timespec="seconds"), **{
                          k: v for k, v in provenance.items() if k not in ("kind", "source", "imported")}}
        if path is not None:
            provenance["sourcePath"] = str(path.resolve())
    elif not provenance:
        provenance = {"kind": "imported", "source": where}
    device = str(data.get("device_name") or "").strip()
    if not device:  # Kernel Tuner writes "" when it cannot name the device: the file names it
        if path is None:
            raise CacheError(f"{where}: the cache names no device (`device_name` is empty)")
        device = device_from_file(path)
        provenance["deviceFromFile"] = True
    return TuningRecord(device, str(data["kernel_name"]), dict(params), dict(entries),
                        data.get("problem_size"), str(data.get("objective") or "time"), provenance, path)


def device_from_file(path: Path) -> str:
    """The name of a cache that names no device: its file's name without `.json` / `.json.gz`."""
    name = path.name
    for suffix in (".gz", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


# ------------------------------------------------------------------------------- the store


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unnamed"


class TuningStore:
    """`<workspace>/.perflsp/tuning/<kernel>/<device>.json`, one Kernel Tuner cache per kernel and device."""

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)
        self.root = self.workspace / STORE_DIR

    def path_for(self, kernel: str, device_name: str) -> Path:
        return self.root / slug(kernel) / f"{slug(device_name)}.json"

    def _ensure_ignored(self) -> None:
        top = self.workspace / ".perflsp"
        top.mkdir(parents=True, exist_ok=True)
        ignore = top / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")

    def save(self, record: TuningRecord, kernel: str | None = None) -> Path:
        """Write `record` as its kernel's cache for its device. An imported cache that names no
        device (named after its file) never replaces another file's cache: it takes the next free
        name, `cache (2)`, `cache (3)`, ... (the same file imported again replaces its own)."""
        self._ensure_ignored()
        kernel = kernel or record.kernel_name
        if record.unnamed_device:
            base, n = record.device_name, 1
            while True:
                path = self.path_for(kernel, record.device_name)
                other = _read_or_none(path)
                if other is None or other.provenance.get("sourcePath") == record.provenance.get("sourcePath"):
                    break
                n += 1
                record.device_name = f"{base} ({n})"
        return record.write(self.path_for(kernel, record.device_name))

    def records_for(self, kernel: str) -> list[TuningRecord]:
        folder = self.root / slug(kernel)
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                out.append(read_cache(path))
            except CacheError:
                continue
        return out

    def kernels(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []


def _read_or_none(path: Path) -> TuningRecord | None:
    if not path.exists():
        return None
    try:
        return read_cache(path)
    except CacheError:
        return None


def new_record(space: TuningSpace, device_name: str, provenance: dict[str, Any]) -> TuningRecord:
    return TuningRecord(device_name, space.kernel_name, {k: list(v) for k, v in space.tune_params.items()}, {},
                        list(space.problem_size) if space.problem_size else None, "time", provenance)


__all__ = [
    "ERROR_MARKERS",
    "STORE_DIR",
    "TOOL_FAILURE_MARKERS",
    "CacheError",
    "TuningRecord",
    "TuningStore",
    "device_from_file",
    "entry_time",
    "new_record",
    "read_cache",
    "record_from_json",
    "slug",
]
