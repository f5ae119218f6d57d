"""Build, run under Nsight Compute, import: the on-device half of profiling.

Every program runs from an argv list (`perflsp.profiling.templates`), under the user's launcher
prefix when one is set (`srun ...`, `ssh host`), with the configured timeouts and output caps.
Nothing runs unless `ProfilingSettings.enabled` — which only user settings or a trusted workspace
can switch on (`perflsp.profiling.settings`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perflsp.kernels.models import FileKernels
from perflsp.profiling import metrics as M
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import MeasuredGpu, find_measured_gpu
from perflsp.profiling.mapping import KernelMatch, map_kernels, parse_name, parse_omp_entry
from perflsp.profiling.measured import MeasuredEvidence, MeasuredKernel, evaluate, group_launches
from perflsp.profiling.ncu_csv import NcuTable, find_messages, parse_ncu_csv
from perflsp.profiling.process import ProcessResult, run_program, tail
from perflsp.profiling.reports import import_report
from perflsp.profiling.settings import ProfilingSettings
from perflsp.profiling.store import STATE_DIR, ProfileRecord, ProfileStore, ensure_state_dir, stored_kernel
from perflsp.profiling.templates import check_value, expand, is_ssh, uses_placeholder, with_launcher
from perflsp.source.demangling import demangle_many

SOURCE_SUFFIXES = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c", ".c++", ".C"})
PERMISSION_MARKER = "ERR_NVGPUCTRPERM"
_VERSION = re.compile(r"Version\s+(\S+)")
_KERNEL_WORD = "(^|[^A-Za-z0-9_]){}([^A-Za-z0-9_]|$)"


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class KernelResult:
    measured: MeasuredKernel
    match: KernelMatch | None
    evidence: MeasuredEvidence | None  # None when no GPU figures were available

    @property
    def name(self) -> str:
        return self.match.display_name if self.match else self.measured.name

    def to_json(self) -> dict:
        match = self.match
        return {
            "kernel": self.name,
            "reported_name": self.measured.name,
            "launches": self.measured.launches,
            "block": self.measured.block,
            "grid": self.measured.grid,
            "registers_per_thread": self.measured.registers_per_thread,
            "achieved_occupancy_pct": self.measured.achieved_occupancy_pct,
            "counters": self.measured.counters.to_json(),
            "source": None
            if match is None or match.ref is None
            else {**match.ref.to_json(), "status": match.status, "reason": match.reason},
            "mapping": None if match is None else {"status": match.status, "reason": match.reason},
            "evidence": self.evidence.to_json() if self.evidence else None,
        }


@dataclass(frozen=True)
class ProfileOutcome:
    record: ProfileRecord
    results: tuple[KernelResult, ...]
    gpu: MeasuredGpu | None
    stored_at: Path | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "origin": self.record.origin,
            "report": self.record.report,
            "gpu": self.gpu.to_json() if self.gpu else None,
            "device_name": self.record.device_name,
            "clock_mhz": self.record.clock_mhz,
            "clock_control": self.record.clock_control,
            "ncu_version": self.record.ncu_version,
            "created_at": self.record.created_at,
            "stored_at": str(self.stored_at) if self.stored_at else None,
            "kernels": [r.to_json() for r in self.results],
            "notes": list(self.notes),
        }


def summarise(
    table: NcuTable,
    *,
    origin: str,
    gpu: MeasuredGpu | None,
    files: Sequence[FileKernels] = (),
    workspace: Path | None = None,
    report: str | None = None,
    ncu_version: str | None = None,
    clock_control: str | None = None,
    command: Sequence[str] | None = None,
    gpu_resolver=find_measured_gpu,
) -> ProfileOutcome:
    """Group launches per kernel, map them to sources, judge them with `gpu` (or the GPU the
    report names, when `gpu_resolver` knows it) and build the record to store."""
    if not table.launches:
        raise ProfilingError("no-kernels", "no kernel launches were profiled")
    kernels = group_launches(table.launches)
    notes: list[str] = []
    if not table.has_units:
        notes.append("the CSV has no units row: values were read as base units (use --print-units base)")
    devices = [k.device_name for k in kernels if k.device_name]
    if gpu is None and devices:
        gpu = gpu_resolver(devices[0])
    if gpu is None:
        named = f" {devices[0]!r}" if devices else ""
        notes.append(f"no figures for the GPU{named}: pass --gpu NAME for verdicts and % of peak")
    # Without sources every kernel is "not found", but its name is still demangled for display.
    matches = map_kernels([k.name for k in kernels], files)
    results = []
    for kernel in kernels:
        match = matches.get(kernel.name)
        evidence = evaluate(kernel, gpu) if gpu else None
        if evidence is not None and match is not None and match.ref is not None:
            evidence = evidence.marked(kernel_hash=match.ref.body_hash, current_hash=match.ref.body_hash)
        results.append(KernelResult(kernel, match, evidence))
    if files:
        unmapped = [r.name for r in results if r.match is None or r.match.status == "not_found"]
        if unmapped:
            notes.append(f"{len(unmapped)} kernel(s) not found in the given sources: " + ", ".join(unmapped[:5]))
    clocks = [(k.sm_clock_hz, k.counters.duration_ns) for k in kernels if k.sm_clock_hz]
    clock_mhz = None
    if clocks:
        weight = sum(d for _, d in clocks)
        clock_mhz = (sum(c * d for c, d in clocks) / weight if weight else clocks[0][0]) / 1e6
    record = ProfileRecord(
        origin=origin,  # type: ignore[arg-type]
        report=report,
        gpu=gpu.name if gpu else None,
        device_name=devices[0] if devices else None,
        clock_mhz=clock_mhz,
        clock_control=clock_control,
        ncu_version=ncu_version,
        command=list(command) if command else None,
        kernels=[stored_kernel(r.measured, r.match, r.evidence, workspace) for r in results],
    )
    return ProfileOutcome(record, tuple(results), gpu, None, tuple(notes))


def _store(outcome: ProfileOutcome, workspace: Path) -> ProfileOutcome:
    path = ProfileStore(workspace).save(outcome.record)
    return ProfileOutcome(outcome.record, outcome.results, outcome.gpu, path, outcome.notes)


def import_and_store(
    report: Path,
    *,
    workspace: Path,
    gpu: MeasuredGpu | None = None,
    files: Sequence[FileKernels] = (),
    ncu_argv: Sequence[str] | None = None,
    store: bool = True,
    gpu_resolver=find_measured_gpu,
) -> ProfileOutcome:
    """`perflsp profile import REPORT` and the `perflsp.importProfile` command. Without `gpu`,
    `gpu_resolver` turns the device name in the report into GPU figures (or None)."""
    imported = import_report(report, ncu_argv=ncu_argv)
    outcome = summarise(
        imported.table,
        origin="import",
        gpu=gpu,
        files=files,
        workspace=workspace,
        report=str(report.resolve()),
        ncu_version=imported.ncu_version,
        gpu_resolver=gpu_resolver,
    )
    return _store(outcome, workspace) if store else outcome


# ---------------------------------------------------------------------------------------------
# Running ncu


def ncu_options(
    settings: ProfilingSettings, *, metrics: Sequence[str] = M.ROOFLINE_METRICS, kernel: str | None = None
) -> list[str]:
    """perflsp's ncu options: CSV raw page in base units, the roofline metrics, clock control,
    kernel filter and launch limits, then the user's extra ncu arguments."""
    argv = [
        settings.ncu_path,
        "--csv",
        "--page", "raw",
        "--print-units", "base",
        "--metrics", ",".join(metrics),
        "--clock-control", settings.clock_control,
    ]  # fmt: skip
    if kernel is not None:
        check_value("kernel", kernel)  # an identifier or qualified name: safe inside a regex
        simple = kernel.rsplit("::", 1)[-1]
        argv += ["--kernel-name", "regex:" + _KERNEL_WORD.format(simple)]
    elif settings.kernel_filter:
        argv += ["--kernel-name", "regex:" + settings.kernel_filter]
    if settings.launch_count is not None:
        argv += ["--launch-count", str(settings.launch_count)]
    if settings.launch_skip:
        argv += ["--launch-skip", str(settings.launch_skip)]
    return [*argv, *settings.ncu_args]


