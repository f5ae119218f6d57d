"""The functions an OpenMP target region can call.

A region calls ordinary C/C++ functions: those of a `#pragma omp declare target` block, or any
function the compiler makes a device function because a region calls it (OpenMP 5.0 implicit
declare target). None of them says `__device__`, so the `__device__` index of the program model
(`AnalysisUnit.callees`) does not hold them. `TargetCallees` adds every function defined in the
file and in the local headers it includes, then (a `declare target` function of another
translation unit, joined at link time) in the other sources of the file's folder, looked up by
simple name, macro-expanded, after the `__device__` ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node, Tree

from perflsp.analysis.walker import Callee
from perflsp.kernels.program import ProgramModel, first_function
from perflsp.source.files import SkippedFile, load_file
from perflsp.source.parser import parse

# nodes whose children may define functions (namespaces, `extern "C" {}`, templates, #if arms)
_CONTAINERS = ("translation_unit", "namespace_definition", "declaration_list", "linkage_specification",
               "template_declaration", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif")
_MAX_NESTING = 6
_SIBLING_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp")
_MAX_SIBLINGS = 32  # a folder of more sources than this is not one program's


def function_definitions(root: Node, data: bytes) -> dict[str, Node]:
    """Simple name -> the first definition of that name at file or namespace scope."""
    found: dict[str, Node] = {}
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.named_children:
            if child.type == "function_definition":
                name = defined_name(child, data)
                if name is not None:
                    found.setdefault(name, child)
            elif child.type in _CONTAINERS and depth < _MAX_NESTING:
                stack.append((child, depth + 1))
    return found


def defined_name(fn: Node, data: bytes) -> str | None:
    """The simple name a function definition defines (`f` of `float *ns::f(...)`)."""
    declarator = fn.child_by_field_name("declarator")
    # `float *f(...)`, `T &f(...)`: the function declarator sits under pointer/reference ones
    while declarator is not None and declarator.type in ("pointer_declarator", "reference_declarator"):
        declarator = declarator.child_by_field_name("declarator") or (
            declarator.named_children[-1] if declarator.named_children else None)
    if declarator is None or declarator.type != "function_declarator":
        return None
    name = declarator.child_by_field_name("declarator")
    if name is None:
        return None
    text = data[name.start_byte : name.end_byte].decode("utf-8", errors="replace")
    simple = text.split("::")[-1].strip()
    return simple if simple.isidentifier() else None


@lru_cache(maxsize=128)
def _header_cached(path: Path, mtime_ns: int, size: int) -> tuple[bytes, Tree, dict[str, Node]] | None:
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return None
    tree = parse(loaded.data)
    return loaded.data, tree, function_definitions(tree.root_node, loaded.data)


def _source_definitions(path: Path) -> tuple[bytes, Tree, dict[str, Node]] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return _header_cached(path, stat.st_mtime_ns, stat.st_size)


class TargetCallees(Mapping[str, Callee]):
    """`device` (the `__device__` functions) first, then the plain functions of the file, of
    its local headers and of the other sources of its folder. Built on first lookup of each
    name."""

    def __init__(self, device: Mapping[str, Callee], model: ProgramModel):
        self._device = device
        self._model = model
        self._local: dict[str, Node] | None = None
        self._sibling_paths: list[Path] | None = None
        self._built: dict[str, Callee | None] = {}

    def _lookup(self, name: str) -> Callee | None:
        if name in self._built:
            return self._built[name]
        found = self._device.get(name)
        if found is None:
            found = self._plain_function(name)
        self._built[name] = found
        return found

    def _plain_function(self, name: str) -> Callee | None:
        if self._local is None:
            self._local = function_definitions(self._model.tree.root_node, self._model.data)
        node = self._local.get(name)
        if node is not None:
            return self._expanded(node, self._model.data, keep_constants=True)
        for header in self._model.headers:
            parsed = _source_definitions(header)
            if parsed is not None and name in parsed[2]:
                return self._expanded(parsed[2][name], parsed[0], keep_constants=False)
        for sibling in self._siblings():
            parsed = _source_definitions(sibling)
            if parsed is not None and name in parsed[2]:
                return self._expanded(parsed[2][name], parsed[0], keep_constants=False)
        return None

    def _siblings(self) -> list[Path]:
        """The other sources of the file's folder (none for an unsaved buffer, or a folder of
        many programs)."""
        if self._sibling_paths is None:
            self._sibling_paths = []
            path = Path(self._model.kernels.path) if self._model.kernels.path else None
            if path is not None and path.parent.is_dir():
                try:
                    found = sorted(p for p in path.parent.iterdir()
                                   if p.suffix in _SIBLING_SUFFIXES and p.name != path.name and p.is_file())
                except OSError:
                    found = []
                if len(found) <= _MAX_SIBLINGS:
                    self._sibling_paths = [p for p in found if p not in self._model.headers]
        return self._sibling_paths

    def _expanded(self, node: Node, data: bytes, keep_constants: bool) -> Callee | None:
        """The definition with the file's macros expanded (itself when none occur)."""
        text = data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
        expanded = self._model.expand(text, keep_constants=keep_constants)
        if expanded == text:
            return Callee(node, data)
        wrapped = expanded.encode("utf-8", errors="replace")
        fn = first_function(parse(wrapped).root_node)
        return Callee(fn, wrapped) if fn is not None else None

    def __getitem__(self, name: str) -> Callee:
        found = self._lookup(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name) is not None

    def __iter__(self) -> Iterator[str]:
        names = dict.fromkeys(self._device)
        if self._local is None:
            self._local = function_definitions(self._model.tree.root_node, self._model.data)
        names.update(dict.fromkeys(self._local))
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return True
