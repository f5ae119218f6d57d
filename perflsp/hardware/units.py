"""Byte sizes as people write them: "16KiB", "16 KB", "48K", "1MiB", "16384"."""

from __future__ import annotations

import re

# CUDA documentation writes KB for 1024 bytes, so K, KB and KiB all mean 1024 here.
_FACTORS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


def parse_size_bytes(text: str | int) -> int:
    """Bytes in `text`; raises ValueError naming the problem."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"a size cannot be negative (got {text})")
        return text
    match = _SIZE.fullmatch(str(text))
    if not match or match.group(2).lower() not in _FACTORS:
        raise ValueError(f"'{text}' is not a size (write bytes, or use a K/KiB/M/MiB suffix: 16KiB)")
    value = float(match.group(1)) * _FACTORS[match.group(2).lower()]
    if value != int(value):
        raise ValueError(f"'{text}' is not a whole number of bytes")
    return int(value)


def format_bytes(n: int) -> str:
    if n and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def format_seconds(seconds: float) -> str:
    """A duration in the unit that reads best: `2.5 s`, `41.5 µs`."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"
