"""Measuring one configuration on the GPU, through the profiling runner (local, SSH or Slurm as
`perflsp.profiling.*` says, and only where profiling may run).

The configuration is applied to a copy of the source (the same validated edit the editor would
offer), written beside the original so its relative includes resolve, built with
`profiling.buildCommand`, and the kernel timed under Nsight Compute (`gpu__time_duration.sum`)
with the block size passed as profiling's launch verification does (`{block}` or
`PERFLSP_BLOCK_SIZE`). The copy is removed after the build.

A configuration that does not build or run is a failed configuration (recorded as Kernel Tuner
records it). A tool that fails whatever the configuration (ncu or the compiler missing, no
permission to run it or to read the counters, profiling not set up) raises `ToolFailure`: the
run stops and nothing is recorded for that configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from perflsp.analysis.fixes import EditError, apply_edits
from perflsp.kernels.models import CudaFunction
from perflsp.kernels.program import ProgramModel
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.runner import build_executable, verify_launch_params
from perflsp.profiling.settings import ProfilingSettings
from perflsp.profiling.templates import uses_placeholder
from perflsp.tuning.cache import slug
from perflsp.tuning.edits import tuned_fix
from perflsp.tuning.search import Measurement, ToolFailure
from perflsp.tuning.space import Config, TuningSpace

# failures of a configuration (its build or its run); every other ProfilingError is a tool's
CONFIGURATION_FAILURES = frozenset({"exit-status", "timeout", "output-cap", "no-kernels", "parse"})
NO_FILE = ("perflsp.profiling.buildCommand has no {file}: tuning writes an edited copy of the source for each "
           "configuration and builds it through {file}; without it every build compiles the unedited source "
           '(for example ["nvcc", "-O3", "-lineinfo", "-o", "{exe}", "{file}"])')


def _tool_failure(exc: ProfilingError, what: str) -> ToolFailure:
    return ToolFailure(f"{what}: {exc.message} (the run stopped; no configuration was recorded as failed for it)")


def program_evaluator(settings: ProfilingSettings, source: Path, model: ProgramModel, kernel: CudaFunction,
                      space: TuningSpace, workspace: Path) -> Callable[[Config], Measurement]:
    """Measures a configuration: the file of `model` with the tuned edit, built and profiled."""
    if not settings.enabled:
        raise ProfilingError("not-enabled", "profiling is off: tuning on a GPU runs the program like profiling does; "
                                            "set perflsp.profiling.enabled in user settings (or a trusted workspace)")
    if not settings.build_command:
        raise ProfilingError("not-configured", "no build command: tuning builds each configuration with "
                                               "perflsp.profiling.buildCommand, for example "
                                               '["nvcc", "-O3", "-lineinfo", "-o", "{exe}", "{file}"]')
    if not uses_placeholder(settings.build_command, "file"):
        raise ProfilingError("bad-settings", NO_FILE)
    build_dir = workspace / ".perflsp" / "build" / "tune" / slug(kernel.name)
    data = model.data
    launched = next((_threads(site.block.value) for site in model.kernels.launches_of(kernel)
                     if _threads(site.block.value)), None)  # the launch's block when no parameter sets it

    def evaluate(config: Config) -> Measurement:
        started = time.perf_counter()
        try:
            fix = tuned_fix(model, kernel, space, config, "tune")
            text = apply_edits(data, fix.edits)
        except EditError as exc:
            if "already has this configuration" not in str(exc):
                return Measurement(None, f"CompilationFailedConfig: {exc}")
            text = data
        copy = source.with_name(f".perflsp-tune-{slug(space.key(config))}{source.suffix}")
        exe = build_dir / slug(space.key(config))
        try:
            copy.write_bytes(text)
            build_executable(settings, copy, exe)
        except ProfilingError as exc:
            if exc.code not in CONFIGURATION_FAILURES:
                raise _tool_failure(exc, "building") from None
            return Measurement(None, f"CompilationFailedConfig: {exc.message}",
                               compile_ms=(time.perf_counter() - started) * 1000)
        except OSError as exc:
            raise ToolFailure(f"cannot write the edited copy {copy}: {exc.strerror or exc}") from None
        finally:
            copy.unlink(missing_ok=True)
        compiled = time.perf_counter()
        threads = space.threads(config) or launched
        if not threads:
            return Measurement(None, "RuntimeFailedConfig: the block size of the launch is unknown (name it with "
                                     "perflsp:block or use a literal block)", compile_ms=(compiled - started) * 1000)
        try:
            verification = verify_launch_params(settings, exe=exe, kernel=kernel.name, current_block=threads,
                                                 proposed_block=threads, sizes=[threads], source=source)
        except ProfilingError as exc:
            if exc.code not in CONFIGURATION_FAILURES:
                raise _tool_failure(exc, "timing") from None
            return Measurement(None, f"RuntimeFailedConfig: {exc.message}",
                               compile_ms=(compiled - started) * 1000)
        timing = verification.timings[0] if verification.timings else None
        ns = timing.per_launch_ns if timing is not None else None
        compile_ms = (compiled - started) * 1000
        bench_ms = (time.perf_counter() - compiled) * 1000
        if ns is None:
            reason = (timing.error if timing is not None else None) or "no timing"
            return Measurement(None, f"RuntimeFailedConfig: {reason}", compile_ms=compile_ms, benchmark_ms=bench_ms)
        return Measurement(ns / 1e6, None, compile_ms=compile_ms, benchmark_ms=bench_ms)

    return evaluate


def _threads(value: object) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return value[0] * value[1] * value[2]
    return None


__all__ = ["program_evaluator"]
