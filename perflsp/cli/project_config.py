"""What `perflsp check` takes from a project's `.perflsp.toml`: GPUs, user GPUs, `[rules]` and
the program's arguments.

    gpus = ["h100", "rtx3080"]          # default targets of `perflsp check` (a string works too)
    [rules]
    "occupancy/low" = "off"             # re-level or silence a code
    [[gpu]]                             # user GPUs, same schema as `--gpus-file`
    id = "my-card" ...
    [profiling]
    args = ["-n", "4096"]               # the program's arguments: folded where main() parses argv

`args` is shared with profiling (which runs the program with them); `check` only folds them into
the analysis, so reading them here runs nothing. Other keys of `[profiling]` and other tables
(`[llm]`, ...) belong to other commands and are ignored here; none of the keys read here can run
anything or send code anywhere.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflsp.analysis.rules import RuleConfigError, parse_rule_levels
from perflsp.source.toml_text import syntax_error, where

CONFIG_NAME = ".perflsp.toml"


class ProjectConfigError(ValueError):
    """The configuration file is unreadable or holds invalid values (one line, names the file and
    the line: `path:LINE: ...`)."""


@dataclass(slots=True)
class ProjectConfig:
    path: Path | None = None
    gpus: list[str] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)
    gpu_tables: list[dict[str, Any]] = field(default_factory=list)
    args: tuple[str, ...] | None = None  # `[profiling] args`: the program's arguments (None: not set)
    compile: bool = True  # `[compile] enabled`: compile the device code for its counts (a project may turn it off)
    text: str | None = None  # the file as written (for the line of a value in a message)

    def where(self, *keys: str | int) -> str:
        """`path:LINE` of a key of the file, for a message (`settings` without a file)."""
        return where(self.path, self.text, *keys) if self.path is not None else "settings"


def load_project_config(explicit: Path | None, cwd: Path | None = None) -> ProjectConfig:
    """`explicit` (must exist) or `.perflsp.toml` in `cwd` (optional)."""
    if explicit is None:
        candidate = (cwd or Path.cwd()) / CONFIG_NAME
        if not candidate.is_file():
            return ProjectConfig()
        explicit = candidate
    try:
        text = explicit.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProjectConfigError(f"{explicit}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ProjectConfigError(f"{explicit}: not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProjectConfigError(syntax_error(explicit, text, exc)) from None
    config = ProjectConfig(path=explicit, text=text)
    gpus = data.get("gpus", [])
    if isinstance(gpus, str):
        gpus = [gpus]
    if not isinstance(gpus, list) or not all(isinstance(g, str) and g.strip() for g in gpus):
        raise ProjectConfigError(f"{config.where('gpus')}: `gpus` must be a GPU name or a list of names (got {gpus!r})")
    config.gpus = [g.strip() for g in gpus]
    rules = data.get("rules", {})
    if not isinstance(rules, dict):
        raise ProjectConfigError(f"{config.where('rules')}: `[rules]` must be a table of code = level")
    for code, level in rules.items():  # (one at a time: the message names the line of the first bad one)
        try:
            parse_rule_levels({code: level})
        except RuleConfigError as exc:
            raise ProjectConfigError(f"{config.where('rules', code)}: [rules]: {exc}") from None
    config.rules = dict(parse_rule_levels(rules))
    tables = data.get("gpu", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ProjectConfigError(f"{config.where('gpu')}: `gpu` must be an array of tables ([[gpu]])")
    config.gpu_tables = tables
    profiling = data.get("profiling", {})
    if not isinstance(profiling, dict):
        raise ProjectConfigError(f"{config.where('profiling')}: `[profiling]` must be a table")
    if "args" in profiling:
        args = profiling["args"]
        if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
            raise ProjectConfigError(f"{config.where('profiling', 'args')}: [profiling] `args` must be a list of "
                                     f"strings (got {args!r})")
        config.args = tuple(args)
    compiling = data.get("compile", {})
    if not isinstance(compiling, dict):
        raise ProjectConfigError(f"{config.where('compile')}: `[compile]` must be a table")
    enabled = compiling.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ProjectConfigError(f"{config.where('compile', 'enabled')}: [compile] `enabled` must be true or false (got {enabled!r})")
    config.compile = enabled
    return config
