"""Include directories and macro definitions from a `compile_commands.json`.

What the preprocessor sees depends on the build: `-I` directories (a benchmark's OpenMP
version including its CUDA sibling's headers) and `-D` macros (`-DFP=float`). A compilation
database recorded on another machine is re-rooted: paths that do not exist here are matched by
their trailing components under a given source root.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from perflsp.kernels.build_sources import SOURCE_SUFFIXES, makefile_source_named


@dataclass(frozen=True, slots=True)
class CompileFlags:
    include_dirs: tuple[Path, ...] = ()
    defines: dict[str, str] = field(default_factory=dict)
    std: str | None = None  # the language standard (`c++17`; GNU dialects read as their ISO one)
    language: str | None = None  # "cuda" (`-x cuda`, nvcc), "omp" (OpenMP offload), None: not said
    forced_includes: tuple[Path, ...] = ()  # `-include file`
    compiler: str | None = None  # the build's compiler family: "clang", "nvcc", "gcc", ... (None: not said)
    # the other sources of the same build target (`CMakeFiles/<target>.dir`), wherever they live:
    # where the host code that calls this file's functions is
    unit_sources: tuple[Path, ...] = ()


class CompileDatabaseError(ValueError):
    pass


class FlagsSource(Protocol):
    """Where a file's build flags come from (a named database, or the ones discovered)."""

    def flags_for(self, source: Path) -> CompileFlags | None: ...

    def is_unit(self, source: Path) -> bool | None:
        """Whether the build compiles `source` itself (None: no database says)."""
        ...


class CompileDatabase:
    def __init__(self, entries: dict[Path, CompileFlags]):
        self._by_file = entries
        self._by_dir: dict[Path, CompileFlags] = {}
        for path, flags in entries.items():
            self._by_dir.setdefault(path.parent, flags)

    @classmethod
    def load(cls, path: Path, source_root: Path | None = None) -> CompileDatabase:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CompileDatabaseError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise CompileDatabaseError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(raw, list):
            raise CompileDatabaseError(f"{path}: expected a JSON list of compile commands")
        entries: dict[Path, CompileFlags] = {}
        targets: dict[str, list[tuple[Path | None, Path, CompileFlags]]] = {}  # target -> (file, as named, flags)
        for entry in raw:
            if not isinstance(entry, dict) or "file" not in entry:
                continue
            directory = Path(entry.get("directory", Path(path).parent))
            try:
                args = entry.get("arguments") or shlex.split(entry.get("command", ""))
            except ValueError:
                continue
            named = directory / entry["file"]
            file = _reroot(named, source_root)
            flags = _flags(args, directory, source_root)
            target = _target(entry.get("output"), args)
            if target is not None:
                targets.setdefault(target, []).append((file, named, flags))
            if file is not None:
                entries[file] = flags
        for members in targets.values():
            sources = _target_sources(members)
            for file, _, _ in members:
                if file is not None and file in entries and len(sources) > 1:
                    entries[file] = replace(entries[file], unit_sources=tuple(s for s in sources if s != file))
        return cls(entries)

    def flags_for(self, source: Path) -> CompileFlags | None:
        """Flags of the entry compiling `source`, or of one in its folder (for headers)."""
        try:
            resolved = Path(source).resolve()
        except OSError:
            return None
        return self._by_file.get(resolved) or self._by_dir.get(resolved.parent)

    def is_unit(self, source: Path) -> bool | None:
        """Whether an entry compiles `source` itself; None when no entry is in its folder
        (the database does not cover it)."""
        try:
            resolved = Path(source).resolve()
        except OSError:
            return None
        if resolved in self._by_file:
            return True
        return False if resolved.parent in self._by_dir else None


_TARGET = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/")
_MAX_TARGET_SOURCES = 64  # (a target of more sources is a library, not one program's host code)


def _target(output: object, args: list[str]) -> str | None:
    """The build target an entry belongs to, where its object file says (`CMakeFiles/<t>.dir/`)."""
    if not isinstance(output, str):
        output = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-o"), None)
    m = _TARGET.search(output) if isinstance(output, str) else None
    return m.group(1) if m is not None else None


def _target_sources(members: list[tuple[Path | None, Path, CompileFlags]]) -> tuple[Path, ...]:
    """The sources of one target, each once; an entry naming a generated copy the build folder
    lacks (`build/<target>-main.cpp`, gone after a clean) stands for the source it copies: the
    one a Makefile of the target's folders names, else the same name in one of its `-I` folders."""
    if len(members) > _MAX_TARGET_SOURCES:
        return ()
    folders = list(dict.fromkeys(file.parent for file, _, _ in members if file is not None))
    found: dict[Path, None] = {}
    for file, named, flags in members:
        if file is None and named.suffix in SOURCE_SUFFIXES:
            file = next((s for f in folders if (s := makefile_source_named(f, named.name)) is not None), None) \
                or _copied_source(named.name, flags.include_dirs)
        if file is not None:
            found.setdefault(file)
    return tuple(found)


