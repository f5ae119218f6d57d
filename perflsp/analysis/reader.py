"""The one reader: a file in its context to the program the analysis reads.

    context = ReadContext(resolver, compile_db.flags_for(path))   # or ReadContext.of(path, resolver, compile_db)
    program = read_program(path, data, context, options)          # options.argv: the program's arguments
    program.model                                                  # its ProgramModel, built on first use

A file's context is what decides how it reads: the include resolver (local headers, the
workspace's `-D`/`-I`, the sources that `#include` the file), the build's flags for it from a
compile database (`-D`, `-I`) and the program's arguments (`AnalysisOptions.argv`). `read_program`
parses and extracts the text in that context (`kernels.program.read_source`: for a file another
source includes, in that includer's macros), adds the launch sites of its kernels in the
includers, folded there with the same flags and arguments (`analysis.includers`), and builds
the program model on first use (`kernels.program.program_model`, the one constructor).

`perflsp check`, `explain`, `eval` (both modes), the LLM evaluation, `profile`, `tune`,
`kernels`, the server's workspace scan and `perflsp.importProfile` read files with it; the
server's open documents extract incrementally (`server.text.TextState`) with the same context
(`ReadContext.env`, `ReadContext.includer_launches`) and build their model with the same
constructor, so a header-defined kernel reads the same everywhere (`tests/test_one_reader.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Tree

from perflsp.analysis.includers import includer_launches
from perflsp.analysis.options import DEFAULT_OPTIONS, AnalysisOptions
from perflsp.kernels.compile_db import CompileFlags, FlagsSource
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import FileKernels, LaunchSite
from perflsp.kernels.program import ProgramModel, SourceFile, program_model, read_source
from perflsp.source.files import SkippedFile, load_file
from perflsp.source.positions import LineIndex

LOSSY_NOTE = "file is not valid UTF-8: invalid bytes were replaced"
# `__cplusplus` of each language standard a compile database names (`CompileFlags.std`)
_CPLUSPLUS = {"c++98": "199711L", "c++03": "199711L", "c++11": "201103L", "c++0x": "201103L",
              "c++14": "201402L", "c++1y": "201402L", "c++17": "201703L", "c++1z": "201703L",
              "c++20": "202002L", "c++2a": "202002L", "c++23": "202302L", "c++2b": "202302L"}


@dataclass(frozen=True, slots=True)
class ReadContext:
    """What a file is read with besides its text: the include resolver and the build's flags
    for it (from a compile database; None: no database names it)."""

    resolver: IncludeResolver
    flags: CompileFlags | None = None

    @classmethod
    def of(cls, path: Path | None, resolver: IncludeResolver, compile_db: FlagsSource | None = None) -> ReadContext:
        """The context of `path` with its flags looked up in `compile_db`."""
        flags = compile_db.flags_for(path) if compile_db is not None and path is not None else None
        return cls(resolver, flags)

    @property
    def defines(self) -> dict[str, str] | None:
        """The build's macros: its `-std` as `__cplusplus`, then its `-D`s."""
        if self.flags is None:
            return None
        out: dict[str, str] = {}
        standard = _CPLUSPLUS.get(self.flags.std or "")
        if standard is not None:
            out["__cplusplus"] = standard
        out.update(self.flags.defines)
        return out or None

    @property
    def project_search(self) -> bool:
        """Whether headers the include paths miss are looked for around the file: where no
        database gives its flags (with one, only its `-I` folders are searched, as the compiler does)."""
        return self.flags is None

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return self.flags.include_dirs if self.flags is not None else ()

    def env(self, path: Path | None, data: bytes) -> ConstEnv:
        """The preprocessor's view of `data` (the text of `path`): its local headers' macros, the
        build's, and for a file that a sibling source `#include`s, that sibling's."""
        return self.resolver.env_for(path, data, self.defines, self.include_dirs, includers=True,
                                     project_search=self.project_search)

    def includer_launches(self, path: Path | None, kernels: FileKernels,
                          argv: Sequence[str] | None) -> tuple[LaunchSite, ...]:
        """Launch sites, in the sources that include `path`, of its kernels it does not launch
        itself, folded in their includer with these flags and the program's arguments."""
        return includer_launches(path, kernels, self.resolver, argv, self.defines, self.include_dirs,
                                 project_search=self.project_search)


