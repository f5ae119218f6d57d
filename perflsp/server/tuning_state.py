"""The server's Kernel Tuner runs (`context.ServerContext.tuning`): the best configuration each run
found, and the one run under way (`features/tuning.py` starts, cancels and offers them). Kept apart
from the feature so that the server's interface names it without importing a feature."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from perflsp.tuning.space import Config


@dataclass(frozen=True)
class TuningRun:
    """The best configuration a tuning run found, offered while the kernel's body is unchanged."""

    body_hash: str
    device: str
    config: Config
    best_ms: float
    current_ms: float | None
    evaluations: int
    recorded: bool


@dataclass
class TuningState:
    """The server's tuning runs: one at a time, cancellable."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel: threading.Event | None = None
    runs: dict[tuple[str, str, str], TuningRun] = field(default_factory=dict)  # (uri, kernel, device)


__all__ = ["TuningRun", "TuningState"]