def _copied_source(name: str, include_dirs: tuple[Path, ...]) -> Path | None:
    """`main.cpp` for `<target>-main.cpp` (or `name` itself) in the first `-I` folder holding it."""
    candidates = [name] + [name[i + 1:] for i, c in enumerate(name) if c == "-"]
    for folder in include_dirs:
        for candidate in candidates:
            path = folder / candidate
            if path.is_file():
                return path.resolve()
    return None


def _reroot(path: Path, source_root: Path | None) -> Path | None:
    if path.exists():
        return path.resolve()
    if source_root is None:
        return None
    parts = path.parts
    for i in range(1, len(parts)):
        candidate = source_root.joinpath(*parts[i:])
        if candidate.exists():
            return candidate.resolve()
    return None


def _flags(args: list[str], directory: Path, source_root: Path | None) -> CompileFlags:
    includes: list[Path] = []
    forced: list[Path] = []
    defines: dict[str, str] = {}
    std: str | None = None
    language: str | None = None
    compiler = _compiler_family(Path(args[0]).name) if args else None
    if compiler == "nvcc":
        language = "cuda"
    i = 1  # args[0] is the compiler
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith(("-std=", "--std=")):
            std = arg.split("=", 1)[1].replace("gnu++", "c++")
            continue
        if arg in ("-x", "--x") and i < len(args):
            if args[i] in ("cuda", "cu"):
                language = "cuda"
            i += 1
            continue
        if arg.startswith("--cuda-gpu-arch") or arg.startswith("--cuda-path"):
            language = "cuda"
            continue
        if arg.startswith("-fopenmp-targets") and language is None:
            language = "omp"
            continue
        if arg == "-include" and i < len(args):
            found = _reroot(directory / args[i], source_root)
            if found is not None:
                forced.append(found)
            i += 1
            continue
        value = None
        for prefix in ("-I", "-isystem", "-D", "-U"):
            if arg == prefix and i < len(args):
                value = args[i]
                i += 1
                kind = prefix
                break
            if arg.startswith(prefix) and arg != prefix:
                value = arg[len(prefix):]
                kind = prefix
                break
        if value is None:
            continue
        if kind in ("-I", "-isystem"):
            folder = _reroot(directory / value, source_root)
            if folder is not None:
                includes.append(folder)
        elif kind == "-D":
            name, _, body = value.partition("=")
            defines[name] = body if _ else "1"
        else:
            defines.pop(value, None)
    return CompileFlags(tuple(includes), defines, std, language, tuple(forced), compiler)


def _compiler_family(name: str) -> str | None:
    """`clang++-18` -> "clang", `nvcc` -> "nvcc", `g++` -> "gcc"; None for anything else (a
    launcher such as `ccache` names no compiler)."""
    m = _COMPILER.fullmatch(name)
    return _FAMILIES[m.group(1)] if m is not None else None


_COMPILER = re.compile(r"(clang\+\+|clang|nvcc|g\+\+|gcc|c\+\+|cc|nvc\+\+|nvc)(?:-[\d.]+)?(?:\.exe)?")
_FAMILIES = {"clang++": "clang", "clang": "clang", "nvcc": "nvcc", "g++": "gcc", "gcc": "gcc", "c++": "gcc",
             "cc": "gcc", "nvc++": "nvc++", "nvc": "nvc++"}


def find_compile_commands(source: Path, stop: Path | None = None) -> Path | None:
    """The compile_commands.json clangd would use for `source`: in its folder or a parent, or in
    a `build/` folder of one of them (up to `stop`, when given)."""
    try:
        folder = Path(source).resolve().parent
    except OSError:
        return None
    stop = Path(stop).resolve() if stop else None
    while True:
        for candidate in (folder / "compile_commands.json", folder / "build" / "compile_commands.json"):
            if candidate.is_file():
                return candidate
        if folder == stop or folder.parent == folder:
            return None
        folder = folder.parent


class DiscoveredDatabases:
    """Flags from the compile database each file's own folders lead to (as clangd finds it);
    each database is read once. Use where no database was named."""

    def __init__(self, stop: Path | None = None):
        self.stop = stop
        self._loaded: dict[Path, CompileDatabase | None] = {}
        self._found: dict[Path, Path | None] = {}  # a folder -> the database its files lead to
        self.problems: list[str] = []  # databases that could not be read, once each

    def database_for(self, source: Path) -> CompileDatabase | None:
        folder = Path(source).parent
        if folder not in self._found:
            self._found[folder] = find_compile_commands(source, self.stop)
        found = self._found[folder]
        if found is None:
            return None
        if found not in self._loaded:
            try:
                self._loaded[found] = CompileDatabase.load(found)
            except CompileDatabaseError as exc:
                self._loaded[found] = None
                self.problems.append(str(exc))
        return self._loaded[found]

    def flags_for(self, source: Path) -> CompileFlags | None:
        database = self.database_for(source)
        return database.flags_for(source) if database is not None else None

    def is_unit(self, source: Path) -> bool | None:
        database = self.database_for(source)
        return database.is_unit(source) if database is not None else None
