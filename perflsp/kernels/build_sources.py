"""Sources of one program that live in another folder, as its build names them.

A port often builds host code it shares with another port: an OpenMP version's Makefile
compiles `../x-cuda/main.cpp` (`main.o: ../x-cuda/main.cpp ../x-cuda/utils.h`), so the
`main` that parses the arguments and calls the offloaded function is not in the folder of the
function. Only the C/C++/CUDA sources a plain Makefile names are read (its source lists and
rules' prerequisites), at most `_MAX_NAMED` of them, the Makefile once per version.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu")
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")  # (the order `make` looks for them in)
_MAX_NAMED = 32  # a build naming more sources than this from elsewhere is not one program's
_MAX_MAKEFILE_BYTES = 256 * 1024

_CONTINUATION = re.compile(r"\\\r?\n")
# `name = words` (`:=`, `::=`, `+=`, `?=`) and `targets: prerequisites` (not `:=`)
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+|override\s+)?([A-Za-z_][\w.-]*)\s*(::?=|[+?]?=)(.*)$")
_RULE = re.compile(r"^([^:=#\t][^:=#]*?)::?(?!=)(.*)$")
_REFERENCE = re.compile(r"\$[({]([A-Za-z_][\w.-]*)[)}]")  # `$(src)`, `${src}`


def program_sources(own: Path, unit_sources: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """The sources of `own`'s program outside its folder: those the folder's Makefile names,
    then the build target's others (`unit_sources`, from a compile database), each once."""
    folder = own.parent
    named = (*makefile_sources(folder), *(p for p in unit_sources if p.parent != folder and p != own))
    return tuple(dict.fromkeys(named))[:_MAX_NAMED]


def makefile_sources(folder: Path) -> tuple[Path, ...]:
    """The existing C/C++/CUDA sources outside `folder` that the Makefile of `folder` names
    (resolved against `folder`, in the order named); () where there is no Makefile."""
    for name in _MAKEFILES:
        makefile = folder / name
        try:
            stat = makefile.stat()
        except OSError:
            continue
        return _named_sources(makefile, stat.st_mtime_ns, stat.st_size)
    return ()


def makefile_source_named(folder: Path, file_name: str) -> Path | None:
    """The source outside `folder` that its Makefile names and whose name `file_name` is, or
    ends with after a `-` (a generated copy `build/<target>-main.cpp` of `../x/main.cpp`)."""
    return next((p for p in makefile_sources(folder) if copies(file_name, p.name)), None)


def copies(file_name: str, source_name: str) -> bool:
    """Whether `file_name` is `source_name` or a build's copy of it named `<prefix>-<source_name>`."""
    return file_name == source_name or file_name.endswith("-" + source_name)


@lru_cache(maxsize=256)
def _named_sources(makefile: Path, mtime_ns: int, size: int) -> tuple[Path, ...]:
    if size > _MAX_MAKEFILE_BYTES:
        return ()
    try:
        text = makefile.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    folder = makefile.parent.resolve()
    found: dict[Path, None] = {}
    variables: dict[str, str] = {}  # the plain assignments so far (`src = ../x-cuda`)
    for line in _CONTINUATION.sub(" ", text).splitlines():
        if line.startswith("\t"):
            continue  # a recipe: what a rule runs, not what it is built from
        line = line.split("#", 1)[0]
        if (m := _ASSIGNMENT.match(line)) is not None:
            name, kind, words = m.group(1), m.group(2), _expanded(m.group(3), variables).strip()
            if kind == "+=":
                variables[name] = f"{variables.get(name, '')} {words}".strip()
            elif kind != "?=" or name not in variables:
                variables[name] = words
        elif (m := _RULE.match(line)) is not None:
            words = _expanded(m.group(2).split(";", 1)[0].replace("|", " "), variables)
        else:
            continue
        for word in words.split():
            if "$" in word or "%" in word or not word.endswith(SOURCE_SUFFIXES):
                continue
            path = _outside(folder, word)
            if path is not None:
                found.setdefault(path)
    return tuple(found) if len(found) <= _MAX_NAMED else ()


def _expanded(words: str, variables: dict[str, str]) -> str:
    """`words` with the Makefile's plain variables expanded (`$(src)/main.cpp`); a reference to
    anything else (an automatic variable, a function, a variable not assigned yet) is left as
    is, and the word it is in is not read."""
    return _REFERENCE.sub(lambda m: variables.get(m.group(1), m.group(0)), words)


def _outside(folder: Path, word: str) -> Path | None:
    """The file `word` names relative to `folder` where it exists outside `folder`."""
    try:
        path = (folder / word).resolve()
        return path if path.parent != folder and path.is_file() else None
    except OSError:
        return None
