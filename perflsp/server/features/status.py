"""`perflsp/status`: what the editor's status bar shows (sent after startup and every
configuration change; also returned by the `perflsp.status` command)."""

from __future__ import annotations

from typing import Any

from perflsp import __version__
from perflsp.server import engine_adapter as engine


def payload(ls: Any) -> dict[str, Any]:
    state = ls.workspace_state
    if state is None:
        return {"version": __version__, "ready": False}
    config = state.folders[0].config or state.config_for(state.folders[0].uri)
    llm_state, llm_reason = llm_status(config)
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
        "profiling": profiling_state,
        "profilingReason": profiling_reason,
        "lints": engine.lints_available(),
        "diagnostics": "pull" if ls.pull_mode else "push",
        "configErrors": list(state.last_problems),
        "ignoredSettings": list(config.ignored),
        "openDocuments": len(ls.workers),
    }


def llm_status(config: Any) -> tuple[str, str]:
    """("off" | "ready", reason): the LLM endpoint policy applied to the settings' origins."""
    from perflsp.llm.config import decide

    origins = {path.split(".", 1)[1]: origin.llm_origin() for path, origin in config.origins.items() if path.startswith("llm.")}
    decision = decide(config.settings.llm, origins, workspace_trusted=config.workspace_trusted)
    if not decision.allowed:
        return "off", decision.reason
    # The advisor itself is wired by the LLM integration; until then it is configured, not running.
    return "off", f"configured ({decision.reason}); the editor integration of the LLM advisor is not enabled in this build"


def profiling_status(config: Any) -> tuple[str, str]:
    settings = config.settings.profiling
    if not settings.enabled:
        ignored = [i for i in config.ignored if "profiling.enabled" in i]
        if ignored:
            return "off", ignored[0]
        return "off", "profiling is off (perflsp.profiling.enabled)"
    if not settings.build_command and settings.run_command == ["{exe}", "{args}"]:
        return "off", "profiling is on but perflsp.profiling.buildCommand is not set"
    return "ready", "profiling is enabled; run it with `perflsp profile run`"
