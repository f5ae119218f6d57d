"""The roofline classification rule shared by the static engine, the profiler and the LLM check.

A kernel is bandwidth-bound only when *every* precision's arithmetic intensity stays below that
precision's ridge point (peak ops/s divided by DRAM bytes/s); otherwise it is compute-bound.
This is exactly how the labels in the evaluation data are defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from perflsp.hardware.precision import ROOFLINE_PRECISIONS, Precision

Verdict = Literal["compute", "bandwidth"]

__all__ = ["ROOFLINE_PRECISIONS", "Precision", "Verdict", "classify"]


def classify(
    intensity: Mapping[Precision, float], ridge: Mapping[Precision, float]
) -> tuple[Verdict, Precision | None]:
    """Return the verdict and the precision that made it compute-bound (None for bandwidth).

    Precisions without a ridge (the GPU has no such unit, or its peak is unknown) never decide.
    When several precisions reach their ridge, the one furthest above it is named.
    """
    best: Precision | None = None
    best_ratio = 0.0
    for precision, ai in intensity.items():
        ridge_point = ridge.get(precision)
        if ridge_point is None or ridge_point <= 0:
            continue
        ratio = ai / ridge_point
        if ratio >= 1.0 and ratio > best_ratio:
            best, best_ratio = precision, ratio
    return ("compute", best) if best is not None else ("bandwidth", None)
