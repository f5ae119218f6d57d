"""Load the GPU database: the shipped `gpus.toml` plus user GPUs from files and settings.

User GPUs are `[[gpu]]` tables in the same schema as the shipped file. A user GPU whose `id`
equals a shipped one replaces it; its aliases take precedence over shipped aliases. Every problem
is reported with where it came from, e.g.
``gpus.toml: [[gpu]] #2 'MyCard': memory_bandwidth_gbs: must be > 0 (got -5)``,
and loading raises `GpuConfigError` without returning a half-built database, so a caller (the
server) can keep the last good one.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from perflsp.hardware.models import (
    OPTIONAL_GPU_FIELDS,
    AmdArchLimits,
    ArchLimits,
    Gpu,
    GpuEntry,
    IntelArchLimits,
    NvidiaArchLimits,
    Peak,
    PeakEntry,
    Source,
)
from perflsp.hardware.precision import Precision
from perflsp.source.toml_text import syntax_error, where

BUILTIN_PATH = Path(__file__).with_name("gpus.toml")
_RATE_TOLERANCE = 0.01  # a peak given both as a value and as a per-SM rate must agree within 1%
_VENDOR_WORDS = ("nvidia", "amd", "intel", "geforce", "tesla", "quadro", "instinct", "radeon")


class GpuConfigError(ValueError):
    """One or more GPU definitions are invalid; `problems` lists each, with its location."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class UnknownGpuError(LookupError):
    def __init__(self, name: str, suggestions: Sequence[str]):
        self.name = name
        self.suggestions = list(suggestions)
        message = f"unknown GPU '{name}'"
        if self.suggestions:
            message += "; did you mean " + ", ".join(self.suggestions) + "?"
        else:
            message += "; `perflsp gpus` lists the known GPUs"
        super().__init__(message)

    def __str__(self) -> str:  # LookupError would quote the message like a key
        return str(self.args[0])


# --------------------------------------------------------------------------- database


