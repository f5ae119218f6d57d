"""API keys never appear in log records, whichever logger writes them."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from perflsp.llm.secrets import MASK, redact, register_secret, resolve_api_key

SECRET = "sk-secret-for-redaction-0123456789"


def test_resolve_precedence(monkeypatch):
    monkeypatch.setenv("K1", "from-environment-123")
    assert resolve_api_key("explicit-value-123", "K1").get_secret_value() == "explicit-value-123"
    assert resolve_api_key(SecretStr("secret-store-123"), "K1").get_secret_value() == "secret-store-123"
    assert resolve_api_key(None, "K1").get_secret_value() == "from-environment-123"
    assert resolve_api_key(None, "UNSET_VARIABLE_XYZ") is None
    assert resolve_api_key("", None) is None
    assert "from-environment-123" not in repr(resolve_api_key(None, "K1"))


def test_registered_secret_is_masked_in_every_logger(caplog):
    register_secret(SECRET)
    caplog.set_level(logging.DEBUG)
    for name in ("perflsp.llm", "httpx", "httpcore.http11", "some.library"):
        logging.getLogger(name).debug("headers: %s", {"authorization": f"Bearer {SECRET}"})
    logging.getLogger("perflsp").info(f"inline {SECRET} in the format string")
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        logging.getLogger("perflsp.llm").exception("request failed")
    assert len(caplog.records) == 6
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in (record.exc_text or "")
    assert MASK in caplog.records[0].getMessage()
    assert SECRET not in caplog.text


def test_short_strings_are_not_treated_as_secrets():
    register_secret("abc")
    assert redact("abc def") == "abc def"
