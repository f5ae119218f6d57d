"""The one roof every surface quotes for a kernel on a GPU, and the one way it is written.

Diagnostics, hover, code lens, inlay hints, the roofline view, `perflsp check` (text, JSON,
SARIF) and `perflsp explain` all pick the quoted precision with `roof_of` and write it with
`roof_text`, for a static estimate and for a measurement alike: a kernel shows one answer.

The quoted roof: a compute-bound kernel's deciding precision (the roof it reached); otherwise the
kernel's main arithmetic, the floating-point precision nearest its roof (FP32 for a float kernel),
INT32 only for a kernel without floating-point work. When the INT32 roof is the nearest one of a
kernel quoted by a floating-point roof, `nearest_int_roof` names it for a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from perflsp.hardware.precision import Precision

LABELS = {Precision.FP64: "FP64", Precision.FP32: "FP32", Precision.FP16: "FP16", Precision.INT32: "INT32"}


def _judged(intensity: Mapping[Precision, float], ridge: Mapping[Precision, float]) -> list[Precision]:
    return [p for p, v in intensity.items() if ridge.get(p) and not math.isnan(v)]


def _ratio(intensity: Mapping[Precision, float], ridge: Mapping[Precision, float], p: Precision) -> float:
    return intensity[p] / ridge[p]


def roof_of(deciding: Precision | None, intensity: Mapping[Precision, float],
            ridge: Mapping[Precision, float]) -> Precision | None:
    """The precision whose intensity and ridge a kernel's verdict is quoted with (see the module)."""
    if deciding is not None:
        return deciding
    judged = _judged(intensity, ridge)
    floating = [p for p in judged if p != Precision.INT32 and intensity[p] > 0]
    pool = floating or judged
    return max(pool, key=lambda p: _ratio(intensity, ridge, p)) if pool else None


def nearest_roof(intensity: Mapping[Precision, float], ridge: Mapping[Precision, float]) -> Precision | None:
    judged = _judged(intensity, ridge)
    return max(judged, key=lambda p: _ratio(intensity, ridge, p)) if judged else None


def nearest_int_roof(deciding: Precision | None, intensity: Mapping[Precision, float],
                     ridge: Mapping[Precision, float]) -> Precision | None:
    """INT32 when it is the nearest roof but not the quoted one (a note says so), else None."""
    shown = roof_of(deciding, intensity, ridge)
    nearest = nearest_roof(intensity, ridge)
    return nearest if nearest == Precision.INT32 and shown != Precision.INT32 else None


def number(value: float) -> str:
    """A displayed intensity or ridge: 3 significant figures at most (`0.17`, `20.0`, `150`)."""
    if math.isinf(value):
        return "∞"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2g}"


def unit(precision: Precision | None) -> str:
    return "op/B" if precision == Precision.INT32 else "FLOP/B"


def label(precision: Precision) -> str:
    return LABELS.get(precision, precision.value.upper())


def roof_text(precision: Precision, value: float, ridge: float | None) -> str:
    """`FP32 intensity 0.17 < ridge 20.0 FLOP/B` (without a ridge: `FP32 intensity 0.17 FLOP/B`)."""
    if not ridge:
        return f"{label(precision)} intensity {number(value)} {unit(precision)}"
    relation = "≥" if value >= ridge else "<"
    return f"{label(precision)} intensity {number(value)} {relation} ridge {number(ridge)} {unit(precision)}"


def roof_summary(deciding: Precision | None, intensity: Mapping[Precision, float],
                 ridge: Mapping[Precision, float]) -> str | None:
    """The quoted roof's text, with the INT32 note when that roof is nearer: `FP32 intensity 0.17 <
    ridge 20.0 FLOP/B · nearest roof: integer instructions, INT32 intensity 0.33 < ridge 10.0 op/B`;
    None when no intensity is known."""
    shown = roof_of(deciding, intensity, ridge)
    if shown is None:
        return None
    text = roof_text(shown, intensity.get(shown, 0.0), ridge.get(shown))
    extra = nearest_int_roof(deciding, intensity, ridge)
    if extra is not None:
        text += " · nearest roof: integer instructions, " + roof_text(extra, intensity[extra], ridge.get(extra))
    return text


__all__ = ["LABELS", "label", "nearest_int_roof", "nearest_roof", "number", "roof_of", "roof_summary", "roof_text",
           "unit"]
