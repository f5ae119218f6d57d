"""tree-sitter parsing with the CUDA grammar (a superset of C++, used for OpenMP host code too)."""

from __future__ import annotations

import threading
import time
from functools import cache
from pathlib import PurePath

from tree_sitter import Language, Node, Parser, Query, Tree

from perflsp.resources import read_text

CUDA_SUFFIXES = frozenset({".cu", ".cuh"})
CXX_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc", ".tpp"})
SOURCE_SUFFIXES = CUDA_SUFFIXES | CXX_SUFFIXES


@cache
def language() -> Language:
    import tree_sitter_cuda

    return Language(tree_sitter_cuda.language())


@cache
def query(*names: str) -> Query:
    """Compile `grammars/<name>.scm` (several files: one query, one tree walk) once per process."""
    return Query(language(), "\n".join(read_text("grammars", f"{name}.scm") for name in names))


def new_parser() -> Parser:
    # Parsers hold mutable state: one per thread/document, never shared across threads.
    return Parser(language())


YIELDING_PARSE_BYTES = 256 * 1024  # texts larger than this are parsed in chunks (see `parse`)
_CHUNK_BYTES = 16 * 1024


def parse(data: bytes, old_tree: Tree | None = None, parser: Parser | None = None) -> Tree:
    """Parse `data` (incrementally with `old_tree`). tree-sitter holds the interpreter lock for
    the whole parse, seconds for a multi-megabyte text; a large text is therefore read in chunks
    and each read lets other threads run (a language server keeps answering meanwhile). With no
    other thread to let run (`perflsp check`) it is parsed whole: each yield gives the CPU away,
    to other processes of a loaded machine too (a 15 MB file waited ~1,300 times)."""
    parser = parser or new_parser()
    # an incremental parse re-reads only what the edit changed (milliseconds): no chunks needed
    if len(data) <= YIELDING_PARSE_BYTES or old_tree is not None or threading.active_count() == 1:
        return parser.parse(data, old_tree) if old_tree is not None else parser.parse(data)

    def read(offset: int, _point: object) -> bytes:
        time.sleep(0)  # releases the interpreter lock for a moment
        return data[offset:offset + _CHUNK_BYTES]

    tree = parser.parse(read, old_tree) if old_tree is not None else parser.parse(read)
    # A tree parsed from a callback has no text of its own: every `node.text` calls `read` again
    # (a Python call, a 16 KiB slice and a sleep per node), which made the lints quadratic on
    # large files. Parsing the bytes again from that tree reuses every node (about 10 ms per MB)
    # and leaves a tree that holds its text.
    return parser.parse(data, tree)


def has_syntax_errors(tree: Tree) -> bool:
    """Whether the text has syntax errors, beyond the grammar's known gaps: tree-sitter-cuda
    reads an explicit instantiation of a class template (`template class Stream<float>;`,
    valid C++) as a declaration missing its declarator, and the execution space of an extended
    lambda (`[=] __device__ (int i) {...}`) as an error inside the lambda."""
    if not tree.root_node.has_error:
        return False
    pending = [tree.root_node]
    while pending:
        node = pending.pop()
        if node.is_missing:
            if not _instantiation_gap(node):
                return True
        elif node.is_error:
            if not _lambda_space_gap(node):
                return True
        else:
            pending.extend(c for c in node.children if c.has_error)
    return False


_SPACES = frozenset({b"__host__", b"__device__"})


def _lambda_space_gap(node: Node) -> bool:
    before = node.prev_sibling
    return (node.parent is not None and node.parent.type == "lambda_expression" and before is not None
            and before.type == "lambda_capture_specifier" and node.text is not None
            and bool(node.text.split()) and set(node.text.split()) <= _SPACES)


def _instantiation_gap(node: Node) -> bool:
    parent = node.parent
    if parent is None or parent.type != "template_instantiation" or node.type != "identifier":
        return False
    kind = parent.child_by_field_name("type")
    return kind is not None and kind.type in ("class_specifier", "struct_specifier", "union_specifier")


def is_source_path(path: str | PurePath) -> bool:
    return PurePath(path).suffix.lower() in SOURCE_SUFFIXES


def warm_up() -> None:
    """Compile every query file now (a server does this in the background at start, so the
    first document does not wait for it)."""
    from perflsp.resources import data_dir

    for path in sorted(data_dir("grammars").glob("*.scm")):
        query(path.stem)
    query("cuda_functions", "launches", "pragmas")
