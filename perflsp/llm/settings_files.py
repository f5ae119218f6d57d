"""LLM settings from the places a command-line user keeps them, each value with its origin.

    layers = [llm_layer_from_toml(user_config_path(), SettingOrigin.USER),
              llm_layer_from_toml(workspace / ".perflsp.toml", SettingOrigin.WORKSPACE_FILE),
              LlmLayer(SettingOrigin.COMMAND_LINE, {"model": "..."}, "command line")]
    resolved = resolve_llm_settings(layers)     # later layers win
    advisor, decision = create_advisor(resolved.settings, resolved.origins, workspace_trusted=...)

The `[llm]` table takes the fields of `LlmSettings` in snake_case or camelCase (`base_url` or
`baseUrl`), as `.perflsp.toml` does for the editor. Origins travel with the values so the endpoint
policy (`perflsp.llm.privacy`) can refuse a repository's file that points the advisor at a remote
host. Unknown keys and invalid values are reported and skipped, never fatal: one typo must not
silently switch the whole table off, nor stop the command.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_snake

from perflsp.llm.config import LlmSettings
from perflsp.llm.privacy import SettingOrigin
from perflsp.source.toml_text import syntax_error, where

TABLE = "llm"


class LlmSettingsError(ValueError):
    """A settings file that cannot be read or parsed; the message names the file."""


@dataclass(frozen=True, slots=True)
class LlmLayer:
    origin: SettingOrigin
    values: Mapping[str, Any]  # the `[llm]` table, snake_case or camelCase keys
    source: str = ""  # where it came from, for messages: a path, "command line"
    text: str | None = None  # the file as written (messages name the line of a key)


@dataclass(frozen=True, slots=True)
class ResolvedLlmSettings:
    settings: LlmSettings
    origins: dict[str, SettingOrigin] = field(default_factory=dict)  # field -> origin of its value
    problems: tuple[str, ...] = ()  # "<source>: llm.<key> ignored: <why>"
    sources: dict[str, str] = field(default_factory=dict)  # field -> where its value came from


def llm_layer_from_toml(path: Path, origin: SettingOrigin) -> LlmLayer | None:
    """The `[llm]` table of a TOML file; None when the file or the table does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise LlmSettingsError(f"{path}: is a directory, not a settings file") from None
    except OSError as exc:
        raise LlmSettingsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise LlmSettingsError(f"{path}: not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LlmSettingsError(syntax_error(path, text, exc)) from None
    table = data.get(TABLE)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise LlmSettingsError(f"{where(path, text, TABLE)}: [{TABLE}] must be a table")
    return LlmLayer(origin, table, str(path), text)


def resolve_llm_settings(layers: Sequence[LlmLayer]) -> ResolvedLlmSettings:
    """Merge `layers` (later ones win), keeping each value's origin; skip what is invalid."""
    merged: dict[str, Any] = {}
    origins: dict[str, SettingOrigin] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    for layer in layers:
        source = layer.source or layer.origin.value
        for key, value in layer.values.items():
            place = where(source, layer.text, TABLE, str(key)) if layer.text is not None else source
            name = to_snake(str(key))
            if name not in LlmSettings.model_fields:
                problems.append(f"{place}: {TABLE}.{key} ignored: unknown setting")
                continue
            try:
                LlmSettings.model_validate({name: value})
            except ValidationError as exc:
                why = "; ".join(error["msg"] for error in exc.errors())
                problems.append(f"{place}: {TABLE}.{key} ignored: invalid value ({why})")
                continue
            merged[name] = value
            origins[name] = layer.origin
            sources[name] = source
    return ResolvedLlmSettings(LlmSettings.model_validate(merged), origins, tuple(problems), sources)
