"""`perflsp/status`: what the editor's status bar shows (sent after startup and every
configuration change; also returned by the `perflsp.status` command)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perflsp import __version__
from perflsp.server import engine_adapter as engine
from perflsp.server.json_types import JsonObject

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ServerContext


def payload(ls: ServerContext) -> JsonObject:
    """The `perflsp/status` params (camelCase, as on the wire); before `initialized` only `version`, `ready`."""
    state = ls.workspace_state
    if state is None:
        return {"version": __version__, "ready": False}
    config = state.folders[0].config or state.config_for(state.folders[0].uri)
    llm_state, llm_reason, llm_label = ls.advice.status(config)
    ls.advice.status_sent(llm_state, llm_reason)
    profiling_state, profiling_reason = profiling_status(config)
    return {
        "version": __version__,
        "engine": engine.ENGINE_VERSION,
        "ready": True,
        "enabled": config.settings.enable,
        "gpus": [{"id": g.id, "name": g.name} for g in config.gpus],
        "trusted": config.workspace_trusted,
        "llm": llm_state,
        "llmReason": llm_reason,
        "llmLabel": llm_label,
        "profiling": profiling_state,
        "profilingReason": profiling_reason,
        "lints": engine.lints_available(),
        "diagnostics": "pull" if ls.pull_mode else "push",
        "configErrors": list(state.last_problems),
        "ignoredSettings": list(config.ignored),
        "openDocuments": len(ls.workers),
        "skippedDocuments": [{"uri": uri, "reason": reason} for uri, reason in ls.refused.items()],
    }


def profiling_status(config: ResolvedConfig) -> tuple[str, str]:
    settings = config.settings.profiling
    if not settings.enabled:
        ignored = [i for i in config.ignored if "profiling.enabled" in i]
        if ignored:
            return "off", ignored[0]
        return "off", "profiling is off (perflsp.profiling.enabled)"
    if not settings.build_command and settings.run_command == ["{exe}", "{args}"]:
        return "off", "profiling is on but perflsp.profiling.buildCommand is not set"
    return "ready", "profiling is enabled: the code lens and `perflsp.profileKernel` run it"
