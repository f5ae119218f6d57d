"""Providers: one class per wire protocol, all with the same two calls.

`complete_json(messages, schema) -> Completion` and `stream_text(messages)`; build one from a
`ProviderConfig` with `make_provider`.
"""

from __future__ import annotations

from pydantic import SecretStr

from perflsp.llm.providers.anthropic import AnthropicProvider
from perflsp.llm.providers.base import (
    Completion,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderHTTPError,
    ProviderKind,
    ProviderProtocolError,
    ProviderRefusal,
    ProviderTimeout,
    ProviderUnreachable,
    TokenUsage,
)
from perflsp.llm.providers.ollama import OllamaProvider
from perflsp.llm.providers.openai import OpenAIProvider

PROVIDERS: dict[str, type[Provider]] = {
    "openai": OpenAIProvider,
    "ollama": OllamaProvider,
    "anthropic": AnthropicProvider,
}


def make_provider(config: ProviderConfig, api_key: SecretStr | str | None = None) -> Provider:
    """A provider for `config`; the key is `api_key` if given, else the configured env variable."""
    return PROVIDERS[config.kind](config, api_key)


__all__ = [
    "PROVIDERS",
    "AnthropicProvider",
    "Completion",
    "OllamaProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderKind",
    "ProviderProtocolError",
    "ProviderRefusal",
    "ProviderTimeout",
    "ProviderUnreachable",
    "TokenUsage",
    "make_provider",
]
