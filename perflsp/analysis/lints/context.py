"""What a lint rule sees: the file's program model (its text, tree, extraction, constants and
typedefs: `perflsp.kernels.program.ProgramModel`), the kernels to lint, the GPUs and options.

Constants are the model's (`model.env`: the preprocessor's view with the file's folded
constants), types are the walker's (`CType`, typedefs as `AnalysisUnit` reads them), so a rule
and the engine read a name alike. What is derived per file (type aliases) is kept on the
model's top-level facts, what is derived per run (scopes, typers) here, each on first use.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePath
from typing import TYPE_CHECKING, Literal

from tree_sitter import Node, Tree

from perflsp.analysis.ctype import CType, parse_type
from perflsp.analysis.exprtypes import (
    ExprTyper,
    Scope,
    bind_declaration,
    declarator_name_and_depth,
    pointer_to,
    type_of,
)
from perflsp.hardware.models import Gpu
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion, Span, TemplateParam
from perflsp.kernels.program import ProgramModel
from perflsp.kernels.text import blank_comments_and_strings
from perflsp.source.positions import LineIndex

if TYPE_CHECKING:
    from perflsp.analysis.fixes.launch_document import LaunchDocument

Language = Literal["c", "cpp"]


@dataclass(frozen=True, slots=True)
class LintOptions:
    registers_per_thread: int = 32  # assumed when nothing better is known (no ptxas figures)
    occupancy_threshold: float = 0.5  # occupancy/low fires at or below this fraction
    warp_size: int = 32  # CUDA's warp; launch shapes are judged against it
    strided_access_min_bytes: int = 32  # neighbouring threads this far apart each need their own sector
    language: Language | None = None  # None: from the file suffix (.c is C, everything else C++)


@dataclass(frozen=True, slots=True)
class Instantiation:
    """Template arguments of one instantiation: type parameters and value parameters."""

    types: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    label: str | None = None  # e.g. "sum_squares<float, 256>"; None for non-templates


@dataclass(frozen=True, slots=True)
class GpuCode:
    """One piece of device code a precision rule walks: a function body under one template
    instantiation, or an OpenMP target region's statement."""

    label: str  # kernel/function/region name, as findings name it
    node: Node  # what to walk
    typer: ExprTyper
    instantiation: str | None = None  # e.g. "sum_squares<float, 256>"
    returns: CType | None = None  # return type of a function, for `return` statements
    template: Instantiation | None = None


