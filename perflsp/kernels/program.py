"""The program model of one file in one context: what the analysis reads from the code.

    model = program_model(read_source(path, data, resolver), argv)

Built once per file context (a text, its preprocessor environment, the program's arguments)
and shared by every kernel of the file. It holds the preprocessed view (macros, header
typedefs, the file's folded constants), the call index (`calls_to`, the arguments a function's
first caller passes), the constants visible at any point (`env_at`), the allocations of the
host code (`host_allocation`, indexed in one pass over the text) and the OpenMP `map`
sections; it expands and parses snippets on the analysis' behalf, so the analysis never calls
the preprocessor or the parser itself. Every memo is a field of the model, filled on first use.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from tree_sitter import Node, QueryCursor, Tree

from perflsp.kernels.allocations import HostAllocation, index_allocations
from perflsp.kernels.build_sources import program_sources
from perflsp.kernels.consteval import ConstEnv, ReadsApart, Value, try_evaluate
from perflsp.kernels.context import ExtractionContext
from perflsp.kernels.cuda import from_definition, macro_aliases
from perflsp.kernels.definitions import (
    function_declarator,
    function_definitions,
    template_arguments,
    template_type_names,
    template_value_names,
)
from perflsp.kernels.extract import extract, extract_with_constants
from perflsp.kernels.fields import field_declarations
from perflsp.kernels.file_trees import defined_names, file_version, parsed_header, parsed_text, source_definitions
from perflsp.kernels.host_fills import HostFill, host_fill
from perflsp.kernels.includes import IncludeResolver, balanced_view, scan_constants
from perflsp.kernels.launches import enclosing_function
from perflsp.kernels.loop_passes import MAX_LATER_PASSES, later_pass_env
from perflsp.kernels.macro_calls import MacroCall, calls_in_expansion, macros_calling
from perflsp.kernels.models import CudaFunction, FileKernels, OmpClause
from perflsp.kernels.objects import DeclaredStruct, ObjectPaths, declared_fields_env, member_env, object_paths_env, passed_fields
from perflsp.kernels.omp import parse_clauses, split_directive
from perflsp.kernels.pointer_tables import calls_through, calls_through_callbacks, mentions_any, tables_listing
from perflsp.kernels.preprocess import expand_macros
from perflsp.kernels.static_members import static_member_value
from perflsp.kernels.symbols import TopLevelFacts, declares, file_env, function_env, is_write, mutable_globals, never_runs
from perflsp.source.files import SkippedFile, is_transient_copy, load_file
from perflsp.source.parser import parse, query
from perflsp.source.positions import LineIndex

Folded = float | tuple[Any, ...]
_PRAGMA = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+omp[ \t]+((?:[^\n\\]|\\\r?\n)*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ParsedFunction:
    """A function definition as the analysis walks it: its node and the bytes the node's
    offsets point into (the file's, or a macro-expanded copy)."""

    node: Node
    data: bytes
    path: str | None = None  # the file the definition is read from (None: not known)
    line_base: int = 0  # the file's 0-based row of `data`'s first line (a macro-expanded copy starts at the definition)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A text read in its context: its tree, line index, the kernels extracted in it, the
    preprocessor's view it was read with (`env`) and the facts of its top-level declarations
    the extraction folded with (`top`, over `env`): what a `ProgramModel` is built from
    (`program_model`). The server's incremental extraction makes one of its text the same way."""

    data: bytes
    tree: Tree
    lines: LineIndex
    kernels: FileKernels
    env: ConstEnv | None  # (None: the text's own macros)
    top: TopLevelFacts | None = None
    build_sources: tuple[Path, ...] = ()  # the build's other sources of the program (`CompileFlags.unit_sources`)


def read_source(path: Path | None, data: bytes, resolver: IncludeResolver, defines: dict[str, str] | None = None,
                include_dirs: tuple[Path, ...] = (), includers: bool = True,
                build_sources: tuple[Path, ...] = (), project_search: bool = False) -> SourceFile:
    """Parse and extract `data` (the text of `path`) with the macros of its local headers and the
    build's `defines`/`include_dirs`; with `includers`, a file that a sibling source `#include`s
    is read in that sibling's context; with `project_search` (no build names its flags), headers
    the include paths miss are looked for around it."""
    env = resolver.env_for(path, data, defines, include_dirs, includers=includers, project_search=project_search)
    data = balanced_view(data, env)
    tree = parsed_text(data).copy()  # (a copy: the caller may edit its tree)
    lines = LineIndex(data)
    kernels, constants = extract_with_constants(data, tree, path=str(path) if path is not None else None,
                                                lines=lines, env=env)
    return SourceFile(data, tree, lines, kernels, env, TopLevelFacts(constants), build_sources)


def program_model(source: SourceFile, argv: Sequence[str] | None = None) -> ProgramModel:
    """The program model of a text read in its context, with the program's arguments `argv`
    (None: not known). Every model is built here: a fresh read (`read_source`), the server's
    incremental extraction of an open document (its `SourceFile` carries the extraction's
    top-level facts), a sibling or includer read for its call sites."""
    return ProgramModel(source.data, source.tree, source.kernels, source.env, argv, source.lines, top=source.top,
                        build_sources=source.build_sources)


# `name(` or `name<...>(`; the lookahead consumes only the name, so a name inside another's
# `<...>` (`i < n && f<T>(x)`) is still found
_CALL_TAIL = rb"\s*(?:<[^;{}()]*>\s*)?\("
def _occurrences(data: bytes, word: bytes) -> list[int]:
    """Offsets of `word` not preceded by a word character (`bytes.find` runs at memchr speed; a
    regex that starts with `\\b` tries every position: 4 ms on a 10,000-line file)."""
    out: list[int] = []
    at = data.find(word)
    while at >= 0:
        if at == 0 or not (data[at - 1:at].isalnum() or data[at - 1:at] == b"_"):
            out.append(at)
        at = data.find(word, at + 1)
    return out


# how many levels of callers a host function's parameters are read through (a launch in `run(n)`,
# called by `test(n)`, called by `main`); `perflsp.server.dependents` re-analyses as far
CALLER_LEVELS = 3
_SIBLING_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp")
# where a `__device__` function of another translation unit (linked with `-rdc`) or of a header
# the file does not include is defined
_SIBLING_CUDA_SUFFIXES = (".cu", ".cuh", ".h", ".hh", ".hpp")
_MAX_SIBLINGS = 32  # a folder of more sources than this is not one program's

# `calls_to` scans the text for each of the first names it is asked about (one analysed kernel
# asks about one or two: a scan costs ~1 ms on a 10,000-line file), then indexes every call once
# (a whole-file analysis asks about hundreds of names; the index costs ~40 ms there).
_SCANS_BEFORE_INDEX = 8
_CALL_START = re.compile(rb"\b([A-Za-z_]\w*)(?=" + _CALL_TAIL + rb")")


class ProgramModel:
    """Per-file facts shared by the kernels of one document version (see the module docstring)."""

    def __init__(self, data: bytes, tree: Tree, kernels: FileKernels, include_env: ConstEnv | None = None,
                 argv: Sequence[str] | None = None, lines: LineIndex | None = None,
                 top: TopLevelFacts | None = None, build_sources: tuple[Path, ...] = ()):
        """`top`: the facts of this text's top-level declarations when the caller has them (an
        extraction's, carried over edits inside function bodies); they are used when they stand
        over the same preprocessor view (`include_env`), else read from the text."""
        self.data = data
        self.tree = tree
        self.kernels = kernels
        self.argv = tuple(argv) if argv is not None else None
        self.include_env = include_env
        self.build_sources = build_sources
        self.ctx = ExtractionContext(data, tree, lines or LineIndex(data), kernels.path)
        if top is None or include_env is None or top.env.parent is not include_env:
            top = TopLevelFacts(file_env(self.ctx, include_env))
        self.top = top
        env = top.env
        if argv is not None:
            base = env
            while base.parent is not None:
                base = base.parent
            base.argv = ("program", *argv)
        elif env.program_arguments() is None:
            # the arguments are not known (an editor): the host code's own defaults, its values
            # when the program is run without arguments (`if (argc > 1) n = atoi(argv[1]);`),
            # stated where a fold reads them (a layer of this model's: the extraction's folds
            # do not see the assumption)
            env = ConstEnv(parent=env, argv=("program",), argv_assumed=True)
        self.env = env
        self._constants: dict[str, tuple[float, str] | None] = {}
        self._caller_arguments: dict[tuple[int, int, int], dict[str, Folded]] = {}  # (function, depth, later pass)
        self._template_types: dict[int, dict[str, str]] = {}  # function start -> its type parameters' types
        self._calls_run: dict[tuple[int, int], bool] = {}  # (call start, depth) -> whether a run reaches it
        self._caller_assumed: dict[tuple[int, int], set[str]] = {}  # those folded from assumed arguments
        self._calls: dict[str, list[Node]] = {}
        self._macro_calls: dict[str, list[MacroCall]] = {}
        self._local_functions: dict[str, CudaFunction] = {}
        for fn in kernels.device_functions:
            self._local_functions.setdefault(fn.name, fn)
        self._header_functions: list[tuple[bytes, Tree, dict[str, CudaFunction], str]] | None = None
        self._class_fields: dict[str, list[tuple[bytes, list[Node]]]] = {}
        self._defines_name: dict[str, bool] = {}  # `_may_define`, per name asked about
        self._sibling_envs: dict[tuple[Path, int, int], ConstEnv] = {}  # `_env_of`, per file version
        self._functions_alone: dict[tuple[int, int], Node | None] = {}  # `_function_alone`, per span
        self._object_paths: ObjectPaths = {}  # `objects.object_paths_env`
        self._declared_fields: dict[tuple[int, int], list[DeclaredStruct]] = {}  # `objects.declared_fields_env`
        self._member_envs: dict[tuple[int, int], list[tuple[ConstEnv, ConstEnv]]] = {}  # `_members_env`
        self._fills: dict[str, HostFill | None] = {}  # `host_fill`, per array asked about
        self._fragment_env: tuple[ConstEnv | None] | None = None  # `_including_env`, once
        self._fragment_site: tuple[tuple[tuple[Path, int, int], bytes, int, tuple[int, int]] | None] | None = None

    # ------------------------------------------------------------------ edited versions

    def reread(self, data: bytes, tree: Tree) -> ProgramModel:
        """The model of an edited version of this text, read in the same context (its headers'
        and the build's macros, the program's arguments) with the edited text's own `#define`s
        over it: what a fix reads back, once, to check what its edit now folds to."""
        env = _edited_macros(data, self.include_env)
        kernels = extract(data, tree, self.kernels.path, env=env)
        return ProgramModel(data, tree, kernels, env, self.argv)

    def edited_definition(self, data: bytes, tree: Tree, offset: int) -> CudaFunction | None:
        """The function whose definition holds `offset` in an edited version of this text whose
        edit stayed inside that definition (so this model's constants still hold): extracted
        alone, so that checking such an edit costs the definition, not the file."""
        node: Node | None = tree.root_node.descendant_for_byte_range(offset, offset)
        while node is not None and node.type != "function_definition":
            node = node.parent
        if node is None:
            return None
        ctx = ExtractionContext(data, tree, LineIndex(data), self.kernels.path)
        return from_definition(ctx, node, self.top.env, macro_aliases(self.top.env))

    # ------------------------------------------------------------------ preprocessed view

    def expand(self, text: str, env: ConstEnv | None = None, keep_constants: bool = False) -> str:
        """`text` with the file's macros (or `env`'s) expanded (itself when none occur)."""
        return expand_macros(text, env if env is not None else self.env, keep_constants=keep_constants)

    def evaluate(self, text: str, env: ConstEnv | None = None) -> Value | None:
        """The value `text` folds to with the file's constants (or `env`'s), or None."""
        value, _ = try_evaluate(text, env if env is not None else self.env)
        return value

    def scoped(self, constants: dict[str, str | Value], parent: ConstEnv | None = None) -> ConstEnv:
        """An environment with `constants` bound over `parent` (default: the file's)."""
        return ConstEnv(parent=parent if parent is not None else self.env, constants=constants)

    @cached_property
    def header_type_aliases(self) -> dict[str, str]:
        """Typedefs of the local headers (`typedef real8 Real_t;`): name -> type text."""
        out: dict[str, str] = {}
        env: ConstEnv | None = self.env
        while env is not None:
            for name, text in env.type_aliases.items():
                out.setdefault(name, text)
            env = env.parent
        return out

    @cached_property
    def headers(self) -> tuple[Path, ...]:
        """The local headers the translation unit includes, in include order."""
        env: ConstEnv | None = self.env
        while env is not None:
            if env.headers:
                return tuple(env.headers)
            env = env.parent
        return ()

    def constant(self, name: str) -> tuple[float, str] | None:
        """A macro or file-scope constant by name (a compile-time constant) and the kind of its
        literal ("int", "f32" for `1e-9f`, "f64"), or None."""
        if name not in self._constants:
            value, _ = try_evaluate(name, self.env)
            if not isinstance(value, (int, float)) and "::" in name:
                value = self._static_member(name)
            if isinstance(value, (int, float)):
                body = self.env.all_macros().get(name, "")
                if isinstance(value, int):
                    kind = "int"
                elif re.search(r"\d[fF]\b|\.[fF]\b", body):
                    kind = "f32"
                else:
                    kind = "f64"
                self._constants[name] = (float(value), kind)
            else:
                self._constants[name] = None
        return self._constants[name]

    def _static_member(self, name: str) -> int | float | None:
        """`Class::member`, a static constant of a class (template instance) defined in this file
        or a local header (`perflsp.kernels.static_members`)."""
        texts, aliases = self._class_texts
        return static_member_value(name, aliases, texts)

    @cached_property
    def _class_texts(self) -> tuple[list[str], ConstEnv]:
        """The texts classes may be defined in (this file, its local headers) and the type
        aliases they declare (the file's own typedefs too), read once."""
        texts = [self.data.decode("utf-8", errors="replace")]
        for path, _mtime, _size in self._header_versions:
            try:
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
        aliases = ConstEnv(parent=self.env)
        for text in texts:
            scan_constants(text.encode("utf-8", errors="replace"), aliases)
        return texts, aliases

    # ------------------------------------------------------------------ constants at a point

    def fold_at(self, byte_offset: int, text: str) -> Value | None:
        value, _ = try_evaluate(text, self.env_at(byte_offset))
        return value

    def env_at(self, byte_offset: int, depth: int = 0) -> ConstEnv:
        """Constants visible at a point: file constants, the file's variables that keep their
        initial value (`host_globals`), the enclosing function's locals, and its parameters as
        passed by its first caller (`CALLER_LEVELS` levels up)."""
        return self._env_at(byte_offset, depth, self.host_globals)

    def _env_at(self, byte_offset: int, depth: int, parent: ConstEnv,
                passing: dict[str, Folded] | None = None) -> ConstEnv:
        """`env_at`, the enclosing function's parameters as `passing` gives them where it does."""
        function = self.enclosing_function(byte_offset)
        passed: dict[str, Folded] = {}
        if function is None and depth == 0:
            # a fragment `#include`d inside a function of another source (`{ #include "step.h" }`):
            # that function's locals and parameters where the directive stands
            parent = self._including_env() or parent
        if function is not None and depth < CALLER_LEVELS:
            passed = self.caller_arguments(function, depth) if passing is None else passing
            types = self.caller_template_types(function)
            if types:
                parent = ConstEnv(parent=parent, type_aliases=types)
            parent = self._members_env(function, depth, parent)
            parent = declared_fields_env(self, function, byte_offset, depth, parent, self._declared_fields)
            parent = object_paths_env(self, function, byte_offset, depth, parent, self._object_paths)
        return function_env(self.ctx, function, byte_offset, parent, passed,
                            self._caller_assumed.get((function.start_byte, depth), ()) if passed and function else ())

    def _members_env(self, function: Node, depth: int, parent: ConstEnv) -> ConstEnv:
        """`parent` with the members of the object a method is called on (`objects`)."""
        built = self._member_envs.setdefault((function.start_byte, depth), [])
        for base, env in built:  # (held with their parent: an id could be reused)
            if base is parent:
                return env
        built.append((parent, parent))  # (a method reached again while its object is followed)
        env = member_env(self, function, depth, parent) or parent
        built[-1] = (parent, env)
        return env

    def defining_model(self, name: str) -> ProgramModel | None:
        """This file if it defines the function `name`, else the first source of its folder that does."""
        if name in self._plain_definitions:
            return self
        return next((m for v in self._sibling_all_versions if name in defined_names(*v)
                     and (m := _sibling_model(*v, self.argv)) is not None and name in m._plain_definitions), None)

    def class_sources(self, class_name: str, method: str) -> tuple[list[ProgramModel], list[tuple[bytes, Node]]]:
        """This file and the folder's sources that may call `method` or construct or define
        `class_name`, and the roots of this file's local headers (where a class is declared)."""
        models = [self] + [m for m in self._caller_sources(method) if m is not self]
        models += [m for m in self._caller_sources(class_name) if all(m is not n for n in models)]
        return models, [(data, tree.root_node) for data, tree, _, _ in self._headers_functions()]

    @cached_property
    def host_globals(self) -> ConstEnv:
        """The file's environment with its non-const variables that keep their initial value
        (`int size = 1 << 20;` at file scope): those the file never writes, or writes only
        where the host code does not go (`for (i = 1; i < argc; i++)` with no arguments,
        `if (argc > 2)`), where a local of the same name does not hide them."""
        candidates = self.file_variables
        if not candidates:
            return self.env
        kept: dict[str, str | Value] = {}
        assumed: set[str] = set()
        for name, text in candidates.items():
            with ReadsApart() as reads:
                written = self._written(name)
            if not written:
                kept[name] = text
                if reads.seen:
                    assumed.add(name)  # (kept because a run without arguments skips its writes)
        return ConstEnv(parent=self.env, constants=kept, assumed=assumed) if kept else self.env

    @cached_property
    def file_variables(self) -> dict[str, str]:
        """The non-const variables the file declares at file scope with an initial value: name ->
        its initialiser's text (`host_globals` keeps those nothing that runs writes)."""
        return mutable_globals(self.ctx)

    def function_name(self, function: Node) -> str | None:
        """The simple name of a function definition (`Stream<T>::copy` -> `copy`)."""
        declarator = function_declarator(function)
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        return self.ctx.text(name_node).rsplit("::", 1)[-1] if name_node is not None else None

    def _written(self, name: str) -> bool:
        """Whether the host code may write the file-scope variable `name` (an assignment, `++`,
        `&name`) anywhere it can run."""
        root = self.tree.root_node
        for at in _occurrences(self.data, name.encode()):
            end = at + len(name)
            if end < len(self.data) and (self.data[end:end + 1].isalnum() or self.data[end:end + 1] == b"_"):
                continue
            node = root.descendant_for_byte_range(at, end)
            if node is None or node.type != "identifier":
                continue
            if not is_write(node):
                continue
            function = enclosing_function(node)
            if function is None:
                return True
            if declares(self.ctx, function, name, node.start_byte):
                continue  # a local or parameter of that name
            if never_runs(self.ctx, node, function, lambda offset: self._env_at(offset, 0, self.env)):
                continue
            return True
        return False

    def enclosing_function(self, byte_offset: int) -> Node | None:
        node = self.tree.root_node.descendant_for_byte_range(byte_offset, byte_offset)
        function = enclosing_function(node) if node is not None else None
        if function is None and self.tree.root_node.has_error:
            function = self._function_alone(byte_offset)
        return function

    def _function_alone(self, byte_offset: int) -> Node | None:
        """The function around `byte_offset` where the file's tree lost it (macros that
        tree-sitter cannot read make the whole file one ERROR node): that function parsed with
        the rest of the text blanked, so its nodes keep the file's byte offsets."""
        span = function_around(self.data, byte_offset)
        if span is None:
            return None
        if span not in self._functions_alone:
            outside = bytes.maketrans(bytes(range(256)), b" " * 10 + b"\n" + b" " * 245)
            blanked = self.data[: span[0]].translate(outside) + self.data[span[0] : span[1]] \
                + self.data[span[1] :].translate(outside)
            node = parsed_text(blanked).root_node.descendant_for_byte_range(byte_offset, byte_offset)
            self._functions_alone[span] = enclosing_function(node) if node is not None else None
        return self._functions_alone[span]

    def template_type_parameters(self, byte_offset: int) -> list[str]:
        """The template type parameters in scope at `byte_offset`: those of the function around
        it (`template <class T> void Stream<T>::copy()`) and of the class it is defined in."""
        function = self.enclosing_function(byte_offset)
        if function is not None:
            start = function.start_byte
            node: Node | None = function.parent
            names: list[str] = []
            while node is not None:
                if node.type == "template_declaration":
                    parameters = node.child_by_field_name("parameters")
                    if parameters is not None:
                        names.extend(_TEMPLATE_TYPE_PARAMETER.findall(self.ctx.text(parameters)))
                node = node.parent
            if names:
                return names
        else:
            span = function_around(self.data, byte_offset)
            if span is None:
                return []
            start = span[0]
        # the tree lost the `template_declaration` (or the function): the `template <...>` text
        # right before the definition
        before = self.data[max(0, start - 400) : start].decode("utf-8", errors="replace")
        m = re.search(r"template\s*<([^{};]*)>\s*(?:(?:inline|static)\s+)*$", before)
        return _TEMPLATE_TYPE_PARAMETER.findall(m.group(1)) if m is not None else []

    def caller_arguments(self, function: Node, depth: int = 0, later: int = 0) -> dict[str, Folded]:
        """The foldable arguments the first caller of `function` passes, by parameter name: a
        call in this file, else (a function of a header, or of another translation unit) one in
        another source of the file's folder. `later`: on that pass of the loop around the call
        after its first (`loop_passes`; nothing where there is none)."""
        key = (function.start_byte, depth, later)
        if key in self._caller_arguments:
            return self._caller_arguments[key]
        self._caller_arguments[key] = {}
        declarator = function_declarator(function)
        if declarator is None:
            return {}
        name_node = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters")
        if name_node is None or params is None:
            return {}
        name = self.ctx.text(name_node).split("::")[-1]
        param_names: list[str | None] = []
        for p in params.named_children:
            if p.type == "comment":
                continue  # (`float **eigenIntervals,  // reset` is one parameter, not two)
            m = re.search(r"(\w+)\s*(?:\[.*\])?\s*(?:=.*)?$", self.ctx.text(p))
            param_names.append(m.group(1) if m else None)
        template_names = template_value_names(function)
        passed = self.arguments_passed(name, tuple(param_names), depth, outside=function, template_names=template_names,
                                       later=later)
        if passed is None and name != "main":
            for other in self._caller_sources(name):
                passed = other.arguments_passed(name, tuple(param_names), depth, template_names=template_names,
                                                later=later)
                if passed is not None:
                    break
        if later:
            values = passed[0] if passed is not None else {}
            self._caller_arguments[key] = values
            return values
        method = "::" in self.ctx.text(name_node) or (function.parent is not None and function.parent.type == "field_declaration_list")
        if passed is None and method:
            # a method (`void Perlin::calculate(...)`, or defined in its class): its calls on an
            # object, here or in another source of the folder
            siblings = (_method_caller(v, name, self.argv) for v in self._sibling_all_versions)
            for caller in itertools.chain((self,), siblings):
                calls = caller.method_calls_to(name) if caller is not None else []
                passed = caller.arguments_passed(name, tuple(param_names), depth, calls=calls) if caller and calls else None
                if passed is not None:
                    break
        if passed is None and name != "main":
            passed = self._passed_through_tables(name, tuple(param_names), depth)
        if passed is None and name != "main":
            calls = calls_through_callbacks(self.data, self.tree.root_node, name, self._plain_definitions)
            passed = self.arguments_passed(name, tuple(param_names), depth, calls=calls) if calls else None
        values, assumed = passed if passed is not None else ({}, set())
        if assumed:
            self._caller_assumed[(function.start_byte, depth)] = assumed
        self._caller_arguments[key] = values
        return values

    def caller_template_types(self, function: Node) -> dict[str, str]:
        """The types the calls of a function template naming them pass for its type parameters
        (`conv<float>(n)` for `template <class T> void conv(int n)`: T is float), so that
        `sizeof(T)` folds in it; none where calls name different types (`run<float>` and
        `run<double>`: which one a launch inside measures, the caller does not say)."""
        key = function.start_byte
        if key in self._template_types:
            return self._template_types[key]
        named: set[tuple[tuple[str, str], ...]] = set()
        names = template_type_names(function)
        declarator = function_declarator(function) if any(names) else None
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        if name_node is not None:
            name = self.ctx.text(name_node).split("::")[-1]
            for call in self.calls_to(name):
                listed = template_arguments(call.child_by_field_name("function"))
                if listed and not function.start_byte <= call.start_byte < function.end_byte:
                    named.add(tuple((n, " ".join(self.ctx.text(a).split())) for n, a in zip(names, listed) if n is not None))
        found = dict(next(iter(named))) if len(named) == 1 else {}
        self._template_types[key] = found
        return found

    def arguments_passed(self, name: str, param_names: tuple[str | None, ...], depth: int,
                         outside: Node | None = None, calls: list[Node] | None = None,
                         template_names: tuple[str | None, ...] = (), later: int = 0,
                         ) -> tuple[dict[str, Folded], set[str]] | None:
        """What the first call of `name` in this file (or of `calls`; with as many arguments as
        `param_names`, not inside `outside`: a recursive call) passes: the foldable arguments by
        parameter name, and those folded from assumed program arguments; None when there is no such call.
        A call a run without arguments reaches comes before those it does not (a `--sweep` option's run
        from 1 element, ahead of the run's own size in the source). The call's explicit template
        arguments bind the value parameters `template_names` names (`run<256>(n)` for
        `template <int BS> void run(int n)`; None for a type parameter). A call that its
        function's first pass cannot reach (`if (n > 1) run(n);` where `n` is 1 the first time
        the function is called) passes what it does on the first pass of its caller's loop that
        reaches it; `later`: what it passes on that pass of the loop around it."""
        candidates: list[tuple[Node, list[str], Sequence[str]]] = []  # (where the call stands, its arguments, its template arguments)
        for call in self.calls_to(name) if calls is None else calls:
            if outside is not None and outside.start_byte <= call.start_byte < outside.end_byte:
                continue
            args = call.child_by_field_name("arguments")
            if args is None:
                continue
            arg_texts = [self.ctx.text(a) for a in args.named_children if a.type != "comment"]
            if len(arg_texts) == len(param_names):
                listed = template_arguments(call.child_by_field_name("function")) or []
                candidates.append((call, arg_texts, [self.ctx.text(a) for a in listed]))
        if calls is None:
            candidates += [(m.site, list(m.arguments), m.template_arguments or ()) for m in self.macro_calls_to(name)
                           if len(m.arguments) == len(param_names)
                           and not (outside is not None and outside.start_byte <= m.site.start_byte < outside.end_byte)]
            candidates.sort(key=lambda c: c[0].start_byte)
        running = next((c for c in candidates if self._call_runs(c[0], depth)), None) if len(candidates) > 1 else None
        for call, arg_texts, template_texts in [running] if running is not None else candidates[:1]:
            env = self.env_at(call.start_byte, depth + 1)
            if later:
                stepped = later_pass_env(self.ctx, call, env, later)
                if stepped is None:
                    return None
                env = stepped
            else:
                env = self._reaching_env(call, depth + 1) or env
            values: dict[str, Folded] = {}
            assumed: set[str] = set()
            for tname, targ in zip(template_names, template_texts):
                if tname is not None and tname not in param_names:
                    tvalue, _ = try_evaluate(targ, env)
                    if isinstance(tvalue, (int, float)):
                        values[tname] = tvalue
            for pname, arg in zip(param_names, arg_texts):
                if pname is None:
                    continue
                assumed |= passed_fields(arg, pname, env, values)
                with ReadsApart() as reads:
                    value, _ = try_evaluate(arg, env)
                if value is not None and not isinstance(value, str):
                    values[pname] = value
                    if reads.seen:
                        assumed.add(pname)
            return values, assumed
        return None

    def _reaching_env(self, call: Node, depth: int) -> ConstEnv | None:
        """The constants at `call` on the first pass of its function's caller's loop that
        reaches it, where the first pass does not (None where it does, or no pass does)."""
        function = enclosing_function(call)
        if function is None or depth >= CALLER_LEVELS:
            return None
        if not never_runs(self.ctx, call, function, lambda offset: self.env_at(offset, depth)):
            return None
        for later in range(1, MAX_LATER_PASSES + 1):
            passed = self.caller_arguments(function, depth, later)
            if not passed:
                return None
            def env_of(offset: int, passing: dict[str, Folded] = passed) -> ConstEnv:
                return self._env_at(offset, depth, self.host_globals, passing)
            if not never_runs(self.ctx, call, function, env_of):
                return env_of(call.start_byte)
        return None

    def _call_runs(self, call: Node, depth: int) -> bool:
        """Whether a run without arguments may reach `call`: not in a branch its function skips,
        in a function that `main` or a caller that runs calls (up to `CALLER_LEVELS` levels; a
        function with no caller in this file may be called from elsewhere, and runs)."""
        key = (call.start_byte, depth)
        if key not in self._calls_run:
            self._calls_run[key] = True  # (a call reached again while it is being decided)
            self._calls_run[key] = self._decide_call_runs(call, depth)
        return self._calls_run[key]

    def _decide_call_runs(self, call: Node, depth: int) -> bool:
        function = enclosing_function(call)
        if function is None:
            return True
        if never_runs(self.ctx, call, function, lambda offset: self.env_at(offset, depth + 1)):
            return False
        name = self.function_name(function)
        if name is None or name == "main" or depth + 1 >= CALLER_LEVELS:
            return True
        callers = [c for c in self.call_sites(name) if not function.start_byte <= c.start_byte < function.end_byte]
        return not callers or any(self._call_runs(c, depth + 1) for c in callers)

    def _passed_through_tables(self, name: str, param_names: tuple[str | None, ...], depth: int,
                               ) -> tuple[dict[str, Folded], set[str]] | None:
        """What the first call through a table of function pointers that lists `name` passes
        (`pointer_tables`): the table in this file, the call here or in the program's other sources."""
        tables = tables_listing(self.data, self.tree.root_node, name)
        if not tables:
            return None
        others = (_sibling_model(*v, self.argv) for v in self._sibling_all_versions if mentions_any(*v, tables))
        for model in (self, *others):
            calls = calls_through(model.data, model.tree.root_node, tables) if model is not None else []
            passed = model.arguments_passed(name, param_names, depth, calls=calls) if model and calls else None
            if passed is not None:
                return passed
        return None

    def _caller_sources(self, name: str) -> list[ProgramModel]:
        """Models of the other sources of the file's folder that may call `name` (read in
        their own context, with this model's program arguments)."""
        found = []
        for version in self._sibling_all_versions:
            if name in _called_names_cached(*version):
                model = _sibling_model(*version, self.argv)
                if model is not None:
                    found.append(model)
        return found

    @cached_property
    def _sibling_all_versions(self) -> tuple[tuple[Path, int, int], ...]:
        """The other sources and headers of the file's folder, `.cu`/`.c*` sources first, then
        the sources of other folders the build names (`build_sources`)."""
        found = self._siblings(_SIBLING_SUFFIXES + tuple(s for s in _SIBLING_CUDA_SUFFIXES if s not in _SIBLING_SUFFIXES))
        ordered = sorted(found, key=lambda p: (p.suffix in (".h", ".hh", ".hpp", ".cuh"), p.name))
        own = Path(self.kernels.path).resolve() if self.kernels.path else None
        named = program_sources(own, self.build_sources) if own is not None else ()
        return tuple(v for v in map(file_version, (*ordered, *named)) if v is not None)

    def caller_argument_nodes(self, function: Node, parameter: str) -> list[Node]:
        """The argument each call of `function` in this file passes for its `parameter`
        (a lambda handed down to the function that launches the kernel)."""
        declarator = function_declarator(function)
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        if name_node is None or params is None:
            return []
        names = [m.group(1) if (m := re.search(r"(\w+)\s*(?:\[.*\])?\s*(?:=.*)?$", self.ctx.text(p))) else None
                 for p in params.named_children if p.type != "comment"]
        if parameter not in names:
            return []
        index = names.index(parameter)
        found = []
        for call in self.calls_to(self.ctx.text(name_node).split("::")[-1]):
            args = call.child_by_field_name("arguments")
            arg_nodes = [a for a in args.named_children if a.type != "comment"] if args is not None else []
            if len(arg_nodes) == len(names) and not function.start_byte <= call.start_byte < function.end_byte:
                found.append(arg_nodes[index])
        return found

    def calls_to(self, name: str) -> list[Node]:
        """Call expressions whose callee's simple name is `name`: found by scanning the text for
        `name(` and querying just those spots (no walk over the whole tree)."""
        if name in self._calls:
            return self._calls[name]
        found: dict[int, Node] = {}
        calls_query = query("calls")
        root = self.tree.root_node
        pattern = re.compile(re.escape(name.encode()) + _CALL_TAIL)
        if re.fullmatch(r"[A-Za-z_]\w*", name, re.ASCII) and len(self._calls) >= _SCANS_BEFORE_INDEX:
            starts: list[int] = self._call_offsets.get(name, [])
        else:  # a few names (one edit's analysis), or not a plain identifier: a scan for this name
            starts = _occurrences(self.data, name.encode())
        for start in starts:
            m = pattern.match(self.data, start)
            if m is None:
                continue
            cursor = QueryCursor(calls_query)
            cursor.set_byte_range(m.start(), m.end())
            for _, groups in cursor.matches(root):
                fn = groups["callee"][0]
                callee = re.sub(r"<.*", "", self.ctx.text(fn)).split("::")[-1].strip()
                if callee == name:
                    call = groups["call"][0]
                    found[call.start_byte] = call
        self._calls[name] = [found[k] for k in sorted(found)]
        return self._calls[name]

    def method_calls_to(self, name: str) -> list[Node]:
        """Calls of a method `name` on an object (`perlin.calculate(...)`, `p->step(...)`), which
        `calls_to` leaves out: who calls a method `X::name` that a file defines."""
        key = "." + name
        if key in self._calls:
            return self._calls[key]
        found: dict[int, Node] = {}
        calls_query = query("calls")
        pattern = re.compile(rb"(?:\.|->)\s*" + re.escape(name.encode()) + _CALL_TAIL)
        for m in pattern.finditer(self.data):
            cursor = QueryCursor(calls_query)
            cursor.set_byte_range(m.start(), m.end())
            for _, groups in cursor.matches(self.tree.root_node):
                fn = groups["callee"][0]
                member = fn.child_by_field_name("field") if fn.type == "field_expression" else None
                if member is not None and re.sub(r"<.*", "", self.ctx.text(member)).strip() == name:
                    found[groups["call"][0].start_byte] = groups["call"][0]
        self._calls[key] = [found[k] for k in sorted(found)]
        return self._calls[key]

    def call_sites(self, name: str) -> list[Node]:
        """Where `name` is called: its written calls (`calls_to`), then the uses of macros whose
        body calls it (`macro_calls_to`)."""
        return [*self.calls_to(name), *(m.site for m in self.macro_calls_to(name))]

    def macro_calls_to(self, name: str) -> list[MacroCall]:
        """The calls of `name` that uses of function-like macros make (`#define RUN(T) run<T>(n)`,
        then `RUN(float);`), in the order of the uses (`perflsp.kernels.macro_calls`)."""
        if name not in self._macro_calls:
            found = []
            for macro in self._macros_calling.get(name, ()):
                for site in self.calls_to(macro):
                    found += [MacroCall(site, arguments, template)
                              for arguments, template in calls_in_expansion(self.ctx.text(site), self.env, name)]
            self._macro_calls[name] = sorted(found, key=lambda c: c.site.start_byte)
        return self._macro_calls[name]

    @cached_property
    def _macros_calling(self) -> dict[str, tuple[str, ...]]:
        return macros_calling(self.env.all_function_macros())

    @cached_property
    def _call_offsets(self) -> dict[str, list[int]]:
        """Where each identifier is followed by `(` or `<...>(`: one pass over the text, so
        `calls_to` costs the calls of its name, not a scan of the file per name."""
        out: dict[str, list[int]] = {}
        for m in _CALL_START.finditer(self.data):
            out.setdefault(m.group(1).decode("latin-1"), []).append(m.start())
        return out

    # ------------------------------------------------------------------ allocations

    @cached_property
    def _allocations(self) -> list[dict[str, HostAllocation]]:
        # one character per byte: match offsets are byte offsets
        return index_allocations(self.data.decode("latin-1"))

    def host_allocation(self, name: str) -> HostAllocation | None:
        """`name = malloc(...)`, `new T[n]`, `std::vector<T> name(n)`, `T name[N]`: the first of
        these forms (in that order) that allocates `name`."""
        for by_name in self._allocations:
            found = by_name.get(name)
            if found is not None:
                return found
        return None

    def host_fill(self, name: str) -> HostFill | None:
        """What the host code stores in array `name` on average (`kernels.host_fills`)."""
        if name not in self._fills:
            self._fills[name] = host_fill(self, name)
        return self._fills[name]

    @cached_property
    def map_clauses(self) -> list[tuple[int, list[OmpClause]]]:
        """(offset, `map`/`to`/`from` clauses) of every OpenMP pragma of the file."""
        found = []
        for m in _PRAGMA.finditer(self.data):
            text = re.sub(r"\\\r?\n", " ", m.group(1).decode("utf-8", errors="replace"))
            _, rest = split_directive("omp " + text)
            clauses = [c for c in parse_clauses(rest) if c.name in ("map", "to", "from")]
            if clauses:
                found.append((m.start(), clauses))
        return found

    # ------------------------------------------------------------------ functions

    def parsed_function(self, fn: CudaFunction) -> ParsedFunction | None:
        """A function of this file, macro-expanded (numeric macros kept by name), as a node."""
        return _expanded_function(self.data, self.tree, fn, self.env, keep_constants=True, recovered=fn.recovered,
                                  path=self.kernels.path)

    def device_function(self, name: str) -> ParsedFunction | None:
        """The `__device__` function `name` of this file, else of the local headers it includes,
        else (declared here, defined in another translation unit linked with `-rdc`) of another
        CUDA source or header of the file's folder."""
        if name in self._local_functions:
            return self.parsed_function(self._local_functions[name])
        for data, tree, by_name, header in self._headers_functions():
            if name in by_name:
                found = _expanded_function(data, tree, by_name[name], self.env, keep_constants=False, recovered=False,
                                           path=header)
                if found is not None:
                    return found
        if name in self._kernel_names:
            return None  # a kernel of this file (its own name, read from its text): never a callee
        if self._may_define(name) and name in self._plain_definitions:
            # defined in this file (a kernel, or without a `__device__` this file sees): that is
            # the function a call here names, not one of another translation unit
            return self._unmarked_device_function(name)
        found_in = _sibling_device_definition(name, self._sibling_cuda_versions)
        if found_in is not None:
            version, index = found_in
            parsed = parsed_header(*version)
            if parsed is not None:
                data, tree, functions = parsed
                return _expanded_function(data, tree, functions[index], self._env_of(version), keep_constants=False,
                                          recovered=False, path=str(version[0]))
        # a kernel calls only device functions: a definition found without `__device__` says it
        # through a macro this file does not see (`#define HD __host__ __device__` under `#ifdef
        # __CUDACC__` in a header of its includer) or is a `constexpr` one
        return self._unmarked_device_function(name)

    @cached_property
    def _kernel_names(self) -> frozenset[str]:
        return frozenset(k.name for k in self.kernels.kernels) | frozenset(k.qualified_name for k in self.kernels.kernels)

    def _may_define(self, name: str) -> bool:
        """Whether this file's text may define a function `name` (`name(...) {` somewhere): most
        names asked about are built-ins, and indexing every definition of a large file costs
        ~4 ms on each edit's new model."""
        found = self._defines_name.get(name)
        if found is None:
            word = name.encode()
            found = any(_AFTER_NAME_DEFINITION.match(self.data, at + len(word)) for at in _occurrences(self.data, word))
            self._defines_name[name] = found
        return found

    def _unmarked_device_function(self, name: str) -> ParsedFunction | None:
        found = self.plain_function(name) if self._may_define(name) else self._plain_elsewhere(name)
        if found is not None:
            return None if _is_kernel_definition(found) else found
        version = _sibling_plain_definition(name, self._sibling_cuda_only_versions)  # (`plain_function` read the others)
        if version is None:
            return None
        parsed = source_definitions(*version)
        if parsed is not None:
            found = _expanded_node(parsed[0], parsed[1][name], self._env_of(version), keep_constants=False,
                                   path=str(version[0]))
            return None if found is None or _is_kernel_definition(found) else found
        return None

    def call_operator(self, class_name: str) -> ParsedFunction | None:
        """`class_name::operator()` (a functor a kernel applies per element), of this file or
        its local headers."""
        suffix = f"{class_name}::operator()"
        for fn in self.kernels.device_functions:
            if fn.qualified_name == suffix or fn.qualified_name.endswith("::" + suffix):
                return self.parsed_function(fn)
        for header in self.headers:
            parsed = _parsed_header(header)
            if parsed is None:
                continue
            data, tree, functions = parsed
            for fn in functions:
                if fn.qualified_name == suffix or fn.qualified_name.endswith("::" + suffix):
                    return _expanded_function(data, tree, fn, self.env, keep_constants=False, recovered=False,
                                              path=str(header))
        return None

    def plain_function(self, name: str) -> ParsedFunction | None:
        """The function `name` as an OpenMP target region calls it (no `__device__` needed),
        macro-expanded: defined in this file, else in a local header it includes, else (a
        `declare target` function of another translation unit) in another source of its folder."""
        node = self._plain_definitions.get(name)
        if node is not None:
            return _expanded_node(self.data, node, self.env, keep_constants=True, path=self.kernels.path)
        return self._plain_elsewhere(name)

    def _plain_elsewhere(self, name: str) -> ParsedFunction | None:
        """`plain_function` in the local headers and the folder's other sources."""
        for header in self._header_versions:
            parsed = source_definitions(*header)
            if parsed is not None and name in parsed[1]:
                return _expanded_node(parsed[0], parsed[1][name], self.env, keep_constants=False, path=str(header[0]))
        version = _sibling_plain_definition(name, self._sibling_versions)
        if version is None:
            return None
        parsed = source_definitions(*version)
        if parsed is not None:
            return _expanded_node(parsed[0], parsed[1][name], self._env_of(version), keep_constants=False,
                                  path=str(version[0]))
        return None

    def _env_of(self, version: tuple[Path, int, int]) -> ConstEnv:
        """The macros a function of another source is expanded with: its own file's (its unit's
        `#define TERMS 35`) over this file's."""
        found = self._sibling_envs.get(version)
        if found is None:
            sibling = _sibling_model(*version, self.argv)
            found = self.env if sibling is None else ConstEnv(
                macros=sibling.env.all_macros(), function_macros=sibling.env.all_function_macros(), parent=self.env)
            self._sibling_envs[version] = found
        return found

    def plain_function_names(self) -> list[str]:
        """The names of this file's own functions (`plain_function` finds these first)."""
        return list(self._plain_definitions)

    @cached_property
    def _plain_definitions(self) -> dict[str, Node]:
        return function_definitions(self.tree.root_node, self.data)

    @cached_property
    def _sibling_sources(self) -> tuple[Path, ...]:
        """The other C/C++ sources of the file's folder (none for an unsaved buffer, or a folder
        of more sources than one program has)."""
        return self._siblings(_SIBLING_SUFFIXES)

    @cached_property
    def _sibling_cuda_sources(self) -> tuple[Path, ...]:
        """The other CUDA sources and headers of the file's folder, `.cu` first."""
        found = self._siblings(_SIBLING_CUDA_SUFFIXES)
        return tuple(sorted(found, key=lambda p: (p.suffix != ".cu", p.name)))

    @cached_property
    def _sibling_versions(self) -> tuple[tuple[Path, int, int], ...]:
        return tuple(v for v in map(file_version, self._sibling_sources) if v is not None)

    @cached_property
    def _sibling_cuda_versions(self) -> tuple[tuple[Path, int, int], ...]:
        return tuple(v for v in map(file_version, self._sibling_cuda_sources) if v is not None)

    @cached_property
    def _header_versions(self) -> tuple[tuple[Path, int, int], ...]:
        """(path, mtime, size) of each local header that can be read, in include order."""
        return tuple(v for v in map(file_version, self.headers) if v is not None)

    @cached_property
    def _sibling_cuda_only_versions(self) -> tuple[tuple[Path, int, int], ...]:
        """The CUDA sources and headers among the siblings that `_sibling_versions` leaves out."""
        return tuple(v for v in self._sibling_cuda_versions if v[0].suffix not in _SIBLING_SUFFIXES)

    def _siblings(self, suffixes: tuple[str, ...]) -> tuple[Path, ...]:
        path = Path(self.kernels.path) if self.kernels.path else None
        if path is None:
            return ()
        try:
            folder_mtime = path.parent.stat().st_mtime_ns
        except OSError:
            return ()
        found = _folder_sources(path.parent, folder_mtime, path.name, suffixes)
        return tuple(p for p in found if p not in self.headers)

    def device_function_names(self) -> list[str]:
        """Names `device_function` may find, this file's first."""
        names = dict.fromkeys(self._local_functions)
        for _, _, by_name, _ in self._headers_functions():
            names.update(dict.fromkeys(by_name))
        return list(names)

    def _headers_functions(self) -> list[tuple[bytes, Tree, dict[str, CudaFunction], str]]:
        if self._header_functions is None:
            self._header_functions = []
            for header in self.headers:
                parsed = _parsed_header(header)
                if parsed is not None:
                    data, tree, functions = parsed
                    by_name: dict[str, CudaFunction] = {}
                    for fn in functions:
                        by_name.setdefault(fn.name, fn)
                    self._header_functions.append((data, tree, by_name, str(header)))
        return self._header_functions

    def class_fields(self, class_name: str) -> list[tuple[bytes, list[Node]]]:
        """The member declarations (`T *a;`, `int array_size;`) of the class or struct
        `class_name`, from this file and its local headers (the class is often declared in a
        header and its methods defined here): (source text, `field_declaration` nodes) per file."""
        if class_name not in self._class_fields:
            sources = [(self.data, self.tree)] + [(data, tree) for data, tree, _, _ in self._headers_functions()]
            found: list[tuple[bytes, list[Node]]] = []
            for data, tree in sources:
                nodes = field_declarations(tree.root_node, data, class_name)
                if nodes:
                    found.append((data, nodes))
            self._class_fields[class_name] = found
        return self._class_fields[class_name]

    def parse_function(self, text: bytes) -> ParsedFunction | None:
        """The first function definition of a stand-alone text (a wrapped region body)."""
        node = first_function(parse(text).root_node)
        return ParsedFunction(node, text) if node is not None else None

    def _including_env(self) -> ConstEnv | None:
        """The constants, in a source of the folder whose function body `#include`s this file,
        where the directive stands (once per model); None for any other file. Only a file with
        an OpenMP region outside any function of its own is looked at as such a fragment (the
        search reads the folder: not for every top-level fold of every file)."""
        if self._fragment_env is None:
            site = self._including_site() if any(r.function_span is None for r in self.kernels.omp_regions) else None
            model = _sibling_model(*site[0], self.argv) if site is not None else None
            self._fragment_env = (model.env_at(site[2]) if model is not None and site is not None else None,)
        return self._fragment_env[0]

    def including_function_text(self) -> str | None:
        """The text of the function, in a file of the same folder, whose body `#include`s this
        file (a fragment `{ #include "step.h" }`), or None."""
        site = self._including_site()
        if site is None:
            return None
        _version, data, _offset, (first, last) = site
        return data[first:last].decode("utf-8", errors="replace")

    def _including_site(self) -> tuple[tuple[Path, int, int], bytes, int, tuple[int, int]] | None:
        """(the includer's version, its text, where the directive stands, the span of the function
        around it) for the first source of the folder whose function body `#include`s this file;
        None where none does (once per model)."""
        if self._fragment_site is None:
            self._fragment_site = (self._find_including_site(),)
        return self._fragment_site[0]

    def _find_including_site(self) -> tuple[tuple[Path, int, int], bytes, int, tuple[int, int]] | None:
        if not self.kernels.path:
            return None
        path = Path(self.kernels.path)
        directive = re.compile(rb'#\s*include\s*"(?:[^"]*/)?' + re.escape(path.name.encode()) + rb'"')
        for includer in IncludeResolver().includers_of(path)[:4]:
            version = file_version(includer)
            loaded = load_file(includer) if version is not None else None
            if version is None or loaded is None or isinstance(loaded, SkippedFile):
                continue
            m = directive.search(loaded.data)
            span = function_around(loaded.data, m.start()) if m is not None else None
            if m is not None and span is not None:
                return version, loaded.data, m.start(), span
        return None


def _edited_macros(data: bytes, context: ConstEnv | None) -> ConstEnv:
    """The macros of an edited text: its own (`#define`s and what they select) over `context`,
    the environment the text was read in (which holds the text's macros before the edit)."""
    resolver = IncludeResolver()
    own = resolver.env_for(None, data)
    if context is None:
        return own
    predefined = resolver.env_for(None, b"").macros
    return ConstEnv(parent=context, macros={n: b for n, b in own.macros.items() if predefined.get(n) != b},
                    function_macros=dict(own.function_macros))


_TEMPLATE_TYPE_PARAMETER = re.compile(r"\b(?:class|typename)\s+([A-Za-z_]\w*)")
def first_function(node: Node) -> Node | None:
    stack = [node]
    while stack:
        n = stack.pop(0)
        if n.type == "function_definition":
            return n
        stack.extend(n.named_children)
    return None


def _expanded_function(data: bytes, tree: Tree, fn: CudaFunction, env: ConstEnv, keep_constants: bool,
                       recovered: bool, path: str | None = None) -> ParsedFunction | None:
    text = data[fn.span.start_byte : fn.span.end_byte]
    expanded = expand_macros(text.decode("utf-8", errors="replace"), env,
                             keep_constants=keep_constants).encode("utf-8", errors="replace")
    if expanded == text and not recovered:
        node = tree.root_node.descendant_for_byte_range(fn.body_span.start_byte, fn.body_span.start_byte)
        while node is not None and node.type != "function_definition":
            node = node.parent
        if node is not None:
            return ParsedFunction(node, data, path)
    found = first_function(parse(expanded).root_node)
    return ParsedFunction(found, expanded, path, fn.span.start.line) if found is not None else None


def _expanded_node(data: bytes, node: Node, env: ConstEnv, keep_constants: bool,
                   path: str | None = None) -> ParsedFunction | None:
    """A function definition with `env`'s macros expanded (itself when none occur)."""
    text = data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
    expanded = expand_macros(text, env, keep_constants=keep_constants)
    if expanded == text:
        return ParsedFunction(node, data, path)
    wrapped = expanded.encode("utf-8", errors="replace")
    found = first_function(parse(wrapped).root_node)
    return ParsedFunction(found, wrapped, path, node.start_point[0]) if found is not None else None


def _is_kernel_definition(fn: ParsedFunction) -> bool:
    """Whether a function definition is a `__global__` one (a kernel launches, never calls, it)."""
    body = fn.node.child_by_field_name("body")
    head = fn.data[fn.node.start_byte : body.start_byte if body is not None else fn.node.end_byte]
    return b"__global__" in head


# what follows a function's name where it is defined: `(params) {` (a superset: `if (x) {` too)
# (no parentheses inside the parameters: a linear match; a function-pointer parameter is missed)
_AFTER_NAME_DEFINITION = re.compile(rb"\s*\([^;{}()]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->[^;{}()]*)?\{")
@lru_cache(maxsize=256)
def _called_names_cached(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """Names another file may call (`name(` or `name<...>(` in its text; a superset)."""
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return frozenset()
    return frozenset(m.decode("latin-1") for m in _CALL_START.findall(loaded.data))


def _method_caller(version: tuple[Path, int, int], name: str, argv: tuple[str, ...] | None) -> ProgramModel | None:
    """The model of a source of the folder whose text calls a method `name` on an object."""
    return _sibling_model(*version, argv) if _calls_method(*version, name) else None


@lru_cache(maxsize=1024)
def _calls_method(path: Path, mtime_ns: int, size: int, name: str) -> bool:
    loaded = load_file(path)
    pattern = rb"(?:\.|->)\s*" + re.escape(name.encode()) + rb"\s*\("
    return not isinstance(loaded, SkippedFile) and re.search(pattern, loaded.data) is not None


@lru_cache(maxsize=32)
def _sibling_model(path: Path, mtime_ns: int, size: int, argv: tuple[str, ...] | None) -> ProgramModel | None:
    """Another source of the folder read as `perflsp check` reads it (its own macros), where
    a function of this file is called from."""
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return None
    return program_model(read_source(path, loaded.data, IncludeResolver(), includers=False), argv)


@lru_cache(maxsize=256)
def _folder_sources(folder: Path, mtime_ns: int, own: str, suffixes: tuple[str, ...]) -> tuple[Path, ...]:
    """The sources of `folder` with these suffixes but `own` (none in a folder of more sources
    than one program has), listed once per state of the folder."""
    try:
        found = sorted(p for p in folder.iterdir()
                       if p.suffix in suffixes and p.name != own and p.is_file() and not is_transient_copy(p))
    except OSError:
        return ()
    return tuple(found) if len(found) <= _MAX_SIBLINGS else ()


# Which other file defines a name is remembered per state of those files (their versions): every
# edit builds a new model that asks again about the same names, mostly built-ins defined nowhere.
@lru_cache(maxsize=8192)
def _sibling_device_definition(name: str, versions: tuple[tuple[Path, int, int], ...]
                               ) -> tuple[tuple[Path, int, int], int] | None:
    """(version of the file, index among its `__device__` functions) of the first that defines
    `__device__` function `name`."""
    for version in versions:
        if name not in defined_names(*version):
            continue  # (not parsed: most names asked about are built-ins defined nowhere here)
        parsed = parsed_header(*version)
        if parsed is None:
            continue
        for index, fn in enumerate(parsed[2]):
            if fn.name == name and not fn.is_kernel:
                return version, index
    return None


@lru_cache(maxsize=8192)
def _sibling_plain_definition(name: str, versions: tuple[tuple[Path, int, int], ...]) -> tuple[Path, int, int] | None:
    """The version of the first file that defines a function `name` (with or without `__device__`)."""
    for version in versions:
        if name not in defined_names(*version):
            continue
        parsed = source_definitions(*version)
        if parsed is not None and name in parsed[1]:
            return version
    return None


def _parsed_header(path: Path) -> tuple[bytes, Tree, tuple[CudaFunction, ...]] | None:
    """A local header's `__device__` functions (each version of a file is parsed once, for
    these and for `_source_definitions`)."""
    version = file_version(path)
    return parsed_header(*version) if version is not None else None


def _source_definitions(path: Path) -> tuple[bytes, dict[str, Node], Tree] | None:
    """Another file's function definitions by simple name."""
    version = file_version(path)
    return source_definitions(*version) if version is not None else None


_FUNCTION_HEAD = re.compile(rb"[A-Za-z_][\w:<>,\s\*&]*?\b[A-Za-z_][\w:~]*\s*\([^;{}]*\)\s*(?:const\s*)?\{")


def function_around(data: bytes, offset: int) -> tuple[int, int] | None:
    """Byte range of the function definition around `offset`, found from the tokens when the
    tree lost it (a file that tree-sitter parses as one ERROR node): the last `name(...) {`
    opened at brace depth 0 before `offset` whose body closes after it."""
    depth = 0
    starts: list[int] = []
    best: tuple[int, int] | None = None
    for m in re.finditer(rb"[{}]", data):
        if m.start() > offset and not starts:
            break
        if m.group() == b"{":
            if depth == 0:
                starts.append(m.start())
            depth += 1
        else:
            depth = max(0, depth - 1)
            if depth == 0 and starts:
                brace = starts.pop()
                if brace < offset < m.end():
                    best = (brace, m.end())
                    break
    if best is None:
        return None
    head_from = data.rfind(b"\n\n", 0, best[0])
    head_from = 0 if head_from < 0 else head_from
    head = None
    for m in _FUNCTION_HEAD.finditer(data, head_from, best[0] + 1):
        if m.end() - 1 == best[0]:
            head = m.start()
    return (head, best[1]) if head is not None else None
