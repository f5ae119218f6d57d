"""Configuration: merge the settings layers of one workspace folder, filter by trust, validate.

Precedence, lowest first: defaults < `initializationOptions` < `workspace/configuration` (or the
settings a client pushes with `didChangeConfiguration`) < the folder's `.perflsp.toml`.

Trust: a setting marked trusted in the settings model (it sends code off the machine or runs a
program) is honoured from a workspace layer (`workspace/configuration`, `.perflsp.toml`) only when
the editor says the workspace is trusted; `initializationOptions` and pushed settings are the
client's own (user-level) configuration. The trust flag itself is never read from `.perflsp.toml`.
The LLM's endpoint rules live in `perflsp.llm.privacy`; the origins recorded here feed it.

Validation problems name the file (or settings source) and the field; the caller keeps the last
good configuration and shows each problem once.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError
from pydantic.alias_generators import to_snake
from pydantic_core import ErrorDetails

from perflsp.hardware import Gpu, GpuConfigError, GpuDatabase, UnknownGpuError, load_database
from perflsp.llm.privacy import SettingOrigin
from perflsp.profiling.settings import (
    ResolvedProfilingSettings,
    SettingsLayer,
    SettingsOrigin,
    resolve_profiling_settings,
)
from perflsp.server.settings import ROOFLINE_CODES, SECTION_MODELS, Settings, trusted_fields, wire_key

CONFIG_FILE = ".perflsp.toml"


class Origin(StrEnum):
    DEFAULT = "default"
    INIT_OPTIONS = "initializationOptions"  # the client's launch configuration: user-level
    CLIENT_PUSH = "didChangeConfiguration"  # settings pushed by a client without workspace/configuration
    WORKSPACE = "workspace/configuration"  # the editor's settings for the folder (may be workspace-level)
    FILE = CONFIG_FILE  # the repository's own file

    @property
    def user_controlled(self) -> bool:
        return self in (Origin.DEFAULT, Origin.INIT_OPTIONS, Origin.CLIENT_PUSH)

    def llm_origin(self) -> SettingOrigin:
        return {Origin.DEFAULT: SettingOrigin.DEFAULT, Origin.INIT_OPTIONS: SettingOrigin.USER,
                Origin.CLIENT_PUSH: SettingOrigin.USER, Origin.WORKSPACE: SettingOrigin.WORKSPACE,
                Origin.FILE: SettingOrigin.WORKSPACE_FILE}[self]

    def profiling_origin(self) -> SettingsOrigin:
        if self.user_controlled:
            return SettingsOrigin.USER
        return SettingsOrigin.WORKSPACE_FILE if self is Origin.FILE else SettingsOrigin.WORKSPACE_SETTINGS


@dataclass(frozen=True, slots=True)
class Layer:
    origin: Origin
    source: str  # shown in messages: a file path or the protocol source
    values: Mapping[str, object]  # raw keys as written (camelCase or snake_case), `perflsp.` stripped


@dataclass(frozen=True)
class ResolvedConfig:
    settings: Settings
    gpus: tuple[Gpu, ...]
    database: GpuDatabase
    workspace_trusted: bool
    origins: Mapping[str, Origin]  # dotted snake_case path -> layer that set it
    ignored: tuple[str, ...]  # settings dropped for trust reasons, as messages
    profiling: ResolvedProfilingSettings
    root: Path | None
    generation: int = 0

    def origin_of(self, path: str) -> Origin:
        return self.origins.get(path, Origin.DEFAULT)

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(g.id for g in self.gpus)

    @property
    def argv(self) -> tuple[str, ...] | None:
        """The program's arguments for the analysis: `perflsp.profiling.args` when some layer set it
        (the same key profiling runs the program with; it takes effect under the same trust rule),
        else None (unknown)."""
        if "args" not in self.profiling.origins:
            return None
        return tuple(self.profiling.settings.args)


class ConfigProblem(Exception):
    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------- reading layers


def read_config_file(root: Path | None) -> Layer | None:
    """The folder's `.perflsp.toml` as a layer; raises ConfigProblem when it cannot be read."""
    if root is None:
        return None
    path = root / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigProblem([f"{path}: cannot be read ({exc})"]) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        from perflsp.source.toml_text import syntax_error

        raise ConfigProblem([syntax_error(path, text, exc)]) from exc
    data = dict(data.get("perflsp", data)) if isinstance(data.get("perflsp"), dict) else dict(data)
    if "gpu" in data:  # `[[gpu]]` tables, as in the GPU database files
        data.setdefault("user_gpus", data.pop("gpu"))
    compiling = data.get("compile")
    if isinstance(compiling, dict) and set(compiling) == {"enabled"}:
        data["compile"] = compiling["enabled"]  # `[compile] enabled = ...`, as `perflsp check` reads it
    return Layer(Origin.FILE, str(path), data)


