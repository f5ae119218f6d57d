"""LLM settings (`perflsp.llm.*` on the wire, snake_case here) and the advisor factory.

The server and the CLI parse their settings into `LlmSettings`, note where each came from, and
call `create_advisor`. It applies the endpoint policy (`perflsp.llm.privacy`): a configuration
the policy refuses yields an advisor that is off, with the reason as its status, so callers never
need a second code path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from perflsp import __version__
from perflsp.llm.advisor import Advisor, AdvisorSettings, AdvisorStatus, UsageRecord
from perflsp.llm.cache import DEFAULT_MAX_BYTES, VerdictCache
from perflsp.llm.privacy import EndpointDecision, SettingOrigin, Sourced, check_llm_settings
from perflsp.llm.providers import PROVIDERS, ProviderConfig, ProviderKind, make_provider


class LlmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    provider: ProviderKind = "openai"
    base_url: str | None = None  # None: the provider's default endpoint
    model: str | None = None
    api_key_env: str | None = None  # None: OPENAI_API_KEY / ANTHROPIC_API_KEY / none for Ollama
    stream: bool = True
    temperature: float | None = Field(default=0.0, ge=0.0, le=2.0)
    max_output_tokens: int = Field(default=1500, ge=64, le=32_000)
    timeout_s: float = Field(default=90.0, gt=0)
    max_concurrent: int = Field(default=2, ge=1, le=32)
    max_retries: int = Field(default=2, ge=0, le=6)
    breaker_threshold: int = Field(default=3, ge=1)
    breaker_cooldown_s: float = Field(default=60.0, ge=0)
    few_shot: bool = False
    max_prompt_tokens: int = Field(default=8000, ge=500)
    cache_enabled: bool = True
    cache_max_mb: float = Field(default=DEFAULT_MAX_BYTES / 2**20, gt=0)
    use_env_proxy: bool = True

    @property
    def effective_base_url(self) -> str:
        return self.base_url or PROVIDERS[self.provider].default_base_url

    def provider_config(self) -> ProviderConfig:
        if not self.model:
            raise ValueError("perflsp.llm.model is not set")
        return ProviderConfig(
            kind=self.provider,
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env,
            read_timeout_s=self.timeout_s,
            max_output_tokens=self.max_output_tokens,
            temperature=self.temperature,
            stream=self.stream,
            use_env_proxy=self.use_env_proxy,
        )

    def advisor_settings(self) -> AdvisorSettings:
        return AdvisorSettings(
            max_concurrent=self.max_concurrent,
            request_timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            breaker_threshold=self.breaker_threshold,
            breaker_cooldown_s=self.breaker_cooldown_s,
            few_shot=self.few_shot,
            max_prompt_tokens=self.max_prompt_tokens,
        )


def decide(
    settings: LlmSettings,
    origins: Mapping[str, SettingOrigin] | None = None,
    *,
    workspace_trusted: bool,
) -> EndpointDecision:
    """Apply the endpoint policy; `origins` maps field names to where each value came from."""
    origins = origins or {}

    def origin(name: str) -> SettingOrigin:
        return origins.get(name, SettingOrigin.DEFAULT)

    decision = check_llm_settings(
        Sourced(settings.enabled, origin("enabled")),
        Sourced(settings.effective_base_url, origin("base_url")),
        Sourced(settings.api_key_env, origin("api_key_env")),
        workspace_trusted=workspace_trusted,
    )
    if decision.allowed and not settings.model:
        return EndpointDecision(False, "perflsp.llm.model is not set: name the model to ask")
    return decision


def create_advisor(
    settings: LlmSettings,
    origins: Mapping[str, SettingOrigin] | None = None,
    *,
    workspace_trusted: bool = False,
    api_key: SecretStr | str | None = None,
    cache: VerdictCache | None = None,
    engine_version: str | None = None,
    on_status: Callable[[AdvisorStatus], None] | None = None,
    on_message: Callable[[str], None] | None = None,
    on_usage: Callable[[UsageRecord], None] | None = None,
) -> tuple[Advisor, EndpointDecision]:
    """An advisor for `settings` (off, with the policy's reason, when it may not run).

    `api_key` is the client's secret storage value, if any; otherwise the key comes from the
    environment variable named by `api_key_env`. `cache` defaults to the user cache directory.
    """
    decision = decide(settings, origins, workspace_trusted=workspace_trusted)
    if not decision.allowed:
        advisor = Advisor(
            None, settings.advisor_settings(), off_reason=decision.reason, on_status=on_status,
            engine_version=engine_version or __version__,
        )
        return advisor, decision
    if cache is None and settings.cache_enabled:
        cache = VerdictCache(max_bytes=int(settings.cache_max_mb * 2**20))
    provider = make_provider(settings.provider_config(), api_key)
    advisor = Advisor(
        provider,
        settings.advisor_settings(),
        cache=cache if settings.cache_enabled else None,
        on_status=on_status,
        on_message=on_message,
        on_usage=on_usage,
        engine_version=engine_version or __version__,
    )
    return advisor, decision
