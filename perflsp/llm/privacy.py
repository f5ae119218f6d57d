"""Who may send code where: the endpoint policy of the LLM advisor.

The advisor is off by default. Turning it on, choosing the endpoint or choosing which environment
variable holds the key is honoured only from places the user controls: user-level settings, the
command line, the environment, or a workspace the user has marked as trusted. A cloned
repository's `.perflsp.toml` (or workspace settings of an untrusted workspace) can never point the
advisor at a new host, so opening someone else's code never sends it anywhere.

A loopback endpoint (127.0.0.0/8, ::1, `localhost`) keeps the code on this machine, so any origin
may choose one; anything else needs a trusted origin. Host names are not resolved: `localhost` is
the only name treated as loopback, every other name is remote.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")


class SettingOrigin(StrEnum):
    DEFAULT = "default"  # perflsp's built-in value
    USER = "user"  # user-level editor settings / ~/.config
    COMMAND_LINE = "command-line"  # flags the user typed
    ENVIRONMENT = "environment"  # PERFLSP_* variables of the user's session
    WORKSPACE = "workspace"  # workspace-level editor settings
    WORKSPACE_FILE = "workspace-file"  # .perflsp.toml in the repository


_USER_CONTROLLED = {
    SettingOrigin.DEFAULT,
    SettingOrigin.USER,
    SettingOrigin.COMMAND_LINE,
    SettingOrigin.ENVIRONMENT,
}


def origin_is_trusted(origin: SettingOrigin, workspace_trusted: bool) -> bool:
    return origin in _USER_CONTROLLED or workspace_trusted


@dataclass(frozen=True, slots=True)
class Sourced(Generic[T]):
    """A setting's value and where it came from."""

    value: T
    origin: SettingOrigin = SettingOrigin.DEFAULT


@dataclass(frozen=True, slots=True)
class EndpointDecision:
    allowed: bool
    reason: str
    loopback: bool = False
    warning: str | None = None


def is_loopback_url(url: str) -> bool:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return is_loopback_host(host or "")


def is_loopback_host(host: str) -> bool:
    host = host.strip().rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def check_endpoint(base_url: str, origin: SettingOrigin, *, workspace_trusted: bool) -> EndpointDecision:
    """May code be sent to `base_url`, given where that setting came from?"""
    try:
        parts = urlsplit(base_url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        return EndpointDecision(False, f"LLM endpoint '{base_url}' is not a valid URL: {exc}")
    if parts.scheme not in ("http", "https") or not host:
        return EndpointDecision(
            False, f"LLM endpoint '{base_url}' must be an http:// or https:// URL with a host"
        )
    if parts.username or parts.password:
        return EndpointDecision(
            False, "LLM endpoint URLs must not carry credentials; use the API key setting"
        )
    if is_loopback_host(host):
        return EndpointDecision(True, f"loopback endpoint {host}: code stays on this machine", True)
    if not origin_is_trusted(origin, workspace_trusted):
        return EndpointDecision(
            False,
            f"LLM endpoint {host} comes from {origin.value} settings of an untrusted workspace; "
            "set it in user settings or trust the workspace to send code there",
        )
    warning = None
    if parts.scheme == "http":
        warning = f"LLM endpoint {host} uses plain http: code and API key cross the network unencrypted"
    return EndpointDecision(True, f"remote endpoint {host} set in {origin.value} settings", False, warning)


def check_llm_settings(
    enabled: Sourced[bool],
    base_url: Sourced[str],
    api_key_env: Sourced[str | None] | None = None,
    *,
    workspace_trusted: bool,
) -> EndpointDecision:
    """The whole decision for a configuration: on at all, endpoint allowed, key variable allowed.

    Enabling from an untrusted workspace is honoured only for a loopback endpoint: otherwise a
    repository could switch on sending its readers' code to the host they use for other work.
    A key variable chosen by an untrusted workspace is refused (it could name any secret).
    """
    if not enabled.value:
        return EndpointDecision(False, "the LLM advisor is off (perflsp.llm.enabled)")
    endpoint = check_endpoint(base_url.value, base_url.origin, workspace_trusted=workspace_trusted)
    if not endpoint.allowed:
        return endpoint
    if not endpoint.loopback and not origin_is_trusted(enabled.origin, workspace_trusted):
        return EndpointDecision(
            False,
            f"the LLM advisor was enabled by {enabled.origin.value} settings of an untrusted "
            "workspace; enable it in user settings or trust the workspace",
        )
    if (
        api_key_env is not None
        and api_key_env.value
        and not origin_is_trusted(api_key_env.origin, workspace_trusted)
    ):
        return EndpointDecision(
            False,
            f"the API key variable was chosen by {api_key_env.origin.value} settings of an "
            "untrusted workspace; choose it in user settings or trust the workspace",
        )
    return endpoint