class ReadProgram:
    """A file read for analysis: its text, tree, line index, kernels, the options it is analysed
    with (its preprocessor view and the includers' launch sites filled in) and its program model
    (built on first use: a file without kernels never needs one)."""

    __slots__ = ("_model", "context", "lossy", "options", "path", "source")

    def __init__(self, path: Path | None, source: SourceFile, options: AnalysisOptions, context: ReadContext,
                 lossy: bool = False, model: ProgramModel | None = None):
        self.path = path
        self.source = source
        self.options = options
        self.context = context
        self.lossy = lossy  # the file was not valid UTF-8 (its invalid bytes replaced)
        self._model = model

    @property
    def data(self) -> bytes:
        return self.source.data

    @property
    def tree(self) -> Tree:
        return self.source.tree

    @property
    def lines(self) -> LineIndex:
        return self.source.lines

    @property
    def kernels(self) -> FileKernels:
        return self.source.kernels

    @property
    def model(self) -> ProgramModel:
        """The program model with the options' arguments (built once)."""
        if self._model is None:
            self._model = program_model(self.source, self.options.argv)
        return self._model

    def model_with(self, argv: Sequence[str] | None) -> ProgramModel:
        """The program model of the same text read with other program arguments (`eval` scores
        each labeled row with its own). A model binds its arguments into the root of the
        preprocessor view its extraction folded with (the launch sites' values fold lazily with
        them), so other arguments mean the text read again: the same as `check --args`."""
        wanted = tuple(argv) if argv is not None else None
        if wanted == self.options.argv:
            return self.model
        again = read_program(self.path, self.data, self.context, dataclasses.replace(self.options, argv=wanted),
                             includer_launch_sites=False)
        return again.model

    def with_options(self, options: AnalysisOptions) -> ReadProgram:
        """The same read analysed with other options (compiled facts, a launch shape): the model
        is shared while the program's arguments are the same."""
        same = options.argv == self.options.argv and options.include_env is self.options.include_env
        return ReadProgram(self.path, self.source, options, self.context, self.lossy,
                           self._model if same else None)


def read_program(path: Path | None, data: bytes, context: ReadContext,
                 options: AnalysisOptions = DEFAULT_OPTIONS, *, includer_launch_sites: bool = True) -> ReadProgram:
    """`data` (the text of `path`) read in `context`: parsed and extracted with its
    preprocessor's view, the options' `include_env` and `external_launches` filled in (the
    launch sites of its kernels in the sources that include it, folded with `options.argv`;
    not looked for with `includer_launch_sites=False`)."""
    source = read_source(path, data, context.resolver, context.defines, context.include_dirs, includers=True,
                         build_sources=context.flags.unit_sources if context.flags is not None else (),
                         project_search=context.project_search)
    external = context.includer_launches(path, source.kernels, options.argv) if includer_launch_sites else ()
    return ReadProgram(path, source, dataclasses.replace(options, include_env=source.env, external_launches=external),
                       context)


def read_file(path: Path, context: ReadContext, options: AnalysisOptions = DEFAULT_OPTIONS, *,
              includer_launch_sites: bool = True) -> ReadProgram | SkippedFile:
    """`read_program` of the file at `path` (loaded defensively: too large, binary or unreadable
    files come back as `SkippedFile`); a file that is not valid UTF-8 is read with its invalid
    bytes replaced, and its kernels say so."""
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return loaded
    program = read_program(path, loaded.data, context, options, includer_launch_sites=includer_launch_sites)
    if loaded.lossy:
        program.kernels.notes.append(LOSSY_NOTE)
        program.lossy = True
    return program


def read_kernels(path: Path, context: ReadContext) -> FileKernels | SkippedFile:
    """The kernels of the file at `path` as `read_file` extracts them (for listing and mapping
    them: no launch sites of other files, no model)."""
    program = read_file(path, context, includer_launch_sites=False)
    return program if isinstance(program, SkippedFile) else program.kernels


__all__ = ["LOSSY_NOTE", "ReadContext", "ReadProgram", "read_file", "read_kernels", "read_program"]
