"""Each provider against a real loopback server speaking its wire protocol."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import API_KEY, answer
from llm_fakes import Reply, ScriptedServer, Wire, closed_port_url

from perflsp.llm.prompts import Message
from perflsp.llm.providers import (
    ProviderConfig,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderUnreachable,
    make_provider,
)
from perflsp.llm.providers.base import parse_retry_after
from perflsp.llm.schema import LlmVerdict, response_json_schema

MESSAGES = [Message("system", "be brief"), Message("user", "classify this")]


def provider_for(wire: Wire, url: str, *, stream: bool = True, key: str | None = API_KEY):
    config = ProviderConfig(kind=wire.kind, base_url=url, model="fake-model", stream=stream)
    return make_provider(config, key)


def schema_for(wire: Wire) -> dict:
    return response_json_schema("openai" if wire.kind == "openai" else "generic")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "document"])
async def test_valid_answer_and_wire_format(wire: Wire, server: ScriptedServer, stream: bool):
    server.push(wire.reply(answer(), stream=stream))
    provider = provider_for(wire, server.url, stream=stream)
    try:
        completion = await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()

    assert LlmVerdict.model_validate_json(completion.text).verdict == "bandwidth"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == wire.usage
    (request,) = server.requests
    body = request.json
    assert body["model"] == "fake-model" and body["stream"] is stream
    if wire.kind == "openai":
        assert request.path == "/chat/completions"
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        jsonschema.Draft202012Validator.check_schema(fmt["json_schema"]["schema"])
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        if stream:
            assert body["stream_options"] == {"include_usage": True}
    elif wire.kind == "ollama":
        assert request.path == "/api/chat"
        assert body["format"]["properties"]["verdict"]["enum"] == ["compute", "bandwidth", "latency"]
        assert body["options"]["num_predict"] > 0
    else:
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == API_KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
        assert body["system"] == "be brief"
        assert [m["role"] for m in body["messages"]] == ["user"]
        (tool,) = body["tools"]
        assert body["tool_choice"] == {"type": "tool", "name": tool["name"]}
        assert tool["input_schema"]["required"] == ["verdict", "confidence", "rationale", "factors", "proposals"]
        assert body["max_tokens"] > 0


async def test_requests_reuse_one_keep_alive_connection(wire: Wire, server: ScriptedServer):
    server.push(wire.reply(answer()), wire.reply(answer("compute")))
    provider = provider_for(wire, server.url)
    try:
        first = await provider.complete_json(MESSAGES, schema_for(wire))
        second = await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert json.loads(first.text)["verdict"] == "bandwidth"
    assert json.loads(second.text)["verdict"] == "compute"
    assert len({r.client_port for r in server.requests}) == 1


async def test_stream_text_yields_chunks_in_order(wire: Wire, server: ScriptedServer):
    text = "The kernel is **bandwidth-bound**: L4 loads two floats per FMA."
    server.push(wire.reply(text, tool=False))
    provider = provider_for(wire, server.url)
    try:
        pieces = [p async for p in provider.stream_text(MESSAGES)]
    finally:
        await provider.aclose()
    chunks = [p for p in pieces if isinstance(p, str)]
    assert len(chunks) >= 2 and "".join(chunks) == text
    assert any(not isinstance(p, str) and p.total_tokens > 0 for p in pieces)
    assert "response_format" not in server.requests[0].json
    assert "format" not in server.requests[0].json and "tools" not in server.requests[0].json


async def test_connection_cut_mid_stream_is_a_protocol_error(wire: Wire, server: ScriptedServer):
    server.push(wire.reply(answer(), truncate=True))
    provider = provider_for(wire, server.url)
    try:
        with pytest.raises(ProviderProtocolError, match="truncated") as info:
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert info.value.retryable


async def test_stream_without_end_marker_is_a_protocol_error(wire: Wire, server: ScriptedServer):
    server.push(wire.reply(answer(), end=False))
    provider = provider_for(wire, server.url)
    try:
        with pytest.raises(ProviderProtocolError, match="end marker"):
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_is_reported(wire: Wire, server: ScriptedServer, status: int):
    server.push(wire.error(status, "slow down", {"Retry-After": "7"}))
    provider = provider_for(wire, server.url)
    try:
        with pytest.raises(ProviderHTTPError) as info:
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert info.value.status == status and info.value.retryable
    assert info.value.retry_after_s == 7.0
    assert "slow down" in info.value.message


async def test_server_error_and_auth_error(wire: Wire, server: ScriptedServer):
    server.push(wire.error(500, "internal"), wire.error(401, "invalid key"))
    provider = provider_for(wire, server.url, key=None)
    try:
        with pytest.raises(ProviderHTTPError) as first:
            await provider.complete_json(MESSAGES, schema_for(wire))
        with pytest.raises(ProviderHTTPError) as second:
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert first.value.retryable and "HTTP 500" in first.value.message
    assert not second.value.retryable and "HTTP 401" in second.value.message
    assert "no API key" in second.value.message


async def test_connection_refused(wire: Wire):
    provider = provider_for(wire, closed_port_url())
    try:
        with pytest.raises(ProviderUnreachable, match="cannot connect"):
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()


async def test_redirect_is_not_followed_and_key_stays_home(
    wire: Wire, server: ScriptedServer, bystander: ScriptedServer
):
    server.push(Reply(307, {"Location": f"{bystander.url}/steal"}))
    provider = provider_for(wire, server.url)
    try:
        with pytest.raises(ProviderHTTPError, match="redirect"):
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert bystander.requests == []


async def test_error_body_echoing_the_key_is_masked(wire: Wire, server: ScriptedServer):
    server.push(wire.error(401, f"key {API_KEY} is not valid"))
    provider = provider_for(wire, server.url)
    try:
        with pytest.raises(ProviderHTTPError) as info:
            await provider.complete_json(MESSAGES, schema_for(wire))
    finally:
        await provider.aclose()
    assert API_KEY not in info.value.message and API_KEY not in str(info.value)


def test_key_from_environment_and_never_in_repr(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", API_KEY)
    config = ProviderConfig(kind="openai", base_url="http://127.0.0.1:9", model="m", api_key_env="MY_LLM_KEY")
    provider = make_provider(config)
    assert provider.has_api_key
    assert API_KEY not in repr(provider._api_key) and API_KEY not in repr(config)
    monkeypatch.delenv("MY_LLM_KEY")
    assert not make_provider(config).has_api_key


def test_retry_after_forms():
    import httpx

    assert parse_retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert parse_retry_after(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), now=1445412470.0) == 10.0
    assert parse_retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