@dataclass
class LintContext:
    model: ProgramModel  # the file's (its whole text, tree and extraction)
    gpus: Sequence[Gpu] = ()
    options: LintOptions = field(default_factory=LintOptions)
    # the kernels to lint, when not all of the file's (the server lints a few at a time)
    subject: FileKernels | None = None
    notes: list[str] = field(default_factory=list)
    # memos shared by every rule of one run: a function's scope per set of type aliases, and the
    # typer of each function holding OpenMP regions (keyed by the function's start byte)
    _scopes: dict[tuple[int, int, tuple[tuple[str, CType], ...]], Scope] = field(
        default_factory=dict, init=False, repr=False)
    _region_typers: dict[int, ExprTyper] = field(default_factory=dict, init=False, repr=False)
    # named descendants of a node (see `descendants`): several rules walk the same code
    _descendants: dict[Node, list[Node]] = field(default_factory=dict, init=False, repr=False)

    # -- text and positions --------------------------------------------------------------

    @property
    def data(self) -> bytes:
        return self.model.data

    @property
    def tree(self) -> Tree:
        return self.model.tree

    @property
    def kernels(self) -> FileKernels:
        return self.subject if self.subject is not None else self.model.kernels

    @property
    def path(self) -> str | None:
        return self.model.kernels.path

    @property
    def lines(self) -> LineIndex:
        return self.model.ctx.lines

    @cached_property
    def blanked(self) -> bytes:
        return blank_comments_and_strings(self.data)

    @cached_property
    def launch_document(self) -> LaunchDocument:
        """The file as the launch-shape questions read it (`fixes.block_size_assumed`)."""
        from perflsp.analysis.fixes import launch_document

        return launch_document(self.model, self.blanked)

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def span(self, node: Node) -> Span:
        return Span(node.start_byte, node.end_byte, lines=self.lines)

    def span_bytes(self, start: int, end: int) -> Span:
        return Span(start, end, lines=self.lines)

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def node_at(self, span: Span | None) -> Node | None:
        return node_at(self.root, span)

    def descendants(self, node: Node) -> list[Node]:
        """`walk(node)` as a list, built once per node of this run: the precision rules, the
        scopes and the access rule each walk every kernel's body."""
        found = self._descendants.get(node)
        if found is None:
            found = self._descendants[node] = list(walk(node))
        return found

    @property
    def language(self) -> Language:
        if self.options.language is not None:
            return self.options.language
        path = self.path
        return "c" if path is not None and PurePath(path).suffix == ".c" else "cpp"

    # -- file-level facts ------------------------------------------------------------------

    @property
    def constants(self) -> ConstEnv:
        """The file's constants as the model folds them (its macros, those of its headers and
        of the build, its enumerators and const values)."""
        return self.model.env

    @cached_property
    def aliases(self) -> dict[str, CType]:
        """Type names: the typedefs and `using`s of the file and its local headers, as the
        engine's unit types them, and `#define NAME type` macros of scalar types (the lints
        read the text as written, not macro-expanded). Kept with the model's top-level facts."""
        return self.model.top.remembered("lint_type_aliases", self._type_aliases)

    def _type_aliases(self) -> dict[str, CType]:
        from perflsp.analysis.options import AnalysisOptions
        from perflsp.analysis.unit import AnalysisUnit

        aliases = dict(AnalysisUnit.of(self.model, AnalysisOptions()).type_aliases)
        for name, body in self.constants.all_macros().items():
            words = body.split()
            if words and all(w in _TYPE_WORDS for w in words):
                aliases.setdefault(name, parse_type(body))
        return aliases

    def instantiation_aliases(self, inst: Instantiation | None) -> dict[str, CType]:
        """`aliases` with an instantiation's template type parameters bound (`T` = float)."""
        if inst is None or not inst.types:
            return self.aliases
        bound = {name: parse_type(text, self.aliases, guess=False) for name, text in inst.types.items()}
        return {**self.aliases, **bound}

    @cached_property
    def file_scope(self) -> Scope:
        names: dict[str, CType | Node | None] = {}
        for node in _top_level(self.root):
            if node.type == "declaration" and not any(c.type == "function_declarator" for c in node.named_children):
                bind_declaration(node, names, self.aliases)
        return Scope(names)

    @cached_property
    def function_returns(self) -> dict[str, CType | None]:
        """Return types of the file's `__device__` functions, by simple and qualified name."""
        returns: dict[str, CType | None] = {}
        for fn in self.kernels.device_functions:
            node = self.function_node(fn)
            ty = self._return_type(node, {}) if node is not None else None
            for name in (fn.name, fn.qualified_name):
                if name in returns and returns[name] != ty:
                    returns[name] = None  # overloads with different return types
                else:
                    returns[name] = ty
        return returns

    def _return_type(self, function: Node, aliases: dict[str, CType]) -> CType | None:
        type_node = function.child_by_field_name("type")
        if type_node is None:
            return None
        base = type_of(self.text(type_node), aliases or self.aliases)
        declarator = function.child_by_field_name("declarator")
        depth = 0
        while declarator is not None and declarator.type == "pointer_declarator":
            depth += 1
            declarator = declarator.child_by_field_name("declarator")
        return pointer_to(base, depth) if base else None

    # -- functions and their code ----------------------------------------------------------

    def function_node(self, fn: CudaFunction) -> Node | None:
        """The `function_definition` of an extracted function (None for recovered ones)."""
        if fn.recovered:
            return None
        node = self.root.named_descendant_for_byte_range(fn.name_span.start_byte, fn.name_span.end_byte)
        while node is not None and node.type != "function_definition":
            node = node.parent
        return node

    def instantiations(self, kernel: CudaFunction) -> list[Instantiation]:
        """Template bindings of a kernel: one per distinct set of explicit template arguments at
        its launch sites (`k<float, 256>`), else the explicit specialisation's, else none
        (template parameters then stay unknown, and unknown types never produce findings)."""
        params = kernel.template_params
        if not params:
            return [Instantiation()]
        if kernel.specialization_args is not None:
            return [_bind(params, kernel.specialization_args, None)]
        seen: dict[tuple[str, ...], Instantiation] = {}
        for site in self.kernels.launches_of(kernel):
            if site.template_args and site.template_args not in seen:
                seen[site.template_args] = _bind(params, site.template_args,
                                                 f"{kernel.name}<{', '.join(site.template_args)}>")
        return list(seen.values()) or [Instantiation()]

    def scope_of(self, function: Node, aliases: dict[str, CType]) -> Scope:
        key = (function.start_byte, function.end_byte, tuple(sorted(aliases.items())))
        scope = self._scopes.get(key)
        if scope is None:
            scope = self._scopes[key] = self._build_scope(function, aliases)
        return scope

    def _build_scope(self, function: Node, aliases: dict[str, CType]) -> Scope:
        names: dict[str, CType | Node | None] = {}
        declarator = function.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        if params is not None:
            for param in params.named_children:
                if param.type in ("parameter_declaration", "optional_parameter_declaration"):
                    decl = param.child_by_field_name("declarator")
                    if decl is None:
                        continue
                    name, depth, _ = declarator_name_and_depth(decl)
                    type_node = param.child_by_field_name("type")
                    base = type_of(self.text(type_node), aliases) if type_node is not None else None
                    if name is not None:
                        names[name] = pointer_to(base, depth) if base else None
        body = function.child_by_field_name("body")
        if body is not None:
            for node in self.descendants(body):
                if node.type == "declaration":
                    bind_declaration(node, names, aliases)
                elif node.type == "for_range_loop":
                    decl = node.child_by_field_name("declarator")
                    type_node = node.child_by_field_name("type")
                    if decl is not None and type_node is not None:
                        name, depth, _ = declarator_name_and_depth(decl)
                        base = type_of(self.text(type_node), aliases)
                        if name is not None and base is not None:
                            names[name] = pointer_to(base, depth)
        return Scope(names, parent=self.file_scope)

    def gpu_code(self) -> list[GpuCode]:
        """Every piece of device code: kernels (per instantiation), `__device__` functions,
        OpenMP target regions (computed once; typers keep their memo between rules)."""
        return self._all_gpu_code

    @cached_property
    def _all_gpu_code(self) -> list[GpuCode]:
        return list(self._each_gpu_code())

    def _each_gpu_code(self) -> Iterator[GpuCode]:
        for fn in [*self.kernels.kernels, *self.kernels.device_functions]:
            node = self.function_node(fn)
            if node is None:
                continue
            for inst in (self.instantiations(fn) if fn.is_kernel else [Instantiation()]):
                aliases = self.instantiation_aliases(inst)
                typer = ExprTyper(self.scope_of(node, aliases), aliases, self.function_returns, self.language)
                yield GpuCode(fn.qualified_name, node, typer, inst.label, self._return_type(node, aliases), inst)
        for region in self.kernels.omp_regions:
            yield from self._region_code(region)

    def _region_code(self, region: OmpRegion) -> Iterator[GpuCode]:
        body = self.node_at(region.body_span)
        if body is None:
            return
        function = body.parent
        while function is not None and function.type != "function_definition":
            function = function.parent
        if function is None:
            typer = ExprTyper(self.file_scope, self.aliases, self.function_returns, self.language)
        else:  # regions of one function share its typer
            known = self._region_typers.get(function.start_byte)
            if known is None:
                known = ExprTyper(self.scope_of(function, self.aliases), self.aliases, self.function_returns,
                                  self.language)
                self._region_typers[function.start_byte] = known
            typer = known
        yield GpuCode(region.name, body, typer)

    def value_env(self, inst: Instantiation | None = None) -> ConstEnv:
        """Template value parameters (`BLOCK` = 256) on top of the file's constants."""
        env = self.constants.child()
        if inst is not None:
            env.constants.update(inst.values)
        return env

    def uses_of(self, name: str, start: int = 0, end: int | None = None) -> list[int]:
        """Byte offsets of `name` as a whole token, outside comments and strings."""
        pattern = re.compile(rb"(?<![\w$])" + re.escape(name.encode()) + rb"(?![\w$])")
        return [m.start() for m in pattern.finditer(self.blanked, start, len(self.data) if end is None else end)]


