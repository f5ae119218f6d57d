"""The command-line helpers of NVIDIA's CUDA samples, read as those libraries define them (as
`getopt` is read by glibc's rules, not run): their bodies (a class that parses the arguments
into a map, `strncasecmp` over the arguments) are not what a host-value run follows.

- `helper_string.h`: `checkCmdLineFlag(argc, argv, "name")` (an argument `-name` or `--name`,
  also `--name=...`), `getCmdLineArgumentInt` / `getCmdLineArgumentFloat(argc, argv, "name")`
  (`--name=192`, `-name192`: the argument that begins with the name, case-insensitively, and
  what follows it; 0 where none), `getCmdLineArgumentString(argc, argv, "name", &s)`.
- shrUtils (`shrGetCmdLineArgumenti` / `u` / `f` / `str(argc, argv, "name", &v)`,
  `shrCheckCmdLineFlag`): `-name=value` or `--name=value`, the name before `=` exactly.

The out-parameter forms return whether the option was given and set `*v` only then."""

from __future__ import annotations

import re

from perflsp.kernels.consteval import NotConstant, Value, string_value

# name -> (the library's matching: "prefix" for helper_string.h, "exact" for shrUtils; what it gives)
RETURNING: dict[str, tuple[str, str]] = {
    "checkCmdLineFlag": ("flag", "flag"),
    "getCmdLineArgumentInt": ("prefix", "int"),
    "getCmdLineArgumentFloat": ("prefix", "float"),
    "shrCheckCmdLineFlag": ("exact", "flag"),
}
WRITING: dict[str, tuple[str, str]] = {
    "getCmdLineArgumentString": ("prefix", "str"),
    "shrGetCmdLineArgumenti": ("exact", "int"),
    "shrGetCmdLineArgumentu": ("exact", "int"),
    "shrGetCmdLineArgumentf": ("exact", "float"),
    "shrGetCmdLineArgumentstr": ("exact", "str"),
}


def _found(argv: tuple[str, ...], option: str, matching: str) -> str | None:
    """What follows the option's name in the last argument that gives it ("" for a bare flag);
    None where no argument does."""
    found: str | None = None
    for arg in argv[1:]:
        body = arg.lstrip("-")
        if matching == "exact":
            if not arg.startswith("-"):
                continue
            name, equal, value = body.partition("=")
            if name == option:
                found = value if equal else ""
        elif matching == "flag":
            if body.partition("=")[0].lower() == option.lower():
                found = ""
        elif body[: len(option)].lower() == option.lower():
            rest = body[len(option) :]
            found = rest[1:] if rest.startswith("=") else rest
    return found


_NUMBER = {"int": re.compile(r"\s*[-+]?\d+"), "float": re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")}


def _converted(text: str, kind: str) -> Value:
    """The option's text as the library converts it (`atoi`/`atof`: the number it begins
    with, 0 where none)."""
    if kind == "str":
        return string_value(text)
    m = _NUMBER[kind].match(text)
    if m is None:
        return 0 if kind == "int" else 0.0
    return int(m.group()) if kind == "int" else float(m.group())


def returned(name: str, argv: tuple[str, ...], option: str) -> Value:
    """The value `checkCmdLineFlag(argc, argv, option)` (one of `RETURNING`) returns."""
    matching, kind = RETURNING[name]
    found = _found(argv, option, matching)
    if kind == "flag":
        return int(found is not None)
    return _converted(found, kind) if found is not None else (0 if kind == "int" else 0.0)


def written(name: str, argv: tuple[str, ...], option: str) -> tuple[int, Value | None]:
    """What `shrGetCmdLineArgumenti(argc, argv, option, &v)` (one of `WRITING`) returns, and
    what it sets `v` to (None: it leaves `v` as it was)."""
    matching, kind = WRITING[name]
    found = _found(argv, option, matching)
    if found is None:
        return 0, None
    if kind != "str" and found == "":
        raise NotConstant(f"`{name}` of a flag without a value")
    return 1, _converted(found, kind)
