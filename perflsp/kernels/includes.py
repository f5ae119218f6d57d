"""A small preprocessor for the macros a translation unit sees.

It follows `#include "local.h"` (quoted includes resolved next to the including file and in
the include directories) and `#include <name.h>` found in the include directories; where no build
names the file's flags, a header found in neither is looked for around the file
(project_headers.py). It evaluates `#if/#ifdef/#ifndef/#elif/#else/#endif` against what is
defined at that point (compile flags `-D` and predefined macros included), and records
`#define`/`#undef` in active regions, so that `#ifdef DOUBLE_PRECISION #define FP double
#else #define FP float #endif` yields the branch the compiler would take. Conditions it cannot
evaluate take their first branch. Const/constexpr scalars of headers are collected too.

Each file's directive lines are read once per process and cached.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perflsp.kernels.consteval import ConstEnv, Value, numbered_enumerators, try_evaluate
from perflsp.kernels.project_headers import HEADER_SUFFIXES, HeaderIndex, search_root
from perflsp.kernels.return_forms import scan_pure_functions
from perflsp.source.files import is_transient_copy

MAX_INCLUDE_DEPTH = 12
MAX_HEADER_BYTES = 4 * 1024 * 1024
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
_INCLUDE_DEPTH = 3  # headers between a source and the file it reaches

# Starts at the `#` (a literal prefix lets the regex engine skip ahead quickly); the caller checks
# that only blanks precede it on its line. A backslash continues it onto the next line, LF or CRLF.
_DIRECTIVE = re.compile(rb"#[ \t]*([A-Za-z_]+)\b[ \t]*((?:[^\n\\]|\\\r?\n|\\.)*)", re.DOTALL)
_CONSTANT = re.compile(
    rb"^[ \t]*(?:(?:static|inline)[ \t]+)*(?:const|constexpr)[ \t]+(?:(?:const|constexpr|static|inline)[ \t]+)*"
    rb"(?:unsigned[ \t]+|signed[ \t]+)?"
    rb"(?:long[ \t]+long|int|long|short|size_t|unsigned|char|float|double|u?int(?:8|16|32|64)_t|uint|ulong)[ \t]+"
    rb"([A-Za-z_]\w*)[ \t]*=[ \t]*([^;{}\n]+);",
    re.MULTILINE,
)
_INCLUDE_NAME = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"((?:[^"\n]*/)?([^"/\n]+))"', re.MULTILINE)
_TYPEDEF = re.compile(rb"^[ \t]*typedef[ \t]+([A-Za-z_][\w: \t<>,*]*?)[ \t*]*\b([A-Za-z_]\w*)[ \t]*;", re.MULTILINE)
_USING = re.compile(rb"^[ \t]*using[ \t]+([A-Za-z_]\w*)[ \t]*=[ \t]*([^;\n]+);", re.MULTILINE)
# an unscoped enumeration's body (`enum { NU = 4 };`, `typedef enum Dir { UP, DOWN } Dir;`); an
# `enum class` names its enumerators through its own scope and is left out
_ENUM = re.compile(rb"\benum(?![ \t\n]+(?:class|struct)\b)[ \t\n]*(?:[A-Za-z_]\w*[ \t\n]*)?(?::[^{;]*)?\{([^{}]*)\}")
_ENUMERATOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*$", re.DOTALL)
_DEFINE_HEAD = re.compile(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)", re.DOTALL)
_DEFINED = re.compile(r"\bdefined\s*(\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))")
_COMMENTS = re.compile(r"//.*|/\*.*?\*/", re.DOTALL)

# What the compilers used with CUDA and OpenMP offload define; `-D` flags add to these.
PREDEFINED_CUDA = {"__CUDACC__": "1", "__cplusplus": "201703L", "__clang__": "1"}
# `__CUDA_ARCH__` of the device pass a kernel's own text is read in: a current architecture
# (sm_80), so that `#if __CUDA_ARCH__ >= 800` bodies and not their old-GPU fallbacks are analysed
DEVICE_ARCH = "800"
PREDEFINED_CXX = {"__cplusplus": "201703L", "__clang__": "1", "_OPENMP": "201811"}


@dataclass(frozen=True, slots=True)
class Directive:
    offset: int
    name: str  # "define", "if", "include", ...
    argument: str


def scan_directives(data: bytes) -> list[Directive]:
    out = []
    pos = 0
    while (m := _DIRECTIVE.search(data, pos)) is not None:
        line_start = data.rfind(b"\n", 0, m.start()) + 1
        if data[line_start : m.start()].strip(b" \t"):  # a `#` inside a line: not a directive
            pos = m.start() + 1
            continue
        pos = m.end()
        argument = m.group(2).decode("utf-8", "replace")
        if "\\" in argument:
            argument = re.sub(r"\\\r?\n", " ", argument)
        if "/" in argument:
            argument = _COMMENTS.sub(" ", argument)
        out.append(Directive(line_start, m.group(1).decode("ascii", "replace"), argument.strip()))
    return out


_GATE = re.compile(r"^(?:defined\s*\(\s*([A-Za-z_]\w*)\s*\)|defined\s+([A-Za-z_]\w*)|([A-Za-z_]\w*))$")
_TARGET_PRAGMA = re.compile(r"^omp\b.*\btarget\b")


@dataclass(slots=True)
class _Conditional:
    """An open `#if`: the macro its first arm needs, and which of its arms hold target directives."""

    gate: str | None
    in_first_arm: bool = True
    target_in_first: bool = False
    target_elsewhere: bool = False


def offload_gates(directives: list[Directive]) -> dict[str, str]:
    """The macros that must be defined for the file's `#pragma omp target` directives to be
    compiled at all: those an `#ifdef X`, `#if defined(X)` or `#if X` tests whose arm holds a
    target directive and whose other arms hold none, where the file does not define them.
    Without the build's flags (no compile database) the offload build's view of the file is the
    one to read: `#ifdef OMP_TARGET` around a directive and the braces it opens, `#define ISTART
    omp_get_team_num()` beside it. (`#ifdef USE_SIMD` choosing between two target directives
    gates nothing.)"""
    gates: dict[str, str] = {}
    defined: set[str] = set()
    stack: list[_Conditional] = []
    for directive in directives:
        name, argument = directive.name, directive.argument
        words = argument.split()
        if name == "define" and words:
            defined.add(words[0].split("(", 1)[0])
        elif name in ("ifdef", "if", "ifndef"):
            m = _GATE.match(argument.strip() if name == "if" else (words[0] if words else "")) \
                if name != "ifndef" else None
            stack.append(_Conditional(next((g for g in m.groups() if g), None) if m else None))
        elif name in ("else", "elif") and stack:
            stack[-1].in_first_arm = False
        elif name == "endif" and stack:
            ended = stack.pop()
            if ended.gate is not None and ended.target_in_first and not ended.target_elsewhere:
                gates[ended.gate] = "1"
        elif name == "pragma" and _TARGET_PRAGMA.match(argument):
            for entry in stack:
                if entry.in_first_arm:
                    entry.target_in_first = True
                else:
                    entry.target_elsewhere = True
    return {gate: value for gate, value in gates.items() if gate not in defined}


def scan_constants(data: bytes, env: ConstEnv) -> set[str]:
    """Const/constexpr scalars and type aliases of a header (line level, position independent).
    Returns the names it defines more than once (`#ifdef SINGLE_PRECISION typedef float real; #else typedef
    double real; #endif`): which one holds depends on the macros where it is included."""
    seen: set[str] = set()
    twice: set[str] = set()

    def note(name: str) -> str:
        (twice if name in seen else seen).add(name)
        return name

    for m in _CONSTANT.finditer(data):
        env.constants.setdefault(note(m.group(1).decode("utf-8", "replace")), m.group(2).decode("utf-8", "replace").strip())
    for m in _TYPEDEF.finditer(data):
        env.type_aliases.setdefault(note(m.group(2).decode("utf-8", "replace")), m.group(1).decode("utf-8", "replace").strip())
    for m in _USING.finditer(data):
        env.type_aliases.setdefault(note(m.group(1).decode("utf-8", "replace")), m.group(2).decode("utf-8", "replace").strip())
    for m in _ENUM.finditer(data):
        for name, value in enumerators(m.group(1).decode("utf-8", "replace")):
            env.constants.setdefault(note(name), value)
    return twice


def enumerators(body: str) -> list[tuple[str, str]]:
    """(name, value text) of each enumerator of an enumeration's body (`numbered_enumerators`)."""
    matches = (_ENUMERATOR.match(item) for item in _COMMENTS.sub(" ", body).split(","))
    return numbered_enumerators((m.group(1), m.group(2)) for m in matches if m is not None)


