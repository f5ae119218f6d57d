"""Per-kernel resource usage (registers, spills, shared memory, stack) from nvcc/ptxas.

When nvcc is available, a translation unit is compiled for the GPU's architecture, device code
only (`nvcc -cubin -Xptxas -v`), and ptxas's report is parsed into one `ResourceUsage` per
kernel, keyed by its mangled name. Results are cached by a hash of the source, the local headers
it includes, the flags, the architecture and the nvcc version.

Trust: nvcc is looked up in user-level settings, `$CUDA_HOME`/`$CUDA_PATH`, `PATH` and the
default CUDA location. A compiler path from *workspace* settings is used only when the workspace
is trusted. Flags from `compile_commands.json` are reduced to include paths, macros and the
language standard, so a cloned repository cannot smuggle in `-Xcompiler -fplugin=...` and the like.

Without nvcc, `estimate_resource_usage` gives a labelled guess instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from perflsp.hardware.models import NvidiaArchLimits
from perflsp.kernels.compile_db import find_compile_commands
from perflsp.kernels.includes import local_headers

DEFAULT_TIMEOUT_S = 120.0
_DEFAULT_NVCC_LOCATIONS = ("/usr/local/cuda/bin/nvcc", "/opt/cuda/bin/nvcc")


class ResourceUsageError(RuntimeError):
    """Resource usage could not be obtained; the message says why."""


class NvccNotFoundError(ResourceUsageError):
    pass


class CompileError(ResourceUsageError):
    def __init__(self, message: str, command: Sequence[str], output: str, returncode: int | None):
        super().__init__(message)
        self.command = list(command)
        self.output = output
        self.returncode = returncode


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    mangled_name: str
    arch: str  # e.g. "sm_86"
    registers: int
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    stack_frame_bytes: int = 0
    cumulative_stack_bytes: int | None = None
    static_shared_memory_bytes: int = 0
    constant_memory_bytes: int = 0  # cmem[0]: kernel parameters and driver constants
    barriers: int | None = None  # older ptxas versions do not report it
    estimated: bool = False
    assumptions: tuple[str, ...] = ()

    @property
    def kernel_name(self) -> str:
        """The kernel's own name without namespaces or template arguments ("saxpy")."""
        return kernel_base_name(self.mangled_name)

    @property
    def spills(self) -> bool:
        return self.spill_stores_bytes > 0 or self.spill_loads_bytes > 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["kernel_name"] = self.kernel_name
        data["assumptions"] = list(self.assumptions)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResourceUsage:
        data = {k: v for k, v in data.items() if k != "kernel_name"}
        data["assumptions"] = tuple(data.get("assumptions", ()))
        return cls(**data)


def arch_flag(compute_capability: str) -> str:
    """"8.6" -> "sm_86", "10.0" -> "sm_100"."""
    major, _, minor = compute_capability.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"not a compute capability: '{compute_capability}'")
    return f"sm_{major}{minor}"


# --------------------------------------------------------------------------- finding nvcc


@dataclass(frozen=True, slots=True)
class NvccLocation:
    path: str | None
    origin: Literal["user settings", "workspace settings", "CUDA_HOME", "CUDA_PATH", "PATH", "default location"] | None
    message: str  # what was found, or why nothing was


def locate_nvcc(
    user_setting: str | None = None,
    workspace_setting: str | None = None,
    *,
    workspace_trusted: bool = False,
    environ: dict[str, str] | None = None,
    default_locations: Iterable[str] | None = None,
) -> NvccLocation:
    """Find nvcc. A path from workspace settings counts only in a trusted workspace."""
    env = os.environ if environ is None else environ
    notes: list[str] = []
    if workspace_setting:
        if workspace_trusted:
            found = _executable(workspace_setting)
            if found:
                return NvccLocation(found, "workspace settings", f"nvcc from workspace settings: {found}")
            notes.append(f"workspace setting nvcc '{workspace_setting}' is not an executable file")
        else:
            notes.append(f"ignored nvcc '{workspace_setting}' from workspace settings: the workspace is not trusted")
    if user_setting:
        found = _executable(user_setting)
        if found:
            return NvccLocation(found, "user settings", f"nvcc from user settings: {found}")
        notes.append(f"user setting nvcc '{user_setting}' is not an executable file")
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            found = _executable(str(Path(env[var]) / "bin" / "nvcc"))
            if found:
                return NvccLocation(found, var, f"nvcc from ${var}: {found}")
    found = shutil.which("nvcc", path=env.get("PATH", ""))
    if found:
        return NvccLocation(found, "PATH", f"nvcc on PATH: {found}")
    for candidate in _DEFAULT_NVCC_LOCATIONS if default_locations is None else default_locations:
        found = _executable(candidate)
        if found:
            return NvccLocation(found, "default location", f"nvcc at {found}")
    notes.append("nvcc not found (set perflsp.nvcc, $CUDA_HOME, or put nvcc on PATH); "
                 "register and spill figures are estimated")
    return NvccLocation(None, None, "; ".join(notes))


