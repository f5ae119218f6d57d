"""Model text is data: control sequences stripped and answers bounded on every path (issue 15)."""

from __future__ import annotations

import re

import pytest
from conftest import API_KEY
from llm_fakes import Reply, ScriptedServer, Wire

from perflsp.llm.prompts import Message
from perflsp.llm.providers import ProviderConfig, ProviderProtocolError, make_provider
from perflsp.llm.sanitize import StreamCleaner, char_limit, clean
from perflsp.llm.schema import LlmVerdict, response_json_schema

MESSAGES = [Message("system", "be brief"), Message("user", "explain")]
HOSTILE = ("a\x1b[31mred\x1b[0m b\x1b]0;title\x07c\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ d\x9b2Je\x00f\x07g\r\n"
           "h\ti\u202ej\x85k\x1bPdcs\x1b\\l\x1b(Bm\x1b]52;c;Y2xpcA==\x07n")
CLEAN = "ared bclink defg\nh\tijklmn"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_clean_strips_sequences_and_controls_but_keeps_newlines_and_tabs():
    assert clean(HOSTILE) == CLEAN
    assert clean("plain text\n\twith tab") == "plain text\n\twith tab"
    assert clean("\x1b[31") == "[31"  # an unterminated sequence loses its ESC: inert


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_stream_cleaner_equals_clean_whatever_the_chunking(size: int):
    cleaner = StreamCleaner()
    out = "".join(cleaner.feed(HOSTILE[i:i + size]) for i in range(0, len(HOSTILE), size)) + cleaner.flush()
    assert out == CLEAN


def test_stream_cleaner_is_bounded():
    cleaner = StreamCleaner(limit=10)
    out = cleaner.feed("x" * 8) + cleaner.feed("\x1b[1m" + "y" * 8) + cleaner.feed("z" * 100)
    assert out == "x" * 8 + "yy" and cleaner.truncated and cleaner.flush() == ""
    assert char_limit(1500) == 9000


def test_the_verdict_schema_cleans_every_string():
    verdict = LlmVerdict.model_validate({
        "verdict": "compute", "confidence": 0.5, "rationale": "\x1b]0;x\x07Tiled\u202e pairs\x1b[2J",
        "factors": [{"text": "\x9b31mfactor", "line": 2}],
        "proposals": {"code_changes": ["use \x1b[1mshared\x1b[0m memory"]},
    })
    assert verdict.rationale == "Tiled pairs" and verdict.factors[0].text == "factor"
    assert verdict.proposals.code_changes == ["use shared memory"]


def provider(wire: Wire, url: str, *, stream: bool = True, max_tokens: int = 1500):
    config = ProviderConfig(kind=wire.kind, base_url=url, model="fake-model", stream=stream,
                            max_output_tokens=max_tokens)
    return make_provider(config, API_KEY)


async def test_streamed_text_is_cleaned_and_cut_at_the_token_limit(wire: Wire, server: ScriptedServer):
    server.push(wire.reply(HOSTILE + " word" * 50_000))
    p = provider(wire, server.url, max_tokens=64)
    try:
        pieces = [x async for x in p.stream_text(MESSAGES) if isinstance(x, str)]
    finally:
        await p.aclose()
    text = "".join(pieces)
    assert text.startswith(CLEAN) and not CONTROL.search(text)
    body, note = text.split("(perflsp:", 1)
    assert len(body.rstrip()) <= char_limit(64) and "cut off after 384 characters" in note


async def test_a_json_answer_is_cut_at_the_token_limit(wire: Wire, server: ScriptedServer):
    server.push(wire.reply('{"verdict": "compute", "rationale": "' + "x" * 100_000 + '"}'))
    p = provider(wire, server.url, max_tokens=64)
    try:
        completion = await p.complete_json(MESSAGES, response_json_schema("generic"))
    finally:
        await p.aclose()
    assert len(completion.text) == char_limit(64) and completion.finish_reason == "length"


async def test_plain_invalid_json_is_reported_as_invalid_json(server: ScriptedServer):
    wire = Wire("openai")
    server.push(Reply(200, {"Content-Type": "application/json"}, body=b'{"choices": [ not json'))
    server.push(Reply(200, {"Content-Type": "text/event-stream"}, body=b'{"choices": [ not json\n'))
    for _ in range(2):
        p = provider(wire, server.url)
        try:
            with pytest.raises(ProviderProtocolError, match="invalid JSON") as info:
                await p.complete_json(MESSAGES, response_json_schema("openai"))
        finally:
            await p.aclose()
        assert "end marker" not in info.value.message


async def test_error_messages_from_the_endpoint_are_cleaned(server: ScriptedServer):
    wire = Wire("openai")
    server.push(wire.error(400, "bad \x1b]0;owned\x07request\x1b[2J"))
    p = provider(wire, server.url)
    try:
        with pytest.raises(Exception) as info:
            await p.complete_json(MESSAGES, response_json_schema("openai"))
    finally:
        await p.aclose()
    assert "bad request" in str(info.value) and not CONTROL.search(str(info.value))