def _active_definitions(data: bytes, macros: ConstEnv, names: set[str]) -> ConstEnv:
    """The definitions of `names` in the branches of `data` that `macros` make active."""
    active = ConstEnv()
    scan_constants(strip_inactive(data.decode("utf-8", "replace"), macros).encode("utf-8"), active)
    active.constants = {n: v for n, v in active.constants.items() if n in names}
    active.type_aliases = {n: v for n, v in active.type_aliases.items() if n in names}
    return active


def define(env: ConstEnv, argument: str) -> None:
    m = _DEFINE_HEAD.match(argument)
    if not m:
        return
    name = m.group(1)
    body = m.group(4).strip()
    if m.group(2) is not None and argument[len(name)] == "(":
        params = tuple("__VA_ARGS__" if p.strip() == "..." else p.strip() for p in m.group(3).split(",") if p.strip())
        env.function_macros[name] = (params, body)
        env.macros.pop(name, None)
    else:
        env.macros[name] = body
        env.function_macros.pop(name, None)


def undefine(env: ConstEnv, name: str) -> None:
    env.macros.pop(name, None)
    env.function_macros.pop(name, None)


def is_defined(env: ConstEnv, name: str) -> bool:
    """Whether `env` or an environment it extends defines the macro `name`."""
    scope: ConstEnv | None = env
    while scope is not None:
        if name in scope.macros or name in scope.function_macros:
            return True
        scope = scope.parent
    return False


