"""Shared state for extracting from one parsed file: bytes, tree, line index, span helper."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tree_sitter import Node, Tree

from perflsp.kernels.models import Param, Span
from perflsp.kernels.text import _BLANK_TABLE, blank_comments_and_strings
from perflsp.source.positions import LineIndex

# the runtime calls that launch a kernel (`cudaLaunchCooperativeKernel((void *)k, grid, block,
# args, 0, stream)`, `hipLaunchKernelGGL(k, grid, block, 0, stream, a, b)`); grammars/launches.scm
# names the same
API_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "hipLaunchKernel", "hipLaunchCooperativeKernel",
                "hipLaunchKernelGGL")
# how a launch is written: `<<<`, which Visual Studio's formatter writes `k << < grid, block >> > (args)`
# (nvcc and the grammar accept it), or a runtime call
LAUNCH_TOKENS = (b"<<<", b"<< <", *(name.encode() for name in API_LAUNCHES))
_CANDIDATE_TOKENS = re.compile(b"|".join([rb"__global__", rb"__device__", *map(re.escape, LAUNCH_TOKENS),
                                          rb"#[ \t]*pragma"]))


def has_launch_syntax(data: bytes) -> bool:
    """Whether `data` may hold a kernel launch (the extraction's launch pass is skipped if not)."""
    return any(token in data for token in LAUNCH_TOKENS)


@dataclass
class ExtractionContext:
    data: bytes
    tree: Tree
    lines: LineIndex
    path: str | None = None
    notes: list[str] = field(default_factory=list)
    # The byte range whose kernels, regions and launch sites are wanted (the server re-extracts
    # one edited definition); None: the whole file.
    byte_range: tuple[int, int] | None = None
    # `symbols.function_env`'s binding events of each function (by its start) and their replays
    # (by function start and the control path of the point asked about): memos `symbols` owns
    # and types (`symbols._Event`, `symbols._Replay`); this module does not import it, which the
    # modules `symbols` itself imports for their context would make a circle
    local_events: dict[int, list[Any]] = field(default_factory=dict, repr=False)
    local_replays: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)
    # the parameters of each distinct parameter list read so far, by its text (cuda.py: `_parameters`)
    parameter_lists: dict[bytes, tuple[Param, ...]] = field(default_factory=dict, repr=False)
    # the file's function definitions by simple name, once asked (`out_parameters`)
    function_index: dict[str, Node] | None = field(default=None, repr=False)
    # the contexts of other sources of the folder whose functions this file's host code calls
    # (`sibling_functions`): their replays are folded in this file's environment, so they are its own
    sibling_contexts: dict[Any, Any] = field(default_factory=dict, repr=False)
    # function name -> the positions of its non-const reference parameters (`symbols`), once asked
    reference_parameters: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)

    def span(self, node: Node) -> Span:
        return self.span_bytes(node.start_byte, node.end_byte)

    def span_bytes(self, start: int, end: int) -> Span:
        return Span(start, end, lines=self.lines)

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def text_bytes(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", errors="replace")

    @cached_property
    def matches(self) -> dict[str, list[dict[str, list[Node]]]]:
        """Matches of the extraction queries, grouped by their main capture.

        The queries run only over the few byte ranges that can match (the `__global__`,
        `__device__`, `<<<` and `#pragma` tokens): a ranged query cursor visits just those
        nodes and their ancestors instead of walking the whole tree.
        """
        from tree_sitter import QueryCursor

        from perflsp.source.parser import query

        grouped: dict[str, list[dict[str, list[Node]]]] = {"function": [], "launch": [], "pragma": []}
        seen: set[tuple[str, int]] = set()
        extraction_query = query("cuda_functions", "launches", "pragmas")
        root = self.tree.root_node
        lo, hi = self.byte_range or (0, len(self.data))
        for m in _CANDIDATE_TOKENS.finditer(self.data, lo, hi):
            cursor = QueryCursor(extraction_query)
            cursor.set_byte_range(m.start(), m.end())
            for _, groups in cursor.matches(root):
                for key in grouped:
                    if key in groups:
                        main = groups[key][0]
                        identity = (key, main.start_byte)
                        if identity not in seen and lo <= main.start_byte and main.end_byte <= hi:
                            seen.add(identity)
                            grouped[key].append(groups)
                        break
        for items in grouped.values():
            items.sort(key=lambda g: next(iter(g.values()))[0].start_byte)
        return grouped

    @cached_property
    def blanked(self) -> bytes:
        if self.byte_range is None:
            return blank_comments_and_strings(self.data)
        # Outside the range: newlines only, so line-based scans keep their line numbers.
        lo, hi = self.byte_range
        return (self.data[:lo].translate(_BLANK_TABLE) + blank_comments_and_strings(self.data[lo:hi])
                + self.data[hi:].translate(_BLANK_TABLE))
