"""perflsp.explainKernel {uri, kernel, gpu?, quiet?, streamId?} -> {uri, kernel, gpu, markdown, headline, llm,
llmMessage, source}: the static explanation, and the LLM's streamed one when the advisor is on."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.server.features.commands.common import estimate_gpu, kernel_question, kernel_report, progress_token
from perflsp.server.features.common import kernel_name
from perflsp.server.features.hover import kernel_markdown
from perflsp.server.json_types import CommandArgument, JsonObject
from perflsp.server.progress import progress

if TYPE_CHECKING:
    from perflsp.server.context import ServerContext


STREAM_INTERVAL_S = 0.2  # at most this often a streamed explanation is sent to the client


async def explain_kernel(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    """The static explanation, and the LLM's streamed one when the advisor is on.

    With `streamId`, partial Markdown goes to the client as `perflsp/explanation` notifications
    `{id, uri, kernel, markdown, done}` while the model writes; the result is the whole text.
    """
    snap, report = await kernel_report(ls, arg)
    name = kernel_name(report.kernel)
    _estimate, gpu = estimate_gpu(snap, report, arg.get("gpu"))
    static_md = kernel_markdown(report, snap)
    headline = " | ".join(e.headline() for e in report.estimates)
    llm_state, reason, label = ls.advice.status(snap.config)
    advisor = ls.advice.advisor_for(snap.config)
    stream_id = arg.get("streamId")

    def send(markdown: str, done: bool) -> None:
        if stream_id is not None:
            ls.notify("perflsp/explanation", {"id": stream_id, "uri": snap.uri, "kernel": name,
                                                        "markdown": markdown, "done": done})

    if advisor is None:
        markdown = static_md + "\n\n---\n\n" + f"*LLM advisor: {llm_state} — {reason}. This explanation is the static engine's.*"
        send(markdown, True)
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Info, message=f"{name}: {headline}. (LLM advisor {llm_state}: {reason})"))
        return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
                "llm": llm_state, "llmMessage": reason, "source": "static"}

    from perflsp.llm.advisor import AdvisorUnavailable
    from perflsp.llm.sanitize import InertMarkdown, inert_markdown, inert_text

    question = await kernel_question(ls, snap.uri, name, gpu, "explain")
    head = (f"## {label} on {gpu.name}\n\n")
    foot = (f"\n\n*{label}'s explanation; its line numbers count from the kernel's first line "
            f"(line {question.first_line} of the file).*\n\n---\n\n## Static estimate\n\n{static_md}")
    # the model's Markdown is shown inert: no image, HTML or link (perflsp.llm.sanitize)
    inert = InertMarkdown()
    shown: list[str] = []  # the inert Markdown of the model's complete lines so far
    failure: str | None = None
    loop = asyncio.get_running_loop()
    last_sent = 0.0
    async with progress(ls, f"perflsp: {label} explains {name}", progress_token(arg)) as bar:
        send(head + "*waiting for the model…*", False)
        try:
            async for chunk in advisor.explain_stream(question):
                shown.append(inert.feed(chunk))
                now = loop.time()
                if now - last_sent >= STREAM_INTERVAL_S:
                    last_sent = now
                    so_far = "".join(shown) + inert.preview()
                    bar.report(f"{len(so_far)} characters")
                    send(head + so_far, False)
        except AdvisorUnavailable as exc:
            failure = str(exc)
    shown.append(inert.flush())
    text = "".join(shown).strip()
    if failure is not None or not text:
        failure = failure or "the model's answer was empty"
        markdown = (static_md + "\n\n---\n\n" + (f"*{label} gave no explanation: {inert_markdown(failure)}. "
                                                 "This explanation is the static engine's.*"))
        if text:
            markdown = head + text + "\n\n*(cut off: " + inert_markdown(failure) + ")*" + foot
        send(markdown, True)
        if not arg.get("quiet"):
            ls.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=inert_text(f"{name}: {headline}. ({label} gave no explanation: {failure})")))
        return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
                "llm": "failing", "llmMessage": failure, "source": "static", "label": label}
    markdown = head + text + foot
    send(markdown, True)
    if not arg.get("quiet"):
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Info,
                                                     message=inert_text(f"{name}: {headline}. ({label} explained it)")))
    return {"uri": snap.uri, "kernel": name, "gpu": gpu.id, "markdown": markdown, "headline": headline,
            "llm": ls.advice.status(snap.config)[0], "llmMessage": "", "source": "llm", "label": label}



__all__ = ["STREAM_INTERVAL_S", "explain_kernel"]