def _executable(path: str) -> str | None:
    p = Path(path).expanduser()
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


# --------------------------------------------------------------------------- flags


# flag -> whether its value is a path (made absolute against the entry's directory)
_VALUE_FLAGS = {"-I": True, "-isystem": True, "-include": True, "-D": False, "-U": False,
                "--include-path": True, "--system-include": True, "--pre-include": True,
                "--define-macro": False, "--undefine-macro": False}
_KEEP_EXACT = {"--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda",
               "-rdc=true", "--relocatable-device-code=true", "-use_fast_math", "--use_fast_math"}


def flags_from_compile_commands(compile_commands: Path, source: Path) -> list[str] | None:
    """Include paths, macros and the C++ standard from the entry for `source`, or None.

    Everything else (output files, host-compiler pass-throughs, the compiler itself, its
    architecture flags) is dropped: the architecture comes from the GPU being analysed.
    """
    try:
        entries = json.loads(Path(compile_commands).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    target = Path(source).resolve()
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or "file" not in entry:
            continue
        directory = Path(entry.get("directory", Path(compile_commands).parent))
        if (directory / entry["file"]).resolve() != target:
            continue
        args = entry.get("arguments") or shlex.split(entry.get("command", ""))
        return _safe_flags(args[1:], directory)
    return None


def _safe_flags(args: Sequence[str], directory: Path) -> list[str]:
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _KEEP_EXACT or re.fullmatch(r"--?std=\S+", arg):
            kept.append(arg)
            continue
        if arg in ("-std", "--std") and i < len(args):
            kept.append(f"{arg}={args[i]}")
            i += 1
            continue
        flag, value = _split_value_flag(arg)
        if flag is None:
            continue
        if value is None:
            if i >= len(args):
                break
            value = args[i]
            i += 1
        if _VALUE_FLAGS[flag] and not Path(value).is_absolute():
            value = str((directory / value).resolve())
        kept += [flag, value]
    return kept


def _split_value_flag(arg: str) -> tuple[str | None, str | None]:
    """("-I", None) for "-I" followed by its value, ("-I", "inc") for "-Iinc", ..."""
    if arg in _VALUE_FLAGS:
        return arg, None
    for flag in ("-I", "-D", "-U"):
        if arg.startswith(flag):
            return flag, arg[len(flag):]
    if arg.startswith("--") and "=" in arg:
        flag, value = arg.split("=", 1)
        if flag in _VALUE_FLAGS:
            return flag, value
    return None, None


# --------------------------------------------------------------------------- parsing ptxas -v

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")


def parse_ptxas_output(text: str) -> dict[str, ResourceUsage]:
    """Kernels (entry functions) in a `ptxas -v` / `nvcc --resource-usage` report."""
    found: dict[str, dict[str, Any]] = {}
    entry: str | None = None
    properties_of: str | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            found[entry] = {"mangled_name": entry, "arch": m.group(2)}
            continue
        if m := _PROPERTIES.search(line):
            properties_of = m.group(1)
            continue
        if (m := _FRAME.search(line)) and properties_of in found:
            found[properties_of].update(
                stack_frame_bytes=int(m.group(1)), spill_stores_bytes=int(m.group(2)),
                spill_loads_bytes=int(m.group(3)))
            properties_of = None
            continue
        if (m := _USED.search(line)) and entry in found:
            usage = found[entry]
            usage["registers"] = int(m.group(1))
            for item in m.group(2).split(","):
                item = item.strip()
                if mm := re.fullmatch(r"used (\d+) barriers?", item):
                    usage["barriers"] = int(mm.group(1))
                elif mm := re.fullmatch(r"(\d+) bytes smem", item):
                    usage["static_shared_memory_bytes"] = int(mm.group(1))
                elif mm := re.fullmatch(r"(\d+) bytes cmem\[0\]", item):
                    usage["constant_memory_bytes"] = int(mm.group(1))
                elif mm := re.fullmatch(r"(\d+) bytes cumulative stack size", item):
                    usage["cumulative_stack_bytes"] = int(mm.group(1))
    return {name: ResourceUsage(**data) for name, data in found.items() if "registers" in data}


# --------------------------------------------------------------------------- names


def kernel_base_name(mangled: str) -> str:
    """The unqualified name in an Itanium-mangled symbol ("_ZN2ns6kernelIfEEvPT_" -> "kernel")."""
    parts = mangled_name_parts(mangled)
    return parts[-1] if parts else mangled


def mangled_name_parts(mangled: str) -> list[str]:
    """Namespace/class components and the name ("_ZN2ns6kernelEPf" -> ["ns", "kernel"])."""
    if not mangled.startswith("_Z"):
        return [mangled]  # extern "C"
    s, i = mangled, 2
    if s.startswith("L", i):
        i += 1
    parts: list[str] = []
    nested = s.startswith("N", i)
    if nested:
        i += 1
        while i < len(s) and s[i] in "rVKRO":
            i += 1
    while i < len(s):
        if s[i].isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            length = int(s[i:j])
            parts.append(s[j:j + length])
            i = j + length
            if not nested:
                break
        elif s[i] == "I":
            i = _skip_template_args(s, i)
        elif s.startswith("St", i):
            parts.append("std")
            i += 2
        elif s[i] == "E" or not nested:
            break
        else:
            return []  # substitutions and the like: not worth decoding here
    return [p.replace("_GLOBAL__N_1", "(anonymous namespace)") for p in parts]


def _skip_template_args(s: str, i: int) -> int:
    depth = 0
    while i < len(s):
        c = s[i]
        if c.isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            i = j + int(s[i:j])
            continue
        if c in "INLX":
            depth += 1
        elif c == "E":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def usage_by_kernel_name(usages: Iterable[ResourceUsage]) -> dict[str, list[ResourceUsage]]:
    """Group by unqualified kernel name (templates can have several instantiations)."""
    grouped: dict[str, list[ResourceUsage]] = {}
    for usage in usages:
        grouped.setdefault(usage.kernel_name, []).append(usage)
    return grouped


# --------------------------------------------------------------------------- cache


class ResourceUsageCache:
    """In memory, and on disk as one JSON file per key when `directory` is given."""

    def __init__(self, directory: Path | None = None):
        self.directory = Path(directory) if directory else None
        self._memory: dict[str, dict[str, ResourceUsage]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, ResourceUsage] | None:
        result = self._memory.get(key)
        if result is None and self.directory is not None:
            try:
                data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
                result = {name: ResourceUsage.from_json(u) for name, u in data.items()}
                self._memory[key] = result
            except (OSError, ValueError, TypeError):
                result = None
        if result is None:
            self.misses += 1
        else:
            self.hits += 1
        return result

    def put(self, key: str, usages: dict[str, ResourceUsage]) -> None:
        self._memory[key] = usages
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f"{key}.json.tmp"
            tmp.write_text(json.dumps({n: u.to_json() for n, u in usages.items()}), encoding="utf-8")
            tmp.replace(self.directory / f"{key}.json")


DEFAULT_CACHE = ResourceUsageCache()
_nvcc_versions: dict[tuple[str, int], str] = {}


# --------------------------------------------------------------------------- compiling


@dataclass(frozen=True, slots=True)
class _Job:
    command: list[str]
    key: str
    source: Path
    arch: str


def _prepare(source_path: str | Path, arch: str, flags: Sequence[str], nvcc: str | None) -> _Job:
    source = Path(source_path)
    if not source.is_file():
        raise ResourceUsageError(f"{source}: no such file")
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ResourceUsageError(f"not a GPU architecture: '{arch}' (expected e.g. sm_86)")
    if nvcc is None:
        location = locate_nvcc()
        if location.path is None:
            raise NvccNotFoundError(location.message)
        nvcc = location.path
    command = [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *flags, "-o", os.devnull]
    if source.suffix != ".cu":
        command += ["-x", "cu"]
    command.append(str(source))
    digest = hashlib.sha256()
    digest.update(json.dumps([_nvcc_version(nvcc), arch, list(flags)]).encode())
    for header in [source, *_local_headers(source, flags)]:
        digest.update(str(header).encode() + b"\0")
        try:
            digest.update(header.read_bytes())
        except OSError:
            pass
    return _Job(command, digest.hexdigest(), source, arch)


def _nvcc_version(nvcc: str) -> str:
    try:
        stamp = (nvcc, Path(nvcc).stat().st_mtime_ns)
    except OSError:
        return "unknown"
    if stamp not in _nvcc_versions:
        try:
            done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
            _nvcc_versions[stamp] = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "unknown"
        except (OSError, subprocess.SubprocessError):
            _nvcc_versions[stamp] = "unknown"
    return _nvcc_versions[stamp]


def _local_headers(source: Path, flags: Sequence[str]) -> list[Path]:
    """Quoted #includes found next to the including file or on -I paths, transitively."""
    include_dirs = [flags[i + 1] for i, f in enumerate(flags[:-1]) if f in ("-I", "--include-path")]
    return local_headers(source, include_dirs)


def _finish(job: _Job, returncode: int | None, output: str) -> dict[str, ResourceUsage]:
    if returncode != 0:
        errors = [ln.strip() for ln in output.splitlines()
                  if "error" in ln.lower() or "fatal" in ln.lower()][:5]
        detail = "; ".join(errors) or output.strip()[-500:] or "no output"
        raise CompileError(f"nvcc failed (exit {returncode}) compiling {job.source.name} for {job.arch}: {detail}",
                           job.command, output, returncode)
    return parse_ptxas_output(output)


def resource_usage(
    source_path: str | Path,
    arch: str,
    flags: Sequence[str] = (),
    nvcc: str | None = None,
    *,
    cache: ResourceUsageCache | None = DEFAULT_CACHE,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, ResourceUsage]:
    """Compile `source_path` for `arch` (e.g. "sm_86") and return each kernel's resource usage.

    `nvcc` must come from a trusted place (see `locate_nvcc`); None looks it up in user-level
    places only. Raises `NvccNotFoundError` or `CompileError` (a `ResourceUsageError`).
    """
    job = _prepare(source_path, arch, flags, nvcc)
    if cache is not None and (hit := cache.get(job.key)) is not None:
        return hit
    try:
        done = subprocess.run(job.command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"nvcc timed out after {timeout_s:g} s compiling {job.source.name}",
                           job.command, str(exc.stderr or ""), None) from exc
    except OSError as exc:
        raise NvccNotFoundError(f"cannot run {job.command[0]}: {exc.strerror or exc}") from exc
    usages = _finish(job, done.returncode, done.stdout + done.stderr)
    if cache is not None:
        cache.put(job.key, usages)
    return usages


async def resource_usage_async(
    source_path: str | Path,
    arch: str,
    flags: Sequence[str] = (),
    nvcc: str | None = None,
    *,
    cache: ResourceUsageCache | None = DEFAULT_CACHE,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, ResourceUsage]:
    """`resource_usage` without blocking the event loop; cancelling it kills nvcc."""
    job = await asyncio.to_thread(_prepare, source_path, arch, flags, nvcc)
    if cache is not None and (hit := cache.get(job.key)) is not None:
        return hit
    try:
        process = await asyncio.create_subprocess_exec(
            *job.command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    except OSError as exc:
        raise NvccNotFoundError(f"cannot run {job.command[0]}: {exc.strerror or exc}") from exc
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        process.kill()
        await process.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise CompileError(f"nvcc timed out after {timeout_s:g} s compiling {job.source.name}",
                           job.command, "", None) from exc
    usages = _finish(job, process.returncode, stdout.decode(errors="replace"))
    if cache is not None:
        cache.put(job.key, usages)
    return usages


# --------------------------------------------------------------------------- estimate


ASSUMED_REGISTERS = 32


def estimate_resource_usage(
    kernel_name: str,
    limits: NvidiaArchLimits,
    *,
    static_smem_bytes: int = 0,
    launch_bounds_max_threads: int | None = None,
    launch_bounds_min_blocks: int | None = None,
    reason: str = "nvcc not available",
) -> ResourceUsage:
    """A labelled guess when nothing was compiled: 32 registers, capped by `__launch_bounds__`."""
    registers = ASSUMED_REGISTERS
    assumptions = [f"{reason}: registers assumed {ASSUMED_REGISTERS} (a typical simple kernel), no spills"]
    if launch_bounds_max_threads:
        warps = -(-launch_bounds_max_threads // limits.warp_size)
        blocks = max(1, launch_bounds_min_blocks or 1)
        per_thread_unit = limits.register_allocation_unit // limits.warp_size
        cap = limits.registers_per_sm // (warps * limits.warp_size * blocks)
        cap = min(limits.max_registers_per_thread, cap - cap % per_thread_unit)
        if cap < registers:
            registers = cap
            assumptions.append(
                f"__launch_bounds__({launch_bounds_max_threads}"
                f"{', ' + str(launch_bounds_min_blocks) if launch_bounds_min_blocks else ''}) caps registers at {cap}")
    return ResourceUsage(
        mangled_name=kernel_name,
        arch=arch_flag(limits.key),
        registers=registers,
        static_shared_memory_bytes=static_smem_bytes,
        estimated=True,
        assumptions=tuple(assumptions),
    )


__all__ = [
    "DEFAULT_CACHE",
    "CompileError",
    "NvccLocation",
    "NvccNotFoundError",
    "ResourceUsage",
    "ResourceUsageCache",
    "ResourceUsageError",
    "arch_flag",
    "estimate_resource_usage",
    "find_compile_commands",
    "flags_from_compile_commands",
    "kernel_base_name",
    "locate_nvcc",
    "parse_ptxas_output",
    "resource_usage",
    "resource_usage_async",
    "usage_by_kernel_name",
]
