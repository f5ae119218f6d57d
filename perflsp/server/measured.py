"""Measured evidence in the editor: Nsight Compute results stored under the workspace folder's
`.perflsp/profiles/` (`perflsp.profiling.ProfileStore`), matched to the kernels of an analysed
snapshot per GPU, and marked stale when the kernel's text changed since it was measured.

A stored record is judged with the figures of the GPU it was measured on, at the clock ncu locks
(the profiling layer's built-in figures, else the hardware database's entry at its base clock).
A measurement on a GPU that is also among `perflsp.gpus` sits beside that GPU's prediction;
others are shown as measured on their own GPU.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perflsp.analysis.models import KernelReport
from perflsp.profiling.gpus import MeasuredGpu, database_resolver
from perflsp.profiling.measured import MeasuredEvidence
from perflsp.profiling.runner import LaunchVerification
from perflsp.profiling.store import ProfileStore
from perflsp.server.features.common import deciding_precision, kernel_name
from perflsp.server.json_types import JsonObject

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.documents import Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotMeasured:
    """Stored measurements of one snapshot's kernels."""

    by_gpu: Mapping[tuple[str, str], MeasuredEvidence] = field(default_factory=dict)  # (kernel, GPU name)
    other: Mapping[str, tuple[MeasuredEvidence, ...]] = field(default_factory=dict)  # kernel -> elsewhere

    def for_estimate(self, name: str, gpu: str) -> MeasuredEvidence | None:
        return self.by_gpu.get((name, gpu))

    def unmatched(self, name: str) -> tuple[MeasuredEvidence, ...]:
        return self.other.get(name, ())

    def any_for(self, name: str) -> bool:
        return bool(self.other.get(name)) or any(k[0] == name for k in self.by_gpu)


def gpu_resolver(config: ResolvedConfig) -> Callable[[str], MeasuredGpu | None]:
    """Figures for a GPU named in a record: the profiling layer's built-in GPUs (at the clock the
    labels use), else the configured GPU database at its base clock."""
    return database_resolver(config.database)


def evidence_for_reports(store: ProfileStore, config: ResolvedConfig, path: str | None,
                         reports: Iterable[KernelReport]) -> SnapshotMeasured | None:
    """Match stored results to `reports` (None when the folder has no stored results)."""
    if not store.directory.is_dir():
        return None
    resolve = gpu_resolver(config)
    configured = {g.id: g.name for g in config.gpus}
    by_gpu: dict[tuple[str, str], MeasuredEvidence] = {}
    other: dict[str, tuple[MeasuredEvidence, ...]] = {}
    for report in reports:
        name = kernel_name(report.kernel)
        found = store.evidence_for(report.kernel, file=path, gpu_resolver=resolve)
        rest = []
        for evidence in found:
            gpu = config.database.find(evidence.gpu)
            if gpu is not None and gpu.id in configured:
                by_gpu.setdefault((name, configured[gpu.id]), evidence)
            else:
                rest.append(evidence)
        if rest:
            other[name] = tuple(rest)
    if not by_gpu and not other:
        return SnapshotMeasured()
    return SnapshotMeasured(by_gpu, other)


def measured_json(evidence: MeasuredEvidence) -> JsonObject:
    """The roofline view's measured point (`intensity` and `gflops` at the deciding precision)
    with the evidence's figures."""
    data = evidence.to_json()
    precision = deciding_precision(evidence)
    point: JsonObject = {"precision": None, "intensity": None, "gflops": None}
    if precision is not None:
        ai = evidence.intensity.get(precision)
        rate = evidence.achieved_ops_per_s.get(precision)
        point = {"precision": precision.value,
                 "intensity": ai if ai is not None and math.isfinite(ai) else None,
                 "gflops": rate / 1e9 if rate else None}
    return {
        **point,
        "gpu": evidence.gpu,
        "verdict": evidence.verdict,
        "stale": evidence.stale,
        "summary": evidence.summary(),
        "intensities": data["intensity"],
        "ridges": data["ridge"],
        "durationNs": evidence.duration_ns,
        "dramBytes": evidence.dram_bytes,
        "launches": evidence.launches,
        "pctOfPeakBandwidth": evidence.pct_of_peak_bandwidth,
        "notes": list(evidence.notes),
        "source": "measured",
    }


class MeasuredService:
    def __init__(self) -> None:
        self._stores: dict[Path, ProfileStore] = {}
        self._lock = threading.Lock()
        self.running = threading.Lock()  # one profiler run at a time: runs on one GPU disturb each other
        # launch verifications: (uri, kernel, body hash, current block, proposed block) -> result
        self.verified: dict[tuple[str, str, str, int, int], LaunchVerification] = {}

    def store(self, root: Path) -> ProfileStore:
        with self._lock:
            store = self._stores.get(root)
            if store is None:
                store = self._stores[root] = ProfileStore(root)
            return store

    def evidence(self, snap: Snapshot) -> SnapshotMeasured | None:
        """Stored results for a snapshot's kernels (worker thread)."""
        root = snap.config.root
        if root is None:
            return None
        from perflsp.server.text import path_of

        path = path_of(snap.uri)
        try:
            store = self.store(root)
            if not store.directory.is_dir():
                return None  # (before listing the reports: this runs for every edit's publication)
            return evidence_for_reports(store, snap.config, str(path) if path else None, snap.reports())
        except Exception:  # unreadable results must not stop the analysis
            log.exception("cannot read the stored profiles of %s", root)
            return None


__all__ = ["MeasuredService", "SnapshotMeasured", "deciding_precision", "evidence_for_reports", "gpu_resolver",
           "measured_json"]
