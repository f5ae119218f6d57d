"""Endpoint policy: off by default, remote hosts only from user-controlled or trusted settings."""

from __future__ import annotations

import pytest

from perflsp.llm.advisor import AdvisorState
from perflsp.llm.config import LlmSettings, create_advisor
from perflsp.llm.privacy import (
    SettingOrigin as O,
)
from perflsp.llm.privacy import (
    Sourced,
    check_endpoint,
    check_llm_settings,
    is_loopback_url,
)


@pytest.mark.parametrize(
    "url, loopback",
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.9.9.9", True),
        ("http://localhost:11434", True),
        ("http://LOCALHOST.:11434", True),
        ("http://[::1]:8080", True),
        ("http://[::ffff:127.0.0.1]:8080", True),
        ("http://localhost.evil.com", False),
        ("http://127.0.0.1.nip.io", False),
        ("http://0.0.0.0:8000", False),
        ("http://10.0.0.5:8000", False),
        ("https://api.openai.com/v1", False),
        ("not a url", False),
    ],
)
def test_loopback_detection(url: str, loopback: bool):
    assert is_loopback_url(url) is loopback


def test_loopback_is_allowed_from_anywhere():
    for origin in O:
        decision = check_endpoint("http://127.0.0.1:8000/v1", origin, workspace_trusted=False)
        assert decision.allowed and decision.loopback


@pytest.mark.parametrize("origin", [O.WORKSPACE, O.WORKSPACE_FILE])
def test_remote_from_untrusted_workspace_is_denied(origin: O):
    decision = check_endpoint("https://llm.example.com/v1", origin, workspace_trusted=False)
    assert not decision.allowed and "untrusted workspace" in decision.reason
    assert check_endpoint("https://llm.example.com/v1", origin, workspace_trusted=True).allowed


@pytest.mark.parametrize("origin", [O.USER, O.COMMAND_LINE, O.ENVIRONMENT, O.DEFAULT])
def test_remote_from_user_controlled_origins_is_allowed(origin: O):
    assert check_endpoint("https://api.anthropic.com", origin, workspace_trusted=False).allowed


def test_malformed_and_credentialed_urls_are_denied():
    assert "must be an http" in check_endpoint("ftp://x", O.USER, workspace_trusted=True).reason
    assert "credentials" in check_endpoint("https://u:p@h.com", O.USER, workspace_trusted=True).reason
    assert not check_endpoint("http://h.com:99999", O.USER, workspace_trusted=True).allowed


def test_plain_http_remote_warns():
    decision = check_endpoint("http://gpu-box:8000/v1", O.USER, workspace_trusted=False)
    assert decision.allowed and "unencrypted" in decision.warning


def test_whole_configuration():
    remote = Sourced("https://api.openai.com/v1", O.USER)
    assert not check_llm_settings(Sourced(False), remote, workspace_trusted=True).allowed
    assert check_llm_settings(Sourced(True, O.USER), remote, workspace_trusted=False).allowed
    # a repository switching the advisor on for a remote host the user configured
    denied = check_llm_settings(Sourced(True, O.WORKSPACE_FILE), remote, workspace_trusted=False)
    assert not denied.allowed and "enabled by workspace-file" in denied.reason
    # ... is fine for a local server
    local = Sourced("http://127.0.0.1:11434", O.WORKSPACE_FILE)
    assert check_llm_settings(Sourced(True, O.WORKSPACE_FILE), local, workspace_trusted=False).allowed
    # a repository choosing which secret to send
    key = Sourced("AWS_SECRET_ACCESS_KEY", O.WORKSPACE_FILE)
    assert not check_llm_settings(Sourced(True, O.USER), remote, key, workspace_trusted=False).allowed
    assert check_llm_settings(Sourced(True, O.USER), remote, key, workspace_trusted=True).allowed


async def test_create_advisor_is_off_by_default_and_when_denied():
    advisor, decision = create_advisor(LlmSettings())
    assert not decision.allowed and advisor.status.state is AdvisorState.OFF
    assert (await advisor.ask(_question())).fallback_reason == decision.reason

    settings = LlmSettings(enabled=True, model="m", base_url="https://llm.example.com/v1")
    advisor, decision = create_advisor(settings, {"base_url": O.WORKSPACE_FILE, "enabled": O.USER})
    assert not decision.allowed and advisor.provider is None

    advisor, decision = create_advisor(LlmSettings(enabled=True, provider="ollama"))
    assert not decision.allowed and "model is not set" in decision.reason


async def test_create_advisor_for_a_local_server(tmp_path):
    from perflsp.llm.cache import VerdictCache

    settings = LlmSettings(enabled=True, provider="ollama", model="qwen2.5-coder")
    advisor, decision = create_advisor(settings, {"enabled": O.WORKSPACE_FILE},
                                       cache=VerdictCache(tmp_path / "c.sqlite3"))
    try:
        assert decision.allowed and decision.loopback
        assert advisor.status.state is AdvisorState.READY
        assert advisor.provider.endpoint == "http://127.0.0.1:11434"
        assert advisor.provider.label == "LLM: qwen2.5-coder"
    finally:
        await advisor.aclose()


def _question():
    from conftest import make_question

    return make_question()