def normalize_name(name: str) -> str:
    """Lookup key: lower case, letters and digits only ("RTX 3080" == "rtx-3080")."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _without_vendor_words(key: str) -> str:
    for word in _VENDOR_WORDS:
        key = key.replace(word, "")
    return key


class GpuDatabase:
    """GPUs by id, with case-insensitive lookup by id, alias or name."""

    def __init__(
        self,
        gpus: Iterable[Gpu],
        archs: Mapping[str, NvidiaArchLimits | AmdArchLimits | IntelArchLimits],
        sources: Mapping[str, Source],
    ):
        self._gpus: dict[str, Gpu] = {}
        for gpu in gpus:  # later definitions replace earlier ones with the same id
            replaced = self._gpus.pop(gpu.id, None)
            if replaced is not None and not gpu.aliases:  # keep the names users know it by
                gpu = gpu.model_copy(update={"aliases": replaced.aliases})
            self._gpus[gpu.id] = gpu
        self.archs = dict(archs)
        self.sources = dict(sources)
        self._index = self._build_index()

    def _build_index(self) -> dict[str, str]:
        index: dict[str, str] = {}
        ordered = list(self._gpus.values())
        for gpu in ordered:  # aliases and names: a later (user) GPU wins
            for key in (*gpu.aliases, gpu.name):
                index[normalize_name(key)] = gpu.id
        for gpu in ordered:  # then loose keys without vendor words, where still free
            for key in (gpu.id, *gpu.aliases, gpu.name):
                index.setdefault(_without_vendor_words(normalize_name(key)), gpu.id)
        for gpu in ordered:  # ids always win
            index[normalize_name(gpu.id)] = gpu.id
        index.pop("", None)
        return index

    def __len__(self) -> int:
        return len(self._gpus)

    def __contains__(self, name: str) -> bool:
        return self.find(name) is not None

    def all(self) -> list[Gpu]:
        return list(self._gpus.values())

    def find(self, name: str) -> Gpu | None:
        key = normalize_name(name)
        gpu_id = self._index.get(key) or self._index.get(_without_vendor_words(key))
        return None if gpu_id is None else self._gpus[gpu_id]

    def get(self, name: str) -> Gpu:
        gpu = self.find(name)
        if gpu is None:
            raise UnknownGpuError(name, self.suggestions(name))
        return gpu

    def suggestions(self, name: str, limit: int = 5) -> list[str]:
        """GPU ids whose id, alias or name is close to `name`, best first."""
        key = normalize_name(name)
        found: list[str] = []
        candidates = difflib.get_close_matches(key, list(self._index), n=20, cutoff=0.6)
        if len(key) >= 3:
            candidates += [k for k in self._index if key in k or (len(k) >= 3 and k in key)]
        for candidate in candidates:
            gpu_id = self._index[candidate]
            if gpu_id not in found:
                found.append(gpu_id)
        return found[:limit]

    def arch(self, key: str) -> NvidiaArchLimits | AmdArchLimits | IntelArchLimits:
        return self.archs[key]


# --------------------------------------------------------------------------- loading


def load_database(
    user_files: Iterable[str | Path] = (),
    user_tables: Sequence[Mapping[str, Any]] = (),
    *,
    tables_origin: str = "settings",
    tables_text: str | None = None,
) -> GpuDatabase:
    """The shipped GPUs plus user GPUs from TOML files and from settings tables (in that order).

    Raises `GpuConfigError` listing every problem found; nothing is half-loaded.
    """
    archs, sources, builtin = _builtin()
    problems: list[str] = []
    gpus = list(builtin)
    for path in user_files:
        gpus += _load_user_file(Path(path), archs, problems)
    gpus += _resolve_tables(user_tables, str(tables_origin), archs, problems, text=tables_text)
    if problems:
        raise GpuConfigError(problems)
    return GpuDatabase(gpus, archs, sources)


@cache
def _builtin() -> tuple[dict[str, Any], dict[str, Source], tuple[Gpu, ...]]:
    data = tomllib.loads(BUILTIN_PATH.read_text(encoding="utf-8"))
    adapter = TypeAdapter(ArchLimits)
    archs = {key: adapter.validate_python({**table, "key": key}) for key, table in data["arch"].items()}
    sources = {key: Source.model_validate(table) for key, table in data["sources"].items()}
    problems: list[str] = []
    gpus = _resolve_tables(data["gpu"], "gpus.toml (builtin)", archs, problems, defined_in="builtin")
    if problems:  # a broken shipped file is a packaging bug, not a user error
        raise RuntimeError("perflsp's GPU database is invalid:\n" + "\n".join(problems))
    return archs, sources, tuple(gpus)


def _load_user_file(path: Path, archs: Mapping[str, Any], problems: list[str]) -> list[Gpu]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"{path}: cannot read the file: {exc.strerror or exc}")
        return []
    except UnicodeDecodeError:
        problems.append(f"{path}: not UTF-8 text")
        return []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(syntax_error(path, text, exc))
        return []
    unknown = sorted(set(data) - {"gpu", "meta"})
    if unknown:
        problems.append(
            f"{path}: unknown top-level key(s) {', '.join(unknown)} (a GPU file holds [[gpu]] tables)"
        )
    tables = data.get("gpu", [])
    if not isinstance(tables, list):
        problems.append(f"{where(path, text, 'gpu')}: 'gpu' must be an array of tables, written [[gpu]]")
        return []
    return _resolve_tables(tables, str(path), archs, problems, defined_in=str(path), text=text)


def _resolve_tables(
    tables: Sequence[Any],
    origin: str,
    archs: Mapping[str, Any],
    problems: list[str],
    defined_in: str | None = None,
    text: str | None = None,
) -> list[Gpu]:
    """`text`: the file the tables were read from, when there is one: each problem then names the
    line of its `[[gpu]]` table (or of the field)."""
    gpus: list[Gpu] = []
    seen_ids: set[str] = set()
    for number, table in enumerate(tables, start=1):
        label = _entry_label(origin, number, table, text)
        if not isinstance(table, Mapping):
            problems.append(f"{label}: must be a table of GPU fields")
            continue
        try:
            entry = GpuEntry.model_validate(dict(table))
        except ValidationError as exc:
            for err in exc.errors():
                field_label = label
                if text is not None and err.get("loc") and isinstance(err["loc"][0], str):
                    field_label = _entry_label(origin, number, table, text, err["loc"][0])
                problems.append(f"{field_label}: {_describe_error(err)}")
            continue
        if entry.id in seen_ids:
            problems.append(f"{label}: id: '{entry.id}' is defined twice in {origin}")
            continue
        seen_ids.add(entry.id)
        entry_problems: list[str] = []
        gpu = _resolve_entry(entry, archs, entry_problems, defined_in or origin)
        problems += [f"{label}: {p}" for p in entry_problems]
        if gpu is not None and not entry_problems:
            gpus.append(gpu)
    return gpus


def _entry_label(origin: str, number: int, table: Any, text: str | None = None, key: str | None = None) -> str:
    name = None
    if isinstance(table, Mapping):
        name = table.get("id") or table.get("name")
    place = where(origin, text, "gpu", number - 1, *([key] if key else [])) if text is not None else origin
    return f"{place}: [[gpu]] #{number}" + (f" '{name}'" if isinstance(name, str) else "")


def _resolve_entry(
    entry: GpuEntry, archs: Mapping[str, Any], problems: list[str], defined_in: str
) -> Gpu | None:
    limits = _arch_of(entry, archs, problems)
    if entry.base_clock_mhz and entry.base_clock_mhz > entry.boost_clock_mhz:
        problems.append(
            f"base_clock_mhz: {entry.base_clock_mhz:g} is above boost_clock_mhz "
            f"{entry.boost_clock_mhz:g}"
        )
    missing_names = _check_missing_lists(entry, problems)
    peaks = {p: _resolve_peak(entry, p, spec, problems) for p, spec in entry.peaks.items()}
    if limits is None or problems:
        return None
    resolved = {p: peak for p, peak in peaks.items() if peak is not None}
    if (
        isinstance(limits, NvidiaArchLimits)
        and Precision.INT32 not in resolved
        and Precision.INT32.value not in missing_names
    ):
        resolved[Precision.INT32] = _derived_int32(entry, limits)
    return Gpu(
        id=entry.id,
        name=entry.name or entry.id,
        vendor=entry.vendor,
        aliases=entry.aliases,
        architecture=entry.architecture or limits.family,
        chip=entry.chip,
        compute_capability=entry.compute_capability,
        gfx_target=entry.gfx_target,
        sm_count=entry.sm_count,
        base_clock_mhz=entry.base_clock_mhz,
        boost_clock_mhz=entry.boost_clock_mhz,
        memory_gb=entry.memory_gb,
        memory_type=entry.memory_type,
        memory_bus_bits=entry.memory_bus_bits,
        memory_bandwidth_gbs=entry.memory_bandwidth_gbs,
        l2_cache_mib=entry.l2_cache_mib,
        last_level_cache_mib=entry.last_level_cache_mib,
        tdp_w=entry.tdp_w,
        other_dram_traffic_gbs=entry.other_dram_traffic_gbs,
        peaks=dict(sorted(resolved.items(), key=lambda kv: list(Precision).index(kv[0]))),
        unsupported=entry.unsupported,
        unknown=entry.unknown,
        notes=entry.notes,
        sources=entry.sources,
        limits=limits,
        defined_in=defined_in,
    )


def _arch_of(entry: GpuEntry, archs: Mapping[str, Any], problems: list[str]) -> Any:
    if entry.vendor == "NVIDIA":
        field, other = "compute_capability", "gfx_target"
    else:
        field, other = "gfx_target", "compute_capability"
    if getattr(entry, other) is not None:
        problems.append(f"{other}: not used for {entry.vendor} GPUs (give {field})")
    key = getattr(entry, field)
    if key is None:
        problems.append(f"{field}: required for {entry.vendor} GPUs")
        return None
    limits = archs.get(key)
    known = sorted(k for k, a in archs.items() if a.vendor == entry.vendor)
    if limits is None or limits.vendor != entry.vendor:
        problems.append(f"{field}: unknown {field.replace('_', ' ')} '{key}' (known: {', '.join(known)})")
        return None
    return limits


def _check_missing_lists(entry: GpuEntry, problems: list[str]) -> set[str]:
    allowed = {p.value for p in Precision} | set(OPTIONAL_GPU_FIELDS)
    names: set[str] = set()
    for list_name in ("unsupported", "unknown"):
        for item in getattr(entry, list_name):
            if item not in allowed:
                problems.append(f"{list_name}: unknown precision or field '{item}'{_did_you_mean(item, allowed)}")
            elif item in {p.value for p in entry.peaks}:
                problems.append(f"{list_name}: '{item}' is listed but also has a peak")
            names.add(item)
    return names


def _resolve_peak(entry: GpuEntry, precision: Precision, spec: PeakEntry, problems: list[str]) -> Peak | None:
    where = f"peaks.{precision.value}"
    before = len(problems)
    if spec.ops_per_clk_per_sm is not None and spec.results_per_clk_per_sm is not None:
        problems.append(f"{where}: give ops_per_clk_per_sm or results_per_clk_per_sm, not both")
    rate = spec.ops_per_clk_per_sm
    if spec.results_per_clk_per_sm is not None:
        rate = 2 * spec.results_per_clk_per_sm  # an FMA result is two operations
    if spec.clock is not None and spec.clock_mhz is not None:
        problems.append(f"{where}: give clock or clock_mhz, not both")
    clock_mhz: float | None
    basis: Literal["boost", "base", "stated", "unstated"]
    if spec.clock_mhz is not None:
        clock_mhz, basis = spec.clock_mhz, "stated"
    elif spec.clock == "base":
        clock_mhz, basis = entry.base_clock_mhz, "base"
        if clock_mhz is None:
            problems.append(f"{where}: clock = \"base\" but the GPU has no base_clock_mhz")
    elif spec.clock == "unstated":
        clock_mhz, basis = None, "unstated"
    else:
        clock_mhz, basis = entry.boost_clock_mhz, "boost"
    if spec.tflops is None and rate is None:
        problems.append(f"{where}: give tflops or a per-SM rate (ops_per_clk_per_sm / results_per_clk_per_sm)")
    if rate is not None and basis == "unstated":
        problems.append(f"{where}: a per-SM rate needs a clock (clock or clock_mhz)")
    if spec.origin == "computed" and rate is None:
        problems.append(f"{where}: origin \"computed\" needs ops_per_clk_per_sm")
    if len(problems) > before:
        return None
    computed_tflops: float | None = None
    if rate is not None and clock_mhz is not None:
        computed_tflops = entry.sm_count * rate * clock_mhz * 1e6 / 1e12
    tflops = spec.tflops if spec.tflops is not None else computed_tflops
    if tflops is None:  # unreachable: the checks above demand tflops or a rate with a clock
        return None
    if spec.tflops is not None and computed_tflops is not None and abs(computed_tflops - spec.tflops) > _RATE_TOLERANCE * spec.tflops:
        problems.append(
            f"{where}: tflops {spec.tflops:g} disagrees with sm_count x rate x clock = "
            f"{entry.sm_count} x {rate:g} x {clock_mhz:g} MHz = {computed_tflops:.4g}"
        )
        return None
    origin = spec.origin or ("quoted" if spec.tflops is not None else "computed")
    return Peak(
        precision=precision,
        tflops=tflops,
        ops_per_clk_per_sm=rate,
        clock_mhz=clock_mhz,
        clock_basis=basis,
        origin=origin,
        sources=spec.sources,
    )


def _derived_int32(entry: GpuEntry, limits: NvidiaArchLimits) -> Peak:
    """INT32 peak from the arch table: int32 multiply-add results/clk/SM x 2 x SMs x boost."""
    rate = 2 * limits.results_per_clk_per_sm.int32_mad
    return Peak(
        precision=Precision.INT32,
        tflops=entry.sm_count * rate * entry.boost_clock_mhz * 1e6 / 1e12,
        ops_per_clk_per_sm=rate,
        clock_mhz=entry.boost_clock_mhz,
        clock_basis="boost",
        origin="derived",
        sources=("computed", *limits.sources),
    )


# --------------------------------------------------------------------------- error text


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _describe_error(err: Mapping[str, Any]) -> str:
    """One pydantic error as 'field.path: what is wrong'."""
    loc = [str(part) for part in err["loc"] if part != "[key]"]
    is_key = "[key]" in err["loc"]
    path = ".".join(loc) if loc else "(entry)"
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if is_key and loc and loc[0] == "peaks":
        known = ", ".join(p.value for p in Precision)
        return f"{path}: unknown precision '{value}'{_did_you_mean(str(value), [p.value for p in Precision])} (known: {known})"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "extra_forbidden":
        model = PeakEntry if len(loc) == 3 and loc[0] == "peaks" else GpuEntry
        return f"{path}: unknown field{_did_you_mean(loc[-1], model.model_fields)}"
    if kind == "greater_than":
        return f"{path}: must be > {ctx.get('gt'):g} (got {value!r})"
    if kind == "greater_than_equal":
        return f"{path}: must be >= {ctx.get('ge'):g} (got {value!r})"
    if kind in ("literal_error", "enum"):
        return f"{path}: must be one of {ctx.get('expected')} (got {value!r})"
    if kind in ("int_parsing", "int_type", "int_from_float", "float_parsing", "float_type"):
        return f"{path}: expected a number, got {value!r}"
    if kind == "string_too_short":
        return f"{path}: must not be empty"
    return f"{path}: {err.get('msg', 'invalid value')} (got {value!r})"