def evaluate_condition(env: ConstEnv, expression: str) -> bool | None:
    """Value of an `#if` expression, or None when it cannot be decided."""
    text = _DEFINED.sub(lambda m: "1" if is_defined(env, m.group(2) or m.group(3)) else "0", expression)
    value, _ = try_evaluate(text, env)
    if value is None:
        # identifiers the preprocessor does not know are 0 in `#if`
        names = set(re.findall(r"[A-Za-z_]\w*", text)) - set(env.macros) - set(env.function_macros)
        if names:
            zeroed = re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", "0", text)
            value, _ = try_evaluate(zeroed, env)
    if value is None or isinstance(value, tuple):
        return None
    return bool(value)


class IncludeResolver:
    """Runs the mini preprocessor for a file; caches every file's directives."""

    def __init__(self, include_dirs: tuple[Path, ...] = (), defines: dict[str, str] | None = None):
        self.include_dirs = include_dirs
        self.defines = dict(defines or {})
        self._directives: dict[Path, tuple[list[Directive], ConstEnv]] = {}
        # of a header: the names it defines in several branches, and its text to choose among them
        self._twice: dict[Path, tuple[set[str], bytes]] = {}
        self._resolved: dict[tuple[Path, tuple[Path, ...], str, bool], Path | None] = {}
        self._extra_dirs: tuple[Path, ...] = ()
        self._project_search = False
        self._projects: dict[Path, HeaderIndex] = {}
        self._includers: dict[Path, dict[str, list[tuple[Path, str]]]] = {}

    def env_for(self, path: Path | None, data: bytes, defines: dict[str, str] | None = None,
                include_dirs: tuple[Path, ...] = (), includers: bool = False,
                project_search: bool = False) -> ConstEnv:
        """The macros in effect at the end of `data` (a translation unit), with header constants.

        `defines` and `include_dirs` come from the build (`-D`, `-I`) and add to the resolver's.
        A file that a sibling source `#include`s (`kernel.cu` pulled into `main.cu` after
        `#define fp float`) is read in that sibling's context when `includers` is set. With
        `project_search` (no build names the file's flags), a header found neither beside the
        including file nor on the include paths is looked for around it in its project."""
        cuda = path is None or path.suffix.lower() in (".cu", ".cuh")
        env = ConstEnv()
        env.macros.update(PREDEFINED_CUDA if cuda else PREDEFINED_CXX)
        env.macros.update(self.defines)
        if defines:
            env.macros.update(defines)
        directives = scan_directives(data)
        if defines is None and b"target" in data:
            # no build flags for this file: read it as its offload build does
            env.macros.update(offload_gates(directives))
        includer_constants: dict[str, str | Value] = {}
        includer_headers: tuple[Path, ...] = ()
        if includers and path is not None:
            for includer in self.includers_of(path):
                context = self.env_for(includer, self._file_bytes(includer), defines, include_dirs, includers=False,
                                       project_search=project_search)
                # the constants of the headers the includer reads (`const int WARPSIZE = 32;` of the
                # header it includes before this one), under this file's own
                includer_constants = dict(context.constants)
                for name, body in context.macros.items():
                    env.macros.setdefault(name, body)
                for name, definition in context.function_macros.items():
                    env.function_macros.setdefault(name, definition)
                for name, text in context.type_aliases.items():
                    env.type_aliases.setdefault(name, text)
                # the headers it reads before this file hold the functions this file calls
                # without including them (`kernels.h` calling a helper of the `benchmark.h` its
                # includer read first)
                read = list(context.headers)
                includer_headers = tuple(read[:read.index(path)] if path in read else read)
                break
        constants = ConstEnv()
        seen: set[Path] = set()
        seen_order: list[Path] = []
        self._seen_order = seen_order
        self._extra_dirs = include_dirs
        self._project_search = project_search
        self._run(directives, path.parent if path is not None else None, env, constants, seen, depth=0)
        for constant, value in (*constants.constants.items(), *includer_constants.items()):
            env.constants.setdefault(constant, value)
        env.type_aliases.update(constants.type_aliases)
        for name, function in constants.pure_functions.items():
            env.pure_functions.setdefault(name, function)
        env.headers = (*seen_order, *(h for h in includer_headers if h not in seen_order))
        return env

    def _run(self, directives: list[Directive], directory: Path | None, env: ConstEnv, constants: ConstEnv,
             seen: set[Path], depth: int) -> None:
        # stack of (this branch active, some branch already taken, parent active)
        stack: list[tuple[bool, bool, bool]] = []
        active = True
        for d in directives:
            name = d.name
            if name in ("if", "ifdef", "ifndef"):
                if not active:
                    stack.append((False, True, False))
                    continue
                if name == "if":
                    cond = evaluate_condition(env, d.argument)
                    taken = True if cond is None else cond
                else:
                    word = d.argument.split()[0] if d.argument.split() else ""
                    taken = is_defined(env, word) == (name == "ifdef")
                stack.append((taken, taken, True))
                active = taken
            elif name in ("elif", "elifdef", "elifndef"):
                if not stack:
                    continue
                _, already, parent = stack[-1]
                if not parent or already:
                    stack[-1] = (False, already, parent)
                    active = False
                    continue
                if name == "elif":
                    cond = evaluate_condition(env, d.argument)
                    taken = bool(cond) if cond is not None else False
                else:
                    word = d.argument.split()[0] if d.argument.split() else ""
                    taken = is_defined(env, word) == (name == "elifdef")
                stack[-1] = (taken, taken, parent)
                active = taken
            elif name == "else":
                if not stack:
                    continue
                _, already, parent = stack[-1]
                stack[-1] = (parent and not already, True, parent)
                active = parent and not already
            elif name == "endif":
                if stack:
                    stack.pop()
                active = stack[-1][0] if stack else True
            elif not active:
                continue
            elif name == "define":
                define(env, d.argument)
            elif name == "undef":
                undefine(env, d.argument.split()[0] if d.argument.split() else "")
            elif name == "include" and directory is not None and depth < MAX_INCLUDE_DEPTH:
                self._include(d.argument, directory, env, constants, seen, depth)

    def _include(self, argument: str, directory: Path, env: ConstEnv, constants: ConstEnv, seen: set[Path],
                 depth: int) -> None:
        """`#include "header"` (or `<header>` on the include paths): its macros, constants and
        typedefs, once per translation unit."""
        m = re.match(r'"([^"]+)"|<([^<>]+)>', argument.strip())
        if not m:
            return
        header = self._resolve(directory, m.group(1)) if m.group(1) else self._resolve_angled(directory, m.group(2))
        if header is None or header in seen:
            return
        seen.add(header)
        self._seen_order.append(header)
        header_directives, header_constants = self._file(header)
        twice = self._twice.get(header)
        if twice is not None:
            # (a name defined in several branches: the definition of the branch the macros so far take)
            chosen = _active_definitions(twice[1], env, twice[0])
            for cname, cbody in chosen.constants.items():
                constants.constants.setdefault(cname, cbody)
            for tname, tbody in chosen.type_aliases.items():
                constants.type_aliases.setdefault(tname, tbody)
        for cname, cbody in header_constants.constants.items():
            constants.constants.setdefault(cname, cbody)
        for tname, tbody in header_constants.type_aliases.items():
            constants.type_aliases.setdefault(tname, tbody)
        for fname, function in header_constants.pure_functions.items():
            constants.pure_functions.setdefault(fname, function)
        self._run(header_directives, header.parent, env, constants, seen, depth + 1)

    def forget(self) -> None:
        """Drop what was read of other files (their directives, where includes resolve, each
        folder's includers): read again on next use."""
        self._directives = {}
        self._twice = {}
        self._resolved = {}
        self._includers = {}
        self._projects = {}

    @property
    def remembered(self) -> int:
        """How many files' directives, resolved includes and folders' includers are kept."""
        return len(self._directives) + len(self._resolved) + len(self._includers)

    def includers_of(self, path: Path) -> list[Path]:
        """Sources that `#include` this file, directly or through other headers, beside it or up
        to two folders above (`runner.cu` -> `kernels.cuh` -> `kernels/gemm_tiled.cuh`),
        nearest first."""
        return sources_including(path, lambda file: [
            candidate for folder in folders_above(file)
            for candidate, written in self._folder_index(folder).get(file.name, [])
            if candidate != file and names_file(candidate, written, file)])

    def _folder_index(self, folder: Path) -> dict[str, list[tuple[Path, str]]]:
        """File name -> the C, C++ and CUDA files (sources and headers) of `folder` that
        `#include "...name"` it, each with the path it writes."""
        index = self._includers.get(folder)
        if index is None:
            index = {}
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                entries = []
            for entry in entries:
                if entry.suffix.lower() not in _SOURCE_SUFFIXES + HEADER_SUFFIXES or not entry.is_file() \
                        or is_transient_copy(entry):
                    continue
                for m in _INCLUDE_NAME.finditer(self._file_bytes(entry)):
                    index.setdefault(m.group(2).decode("utf-8", "replace"), []).append(
                        (entry, m.group(1).decode("utf-8", "replace")))
            self._includers[folder] = index
        return index

    def _file_bytes(self, path: Path) -> bytes:
        try:
            return path.read_bytes()[:MAX_HEADER_BYTES]
        except OSError:
            return b""

    def _file(self, path: Path) -> tuple[list[Directive], ConstEnv]:
        cached = self._directives.get(path)
        if cached is None:
            constants = ConstEnv()
            try:
                data = path.read_bytes()[:MAX_HEADER_BYTES]
            except OSError:
                data = b""
            directives = scan_directives(data)
            twice = scan_constants(data, constants)
            if twice:
                self._twice[path] = (twice, data)
            for name, parameters, expression in scan_pure_functions(data):
                constants.pure_functions.setdefault(name, (parameters, expression))
            cached = (directives, constants)
            self._directives[path] = cached
        return cached

    def _resolve(self, directory: Path, name: str) -> Path | None:
        """A quoted include: beside the file, on the include paths, in the conventional folders,
        then (with project search) around the file."""
        key = (directory, self._extra_dirs, name, self._project_search)
        if key not in self._resolved:
            found = _first_file(name, (directory, *self.include_dirs, *self._extra_dirs, *_conventional_dirs(directory)))
            self._resolved[key] = found if found is not None else self._in_project(directory, name)
        return self._resolved[key]

    def _resolve_angled(self, directory: Path, name: str) -> Path | None:
        """An angled include: on the include paths, then (with project search) around the file
        when it is a header the system does not provide."""
        key = (directory, self._extra_dirs, "<" + name, self._project_search)
        if key not in self._resolved:
            found = _first_file(name, (*self.include_dirs, *self._extra_dirs))
            if found is None and name.endswith(HEADER_SUFFIXES) and _first_file(name, SYSTEM_INCLUDE_DIRS) is None:
                found = self._in_project(directory, name)
            self._resolved[key] = found
        return self._resolved[key]

    def _in_project(self, directory: Path, name: str) -> Path | None:
        if not self._project_search:
            return None
        directory = directory.absolute()  # (`check main.cu`: the folder is `.`)
        root = search_root(directory)
        if root is None:
            return None
        index = self._projects.get(root)
        if index is None:
            index = self._projects[root] = HeaderIndex(root, directory)
        folder = index.folder_for(name, directory)
        if folder is None and not index.complete:
            # (a walk cut short near another file: this one's surroundings walked first)
            folder = HeaderIndex(root, directory).folder_for(name, directory)
        return _first_file(name, (folder,)) if folder is not None else None


