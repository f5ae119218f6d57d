"""On-device verification: Nsight Compute runs, report import, measured verdicts.

The API the server and CLI use (all synchronous; the server calls it via asyncio.to_thread):

- settings: `ProfilingSettings`, `SettingsLayer`, `SettingsOrigin`, `resolve_profiling_settings`,
  `require_enabled`, `layer_from_toml` — what may take effect, given origin and workspace trust.
- runs: `profile_target`, `verify_launch_params`, `run_ncu`, `import_and_store`.
- evidence: `MeasuredGpu`, `resolve_measured_gpu`, `evaluate`, `MeasuredEvidence`,
  `ProfileStore.evidence_for` (stored results for a source kernel, stale when edited).
- mapping: `map_kernels`, `parse_name`, `parse_omp_entry`, `demangle_many`.
- every failure: `ProfilingError(code, message)`.
"""

from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import BUILTIN_GPUS, RTX_3080, MeasuredGpu, find_measured_gpu, resolve_measured_gpu
from perflsp.profiling.mapping import KernelMatch, KernelRef, map_kernel, map_kernels, parse_name, parse_omp_entry
from perflsp.profiling.measured import KernelCounters, MeasuredEvidence, MeasuredKernel, evaluate, group_launches
from perflsp.profiling.ncu_csv import NcuLaunch, NcuTable, parse_ncu_csv
from perflsp.profiling.reports import import_report
from perflsp.profiling.runner import (
    BlockTiming,
    KernelResult,
    LaunchVerification,
    ProfileOutcome,
    import_and_store,
    profile_target,
    run_ncu,
    summarise,
    sweep_sizes,
    verify_launch_params,
)
from perflsp.profiling.settings import (
    ProfilingSettings,
    ResolvedProfilingSettings,
    SettingsLayer,
    SettingsOrigin,
    layer_from_toml,
    require_enabled,
    resolve_profiling_settings,
)
from perflsp.profiling.store import ProfileRecord, ProfileStore
from perflsp.source.demangling import demangle, demangle_many

__all__ = [
    "BUILTIN_GPUS",
    "RTX_3080",
    "BlockTiming",
    "KernelCounters",
    "KernelMatch",
    "KernelRef",
    "KernelResult",
    "LaunchVerification",
    "MeasuredEvidence",
    "MeasuredGpu",
    "MeasuredKernel",
    "NcuLaunch",
    "NcuTable",
    "ProfileOutcome",
    "ProfileRecord",
    "ProfileStore",
    "ProfilingError",
    "ProfilingSettings",
    "ResolvedProfilingSettings",
    "SettingsLayer",
    "SettingsOrigin",
    "demangle",
    "demangle_many",
    "evaluate",
    "find_measured_gpu",
    "group_launches",
    "import_and_store",
    "import_report",
    "layer_from_toml",
    "map_kernel",
    "map_kernels",
    "parse_name",
    "parse_ncu_csv",
    "parse_omp_entry",
    "profile_target",
    "require_enabled",
    "resolve_measured_gpu",
    "resolve_profiling_settings",
    "run_ncu",
    "summarise",
    "sweep_sizes",
    "verify_launch_params",
]
