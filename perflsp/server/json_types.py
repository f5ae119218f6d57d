"""The JSON the server exchanges with its client, as types.

`JsonValue` is what the server sends (command answers, diagnostics' `data`, status payloads): any
JSON value, built from Python's own containers. `CommandArgument` is a command's argument as the
client sent it: nothing about its fields is known until a handler checks each one it reads (the
protocol edge: `features/commands/common.argument`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonValue: TypeAlias = bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]
CommandArgument: TypeAlias = dict[str, object]

__all__ = ["CommandArgument", "JsonObject", "JsonValue"]
