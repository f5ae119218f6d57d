"""API keys: where they come from, and making sure no log line ever carries one.

Keys come from an explicit value (the editor's secret storage, passed by the client) or from a
named environment variable; they live in `pydantic.SecretStr` so `repr`/`str` show `**********`.
As a second line of defence every key in use is registered with a log-record factory that masks
it in any record from any logger (perflsp, httpx, httpcore, ...), exception text included.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback

from pydantic import SecretStr

MASK = "***"
_MIN_SECRET_LENGTH = 6  # shorter strings would mask ordinary words; real keys are far longer

_lock = threading.Lock()
_secrets: set[str] = set()
_installed = False


def resolve_api_key(explicit: SecretStr | str | None, env_var: str | None) -> SecretStr | None:
    """The explicit secret if given, else the named environment variable's value, else None."""
    value: str | None = explicit.get_secret_value() if isinstance(explicit, SecretStr) else explicit
    if not value and env_var:
        value = os.environ.get(env_var)
    if not value:
        return None
    register_secret(value)
    return SecretStr(value)


def register_secret(value: str) -> None:
    """Mask `value` in every log record from now on."""
    if len(value) < _MIN_SECRET_LENGTH:
        return
    with _lock:
        _secrets.add(value)
    install_redaction()


def redact(text: str) -> str:
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def install_redaction() -> None:
    """Wrap the global log-record factory once; records are masked where they are created."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if not _secrets:
            return record
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is the caller's bug; leave the record alone
            return record
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
        return record

    logging.setLogRecordFactory(factory)
