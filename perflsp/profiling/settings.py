"""Profiling settings and the trust check that decides which of them may take effect.

Anything that names a program to run (build/run templates, launcher, ncu path, extra ncu
arguments, environment, program arguments) or switches profiling on is *privileged*: it is taken
only from user-level settings or from a workspace the user trusts. A cloned repository's
`.perflsp.toml` (or its editor settings) can tune harmless knobs such as timeouts, never run
anything. Ignored values are reported with a reason so the editor can say why.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.templates import check_template

_TEMPLATE_PLACEHOLDERS = {
    "build_command": ("file", "exe", "args"),
    "run_command": ("file", "exe", "args", "kernel", "block"),
}


class ProfilingSettings(BaseModel):
    """`perflsp.profiling.*` (camelCase on the wire, snake_case here)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    enabled: bool = False
    # argv templates; see perflsp.profiling.templates for placeholders
    build_command: list[str] = Field(default_factory=list)
    run_command: list[str] = Field(default_factory=lambda: ["{exe}", "{args}"])
    args: list[str] = Field(default_factory=list)  # what {args} becomes unless a caller overrides it
    launcher: list[str] = Field(default_factory=list)  # e.g. ["srun", "-p", "gpu", "--gres=gpu:1"]
    ncu_path: str = "ncu"
    ncu_args: list[str] = Field(default_factory=list)  # appended to perflsp's own ncu options
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for build and run
    block_env_var: str = "PERFLSP_BLOCK_SIZE"  # block-size override when the run template has no {block}

    # harmless knobs: a workspace file may set these
    clock_control: Literal["base", "none", "reset"] = "base"  # ncu locks base clocks by default
    kernel_filter: str | None = None  # regex on the kernel function name (ncu --kernel-name regex:...)
    launch_count: int | None = Field(default=None, ge=1)
    launch_skip: int = Field(default=0, ge=0)
    build_timeout_s: float = Field(default=300.0, gt=0, le=24 * 3600)
    run_timeout_s: float = Field(default=600.0, gt=0, le=24 * 3600)
    output_cap_bytes: int = Field(default=32 * 1024 * 1024, ge=4096)

    @field_validator("build_command", "run_command")
    @classmethod
    def _template(cls, value: list[str], info: Any) -> list[str]:
        check_template(value, _TEMPLATE_PLACEHOLDERS[info.field_name])
        return value

    @field_validator("launcher", "ncu_args", "args")
    @classmethod
    def _no_placeholders(cls, value: list[str]) -> list[str]:
        for argument in value:
            if "\0" in argument:
                raise ValueError("arguments cannot contain NUL characters")
        return value

    @field_validator("ncu_path")
    @classmethod
    def _program(cls, value: str) -> str:
        if not value.strip() or "\0" in value:
            raise ValueError("must name a program")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not name or "=" in name or "\0" in name or "\0" in text:
                raise ValueError(f"invalid environment variable {name!r}")
        return value

    @field_validator("block_env_var")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not value.replace("_", "a").isalnum() or value[:1].isdigit():
            raise ValueError(f"invalid environment variable name {value!r}")
        return value


PRIVILEGED_FIELDS = frozenset(
    {"enabled", "build_command", "run_command", "args", "launcher", "ncu_path", "ncu_args", "env", "block_env_var"}
)

_FIELD_BY_KEY: dict[str, str] = {}
for _name, _info in ProfilingSettings.model_fields.items():
    _FIELD_BY_KEY[_name] = _name
    _FIELD_BY_KEY[_info.alias or _name] = _name


def wire_name(field_name: str) -> str:
    """`build_command` -> `perflsp.profiling.buildCommand`, as users see it."""
    return f"perflsp.profiling.{to_camel(field_name)}"


class SettingsOrigin(StrEnum):
    USER = "user"  # user-level editor settings, user config file, CLI flags
    WORKSPACE_FILE = "workspace_file"  # the workspace's .perflsp.toml
    WORKSPACE_SETTINGS = "workspace_settings"  # workspace-level editor settings (.vscode/settings.json)


def origin_is_trusted(origin: SettingsOrigin, workspace_trusted: bool) -> bool:
    return origin is SettingsOrigin.USER or workspace_trusted


@dataclass(frozen=True, slots=True)
class SettingsLayer:
    origin: SettingsOrigin
    values: Mapping[str, Any]  # the `profiling` section, camelCase or snake_case keys
    source: str = ""  # where it came from, for messages (a path, "user settings")


@dataclass(frozen=True, slots=True)
class IgnoredSetting:
    key: str
    origin: SettingsOrigin
    source: str
    reason: str

    def describe(self) -> str:
        where = self.source or self.origin.value
        return f"{where}: {self.key} ignored: {self.reason}"


@dataclass(frozen=True, slots=True)
class ResolvedProfilingSettings:
    settings: ProfilingSettings
    ignored: tuple[IgnoredSetting, ...] = ()
    origins: Mapping[str, SettingsOrigin] = field(default_factory=dict)  # field -> origin that set it


def resolve_profiling_settings(
    layers: Sequence[SettingsLayer], *, workspace_trusted: bool
) -> ResolvedProfilingSettings:
    """Merge `layers` (later ones win) keeping only what each origin may set.

    Invalid values are ignored with the validation message, so one bad key never disables the
    rest; the caller shows `ignored` to the user.
    """
    merged: dict[str, Any] = {}
    origins: dict[str, SettingsOrigin] = {}
    ignored: list[IgnoredSetting] = []
    for layer in layers:
        for key, value in layer.values.items():
            name = _FIELD_BY_KEY.get(key)
            if name is None:
                ignored.append(IgnoredSetting(str(key), layer.origin, layer.source, "unknown setting"))
                continue
            if name in PRIVILEGED_FIELDS and not origin_is_trusted(layer.origin, workspace_trusted):
                ignored.append(
                    IgnoredSetting(
                        wire_name(name),
                        layer.origin,
                        layer.source,
                        "the workspace is not trusted, and this setting can run programs "
                        "(user settings or a trusted workspace only)",
                    )
                )
                continue
            try:
                ProfilingSettings.model_validate({name: value})
            except ValidationError as exc:
                problem = "; ".join(e["msg"] for e in exc.errors())
                ignored.append(
                    IgnoredSetting(wire_name(name), layer.origin, layer.source, f"invalid value ({problem})")
                )
                continue
            merged[name] = value
            origins[name] = layer.origin
    return ResolvedProfilingSettings(ProfilingSettings.model_validate(merged), tuple(ignored), origins)


def require_enabled(resolved: ResolvedProfilingSettings) -> ProfilingSettings:
    """The gate the server calls before running anything: raise `not-enabled` with the reason."""
    if resolved.settings.enabled:
        return resolved.settings
    refused = [i for i in resolved.ignored if i.key == wire_name("enabled")]
    if refused:
        raise ProfilingError(
            "not-enabled",
            f"profiling is off: {refused[-1].describe()}. Enable it in user settings or trust the workspace",
        )
    raise ProfilingError("not-enabled", f"profiling is off: set {wire_name('enabled')} to true in user settings")


def layer_from_toml(path: Path, origin: SettingsOrigin) -> SettingsLayer | None:
    """The `[profiling]` table of a TOML file (`.perflsp.toml` or the user config); None if absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfilingError("io", f"cannot read {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        from perflsp.source.toml_text import syntax_error

        raise ProfilingError("bad-settings", syntax_error(path, text, exc)) from None
    section = data.get("profiling")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ProfilingError("bad-settings", f"{path}: [profiling] must be a table")
    return SettingsLayer(origin, section, str(path))
