"""Syntax trees of texts and of other files (a folder's sources, local headers, includers), cached
by text or by file version (path, mtime, size), so a file read as itself, as the sibling a callee
is defined in and as a header's includer is parsed once."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node, Tree

from perflsp.kernels.definitions import function_definitions
from perflsp.kernels.extract import extract
from perflsp.kernels.models import CudaFunction
from perflsp.source.files import SkippedFile, load_file
from perflsp.source.parser import parse


def file_version(path: Path) -> tuple[Path, int, int] | None:
    """(path, mtime, size): what the caches of other files' syntax trees are keyed by."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return path, stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=256)
def parsed_source(path: Path, mtime_ns: int, size: int) -> tuple[bytes, Tree] | None:
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return None
    return loaded.data, parsed_text(loaded.data)


_SHARED_PARSE_BYTES = 256 * 1024  # larger texts are parsed each time (their trees are large)


def parsed_text(data: bytes) -> Tree:
    """The tree of `data`, shared by the readers of the same text (do not edit it: copy it): a
    file of a folder is read as itself, as the sibling another file's callee is defined in, and
    as the includer of a header, and each of these parsed it again."""
    return _parsed_text_cached(data) if len(data) <= _SHARED_PARSE_BYTES else parse(data)


@lru_cache(maxsize=32)
def _parsed_text_cached(data: bytes) -> Tree:
    return parse(data)


@lru_cache(maxsize=256)
def parsed_header(path: Path, mtime_ns: int, size: int) -> tuple[bytes, Tree, tuple[CudaFunction, ...]] | None:
    parsed = parsed_source(path, mtime_ns, size)
    if parsed is None:
        return None
    data, tree = parsed
    return data, tree, tuple(extract(data, tree, str(path)).device_functions)


@lru_cache(maxsize=256)
def source_definitions(path: Path, mtime_ns: int, size: int) -> tuple[bytes, dict[str, Node], Tree] | None:
    parsed = parsed_source(path, mtime_ns, size)
    if parsed is None:
        return None
    data, tree = parsed
    return data, function_definitions(tree.root_node, data), tree  # (the tree keeps the nodes alive)


# `name(params) {`: what a function definition looks like in text (a superset: `if (x) {` too); the
# head is a lookahead, or `#define S (0.5f)` before `float f(float x) {` would hide `f`
_DEFINITION_HEAD = re.compile(rb"\b([A-Za-z_]\w*)(?=\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->[^;{}]*)?\{)")


@lru_cache(maxsize=256)
def defined_names(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """Names another file may define a function of, from its text (a superset; no parse): a
    sibling source is parsed only when it may define the name asked about. Every unresolved
    call of a kernel (built-ins, intrinsics) is asked about, and parsing every source of a
    folder of large files for those cost seconds and hundreds of MiB."""
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return frozenset()
    return frozenset(m.decode("utf-8", "replace") for m in _DEFINITION_HEAD.findall(loaded.data))