# the system's own headers (`<math.h>`) are never looked for in a project
SYSTEM_INCLUDE_DIRS = (Path("/usr/include"), Path("/usr/local/include"))


def _first_file(name: str, folders: Sequence[Path]) -> Path | None:
    for base in folders:
        candidate = base / name
        try:
            if candidate.is_file():
                return candidate.resolve()
        except OSError:
            return None
    return None


# Where projects keep their headers when no `-I` says (an editor without a compile database):
# `include/`, `inc/` or `common/` beside the file or up to two folders above it; searched after
# the file's folder and the include directories.
CONVENTIONAL_INCLUDE_FOLDERS = ("include", "inc", "common")


def _conventional_dirs(directory: Path) -> list[Path]:
    dirs = []
    for ancestor in (directory, directory.parent, directory.parent.parent):
        for sub in CONVENTIONAL_INCLUDE_FOLDERS:
            dirs.append(ancestor / sub)
    return dirs


def strip_inactive(text: str, env: ConstEnv) -> str:
    """Blank the lines of `text` in conditional branches that `env` makes inactive (line
    numbers are kept). Used on a kernel's own text before it is analysed."""
    if "#" not in text:
        return text
    lines = text.split("\n")
    stack: list[tuple[bool, bool, bool]] = []
    active = True
    out = []
    local = ConstEnv(parent=env)
    local.macros = dict(env.all_macros())
    local.function_macros = dict(env.all_function_macros())
    if "__CUDACC__" in local.macros:
        # a kernel's text is compiled in nvcc's device pass, where `__CUDA_ARCH__` is defined
        local.macros.setdefault("__CUDA_ARCH__", DEVICE_ARCH)
    for line in lines:
        stripped = line.strip()
        m = re.match(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", stripped)
        if not m:
            out.append(line if active else "")
            continue
        name, argument = m.group(1), _COMMENTS.sub(" ", m.group(2)).strip()
        if name in ("if", "ifdef", "ifndef"):
            if not active:
                stack.append((False, True, False))
            else:
                if name == "if":
                    cond = evaluate_condition(local, argument)
                    taken = True if cond is None else cond
                else:
                    word = argument.split()[0] if argument.split() else ""
                    taken = is_defined(local, word) == (name == "ifdef")
                stack.append((taken, taken, True))
                active = taken
        elif name == "elif" and stack:
            _, already, parent = stack[-1]
            cond = evaluate_condition(local, argument) if parent and not already else False
            taken = bool(cond)
            stack[-1] = (taken, already or taken, parent)
            active = taken
        elif name == "else" and stack:
            _, already, parent = stack[-1]
            stack[-1] = (parent and not already, True, parent)
            active = parent and not already
        elif name == "endif" and stack:
            stack.pop()
            active = stack[-1][0] if stack else True
        out.append("")
    return "\n".join(out)


_CONDITIONAL_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b", re.M)
_BRACE_NOISE = re.compile(rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)


def _brace_balance(segment: bytes) -> int:
    return segment.count(b"{") - segment.count(b"}")


def _without_noise(data: bytes) -> bytes:
    """`data` with its strings, characters and comments blanked, newlines and offsets kept
    (braces there pair nothing; a `#if` in a comment is no directive)."""
    return _BRACE_NOISE.sub(lambda m: m.group().translate(_BLANKED), data)


_BLANKED = bytes(10 if byte == 10 else 32 for byte in range(256))  # every byte a space but newlines


def _unbalanced_groups(data: bytes) -> list[tuple[int, int]]:
    """(start, end) bytes of the outermost conditional groups one of whose branches opens more
    braces than it closes, or closes more (`#ifdef DUMP` / `for (...) {` / `#else` /
    `for (...) {` / `#endif`, or `extern "C" {` under `#ifdef __cplusplus`)."""
    found: list[tuple[int, int]] = []
    stack: list[tuple[int, int, list[int]]] = []  # (group start, branch start, each branch's balance)
    for m in _CONDITIONAL_DIRECTIVE.finditer(data):
        line_end = data.find(b"\n", m.end())
        line_end = len(data) if line_end < 0 else line_end
        if stack:  # (the text of the open branch up to here counts for it)
            first, branch, balances = stack[-1]
            balances[-1] += _brace_balance(data[branch:m.start()])
        word = m.group(1)
        if word in (b"if", b"ifdef", b"ifndef"):
            stack.append((m.start(), line_end, [0]))
        elif not stack:
            continue
        elif word == b"endif":
            first, _, balances = stack.pop()
            if any(balances):
                found = [g for g in found if g[0] < first] + [(first, line_end)]
        else:  # `#elif`, `#else`: a new branch
            first, _, balances = stack[-1]
            balances.append(0)
        if stack and word != b"if" and word != b"ifdef" and word != b"ifndef":
            stack[-1] = (stack[-1][0], line_end, stack[-1][2])  # (the branch goes on after this line)
    return found


def balanced_view(data: bytes, env: ConstEnv) -> bytes:
    """`data` with the conditional groups that split a brace pair between branches resolved by
    `env`'s macros: their directives and inactive branches blanked, byte for byte (offsets and
    lines stay). A parser reading such text as written sees two `for (...) {` headers for one
    body and loses the function around them; groups that keep braces paired stay as written."""
    if b"{" not in data:
        return data
    if not _unbalanced_groups(data):  # (counted as written first: most files end here)
        return data
    groups = _unbalanced_groups(_without_noise(data))
    if not groups:
        return data
    out = bytearray(data)
    for start, end in groups:
        raw = data[start:end].split(b"\n")
        text = [line.decode("utf-8", errors="replace") for line in raw]
        stripped = strip_inactive("\n".join(text), env).split("\n")
        at = start
        for line, before, after in zip(raw, text, stripped):
            if after != before:
                out[at:at + len(line)] = b" " * len(line)
            at += len(line) + 1
    return bytes(out)


def inactive_lines(data: bytes, env: ConstEnv) -> set[int]:
    """0-based lines of `data` in conditional branches that the macros of `env` make inactive
    (the directives themselves aside)."""
    text = data.decode("utf-8", errors="replace")
    original = text.split("\n")
    stripped = strip_inactive(text, env).split("\n")
    return {i for i, (a, b) in enumerate(zip(original, stripped)) if a.strip() and not b.strip()
            and not _CONDITIONAL_LINE.match(a)}


_CONDITIONAL_LINE = re.compile(r"\s*#\s*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")


MAX_LOCAL_HEADERS = 300
_QUOTED_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)


