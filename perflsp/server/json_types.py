"""The JSON the server exchanges with its client, as types.

`JsonValue` is what the server sends (command answers, diagnostics' `data`, status payloads): any
JSON value, built from Python's own containers. `CommandArgument` is a command's argument as the
client sent it: nothing about its fields is known until a handler checks each one it reads (the
protocol edge: `features/commands/common.argument`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from cattrs import Converter

JsonValue: TypeAlias = bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]
CommandArgument: TypeAlias = dict[str, object]

_CONVERTER: Converter | None = None


def lsp_converter() -> Converter:
    """pygls' converter between lsprotocol objects and JSON, made once (it caches what it learns
    of each type)."""
    global _CONVERTER
    if _CONVERTER is None:
        from pygls.protocol import default_converter

        _CONVERTER = default_converter()
    return _CONVERTER


def lsp_json(value: object) -> JsonValue:
    """An lsprotocol object (or a list of them) as the JSON the client receives."""
    shown: JsonValue = lsp_converter().unstructure(value)
    return shown


def lsp_json_object(value: object) -> JsonObject:
    """An lsprotocol object as the JSON object the client receives."""
    shown: JsonObject = lsp_converter().unstructure(value)
    return shown


__all__ = ["CommandArgument", "JsonObject", "JsonValue", "lsp_converter", "lsp_json", "lsp_json_object"]
