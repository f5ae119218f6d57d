"""A document as the launch fixes read it: where the names in a launch are defined (and
whether those definitions can be edited), which kernel reads the block size, and whether the
kernel is grid-strided or assumes its block size."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from perflsp.analysis.fixes.document import _node_text
from perflsp.analysis.fixes.launch_bounds import _threads
from perflsp.analysis.fixes.launch_exprs import _int_value, _walk
from perflsp.kernels.consteval import try_evaluate
from perflsp.kernels.models import CudaFunction, LaunchSite, Span
from perflsp.kernels.program import ProgramModel
from perflsp.kernels.text import blank_comments_and_strings


@dataclass
class _Definition:
    """Where a name used as a launch value is defined, and whether its value can be edited."""

    name: str
    value_start: int  # the literal's bytes (editable only when it is a plain integer literal)
    value_end: int
    editable: bool
    scope: tuple[int, int]  # where its uses are counted (file, or the enclosing function)
    declaration: tuple[int, int]  # the defining construct, excluded from the uses
    is_args: bool = False  # the value is a parenthesised argument list: `dim3 grid(a, b)`
    local: bool = False  # a variable of the launching function (not a file-level constant/macro)


class LaunchDocument:
    """The file's program model as the launch questions read it, with its text blanked of
    comments and strings (built once for several launches)."""

    def __init__(self, model: ProgramModel, blanked: bytes | None = None):
        self.model = model
        self.data = model.data
        self.tree = model.tree
        self.fk = model.kernels
        self.blanked = blanked if blanked is not None else blank_comments_and_strings(model.data)

    def fold(self, name: str) -> object:
        """The value of a file-level constant or macro (the model's constants), or None."""
        return self.model.evaluate(name)

    def uses(self, name: str, scope: tuple[int, int]) -> list[int]:
        pattern = re.compile(rb"(?<![\w$])" + re.escape(name.encode()) + rb"(?![\w$])")
        return [m.start() for m in pattern.finditer(self.blanked, scope[0], scope[1])]

    def enclosing_function(self, byte: int) -> Node | None:
        node = self.tree.root_node.named_descendant_for_byte_range(byte, byte)
        while node is not None and node.type != "function_definition":
            node = node.parent
        return node

    def definition(self, name: str, before: int) -> _Definition | None:
        """A local declared before `before` in the enclosing function, a file-scope constant or an
        object-like `#define` in this file."""
        function = self.enclosing_function(before)
        if function is not None:
            found = self._local(function, name, before)
            if found is not None:
                return found
        return self._file_level(name)

    def _local(self, function: Node, name: str, before: int) -> _Definition | None:
        body = function.child_by_field_name("body")
        if body is None:
            return None
        last = None
        for node in _walk(body):
            if node.start_byte >= before:
                break
            if node.type == "declaration":
                for declarator in node.children_by_field_name("declarator"):
                    target = (declarator.child_by_field_name("declarator")
                              if declarator.type in ("init_declarator", "function_declarator") else declarator)
                    if target is not None and _node_text(target) == name:
                        last = (node, declarator)
        if last is None:
            return None
        decl, declarator = last
        value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        scope = (decl.start_byte, body.end_byte)
        if self._modified(name, decl.end_byte, body.end_byte):
            return _Definition(name, 0, 0, False, scope, (decl.start_byte, decl.end_byte), local=True)
        if value is None:
            args = declarator.child_by_field_name("parameters") if declarator.type == "function_declarator" else None
            if args is not None:  # `dim3 block(256)`: the most vexing parse
                return _Definition(name, args.start_byte, args.end_byte, False, scope, (decl.start_byte, decl.end_byte),
                                   is_args=True, local=True)
            return _Definition(name, 0, 0, False, scope, (decl.start_byte, decl.end_byte), local=True)
        editable = _int_value(value) is not None
        return _Definition(name, value.start_byte, value.end_byte, editable, scope, (decl.start_byte, decl.end_byte),
                           is_args=value.type in ("argument_list", "initializer_list"), local=True)

    def _modified(self, name: str, start: int, end: int) -> bool:
        pattern = re.compile(rb"(?<![\w$.>])" + re.escape(name.encode())
                             + rb"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--|&)\s*" + re.escape(name.encode())
                             + rb"(?![\w$])|(?<![\w$])" + re.escape(name.encode()) + rb"\s*(?:\+\+|--)")
        return pattern.search(self.blanked, start, end) is not None

    def _file_level(self, name: str) -> _Definition | None:
        scope = (0, len(self.data))
        for node in self.tree.root_node.named_children:
            if node.type == "preproc_def":
                macro = node.child_by_field_name("name")
                value = node.child_by_field_name("value")
                if macro is None or _node_text(macro) != name:
                    continue
                if value is None:
                    return _Definition(name, 0, 0, False, scope, (node.start_byte, node.end_byte))
                m = re.match(rb"\s*(?:\(\s*)?(\d+)[uUlL]*(?:\s*\))?\s*(?://.*|/\*.*)?$",
                             self.data[value.start_byte:value.end_byte], re.DOTALL)
                if m is None:
                    return _Definition(name, 0, 0, False, scope, (node.start_byte, node.end_byte))
                start = value.start_byte + m.start(1)
                return _Definition(name, start, start + len(m.group(1)), True, scope, (node.start_byte, node.end_byte))
            if node.type == "declaration" and re.search(rb"\b(const|constexpr)\b", node.text or b""):
                for declarator in node.children_by_field_name("declarator"):
                    target = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else None
                    value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
                    if target is not None and _node_text(target) == name and value is not None:
                        editable = _int_value(value) is not None
                        return _Definition(name, value.start_byte, value.end_byte, editable, scope,
                                           (node.start_byte, node.end_byte))
        return None


def _reads(body: bytes, word: str) -> bool:
    """`body` (blanked) mentions `threadIdx.x`-like `word` (spaces around the dot allowed)."""
    return re.search(rb"\b" + word.encode().replace(b".", rb"\s*\.\s*") + rb"\b", body) is not None


def _kernel_assumes_block(doc: LaunchDocument, site: LaunchSite, kernel: CudaFunction, old: int | None) -> str | None:
    """Why `kernel`'s code is written for the block size `site` launches it with (1-D, `old`
    threads): a change of that size would change what it computes, not only how fast. None when
    nothing says so."""
    body = doc.blanked[kernel.body_span.start_byte:kernel.body_span.end_byte]
    shown = "its current" if old is None else str(old)
    name = site.name
    if old is not None and kernel.template_params and any(try_evaluate(arg)[0] == old for arg in site.template_args):
        return f"`{site.callee}` passes {old} as a template argument too: change both by hand"
    if not _reads(body, "threadIdx.x"):
        return f"`{name}` never reads threadIdx.x: it is written for {shown} thread(s) per block"
    if _reads(body, "blockIdx.x") and not _reads(body, "blockDim.x"):
        return f"`{name}` indexes with blockIdx.x but never reads blockDim.x: it assumes {shown} threads per block"
    if old is not None and old >= 16 and re.search(rb"(?<![\w.])" + str(old).encode() + rb"(?![\w.])", body):
        return (f"`{name}` uses the number {old} in its code (an array or index sized to the block?): "
                "change the block size by hand")
    return None


_NOT_NAMES = frozenset({b"dim3", b"int", b"unsigned", b"long", b"size_t", b"float", b"double", b"const",
                        b"static_cast", b"ceil", b"min", b"max", b"std"})


def _names_behind(doc: LaunchDocument, span: Span, depth: int = 2) -> set[bytes]:
    """The identifiers a launch argument is computed from: its own, and those of the local
    variables and object-like macros it names (`depth` levels deep)."""
    text = doc.blanked[span.start_byte:span.end_byte]
    names = {n for n in re.findall(rb"[A-Za-z_]\w*", text) if n not in _NOT_NAMES}
    frontier = set(names)
    for _ in range(depth):
        found: set[bytes] = set()
        for name in frontier:
            definition = doc.definition(name.decode(), span.start_byte)
            values: list[bytes] = []
            if definition is not None and definition.value_end > definition.value_start:
                values.append(doc.blanked[definition.value_start:definition.value_end])
            macro = re.search(rb"^[ \t]*#[ \t]*define[ \t]+" + re.escape(name) + rb"[ \t]+(.+)$", doc.blanked, re.MULTILINE)
            if macro is not None:
                values.append(macro.group(1))
            for value in values:
                found |= {n for n in re.findall(rb"[A-Za-z_]\w*", value) if n not in _NOT_NAMES}
        frontier = found - names
        names |= found
    return names


def _grid_follows_block(doc: LaunchDocument, site: LaunchSite) -> bool:
    """The grid is computed from the block size (a name both are built from, or a division by the
    block's literal), or is not a constant at all (then nothing says it is fixed)."""
    if not isinstance(site.grid.value, (int, tuple)) or site.grid.span is None or site.block.span is None:
        return True
    grid_names = _names_behind(doc, site.grid.span)
    if grid_names & _names_behind(doc, site.block.span):
        return True
    threads = _threads(site.block.value)
    grid_text = doc.blanked[site.grid.span.start_byte:site.grid.span.end_byte]
    return threads is not None and re.search(rb"/\s*\(?\s*" + str(threads).encode() + rb"(?![\w.])", grid_text) is not None


def launch_document(model: ProgramModel, blanked: bytes | None = None) -> LaunchDocument:
    """What `block_size_assumed` and `grid_strided` read, built once for several launches."""
    return LaunchDocument(model, blanked)


def block_size_assumed(doc: LaunchDocument, site: LaunchSite) -> str | None:
    """Why the block size of `site` is part of what its kernel computes, so that another size
    would change the result or repeat the work rather than run the same work faster; None when
    nothing in the file says so (or the kernel is not defined in it). What the lints about block
    sizes (`launch/block-size-not-warp-multiple`, `occupancy/low`) ask before they report a size."""
    value = site.block.value
    threads = _threads(value)
    fixed_grid = isinstance(site.grid.value, (int, tuple))
    if threads == 1 and fixed_grid and _threads(site.grid.value) == 1:
        return f"`{site.name}` runs as a single thread: the launch is serial by design"
    kernel = next((k for k in doc.fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    if kernel is None or kernel.recovered:
        return None
    body = doc.blanked[kernel.body_span.start_byte:kernel.body_span.end_byte]
    shown = f"{threads} thread{'s' if threads != 1 else ''}" if threads is not None else "its block size"
    if not any(_reads(body, f"threadIdx.{axis}") for axis in "xyz"):
        if not fixed_grid:  # `k<<<n, 1>>>`: one block per item over the data is the slip to report
            return None
        return (f"`{site.name}` never reads threadIdx and runs a fixed grid: it is written for {shown} per block "
                "(more would repeat its work)")
    if isinstance(value, int) or (isinstance(value, tuple) and value[1:] == (1, 1)):
        reason = _kernel_assumes_block(doc, site, kernel, value if isinstance(value, int) else value[0])
        if reason is not None:
            return reason
    if not _strides_by_grid(body) and not _grid_follows_block(doc, site):
        return (f"the launch runs a fixed grid of {site.grid.text.strip()} blocks of {shown}, which does not follow the "
                f"block size, and `{site.name}` is not a grid-stride loop: another block size changes the work done")
    return None


def grid_strided(doc: LaunchDocument, site: LaunchSite) -> bool:
    """The launched kernel strides over its work by the grid size (reads `gridDim`), so that more
    blocks share the same work; False when it does not or is not defined in the file."""
    kernel = next((k for k in doc.fk.kernels if k.qualified_name == site.kernel), None) if site.kernel else None
    if kernel is None or kernel.recovered:
        return False
    return _strides_by_grid(doc.blanked[kernel.body_span.start_byte:kernel.body_span.end_byte])


def _strides_by_grid(body: bytes) -> bool:
    """The kernel body (blanked) steps through its work by the grid size: `i += blockDim.x * gridDim.x`,
    or a step variable computed from `gridDim` (`i += stride`, `i = i + stride`); a grid-stride loop,
    which more blocks share. `gridDim` only in an index, a print or a launch of its own
    (`child<<<gridDim.x, ...>>>`) is no stride."""
    text = re.sub(rb"<<<.*?>>>", b"", body, flags=re.DOTALL)
    if re.search(rb"\bgridDim\b", text) is None:
        return False
    terms = [rb"gridDim"]
    for match in re.finditer(rb"([A-Za-z_]\w*)\s*=(?!=)([^;]*)", text):
        if re.search(rb"\bgridDim\b", match.group(2)):
            terms.append(re.escape(match.group(1)))
    term = rb"\b(?:" + b"|".join(terms) + rb")\b"
    if re.search(rb"(?:\+=|-=)[^;)]*" + term, text):
        return True
    return re.search(rb"\b([A-Za-z_]\w*)\s*=\s*\1\s*[-+][^;)]*" + term, text) is not None
