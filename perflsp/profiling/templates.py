"""Command templates: argv lists with `{placeholder}`s, expanded one argument at a time.

Nothing here ever builds a shell string from values: a value lands inside the single argument
that named it, so a file called `a.cu; rm -rf ~` stays one argument. `{args}` is the one
placeholder that expands to several arguments, and only when it stands alone as an argument.
Values from source files (paths, kernel names) are checked so they cannot read as options.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePath

from perflsp.profiling.errors import ProfilingError

PLACEHOLDERS = {
    "file": "the source file (absolute path)",
    "exe": "the built executable (absolute path)",
    "args": "the program arguments (a list; must be a whole argument)",
    "kernel": "the kernel name (identifier or qualified name)",
    "block": "the block size to try (launch-parameter verification)",
}

_KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "cmd", "cmd.exe", "powershell", "pwsh"}


def _tokens(argument: str) -> list[tuple[str, str]]:
    """Split one argument into ("text", ...) and ("field", name) pieces, reading left to right
    as str.format does: `{{` and `}}` are literal braces; a lone brace is an error."""
    tokens: list[tuple[str, str]] = []
    i, text = 0, []
    while i < len(argument):
        two = argument[i : i + 2]
        if two in ("{{", "}}"):
            text.append(two[0])
            i += 2
            continue
        ch = argument[i]
        if ch == "{":
            end = argument.find("}", i + 1)
            if end < 0 or "{" in argument[i + 1 : end]:
                raise ValueError(f"unmatched '{{' in {argument!r} (write {{{{ for a literal brace)")
            if text:
                tokens.append(("text", "".join(text)))
                text = []
            tokens.append(("field", argument[i + 1 : end]))
            i = end + 1
            continue
        if ch == "}":
            raise ValueError(f"unmatched '}}' in {argument!r} (write }}}} for a literal brace)")
        text.append(ch)
        i += 1
    if text:
        tokens.append(("text", "".join(text)))
    return tokens


def placeholders_in(argument: str) -> list[str]:
    """Names of the placeholders in one argument (empty for a malformed one)."""
    try:
        return [value for kind, value in _tokens(argument) if kind == "field"]
    except ValueError:
        return []


def check_template(template: Sequence[str], allowed: Sequence[str] = tuple(PLACEHOLDERS)) -> None:
    """Raise ValueError naming the first unknown or misplaced placeholder."""
    for argument in template:
        if "\0" in argument:
            raise ValueError("arguments cannot contain NUL characters")
        names = [value for kind, value in _tokens(argument) if kind == "field"]
        for name in names:
            if name not in allowed:
                known = ", ".join("{" + n + "}" for n in allowed)
                raise ValueError(f"unknown placeholder {{{name}}} in {argument!r} (known: {known})")
        if "args" in names and argument != "{args}":
            raise ValueError(f"{{args}} expands to several arguments and must stand alone, not in {argument!r}")
    _refuse_shell_strings(template)


def _refuse_shell_strings(template: Sequence[str]) -> None:
    """`bash -c "nvcc {file}"` would hand a value to a shell parser: refuse it."""
    if not template:
        return
    program = PurePath(template[0]).name.lower()
    if program not in _SHELLS:
        return
    for argument in template[1:]:
        if placeholders_in(argument):
            raise ValueError(
                f"placeholders cannot be used in arguments to the shell '{program}' "
                "(its command string would be re-parsed); call the program directly"
            )


def check_value(name: str, value: str) -> str:
    """Validate a single-argument value; return it unchanged."""
    if "\0" in value:
        raise ProfilingError("bad-template", f"the value for {{{name}}} contains a NUL character")
    if name in ("file", "exe"):
        if not PurePath(value).is_absolute():
            # Absolute paths never begin with '-', so they cannot be taken for an option.
            raise ProfilingError("bad-template", f"{{{name}}} must be an absolute path, got {value!r}")
    elif name == "kernel":
        if not _KERNEL_NAME.match(value):
            raise ProfilingError("bad-template", f"{{kernel}} must be an identifier or qualified name, got {value!r}")
    elif name == "block" and not value.isdigit():
        raise ProfilingError("bad-template", f"{{block}} must be a positive integer, got {value!r}")
    return value


def expand(
    template: Sequence[str],
    values: Mapping[str, str],
    *,
    args: Sequence[str] = (),
    what: str = "command",
) -> list[str]:
    """Expand `template` into an argv list.

    `values` holds the single-argument placeholders; `args` is what a whole-argument `{args}`
    becomes. A placeholder without a value is an error naming the template.
    """
    try:
        check_template(template)
    except ValueError as exc:
        raise ProfilingError("bad-template", f"{what}: {exc}") from None
    argv: list[str] = []
    for argument in template:
        if argument == "{args}":
            for extra in args:
                if "\0" in extra:
                    raise ProfilingError("bad-template", "a program argument contains a NUL character")
            argv.extend(args)
            continue

        pieces = []
        for kind, value in _tokens(argument):
            if kind == "text":
                pieces.append(value)
            elif value not in values:
                raise ProfilingError("bad-template", f"{what}: {{{value}}} has no value here")
            else:
                pieces.append(check_value(value, values[value]))
        expanded = "".join(pieces)
        argv.append(expanded)
    return argv


def uses_placeholder(template: Sequence[str], name: str) -> bool:
    return any(name in placeholders_in(argument) for argument in template)


def is_ssh(launcher: Sequence[str]) -> bool:
    return bool(launcher) and PurePath(launcher[0]).name.lower() in {"ssh", "ssh.exe"}


def with_launcher(launcher: Sequence[str], argv: Sequence[str]) -> list[str]:
    """Prefix `argv` with the launcher (`srun -p gpu`, `ssh gpu01`, ...).

    ssh joins its remote command into one string that the remote shell splits again, so after an
    ssh launcher every argument is shell-quoted: values still arrive as single arguments.
    """
    if not launcher:
        return list(argv)
    if is_ssh(launcher):
        return [*launcher, *(shlex.quote(a) for a in argv)]
    return [*launcher, *argv]