def client_values(raw: object) -> dict[str, object]:
    """Accept `{"perflsp": {...}}`, `{"perflsp.gpus": ...}` or the section itself (raw JSON from
    the client: `merge_layers` and the settings model validate it)."""
    if not isinstance(raw, Mapping):
        return {}
    nested = raw.get("perflsp")
    values: Mapping[object, object] = nested if isinstance(nested, Mapping) else raw
    out: dict[str, object] = {}
    for key, value in values.items():
        key = str(key)
        if key.startswith("perflsp."):
            key = key[len("perflsp."):]
        if "." in key and key.split(".", 1)[0] in SECTION_MODELS:
            section, sub = key.split(".", 1)
            _table(out, section)[sub] = value
        else:
            out[key] = value
    return out


def _table(values: dict[str, object], key: str) -> dict[object, object]:
    """The table `values[key]`, made an empty one when it is not a table yet."""
    table = values.get(key)
    if not isinstance(table, dict):
        table = values[key] = {}
    return table


# --------------------------------------------------------------------------- merging


_TOP_FIELDS = {to_snake(name): name for name in Settings.model_fields}
_ALIASES = {info.alias or name: name for name, info in Settings.model_fields.items()}


def _field_name(key: str) -> str | None:
    if key in Settings.model_fields:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    snake = to_snake(key)
    return snake if snake in Settings.model_fields else None


def _section_field(section: str, key: str) -> str | None:
    model = SECTION_MODELS[section]
    for candidate in (key, to_snake(key)):
        if candidate in model.model_fields:
            return candidate
    for name, info in model.model_fields.items():
        if info.alias == key:
            return name
    return None


@dataclass
class _Merged:
    values: dict[str, object] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)  # path -> key as the user wrote it
    problems: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    section_layers: dict[str, list[tuple[Layer, dict[str, object]]]] = field(default_factory=dict)


def _display(layer: Layer, path: str, written: str | None = None) -> str:
    if layer.origin is Origin.FILE:
        return f"{layer.source}: {written or path}"
    return f"{layer.source}: {wire_key(path)}"


def merge_layers(layers: Iterable[Layer], workspace_trusted: bool) -> _Merged:
    merged = _Merged()
    trusted_only = trusted_fields()
    for layer in layers:
        for key, value in layer.values.items():
            name = _field_name(str(key))
            if name is None:
                merged.problems.append(f"{layer.source}: unknown setting '{key}'" + _suggest(str(key), _TOP_FIELDS))
                continue
            if name == "trusted_workspace" and layer.origin is Origin.FILE:
                merged.ignored.append(f"{layer.source}: trustedWorkspace ignored: only the editor can mark a workspace trusted")
                continue
            if name in SECTION_MODELS:
                if not isinstance(value, Mapping):
                    merged.problems.append(f"{_display(layer, name)}: must be a table of settings")
                    continue
                section: dict[str, object] = {}
                for sub_key, sub_value in value.items():
                    sub = _section_field(name, str(sub_key))
                    if sub is None:
                        merged.problems.append(
                            f"{_display(layer, name)}: unknown setting '{sub_key}'"
                            + _suggest(str(sub_key), {to_snake(n): n for n in SECTION_MODELS[name].model_fields}))
                        continue
                    path = f"{name}.{sub}"
                    section[sub] = sub_value
                    if name == "llm":  # the LLM endpoint policy decides with these origins later
                        _table(merged.values, "llm")[sub] = sub_value
                        merged.origins[path] = layer.origin
                        merged.sources[path] = layer.source
                merged.section_layers.setdefault(name, []).append((layer, section))
                continue
            if name in trusted_only and not layer.origin.user_controlled and not workspace_trusted:
                merged.ignored.append(
                    f"{_display(layer, name, str(key))} ignored: the workspace is not trusted, and this setting "
                    "runs a program or sends code off the machine; set it in user settings or trust the workspace")
                continue
            rules = merged.values.get("rules")
            if name == "rules" and isinstance(value, Mapping) and isinstance(rules, dict):
                merged.values["rules"] = {**rules, **value}
            else:
                merged.values[name] = value
            merged.origins[name] = layer.origin
            merged.sources[name] = layer.source
            merged.written[name] = str(key)
    return merged


def _suggest(word: str, options: Mapping[str, str]) -> str:
    import difflib

    close = difflib.get_close_matches(to_snake(word), list(options), n=1)
    return f"; did you mean '{options[close[0]]}'?" if close else ""


