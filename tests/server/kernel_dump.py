"""Canonical, comparable form of extraction results (every field, spans as bytes and positions)."""

from __future__ import annotations

import dataclasses
from typing import Any

from perflsp.kernels.models import FileKernels, Span


def dump(value: Any) -> Any:
    if isinstance(value, Span):
        return ("span", value.start_byte, value.end_byte, value.start.line, value.start.character,
                value.end.line, value.end.character)
    if isinstance(value, (list, tuple)):
        return tuple(dump(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,) + tuple(
            (f.name, dump(getattr(value, f.name))) for f in dataclasses.fields(value) if f.name != "notes")
    return value


def dump_file(fk: FileKernels) -> Any:
    return dump(fk)