_TYPE_WORDS = frozenset({"float", "double", "int", "unsigned", "signed", "long", "short", "char", "const",
                         "size_t", "int32_t", "uint32_t", "int64_t", "uint64_t"})


def _bind(params: tuple[TemplateParam, ...], args: tuple[str, ...], label: str | None) -> Instantiation:
    types: dict[str, str] = {}
    values: dict[str, str] = {}
    for i, param in enumerate(params):
        value = args[i] if i < len(args) else param.default
        if value is None:
            continue
        (types if param.kind == "type" else values)[param.name] = value
    return Instantiation(types, values, label)


def _top_level(root: Node) -> Iterator[Node]:
    stack = list(reversed(root.named_children))
    while stack:
        node = stack.pop()
        if node.type in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "linkage_specification",
                         "declaration_list"):
            stack.extend(reversed(node.named_children))
        elif node.type == "namespace_definition":
            body = node.child_by_field_name("body")
            if body is not None:
                stack.extend(reversed(body.named_children))
        else:
            yield node


def walk(node: Node) -> Iterator[Node]:
    """Named descendants of `node` (itself first), depth first, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def node_at(root: Node, span: Span | None) -> Node | None:
    """The outermost named node covering exactly `span` (or the smallest covering it)."""
    if span is None:
        return None
    node = root.named_descendant_for_byte_range(span.start_byte, span.end_byte)
    if node is None:
        return None
    while (node.parent is not None and node.parent.start_byte == span.start_byte
           and node.parent.end_byte == span.end_byte and node.parent.type != "translation_unit"):
        node = node.parent
    return node
