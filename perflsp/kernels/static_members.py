"""Static constant members of classes, read where a kernel names them: `x128::size` with
`typedef Packed128<float> x128;` and `template <class ElementType> struct Packed128 { static
constexpr const int size = sizeof(int4) / sizeof(ElementType); ... };` is 4. The alias is
followed to the class template and its arguments, the member's initialiser is found in the
class's body, and it is folded with the template's parameters replaced by those arguments.
Text-level, like the rest of the constant folding: a class defined in the file or a header it
includes."""

from __future__ import annotations

import re
from collections.abc import Iterable

from perflsp.kernels.consteval import ConstEnv, try_evaluate
from perflsp.kernels.text import split_top_level

_QUALIFIED = re.compile(r"([A-Za-z_]\w*(?:<[^<>]*>)?)::([A-Za-z_]\w*)")
_INSTANCE = re.compile(r"([A-Za-z_]\w*)\s*(?:<(.*)>)?")
_MAX_ALIASES = 8  # typedefs followed before giving up (a cycle, or a chain too deep to be a type)


def static_member_value(name: str, env: ConstEnv, texts: Iterable[str]) -> int | float | None:
    """The value of `Class::member` (`name`), a static constant of a class or class template
    instance defined in one of `texts`, folded in `env`; None when it is not one."""
    m = _QUALIFIED.fullmatch(name.replace(" ", ""))
    if m is None:
        return None
    cls, arguments = _instance(m.group(1), env)
    if cls is None:
        return None
    for text in texts:
        found = _member_initialiser(text, cls, m.group(2))
        if found is None:
            continue
        parameters, initialiser = found
        for parameter, argument in zip(parameters, arguments):
            initialiser = re.sub(rf"\b{re.escape(parameter)}\b", argument, initialiser)
        value, _ = try_evaluate(initialiser, env)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return None


def _instance(type_text: str, env: ConstEnv) -> tuple[str | None, list[str]]:
    """(the class template's or class's name, its arguments with aliases resolved) of a type."""
    for _ in range(_MAX_ALIASES):
        m = _INSTANCE.fullmatch(type_text.strip())
        if m is None:
            return None, []
        alias = env.type_alias(m.group(1)) if m.group(2) is None else None
        if alias is None:
            arguments = [_resolved(a, env) for a in split_top_level(m.group(2), angles=True)] if m.group(2) else []
            return m.group(1), arguments
        type_text = alias
    return None, []


def _resolved(type_text: str, env: ConstEnv) -> str:
    text = type_text.strip()
    for _ in range(_MAX_ALIASES):
        alias = env.type_alias(text)
        if alias is None:
            return text
        text = alias.strip()
    return text


def _member_initialiser(text: str, cls: str, member: str) -> tuple[list[str], str] | None:
    """(the class template's parameter names, the member's initialiser) where `text` defines
    class `cls` with a static constant `member`."""
    head = re.compile(rf"(?:template\s*<([^<>]*(?:<[^<>]*>[^<>]*)*)>\s*)?(?:struct|class)\s+(?:alignas\s*\([^)]*\)\s*)?"
                      rf"{re.escape(cls)}\b[^;{{]*\{{")
    for m in head.finditer(text):
        body = _body(text, m.end() - 1)
        found = re.search(rf"\bstatic\s+(?:constexpr\s+|const\s+|inline\s+)+[\w:<> ]*?\b{re.escape(member)}\s*=\s*([^;]+);",
                          body)
        if found is None:
            continue
        parameters = re.findall(r"(?:class|typename|int|unsigned|size_t|bool|auto)\s+([A-Za-z_]\w*)", m.group(1) or "")
        return parameters, found.group(1)
    return None


def _body(text: str, brace: int) -> str:
    """The text of the braces opening at `brace`."""
    depth = 0
    for at in range(brace, len(text)):
        if text[at] == "{":
            depth += 1
        elif text[at] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1:at]
    return text[brace + 1:]