def quoted_includes(text: bytes) -> list[str]:
    """The names `text`'s quoted #includes spell (`#include "util/grid.h"`: `util/grid.h`)."""
    return [name.decode(errors="replace") for name in _QUOTED_INCLUDE.findall(text)]


def local_headers(source: Path, include_dirs: Sequence[str] = ()) -> list[Path]:
    """Quoted #includes found beside the including file or on the include paths, transitively
    (what a cached compile is checked against: a header's change makes it stale)."""
    dirs = [Path(d) for d in include_dirs]
    seen: list[Path] = []
    queue = [source]
    resolved_source = source.resolve()
    while queue and len(seen) < MAX_LOCAL_HEADERS:
        current = queue.pop()
        try:
            text = current.read_bytes()
        except OSError:
            continue
        for name in quoted_includes(text):
            for folder in (current.parent, *dirs):
                candidate = (folder / name).resolve()
                if candidate.is_file():
                    if candidate not in seen and candidate != resolved_source:
                        seen.append(candidate)
                        queue.append(candidate)
                    break
    return sorted(seen)


def sources_including(path: Path, includers: Callable[[Path], Iterable[Path]], depth: int = _INCLUDE_DEPTH,
                      is_unit: Callable[[Path], bool | None] | None = None) -> list[Path]:
    """The source files that include `path`, directly or through up to `depth` headers, nearest
    first. `includers(file)`: the files (sources and headers) that `#include` `file` by name.
    `is_unit(source)`: False for a source the build does not compile itself (`work.cu`, which
    `main.cu` includes): it is passed through like a header, towards the source that is compiled."""
    found: list[Path] = []
    frontier, seen = [path], {path}
    for _ in range(depth):
        next_frontier: list[Path] = []
        for current in frontier:
            for candidate in includers(current):
                if candidate not in seen:
                    seen.add(candidate)
                    ends = _is_source(candidate) and (is_unit is None or is_unit(candidate) is not False)
                    (found if ends else next_frontier).append(candidate)
        frontier = next_frontier
    return found


def names_file(includer: Path, written: str, file: Path) -> bool:
    """Whether `#include "written"` in `includer` can mean `file`: the path resolves to it from the
    includer's folder, or, resolving to no file there, names it (a folder on the include path)
    — not a header of the same name beside the includer."""
    if Path(written).name != file.name:
        return False
    relative = includer.parent / written
    return os.path.normpath(relative) == os.path.normpath(file) or not relative.is_file()


def folders_above(path: Path) -> tuple[Path, Path, Path]:
    """Where a file's includers are looked for: its folder and the two above it."""
    return path.parent, path.parent.parent, path.parent.parent.parent


def _is_source(path: Path) -> bool:
    return path.suffix.lower() in _SOURCE_SUFFIXES