@dataclass(frozen=True)
class NcuRun:
    argv: tuple[str, ...]
    table: NcuTable
    process: ProcessResult


def run_ncu(
    settings: ProfilingSettings,
    app_argv: Sequence[str],
    *,
    metrics: Sequence[str] = M.ROOFLINE_METRICS,
    kernel: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> NcuRun:
    """Profile `app_argv` under ncu and parse its CSV; every failure is a clear ProfilingError."""
    argv = with_launcher(settings.launcher, [*ncu_options(settings, metrics=metrics, kernel=kernel), *app_argv])
    result = run_program(
        argv,
        timeout_s=settings.run_timeout_s,
        output_cap_bytes=settings.output_cap_bytes,
        what="ncu",
        env={**settings.env, **(extra_env or {})},
        cwd=cwd,
    )
    combined = result.stdout + "\n" + result.stderr
    if PERMISSION_MARKER in combined:
        raise ProfilingError(
            "permission",
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run it with the needed "
            "privileges or allow profiling for all users, see https://developer.nvidia.com/ERR_NVGPUCTRPERM",
        )
    errors = [m for m in find_messages(combined) if m.startswith("==ERROR==")]
    if result.returncode != 0:
        detail = "; ".join(errors[:3]) or tail(result.stderr or result.stdout, 4) or "no output"
        raise ProfilingError("exit-status", f"ncu exited with status {result.returncode}: {detail}")
    try:
        table = parse_ncu_csv(result.stdout, source="ncu output")
    except ProfilingError:
        if any("No kernels were profiled" in m for m in find_messages(combined)):
            raise ProfilingError(
                "no-kernels", "ncu profiled no kernels: did the program launch any, and does the kernel filter match?"
            ) from None
        raise
    if not table.launches:
        raise ProfilingError(
            "no-kernels", "ncu profiled no kernels: did the program launch any, and does the kernel filter match?"
        )
    return NcuRun(tuple(argv), table, result)


_QUEUED_LAUNCHERS = frozenset({"srun", "salloc", "sbatch", "qsub", "bsub", "flux"})


def ncu_version(settings: ProfilingSettings) -> str | None:
    """`ncu --version`'s version number, or None when it cannot be had (never raises).

    Behind a batch-queue launcher (srun, ...) the question would wait for a second allocation,
    so it is not asked there and the version stays unknown.
    """
    if settings.launcher and Path(settings.launcher[0]).name in _QUEUED_LAUNCHERS:
        return None
    argv = with_launcher(settings.launcher, [settings.ncu_path, "--version"])
    try:
        result = run_program(
            argv,
            timeout_s=min(30.0, settings.run_timeout_s),
            output_cap_bytes=65536,
            what="ncu --version",
            env=settings.env,
        )
    except ProfilingError:
        return None
    if result.returncode != 0:
        return None
    match = _VERSION.search(result.stdout)
    return match.group(1) if match else None


def is_source_file(path: Path) -> bool:
    return path.suffix in SOURCE_SUFFIXES


def build_executable(
    settings: ProfilingSettings, source: Path, exe: Path, *, args: Sequence[str] = ()
) -> ProcessResult:
    if not settings.build_command:
        raise ProfilingError(
            "not-configured",
            "no build command: set perflsp.profiling.buildCommand, for example "
            '["nvcc", "-O3", "-lineinfo", "-o", "{exe}", "{file}"]',
        )
    argv = expand(settings.build_command, {"file": str(source), "exe": str(exe)}, args=args, what="buildCommand")
    exe.parent.mkdir(parents=True, exist_ok=True)
    result = run_program(
        argv,
        timeout_s=settings.build_timeout_s,
        output_cap_bytes=settings.output_cap_bytes,
        what="the build command",
        env=settings.env,
        cwd=source.parent,
    )
    if result.returncode != 0:
        raise ProfilingError(
            "exit-status",
            f"the build command failed with status {result.returncode}: {tail(result.stderr or result.stdout, 6)}",
        )
    if not exe.exists():
        raise ProfilingError(
            "exit-status", f"the build command succeeded but did not write {exe} (use {{exe}} as its output)"
        )
    return result


def app_command(
    settings: ProfilingSettings,
    *,
    exe: Path,
    source: Path | None = None,
    kernel: str | None = None,
    block: int | None = None,
    args: Sequence[str] | None = None,
) -> list[str]:
    values = {"exe": str(exe)}
    if source is not None:
        values["file"] = str(source)
    if kernel is not None:
        values["kernel"] = kernel
    if block is not None:
        values["block"] = str(block)
    return expand(settings.run_command, values, args=settings.args if args is None else args, what="runCommand")


def _require_enabled(settings: ProfilingSettings) -> None:
    if not settings.enabled:
        raise ProfilingError(
            "not-enabled",
            "profiling is off: set perflsp.profiling.enabled to true in user settings (or a trusted workspace)",
        )


def prepare_target(
    settings: ProfilingSettings, target: Path, workspace: Path, *, args: Sequence[str] = ()
) -> tuple[Path, Path | None]:
    """Return (executable, source): build a source file into `.perflsp/build/`, or take an
    executable as it is."""
    target = target.resolve()
    if is_source_file(target):
        if not target.is_file():
            raise ProfilingError("io", f"no such source file: {target}")
        ensure_state_dir(workspace)
        exe = (workspace / STATE_DIR / "build" / target.stem).resolve()
        build_executable(settings, target, exe, args=args)
        return exe, target
    if target.is_file() and os.access(target, os.X_OK):
        return target, None
    if target.exists():
        raise ProfilingError("io", f"{target} is neither a CUDA/C/C++ source file nor an executable")
    raise ProfilingError("io", f"no such file: {target}")


def profile_target(
    settings: ProfilingSettings,
    target: Path,
    *,
    workspace: Path,
    gpu: MeasuredGpu | None = None,
    kernel: str | None = None,
    args: Sequence[str] | None = None,
    files: Sequence[FileKernels] = (),
    store: bool = True,
    gpu_resolver=find_measured_gpu,
) -> ProfileOutcome:
    """`perflsp profile FILE|TARGET`: build (for a source file), run under ncu, map, judge, store."""
    _require_enabled(settings)
    exe, source = prepare_target(settings, target, workspace)
    app_argv = app_command(settings, exe=exe, source=source, kernel=kernel, args=args)
    # Programs often read inputs relative to their sources: run next to them.
    run = run_ncu(settings, app_argv, kernel=kernel, cwd=source.parent if source else workspace)
    outcome = summarise(
        run.table,
        origin="run",
        gpu=gpu,
        files=files,
        workspace=workspace,
        report=None,
        ncu_version=ncu_version(settings),
        clock_control=settings.clock_control,
        command=run.argv,
        gpu_resolver=gpu_resolver,
    )
    return _store(outcome, workspace) if store else outcome


# ---------------------------------------------------------------------------------------------
# Launch-parameter verification


@dataclass(frozen=True)
class BlockTiming:
    block_size: int
    duration_ns: float | None  # summed over the kernel's profiled launches
    launches: int
    observed_block_sizes: tuple[int, ...] = ()  # threads per block ncu saw
    error: str | None = None

    @property
    def per_launch_ns(self) -> float | None:
        if self.duration_ns is None or self.launches == 0:
            return None
        return self.duration_ns / self.launches

    @property
    def honoured(self) -> bool:
        """The program really ran the kernel with the requested block size."""
        return self.error is None and self.observed_block_sizes in ((), (self.block_size,))

    def to_json(self) -> dict:
        return {
            "block_size": self.block_size,
            "duration_ns": self.duration_ns,
            "launches": self.launches,
            "per_launch_ns": self.per_launch_ns,
            "observed_block_sizes": list(self.observed_block_sizes),
            "honoured": self.honoured,
            "error": self.error,
        }


@dataclass(frozen=True)
class LaunchVerification:
    kernel: str
    current_block: int
    proposed_block: int
    timings: tuple[BlockTiming, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def timing(self, block: int) -> BlockTiming | None:
        return next((t for t in self.timings if t.block_size == block), None)

    @property
    def speedup(self) -> float | None:
        """Current time / proposed time per launch (> 1: the proposal is faster)."""
        current, proposed = self.timing(self.current_block), self.timing(self.proposed_block)
        if not current or not proposed or not current.honoured or not proposed.honoured:
            return None
        if not current.per_launch_ns or not proposed.per_launch_ns:
            return None
        return current.per_launch_ns / proposed.per_launch_ns

    @property
    def best(self) -> BlockTiming | None:
        usable = [(ns, t) for t in self.timings if t.honoured and (ns := t.per_launch_ns)]
        return min(usable, key=lambda pair: pair[0])[1] if usable else None

    def summary(self) -> str:
        speedup = self.speedup
        if speedup is None:
            return f"could not measure {self.kernel} at both block sizes"
        return f"measured {speedup:.2f}x at block {self.proposed_block} vs {self.current_block}"

    def to_json(self) -> dict:
        best = self.best
        return {
            "kernel": self.kernel,
            "current_block": self.current_block,
            "proposed_block": self.proposed_block,
            "speedup": self.speedup,
            "best_block": best.block_size if best else None,
            "summary": self.summary(),
            "timings": [t.to_json() for t in self.timings],
            "notes": list(self.notes),
        }


def sweep_sizes(current: int, proposed: int, *, warp: int = 32, max_threads: int = 1024) -> list[int]:
    """The current and proposed block sizes plus the proposal halved and doubled (warp multiples)."""
    sizes = {current, proposed}
    for candidate in (proposed // 2, proposed * 2):
        if warp <= candidate <= max_threads and candidate % warp == 0:
            sizes.add(candidate)
    return sorted(s for s in sizes if 0 < s <= max_threads)


_RECORDED_FAILURES = frozenset({"exit-status", "timeout", "no-kernels", "parse", "output-cap"})


def verify_launch_params(
    settings: ProfilingSettings,
    *,
    exe: Path,
    kernel: str,
    current_block: int,
    proposed_block: int,
    sizes: Sequence[int] | None = None,
    source: Path | None = None,
    args: Sequence[str] | None = None,
) -> LaunchVerification:
    """Time `kernel` at the current, the proposed and nearby block sizes.

    The block size reaches the program through `{block}` in the run template, or else through
    the environment variable `settings.block_env_var` (default PERFLSP_BLOCK_SIZE), which the
    program reads when it picks its launch configuration. ssh does not forward the environment,
    so with an ssh launcher the template must use `{block}`.
    """
    _require_enabled(settings)
    uses_block = uses_placeholder(settings.run_command, "block")
    if not uses_block and is_ssh(settings.launcher):
        raise ProfilingError(
            "not-configured", "ssh does not forward environment variables: put {block} in perflsp.profiling.runCommand"
        )
    notes: list[str] = []
    timings = []
    for block in sizes or sweep_sizes(current_block, proposed_block):
        app_argv = app_command(settings, exe=exe, source=source, kernel=kernel, block=block, args=args)
        env = {settings.block_env_var: str(block)}
        try:
            cwd = source.parent if source else exe.parent
            run = run_ncu(settings, app_argv, metrics=M.TIMING_METRICS, kernel=kernel, extra_env=env, cwd=cwd)
        except ProfilingError as exc:
            if exc.code not in _RECORDED_FAILURES:
                raise
            timings.append(BlockTiming(block, None, 0, (), exc.message))
            continue
        timings.append(_timing(block, run.table, kernel))
    for timing in timings:
        if timing.error is None and not timing.honoured:
            notes.append(
                f"asked for block {timing.block_size}, the kernel ran with "
                f"{', '.join(map(str, timing.observed_block_sizes))}: the program ignores the override"
            )
    return LaunchVerification(kernel, current_block, proposed_block, tuple(timings), tuple(notes))


def _is_launch_of(reported: str, demangled: str, kernel: str) -> bool:
    if parse_omp_entry(reported) is not None:
        return reported == kernel
    return parse_name(demangled).simple == kernel.rsplit("::", 1)[-1]


def _timing(block: int, table: NcuTable, kernel: str) -> BlockTiming:
    names = demangle_many(launch.kernel_name for launch in table.launches)
    launches = [
        launch for launch in table.launches if _is_launch_of(launch.kernel_name, names[launch.kernel_name], kernel)
    ]
    if not launches:
        return BlockTiming(block, None, 0, (), f"no launch of {kernel} was profiled")
    observed = set()
    for launch in launches:
        threads = launch.metrics.get(M.BLOCK_SIZE)
        if threads is None and launch.block is not None:
            threads = launch.block[0] * launch.block[1] * launch.block[2]
        if threads is not None:
            observed.add(int(threads))
    durations = [launch.metrics.get(M.DURATION) for launch in launches]
    measured = [d for d in durations if d is not None]
    if len(measured) != len(durations):
        return BlockTiming(block, None, len(launches), tuple(sorted(observed)), f"ncu reported no {M.DURATION}")
    return BlockTiming(block, float(sum(measured)), len(launches), tuple(sorted(observed)))
