"""The optional LLM advisor: providers over httpx, prompts from `prompts/`, validated answers.

Entry points for the server and the CLI:
- `KernelQuestion` (request.py): what to ask about one kernel, filled from the static engine;
- `create_advisor(LlmSettings, origins, workspace_trusted=...)` (config.py) → `Advisor`;
- `Advisor.ask(question) -> AdvisorResult`, `Advisor.submit(question) -> Task`,
  `Advisor.explain_stream(question) -> AsyncIterator[str]`, `Advisor.cancel(kernel_id)`;
- `VerdictCache` (cache.py) for `perflsp cache stats|clear`.
"""

from perflsp.llm.advisor import (
    Advisor,
    AdvisorResult,
    AdvisorSettings,
    AdvisorState,
    AdvisorStatus,
    AdvisorUnavailable,
    UsageRecord,
)
from perflsp.llm.cache import VerdictCache
from perflsp.llm.config import LlmSettings, create_advisor
from perflsp.llm.privacy import SettingOrigin
from perflsp.llm.request import (
    DeviceFunction,
    GpuFacts,
    KernelQuestion,
    LaunchSiteFacts,
    MeasuredFacts,
    StaticFacts,
)
from perflsp.llm.schema import LlmVerdict

__all__ = [
    "Advisor",
    "AdvisorResult",
    "AdvisorSettings",
    "AdvisorState",
    "AdvisorStatus",
    "AdvisorUnavailable",
    "DeviceFunction",
    "GpuFacts",
    "KernelQuestion",
    "LaunchSiteFacts",
    "LlmSettings",
    "LlmVerdict",
    "MeasuredFacts",
    "SettingOrigin",
    "StaticFacts",
    "UsageRecord",
    "VerdictCache",
    "create_advisor",
]