# --------------------------------------------------------------------------- resolving


def resolve(
    layers: Sequence[Layer],
    *,
    client_trusted: bool = False,
    root: Path | None = None,
    known_rules: Iterable[str] | None = None,
    generation: int = 0,
) -> ResolvedConfig:
    """Merge, filter and validate; raises ConfigProblem listing every problem found."""
    # Trust comes from the client: initializationOptions' workspaceTrusted, or trustedWorkspace in
    # client settings (never the repository's file).
    trusted = client_trusted or any(
        bool(_lookup(layer.values, "trusted_workspace")) for layer in layers if layer.origin is not Origin.FILE
    )
    merged = merge_layers(layers, trusted)
    problems = list(merged.problems)

    profiling = resolve_profiling_settings(
        [SettingsLayer(layer.origin.profiling_origin(), values, layer.source)
         for layer, values in merged.section_layers.get("profiling", [])],
        workspace_trusted=trusted,
    )
    for item in profiling.ignored:
        if "not trusted" in item.reason:
            merged.ignored.append(item.describe())
        else:
            problems.append(item.describe())
    values = dict(merged.values)
    values["profiling"] = profiling.settings
    values["trusted_workspace"] = trusted
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(_describe_error(err, merged))
        raise ConfigProblem(problems) from None

    if known_rules is not None:
        known = set(known_rules) | set(ROOFLINE_CODES)
        for code in settings.rules:
            if code not in known:
                source = merged.sources.get("rules", "settings")
                problems.append(f"{source}: {_field_label(merged, 'rules')}: unknown rule '{code}'"
                                + _suggest_code(code, known))

    database, gpus = _gpus(settings, merged, root, problems)
    if problems:
        raise ConfigProblem(problems)
    assert database is not None
    return ResolvedConfig(
        settings=settings,
        gpus=tuple(gpus),
        database=database,
        workspace_trusted=trusted,
        origins=dict(merged.origins),
        ignored=tuple(merged.ignored),
        profiling=profiling,
        root=root,
        generation=generation,
    )


def _lookup(values: Mapping[str, object], name: str) -> object:
    for key, value in values.items():
        if _field_name(str(key)) == name:
            return value
    return None


def _suggest_code(code: str, known: set[str]) -> str:
    import difflib

    close = difflib.get_close_matches(code, sorted(known), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _field_label(merged: _Merged, path: str) -> str:
    origin = merged.origins.get(path.split(".")[0] if not path.startswith("llm.") else path)
    return merged.written.get(path, path) if origin is Origin.FILE else wire_key(path)


def _describe_error(err: ErrorDetails, merged: _Merged) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    if not loc:
        return f"settings: {err.get('msg')}"
    top = _field_name(loc[0]) or loc[0]
    path = top
    rest = loc[1:]
    if top in SECTION_MODELS and rest:
        path = f"{top}.{_section_field(top, rest[0]) or rest[0]}"
        rest = rest[1:]
    source = merged.sources.get(path) or merged.sources.get(top) or "settings"
    if top == "profiling":
        source = "settings"
    label = _field_label(merged, path) + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in rest)
    message = str(err.get("msg", "invalid value"))
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
    return f"{source}: {label}: {message}{shown}"


def _gpus(settings: Settings, merged: _Merged, root: Path | None, problems: list[str]) -> tuple[GpuDatabase | None, list[Gpu]]:
    files: list[Path] = []
    if settings.gpus_file:
        path = Path(settings.gpus_file).expanduser()
        if not path.is_absolute() and root is not None:
            path = root / path
        if not path.is_file():
            problems.append(f"{merged.sources.get('gpus_file', 'settings')}: {_field_label(merged, 'gpus_file')}: "
                            f"no such file '{path}'")
        else:
            files.append(path)
    try:
        database = load_database(files, settings.user_gpus,
                                 tables_origin=f"{merged.sources.get('user_gpus', 'settings')}: {_field_label(merged, 'user_gpus')}")
    except GpuConfigError as exc:
        problems.extend(exc.problems)
        return None, []
    except (OSError, ValueError) as exc:
        problems.append(f"GPU definitions: {exc}")
        return None, []
    gpus: list[Gpu] = []
    for index, name in enumerate(settings.gpus):
        try:
            gpu = database.get(name)
        except UnknownGpuError as exc:
            problems.append(f"{merged.sources.get('gpus', 'settings')}: {_field_label(merged, 'gpus')}[{index}]: {exc}")
            continue
        if gpu.id not in {g.id for g in gpus}:
            gpus.append(gpu)
    return database, gpus


def defaults(root: Path | None = None) -> ResolvedConfig:
    return resolve([], root=root)

