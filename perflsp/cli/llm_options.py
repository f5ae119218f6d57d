"""LLM options and settings shared by the commands that ask a model (`explain`, `eval --llm`).

    @click.command()
    @llm_options
    def cmd(..., llm: LlmFlags):
        choice = choose_advisor(llm)       # LlmChoice: an advisor, or why there is none

Settings, later ones winning: the `[llm]` table of the user config file ($PERFLSP_CONFIG or
<user config dir>/perflsp/config.toml), the `[llm]` table of WORKSPACE/.perflsp.toml, then the
flags. The endpoint policy (`perflsp.llm.privacy`) applies to where each value came from: a
workspace file may choose only a loopback endpoint unless --trust-workspace is given. Giving
--model, --provider or --base-url turns the advisor on. The API key comes from the environment
variable named by --api-key-env / `api_key_env` (default OPENAI_API_KEY or ANTHROPIC_API_KEY; none
for Ollama), never from a file or a flag.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from perflsp.cli.output import fail, warn
from perflsp.llm.cache import CACHE_DIR_ENV, CACHE_FILE_NAME

WORKSPACE_FILE = ".perflsp.toml"


@dataclass(frozen=True, slots=True)
class LlmFlags:
    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float | None = None
    no_cache: bool = False
    cache_dir: str | None = None
    config_path: Path | None = None
    workspace: Path | None = None
    trust_workspace: bool = False


@dataclass(frozen=True, slots=True)
class LlmChoice:
    advisor: Any  # an Advisor that may be asked, or None
    reason: str | None = None  # why there is none
    failed: bool = False  # an LLM is configured but cannot work (no API key): not a "not configured"


_OPTIONS = [
    click.option("--provider", type=click.Choice(["openai", "ollama", "anthropic"]),
                 help="LLM wire protocol (turns the LLM on)."),
    click.option("--base-url", metavar="URL", help="LLM endpoint, e.g. http://127.0.0.1:11434 (turns the LLM on)."),
    click.option("--model", metavar="NAME", help="Model name (turns the LLM on)."),
    click.option("--api-key-env", metavar="VAR", help="Environment variable that holds the API key."),
    click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), metavar="S",
                 help="Seconds one LLM answer may take (default 90)."),
    click.option("--no-cache", is_flag=True, help="Neither read nor write the LLM answer cache."),
    click.option("--cache-dir", type=click.Path(file_okay=False), envvar=CACHE_DIR_ENV,
                 help=f"Folder of the LLM answer cache (env {CACHE_DIR_ENV})."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                 help="User config file (default: $PERFLSP_CONFIG or the user config dir)."),
    click.option("--workspace", type=click.Path(file_okay=False, path_type=Path),
                 help="Folder whose .perflsp.toml applies (default: the current directory)."),
    click.option("--trust-workspace", is_flag=True,
                 help="Let the workspace's .perflsp.toml choose a remote LLM endpoint."),
]
_FIELDS = [name for name in LlmFlags.__dataclass_fields__]


def llm_options(command):
    """Add the LLM options to a click command; it receives them as one `llm: LlmFlags` argument."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        flags = LlmFlags(**{name: kwargs.pop(name) for name in _FIELDS})
        return command(*args, llm=flags, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def choose_advisor(flags: LlmFlags) -> LlmChoice:
    """The advisor when an LLM may be asked; else why not (not configured, refused by the endpoint
    policy, or configured without its API key). Bad settings files end the command (exit 2)."""
    from perflsp.analysis.engine import ENGINE_VERSION
    from perflsp.llm.cache import VerdictCache
    from perflsp.llm.config import create_advisor
    from perflsp.llm.privacy import SettingOrigin
    from perflsp.llm.settings_files import (
        LlmLayer,
        LlmSettingsError,
        llm_layer_from_toml,
        resolve_llm_settings,
    )
    from perflsp.resources import user_config_path

    layers: list[LlmLayer] = []
    workspace = flags.workspace or Path.cwd()
    try:
        for file, origin in ((flags.config_path or user_config_path(), SettingOrigin.USER),
                             (workspace / WORKSPACE_FILE, SettingOrigin.WORKSPACE_FILE)):
            layer = llm_layer_from_toml(file, origin)
            if layer is not None:
                layers.append(layer)
    except LlmSettingsError as exc:
        fail(str(exc))
    given: dict[str, Any] = {
        name: value for name in ("provider", "base_url", "model", "api_key_env")
        if (value := getattr(flags, name)) is not None
    }
    if given.keys() & {"provider", "base_url", "model"}:
        given["enabled"] = True
    if flags.timeout_s is not None:
        given["timeout_s"] = flags.timeout_s
    if flags.no_cache:
        given["cache_enabled"] = False
    layers.append(LlmLayer(SettingOrigin.COMMAND_LINE, given, "command line"))
    resolved = resolve_llm_settings(layers)
    for problem in resolved.problems:
        warn(problem)
    settings = resolved.settings
    cache = None
    if settings.cache_enabled and flags.cache_dir:
        cache = VerdictCache(Path(flags.cache_dir) / CACHE_FILE_NAME, max_bytes=int(settings.cache_max_mb * 2**20))
    advisor, decision = create_advisor(settings, resolved.origins, workspace_trusted=flags.trust_workspace,
                                       cache=cache, engine_version=ENGINE_VERSION)
    if not decision.allowed or advisor.provider is None:
        reason = decision.reason
        if not flags.trust_workspace and "untrusted workspace" in reason:
            reason += " (pass --trust-workspace to use it)"
        return LlmChoice(None, reason)
    if decision.warning:
        warn(decision.warning)
    provider = advisor.provider
    if not decision.loopback and provider.kind != "ollama" and not provider.has_api_key:
        asyncio.run(advisor.aclose())
        variable = provider.api_key_env or "the API key variable"
        hint = "" if flags.api_key_env else " (or name another with --api-key-env)"
        return LlmChoice(None, f"no API key for {provider.endpoint}: set the environment variable {variable}{hint}",
                         failed=True)
    return LlmChoice(advisor)


def how_to_configure(reason: str | None, what: str = "an LLM explanation") -> str:
    """One line: why no LLM is used, and how to configure one."""
    from perflsp.resources import user_config_path

    return (f"LLM not used: {reason}. For {what}, set `enabled = true`, `provider` and `model` (and "
            f"`base_url`) in the [llm] table of {user_config_path()}, or pass --model (with "
            "--provider/--base-url); the API key is read from the environment (OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY or --api-key-env)")
