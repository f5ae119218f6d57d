"""What the editor and the CLI show of stored tuning results: one offer per device (its best
configuration against the code's current one), the top configurations per device, and the
portability view (how each device's best performs on the others)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from perflsp.tuning.cache import TuningRecord
from perflsp.tuning.space import Config, TuningSpace

VENDOR_WORDS = re.compile(r"^(NVIDIA|AMD|Intel)\s+(GeForce\s+|Radeon\s+(PRO\s+)?|Instinct\s+)?", re.IGNORECASE)


def short_device(name: str) -> str:
    """`NVIDIA A100-PCIE-40GB` -> `A100-PCIE-40GB`, `AMD Radeon PRO W7800` -> `W7800`."""
    return VENDOR_WORDS.sub("", name).strip() or name


@dataclass
class Offer:
    record: TuningRecord
    config: Config
    best_ms: float
    current_ms: float | None

    @property
    def speedup(self) -> float | None:
        return self.current_ms / self.best_ms if self.current_ms else None

    @property
    def how(self) -> str:
        return f"recorded on {self.record.device_name}" if self.record.recorded else "measured"

    def title(self) -> str:
        device = short_device(self.record.device_name)
        if self.speedup is not None:
            gain = f"{self.speedup:.2f}x faster than current" if self.speedup >= 1.005 else "as fast as current"
        else:
            gain = f"{self.best_ms:.3g} ms (current configuration not measured)"
        return f"Apply the {device}-tuned configuration: {gain}, {self.how}"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.record.device_name, "config": self.config, "bestMs": self.best_ms,
                "currentMs": self.current_ms, "speedup": self.speedup, "recorded": self.record.recorded,
                "title": self.title(), "path": str(self.record.path) if self.record.path else None}


def offers(records: list[TuningRecord], space: TuningSpace) -> list[Offer]:
    """One offer per device whose record fits the space and whose best is a valid, different configuration."""
    out = []
    current = space.code_values or space.current or {}
    for record in records:
        if not record.matches(space):
            continue
        best = next(((c, t) for c, t in record.timed() if space.valid(c)), None)
        if best is None:
            continue
        config, best_ms = best
        if all(current.get(k) == v for k, v in config.items()):
            continue
        current_ms = record.time_of(current) if current and set(current) == set(space.tune_params) else None
        out.append(Offer(record, config, best_ms, current_ms))
    return out


def portability(records: list[TuningRecord]) -> list[dict[str, Any]]:
    """For each device's best configuration: its time on every other device relative to that device's best."""
    rows = []
    bests = {r.device_name: r.best() for r in records}
    for source in records:
        best = bests[source.device_name]
        if best is None:
            continue
        row: dict[str, Any] = {"from": source.device_name, "config": best[0], "on": {}}
        for target in records:
            target_best = bests[target.device_name]
            time = target.time_of(best[0]) if set(target.tune_params) == set(source.tune_params) else None
            row["on"][target.device_name] = (time / target_best[1]) if time and target_best else None
        rows.append(row)
    return rows


def _config_text(config: Config, space: TuningSpace | None) -> str:
    names = space.names if space is not None else list(config)
    constant = {n for n in names if space is not None and len(space.tune_params.get(n, [])) == 1}
    return ", ".join(f"{n}={config[n]}" for n in names if n in config and n not in constant)


def hover_markdown(records: list[TuningRecord], space: TuningSpace | None, top: int = 3) -> str:
    if not records:
        return ""
    lines = ["**Tuned configurations** (Kernel Tuner caches in `.perflsp/tuning/`)", ""]
    lines += ["| device | # | configuration | time | vs best |", "| --- | --- | --- | --- | --- |"]
    for record in records:
        timed = [(c, t) for c, t in record.timed() if space is None or space.valid(c)]
        label = short_device(record.device_name) + (" (recorded)" if record.recorded else " (measured)")
        for i, (config, time) in enumerate(timed[:top], 1):
            lines.append(f"| {label if i == 1 else ''} | {i} | {_config_text(config, space)} | {time:.3g} ms | "
                         f"{time / timed[0][1]:.2f}x |")
        failed = record.failures()
        lines.append(f"| | | {len(timed)} configurations timed{f', {failed} failed' if failed else ''} | | |")
    rows = portability(records)
    if len(rows) > 1:
        devices = [r.device_name for r in records]
        lines += ["", "**Portability**: each device's best configuration on the others (time / that device's best)",
                  "", "| best of \\ on | " + " | ".join(short_device(d) for d in devices) + " |",
                  "| --- |" + " --- |" * len(devices)]
        for row in rows:
            cells = [f"{row['on'][d]:.2f}x" if row["on"].get(d) else "n/a" for d in devices]
            lines.append(f"| {short_device(row['from'])} | " + " | ".join(cells) + " |")
    provenance = [f"{short_device(r.device_name)}: {r.label()}" for r in records if r.recorded]
    if provenance:
        lines += ["", "Recorded elsewhere, not measured here: " + "; ".join(provenance)]
    return "\n".join(lines)


__all__ = ["Offer", "hover_markdown", "offers", "portability", "short_device"]
