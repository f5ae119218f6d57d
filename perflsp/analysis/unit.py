"""The analysis' view of one file: the program model (`perflsp.kernels.program`) read as types
and values the walker understands, with the options of the run.

    unit = AnalysisUnit(data, tree, file_kernels, options)        # builds the model
    unit = AnalysisUnit.of(model, options)                         # over a model already built

What is typed here (typedefs as `CType`, file-scope device arrays as `Val`, device functions as
`Callee`) is built on first use and kept in the unit's own fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cached_property

from tree_sitter import Node, Tree

from perflsp.analysis.ctype import CType, parse_type
from perflsp.analysis.extents import Extent
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.struct_layout import struct_layout
from perflsp.analysis.walk_values import Callee, Val
from perflsp.kernels.consteval import ConstEnv, Value
from perflsp.kernels.models import CudaFunction, FileKernels
from perflsp.kernels.program import ProgramModel, SourceFile, program_model
from perflsp.kernels.symbols import active_contents
from perflsp.source.positions import LineIndex

HostTypes = dict[str, tuple[CType, tuple[float, ...]]]  # variable -> (type, array dimensions)
# a texture reference (`texture<float4, 2, cudaReadModeElementType>`): its element type
_TEXTURE_REFERENCE = re.compile(r"\s*texture\s*<\s*([^,<>]+?)\s*[,>]")


class AnalysisUnit:
    """Per-file state shared by the kernels of one document version."""

    def __init__(self, data: bytes, tree: Tree, kernels: FileKernels, options: AnalysisOptions,
                 lines: LineIndex | None = None, *, model: ProgramModel | None = None):
        if model is None:
            model = program_model(SourceFile(data, tree, lines or LineIndex(data), kernels, options.include_env),
                                  options.argv)
        self.model = model
        self.options = options
        self.data = self.model.data
        self.tree = self.model.tree
        self.kernels = self.model.kernels
        self.ctx = self.model.ctx
        self.env: ConstEnv = self.model.env
        if self.env.type_sizes is None:
            self.env.type_sizes = self._struct_bytes  # (`sizeof(KeyValue)` in an allocation's size)
        # memos of the analysis modules (filled on first use)
        self.extents: dict[str, Extent] = {}  # analysis.extents: variable -> its allocation's size
        # analysis.host_types: (function start, instantiation named) -> types
        self.host_types: dict[tuple[int, tuple[str, ...] | None], HostTypes] = {}

    def _struct_bytes(self, name: str) -> int | None:
        """The bytes of the struct `name` as the source lays it out, None where it does not."""
        layout = struct_layout(self.model, name, self.type_aliases)
        return layout.size_bytes if layout is not None else None

    @classmethod
    def of(cls, model: ProgramModel, options: AnalysisOptions) -> AnalysisUnit:
        return cls(model.data, model.tree, model.kernels, options, model=model)

    @cached_property
    def type_aliases(self) -> dict[str, CType]:
        """Typedefs and `using` aliases of the file's top level, then of its local headers (read
        once per `TopLevelFacts`: an edit inside a function body leaves them as they were)."""
        return self.model.top.remembered("type_aliases", self._type_aliases)

    def _type_aliases(self) -> dict[str, CType]:
        aliases: dict[str, CType] = {}
        for node in self.tree.root_node.named_children:
            self._collect_aliases(node, aliases, depth=0)
        # typedefs of the local headers (`typedef real8 Real_t;`), resolved through each other
        header_aliases = self.model.header_type_aliases
        for _ in range(3):
            for name, text in header_aliases.items():
                if name not in aliases or aliases[name].kind in ("unknown", "struct"):
                    aliases[name] = parse_type(text, aliases)
        return aliases

    def _collect_aliases(self, node: Node, aliases: dict[str, CType], depth: int) -> None:
        if node.type == "type_definition":
            type_node = node.child_by_field_name("type")
            for declarator in node.children_by_field_name("declarator"):
                stars = self.ctx.text(declarator).count("*")
                name = re.sub(r"[^\w]", "", self.ctx.text(declarator))
                # (`typedef struct {...} T;` names a struct, whatever its members' types)
                body = type_node.child_by_field_name("body") if type_node is not None else None
                written = "struct " + name if body is not None and type_node is not None and type_node.type != "enum_specifier" \
                    else self.ctx.text(type_node)
                aliases.setdefault(name, parse_type(written + "*" * stars, aliases))
        elif node.type == "alias_declaration":
            name_node = node.child_by_field_name("name")
            type_node = node.child_by_field_name("type")
            if name_node is not None and type_node is not None:
                aliases.setdefault(self.ctx.text(name_node), parse_type(self.ctx.text(type_node), aliases))
        elif node.type in ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef") and depth < 6:
            # (`#ifdef DOUBLE_PRECISION typedef double real; #else typedef float real; #endif`: the
            # branch the macros take)
            for child in active_contents(self.ctx, node, self.env):
                self._collect_aliases(child, aliases, depth + 1)
        elif node.type in ("namespace_definition", "declaration_list", "preproc_else",
                           "linkage_specification") and depth < 6:
            for child in node.named_children:
                self._collect_aliases(child, aliases, depth + 1)

    @cached_property
    def globals(self) -> dict[str, Val]:
        """File-scope `__device__`/`__constant__` arrays and variables (read once per
        `TopLevelFacts`, as `type_aliases`)."""
        return self.model.top.remembered("globals", self._globals)

    def _globals(self) -> dict[str, Val]:
        out: dict[str, Val] = {}
        for node in self.tree.root_node.named_children:
            if node.type != "declaration":
                continue
            text = self.ctx.text(node)
            head = text.split("=", 1)[0]
            space = "const" if "__constant__" in head else ("global" if "__device__" in head or "__managed__" in head else None)
            written = self.ctx.text(node.child_by_field_name("type"))
            texel = _TEXTURE_REFERENCE.match(written)
            if texel is not None:  # `texture<float4, 2> tex;`: what its fetches read
                space, written = "global", texel.group(1)
            if space is None:
                continue
            base = parse_type(written, self.type_aliases)
            for declarator in node.children_by_field_name("declarator"):
                name = re.match(r"\W*(\w+)", self.ctx.text(declarator))
                if name:
                    out[name.group(1)] = Val(CType(base.kind, base.size_bytes, base.lanes, base.pointer + 1, base.wide),
                                             root=name.group(1), space=space)
        return out

    @cached_property
    def callees(self) -> Callees:
        """`__device__` functions (and host-device helpers) by simple name, macro-expanded:
        this file's, then those of the local headers it includes. Built on first lookup of
        each name: a kernel pays only for the helpers it calls."""
        return Callees(self.model)

    @cached_property
    def target_callees(self) -> Mapping[str, Callee]:
        """What an OpenMP target region may call: the `__device__` functions, then every other
        function of the file and its local headers (`perflsp.analysis.omp_callees`)."""
        from perflsp.analysis.omp_callees import TargetCallees

        return TargetCallees(self.callees, self.model)

    def function_node(self, fn: CudaFunction) -> Callee | None:
        parsed = self.model.parsed_function(fn)
        return Callee(parsed.node, parsed.data, parsed.path, parsed.line_base) if parsed is not None else None

    def constant(self, name: str) -> tuple[float, str] | None:
        return self.model.constant(name)

    def fold_at(self, byte_offset: int, text: str) -> Value | None:
        return self.model.fold_at(byte_offset, text)

    def env_at(self, byte_offset: int, depth: int = 0) -> ConstEnv:
        return self.model.env_at(byte_offset, depth)


class Callees(Mapping[str, Callee]):
    """A lazy name -> Callee mapping over a model's device functions (see AnalysisUnit.callees);
    subclasses change what `_find` looks in (`omp_callees.TargetCallees`)."""

    def __init__(self, model: ProgramModel):
        self._model = model
        self._built: dict[str, Callee | None] = {}

    def _find(self, name: str) -> Callee | None:
        parsed = self._model.device_function(name)
        return Callee(parsed.node, parsed.data, parsed.path, parsed.line_base) if parsed is not None else None

    def _lookup(self, name: str) -> Callee | None:
        if name not in self._built:
            self._built[name] = self._find(name)
        return self._built[name]

    def __getitem__(self, name: str) -> Callee:
        found = self._lookup(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name) is not None

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._model.device_function_names() if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return True  # `callees or {}` must not build every function to learn that there are some
