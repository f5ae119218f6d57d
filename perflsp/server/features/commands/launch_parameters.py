"""perflsp.askLaunchParameters {uri, kernel, gpu?} -> {uri, kernel, launches, suggestions, source, llm,
actions, rejected}: static block sizes per GPU and the LLM's proposals as validated edits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.kernels.models import CudaFunction
from perflsp.server import engine_adapter as engine
from perflsp.server.features.commands.common import CommandError, estimate_gpu, kernel_question, kernel_report, progress_token
from perflsp.server.features.commands.serialize import json_value
from perflsp.server.features.common import kernel_name
from perflsp.server.json_types import CommandArgument, JsonObject
from perflsp.server.progress import progress

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext
    from perflsp.server.documents import Snapshot
    from perflsp.server.features.proposals import ProposalEdits


async def ask_launch_parameters(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    """Static block-size suggestions per GPU and, with the LLM on, its proposals as validated
    edits (`actions`, each a code action with a WorkspaceEdit) or rejections with the reason."""
    snap, report = await kernel_report(ls, arg)
    kernel = report.kernel
    name = kernel_name(kernel)
    launches = [{"range": site.span.to_json(), "grid": site.grid.text, "block": site.block.text,
                 "gridValue": json_value(site.grid.value), "blockValue": json_value(site.block.value)}
                for site in report.launches]
    suggestions = []
    for gpu in snap.config.gpus:
        block = engine.best_block_for(kernel if isinstance(kernel, CudaFunction) else None, gpu, None)
        suggestions.append({"gpu": gpu.id, "gpuName": gpu.name, "blockSize": block,
                            "basis": "occupancy with 32 registers per thread assumed (no ptxas figures)"})
    result: JsonObject = {"uri": snap.uri, "kernel": name, "launches": launches, "suggestions": suggestions,
                              "source": "static", "actions": [], "rejected": []}
    advisor = ls.advice.advisor_for(snap.config)
    llm_state, reason, label = ls.advice.status(snap.config)
    if advisor is None:
        result["llm"] = {"used": False, "state": llm_state, "reason": reason}
        return result
    label = label or "the LLM"  # (an advisor in use names its model)
    from perflsp.llm.sanitize import inert_text

    _estimate, gpu = estimate_gpu(snap, report, arg.get("gpu"))
    question = await kernel_question(ls, snap.uri, name, gpu, "launch_params")
    async with progress(ls, f"perflsp: asking {label} for launch parameters of {name}", progress_token(arg)):
        answer = await advisor.ask(question)
    if answer.source != "llm":
        result["llm"] = {"used": False, "state": ls.advice.status(snap.config)[0], "label": label,
                         "reason": answer.fallback_reason}
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=inert_text(f"perflsp: {label} proposed nothing for {name}: {answer.fallback_reason}")))
        return result
    from perflsp.server.features.code_actions import code_action_json
    from perflsp.server.features.proposals import describe, proposal_edits

    def build(current: Snapshot) -> tuple[ProposalEdits, list[JsonObject]]:
        found = proposal_edits(current, name, answer.proposals, gpu, label)
        return found, [code_action_json(current, fix) for fix in found.fixes]

    worker = ls.workers.get(snap.uri)
    built = await worker.exclusive(build) if worker is not None else None
    if built is None:
        raise CommandError(f"{snap.uri} was closed")
    found, actions = built
    ls.advice.proposals[(snap.uri, name)] = (question.kernel_hash, gpu, answer.proposals, label)
    result.update({
        "source": "llm",
        "llm": {"used": True, "label": label, "verdict": answer.verdict, "confidence": answer.confidence,
                "rationale": answer.rationale, "proposals": describe(answer.proposals)},
        "actions": actions,
        "rejected": found.rejected,
        "notes": found.notes,
    })
    if not arg.get("quiet"):
        what = "; ".join(f.title for f in found.fixes) or "no applicable edit"
        rejected = f" Rejected: {'; '.join(r['proposal'] + ' (' + r['reason'] + ')' for r in found.rejected)}." \
            if found.rejected else ""
        ls.window_show_message(lsp.ShowMessageParams(
            type=lsp.MessageType.Info,
            message=inert_text(f"perflsp: {label} for {name} on {gpu.name}: {what}.{rejected} "
                               f"The code actions on `{name}` apply it.")))
    return result



__all__ = ["ask_launch_parameters"]
