"""The options a `getopt()` loop of the host code sees, read from the program's arguments as
glibc's `getopt` reads them: `-n 20000`, `-n20000`, grouped flags (`-vq`), options after
operands (it permutes them), `--` ending the options."""

from __future__ import annotations

import re

# `(opt = getopt(argc, argv, "n:i:h"))`, `getopt_long(argc, argv, "::n:i:", long, &index)`
_GETOPT_CALL = re.compile(r"\b(getopt|getopt_long|getopt_long_only)\s*\(\s*argc\s*,\s*argv\s*,\s*\"((?:\\.|[^\"\\])*)\"")
UNKNOWN_OPTION = "?"


def getopt_call(condition: str) -> tuple[str, str] | None:
    """(function, option string) of the `getopt` call a loop condition makes, if any."""
    m = _GETOPT_CALL.search(condition)
    return (m.group(1), m.group(2)) if m is not None else None


def parse_options(optstring: str, argv: tuple[str, ...], long_only: bool = False
                  ) -> list[tuple[str, str | None]] | None:
    """The (option character, argument) pairs successive `getopt` calls return for `argv`
    (`argv[0]` the program), in order; `?` for an option the string does not declare or whose
    argument is missing. None where the reading is not certain: a long option (`--size=8`)
    that `getopt_long` would match against a table this reading does not see (with `long_only`,
    `getopt_long_only`'s `-size` too)."""
    posix = optstring.startswith("+")
    spec = optstring.lstrip("+-:")
    found: list[tuple[str, str | None]] = []
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if arg.startswith("--") or (long_only and arg.startswith("-") and len(arg) > 2 and arg[1] not in spec):
            return None
        if not arg.startswith("-") or arg == "-":
            if posix:
                break
            continue  # an operand: glibc moves it after the options and reads on
        j = 1
        while j < len(arg):
            letter = arg[j]
            at = spec.find(letter)
            if letter == ":" or at < 0:
                found.append((UNKNOWN_OPTION, None))
                j += 1
                continue
            takes = spec[at + 1 : at + 2] == ":"
            optional = spec[at + 1 : at + 3] == "::"
            if not takes:
                found.append((letter, None))
                j += 1
                continue
            rest = arg[j + 1 :]
            if rest or optional:
                found.append((letter, rest or None))
            elif i < len(args):
                found.append((letter, args[i]))
                i += 1
            else:
                found.append((UNKNOWN_OPTION, None))
            break
    return found
