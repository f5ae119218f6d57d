"""Host functions of the other sources of a file's folder, for the host code that calls them
with an address (`ParseCommandLineOptions(argc, argv, myRank, &opts)` in `main.cc`, defined in
`util.cc`, linked into one program): each such source read once per version, with a context
of its own that the host-value replay (`symbols.function_env`) runs the callee in."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node, Tree

from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.definitions import function_definitions
from perflsp.source.files import SkippedFile, is_transient_copy, load_file
from perflsp.source.parser import parse
from perflsp.source.positions import LineIndex

_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu")
_MAX_SOURCES = 32  # a folder of more sources than this is not one program's
_VERSIONS = "versions"  # (the key the folder's source versions are kept under in `sibling_contexts`)


def sibling_function(ctx: ExtractionContext, name: str, by_reference: bool = False
                     ) -> tuple[ExtractionContext, Node] | None:
    """The context of the other source of `ctx`'s folder that defines host function `name`, and
    the definition; None where none does (or the file has no path). `by_reference`: only a
    definition with a `&` among its parameters (one that may take a reference)."""
    if ctx.path is None:
        return None
    versions = ctx.sibling_contexts.get(_VERSIONS)
    if versions is None:  # (listed once per read of the file: every `cudaMalloc(&d, ...)` asks)
        path = Path(ctx.path)
        versions = tuple(v for v in map(_version, _folder_sources(path.parent, path.name)) if v is not None)
        ctx.sibling_contexts[_VERSIONS] = versions
    if by_reference:
        versions = tuple(v for v in versions if name in _reference_taking(*v))
    found = _defining_source(name, versions) if versions else None
    if found is None:
        return None
    sibling = ctx.sibling_contexts.get(found)
    if sibling is None:
        sibling = ctx.sibling_contexts[found] = _context(*found)
    definition = sibling.function_index.get(name) if sibling is not None and sibling.function_index else None
    return (sibling, definition) if sibling is not None and definition is not None else None


def _version(path: Path) -> tuple[Path, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return path, stat.st_mtime_ns, stat.st_size


def _folder_sources(folder: Path, own: str) -> tuple[Path, ...]:
    try:
        found = sorted(p for p in folder.iterdir()
                       if p.suffix in _SOURCE_SUFFIXES and p.name != own and p.is_file() and not is_transient_copy(p))
    except OSError:
        return ()
    return tuple(found) if len(found) <= _MAX_SOURCES else ()


@lru_cache(maxsize=1024)
def _defining_source(name: str, versions: tuple[tuple[Path, int, int], ...]) -> tuple[Path, int, int] | None:
    """The first source whose text may define `name` (`name(...) {`) and whose tree does."""
    head = re.compile(rb"\b" + re.escape(name.encode()) + rb"\s*\([^;{}]*\)\s*\{")
    for version in versions:
        data = _text(*version)
        if data is None or head.search(data) is None:
            continue
        parsed = _parsed(*version)
        if parsed is not None and name in parsed[1]:
            return version
    return None


_DEFINITION_HEAD = re.compile(rb"\b([A-Za-z_]\w*)\s*\(([^;{}()]*)\)\s*\{")


@lru_cache(maxsize=256)
def _reference_taking(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """The names the source may define with a `&` among their parameters (`void f(int &n) {`),
    from one pass over its text."""
    data = _text(path, mtime_ns, size)
    return frozenset(m.group(1).decode("latin-1") for m in _DEFINITION_HEAD.finditer(data or b"") if b"&" in m.group(2))


@lru_cache(maxsize=64)
def _text(path: Path, mtime_ns: int, size: int) -> bytes | None:
    loaded = load_file(path)
    return None if isinstance(loaded, SkippedFile) else loaded.data


@lru_cache(maxsize=32)
def _parsed(path: Path, mtime_ns: int, size: int) -> tuple[Tree, dict[str, Node]] | None:
    data = _text(path, mtime_ns, size)
    if data is None:
        return None
    tree = parse(data)
    return tree, function_definitions(tree.root_node, data)


def _context(path: Path, mtime_ns: int, size: int) -> ExtractionContext | None:
    """A context of its own for the source (the replays it memoises depend on the caller's
    environment: the program's arguments), over the shared tree."""
    data, parsed = _text(path, mtime_ns, size), _parsed(path, mtime_ns, size)
    if data is None or parsed is None:
        return None
    ctx = ExtractionContext(data, parsed[0], LineIndex(data), path=str(path))
    ctx.function_index = parsed[1]
    return ctx
