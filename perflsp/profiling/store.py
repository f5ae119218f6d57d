"""Measured results kept under the workspace: `.perflsp/profiles/*.json`.

Each file is one profiling session (a run or an import): the GPU and clock it was taken on, the
ncu version, when, the command, and per kernel the raw counters and the source kernel (with its
body hash) it was mapped to. Verdicts are recomputed from the counters on read, so a later
change of GPU figures never leaves stale numbers behind; a kernel whose text changed since the
measurement is reported as stale. `.perflsp/` gets a `.gitignore` of `*`.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perflsp.kernels.models import CudaFunction, OmpRegion
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.gpus import MeasuredGpu, find_measured_gpu
from perflsp.profiling.mapping import KernelMatch, KernelRef
from perflsp.profiling.measured import KernelCounters, MeasuredEvidence, MeasuredKernel, evaluate

STATE_DIR = ".perflsp"
PROFILES_DIR = "profiles"
SCHEMA_VERSION = 1


class StoredMapping(BaseModel):
    kind: Literal["cuda", "omp"]
    file: str | None
    line: int
    name: str
    body_hash: str
    status: Literal["exact", "ambiguous"]
    reason: str = ""

    def ref(self) -> KernelRef:
        return KernelRef(self.kind, self.file, self.line, self.name, self.body_hash)


class StoredKernel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reported_name: str
    display_name: str
    launches: int
    counters: dict
    block: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    shapes_vary: bool = False
    registers_per_thread: int | None = None
    achieved_occupancy_pct: float | None = None
    sm_clock_hz: float | None = None
    device_name: str | None = None
    mapping: StoredMapping | None = None
    evidence: dict | None = None  # snapshot with the record's GPU, for readers without perflsp

    def measured(self) -> MeasuredKernel:
        return MeasuredKernel(
            name=self.reported_name,
            launches=self.launches,
            counters=KernelCounters.from_json(self.counters),
            block=self.block,
            grid=self.grid,
            shapes_vary=self.shapes_vary,
            registers_per_thread=self.registers_per_thread,
            achieved_occupancy_pct=self.achieved_occupancy_pct,
            sm_clock_hz=self.sm_clock_hz,
            device_name=self.device_name,
        )


class ProfileRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: secrets.token_hex(4))
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    origin: Literal["run", "import"]
    report: str | None = None  # the imported file, or the stored CSV of a run
    gpu: str | None = None  # the GPU model whose figures judged it
    device_name: str | None = None  # as ncu reported it
    clock_mhz: float | None = None  # measured SM clock (time-weighted over kernels)
    clock_control: str | None = None
    ncu_version: str | None = None
    command: list[str] | None = None
    kernels: list[StoredKernel] = Field(default_factory=list)


def stored_kernel(
    kernel: MeasuredKernel, match: KernelMatch | None, evidence: MeasuredEvidence | None, workspace: Path | None
) -> StoredKernel:
    mapping = None
    if match is not None and match.ref is not None and match.status != "not_found":
        ref = match.ref
        mapping = StoredMapping(
            kind=ref.kind,
            file=_relative(ref.file, workspace),
            line=ref.line,
            name=ref.name,
            body_hash=ref.body_hash,
            status=match.status,
            reason=match.reason,
        )
    return StoredKernel(
        reported_name=kernel.name,
        display_name=match.display_name if match else kernel.name,
        launches=kernel.launches,
        counters=kernel.counters.to_json(),
        block=kernel.block,
        grid=kernel.grid,
        shapes_vary=kernel.shapes_vary,
        registers_per_thread=kernel.registers_per_thread,
        achieved_occupancy_pct=kernel.achieved_occupancy_pct,
        sm_clock_hz=kernel.sm_clock_hz,
        device_name=kernel.device_name,
        mapping=mapping,
        evidence=evidence.to_json() if evidence else None,
    )


def _relative(path: str | None, workspace: Path | None) -> str | None:
    if path is None or workspace is None:
        return path
    try:
        return Path(path).resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def ensure_state_dir(workspace: Path) -> Path:
    """Create `.perflsp/` with a `.gitignore` of `*` (results and builds stay out of git)."""
    state = workspace / STATE_DIR
    try:
        state.mkdir(parents=True, exist_ok=True)
        ignore = state / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# perflsp state: measured profiles, builds\n*\n", encoding="utf-8")
    except OSError as exc:
        raise ProfilingError("io", f"cannot create {state}: {exc.strerror or exc}") from None
    return state


class ProfileStore:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.directory = workspace / STATE_DIR / PROFILES_DIR
        self.problems: list[str] = []  # files that could not be read, with the reason
        # parsed files by name, with the (mtime, size) they were read at: a long-lived store (the
        # language server's) reads each file once, however often evidence is asked for
        self._parsed: dict[str, tuple[tuple[int, int], ProfileRecord | str]] = {}
        self._lock = threading.Lock()

    def save(self, record: ProfileRecord) -> Path:
        ensure_state_dir(self.workspace)
        stamp = record.created_at.replace(":", "").replace("-", "").replace("+0000", "Z")
        target = self.directory / f"{stamp}-{record.origin}-{record.id}.json"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            temporary = target.with_suffix(".json.tmp")
            temporary.write_text(record.model_dump_json(indent=1), encoding="utf-8")
            os.replace(temporary, target)  # readers never see half a file
        except OSError as exc:
            raise ProfilingError("io", f"cannot write {target}: {exc.strerror or exc}") from None
        return target

    def records(self) -> list[ProfileRecord]:
        """All readable records, oldest first; unreadable files are listed in `problems`."""
        problems: list[str] = []
        if not self.directory.is_dir():
            self.problems = problems
            return []
        records = []
        with self._lock:
            seen: set[str] = set()
            for path in sorted(self.directory.glob("*.json")):
                seen.add(path.name)
                try:
                    stat = path.stat()
                except OSError:
                    continue  # removed meanwhile
                stamp = (stat.st_mtime_ns, stat.st_size)
                cached = self._parsed.get(path.name)
                if cached is None or cached[0] != stamp:
                    cached = (stamp, _read_record(path))
                    self._parsed[path.name] = cached
                if isinstance(cached[1], str):
                    problems.append(cached[1])
                else:
                    records.append(cached[1])
            for name in set(self._parsed) - seen:
                del self._parsed[name]
        self.problems = problems
        return sorted(records, key=lambda r: r.created_at)

    def evidence_for(
        self,
        kernel: CudaFunction | OmpRegion,
        *,
        file: str | None,
        gpu: MeasuredGpu | None = None,
        gpu_resolver=None,
    ) -> list[MeasuredEvidence]:
        """The newest measurement of `kernel` per GPU, newest first, marked stale when the
        kernel's body hash differs from the one measured.

        Verdicts are recomputed with `gpu` when given (judge every record with one GPU's
        figures), else with `gpu_resolver(record.gpu or record.device_name)` (default: the built-in
        GPUs); records whose GPU cannot be resolved are skipped.
        """
        gpu_resolver = gpu_resolver or find_measured_gpu
        wanted_file = _relative(file, self.workspace) if file else None
        seen: set[str] = set()
        found: list[MeasuredEvidence] = []
        for record in reversed(self.records()):
            # a record imported without GPU figures still names the device ncu saw
            named = record.gpu or record.device_name
            judge = gpu or (gpu_resolver(named) if named else None)
            if judge is None or judge.name in seen:
                continue
            for stored in record.kernels:
                mapping = stored.mapping
                if mapping is None or not _same_kernel(mapping, kernel, wanted_file):
                    continue
                evidence = evaluate(stored.measured(), judge).marked(
                    kernel_hash=mapping.body_hash, current_hash=kernel.body_hash
                )
                found.append(evidence)
                seen.add(judge.name)
                break
        return found


def _read_record(path: Path) -> ProfileRecord | str:
    """The record in `path`, or a line saying why it cannot be read."""
    try:
        return ProfileRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        return f"{path.name}: {str(exc).splitlines()[0]}"


def _same_kernel(mapping: StoredMapping, kernel: CudaFunction | OmpRegion, wanted_file: str | None) -> bool:
    if mapping.kind != kernel.kind:
        return False
    if wanted_file is not None and mapping.file is not None and mapping.file != wanted_file:
        return False
    if isinstance(kernel, CudaFunction):
        return mapping.name == kernel.qualified_name
    # A region is recognised within its function by its unchanged text (it may have moved) or,
    # once edited, by its pragma line.
    function = mapping.name.rsplit("@l", 1)[0]
    if function != (kernel.function or "<file>"):
        return False
    return mapping.body_hash == kernel.body_hash or mapping.line == kernel.line
