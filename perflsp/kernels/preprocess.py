"""Macro expansion of a kernel's text with the macros the file (and its local headers) define.

Array accesses, arithmetic and types hidden behind macros (`#define IDX(i, j) ((i) * N + (j))`,
`#define REAL double`) are invisible to a tree-only reading. Expanding the kernel's text before
the engine reads it is a small, bounded preprocessor: object-like and function-like macros,
`#` and `##`, recursion guarded by a hide set, output capped. Conditionals and includes are not
evaluated here (the extraction already saw the file as written).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.includes import strip_inactive

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*|/\*.*?\*/)
      | (?P<id>[A-Za-z_]\w*)
      | (?P<num>\.?\d(?:[\w.]|[eEpP][+-])*)
      | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      | (?P<punct>\#\#|\#|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=?:;,.(){}\[\]]|.)
    """,
    re.VERBOSE | re.DOTALL,
)
MAX_OUTPUT_CHARS = 400_000
MAX_DEPTH = 24


def _tokens(text: str) -> list[str]:
    return [m.group() for m in _TOKEN.finditer(text)]


@lru_cache(maxsize=8192)
def _body_tokens(body: str) -> tuple[str, ...]:
    """A macro's body as tokens: the same few bodies are expanded at every use, in every file
    that includes their header."""
    return tuple(_tokens(body))


def expand_macros(text: str, env: ConstEnv, keep_constants: bool = False) -> str:
    """Expand every macro `env` knows in `text`; returns `text` itself when none occur.

    With `keep_constants`, a text whose only macros are numeric constants (`BLOCK` for 256) is
    returned unexpanded: such names do not change how the code parses, and the caller resolves
    them by name (this saves a re-parse of most kernels).
    """
    text = strip_inactive(text, env)
    objects = env.all_macros()
    functions = env.all_function_macros()
    if not objects and not functions:
        return pragma_lines(text)
    names = set(re.findall(r"[A-Za-z_]\w*", text))
    used_objects = names & objects.keys()
    used_functions = names & functions.keys()
    if not used_objects and not used_functions:
        return pragma_lines(text)
    if keep_constants and not used_functions and all(_is_numeric(objects[n], env) for n in used_objects):
        return pragma_lines(text)
    expander = _Expander(objects, functions)
    out = expander.expand(_tokens(text), frozenset(), 0)
    return pragma_lines("".join(out))


_PRAGMA_OPERATOR = re.compile(r'\b_Pragma\s*\(\s*((?:"(?:\\.|[^"\\\n])*"\s*)+)\)')
_STRING_PART = re.compile(r'"((?:\\.|[^"\\])*)"')


def pragma_lines(text: str) -> str:
    """`_Pragma("omp target ...")` as the directive it stands for, on a line of its own
    (`#pragma omp target ...`): how the compiler reads it, and how the tree shows directives."""
    if "_Pragma" not in text:
        return text
    return _PRAGMA_OPERATOR.sub(lambda m: "\n#pragma " + pragma_argument(m.group(1)) + "\n", text)


def pragma_argument(strings: str) -> str:
    """The directive text of a `_Pragma` operand: its string literals, destringized."""
    parts = _STRING_PART.findall(strings)
    return "".join(parts).replace('\\"', '"').replace("\\\\", "\\").replace("\n", " ")


def _is_numeric(body: str, env: ConstEnv) -> bool:
    from perflsp.kernels.consteval import try_evaluate

    cache = env.numeric_bodies
    if body not in cache:
        value, _ = try_evaluate(body, env)
        cache[body] = isinstance(value, (int, float))
    return cache[body]


class _Expander:
    def __init__(self, objects: dict[str, str], functions: dict[str, tuple[tuple[str, ...], str]]):
        self.objects = objects
        self.functions = functions
        self.produced = 0
        # object-like macro -> whether its body names no macro (its expansion is its body)
        self._plain_bodies: dict[str, bool] = {}

    def _is_plain(self, name: str, body: Sequence[str]) -> bool:
        plain = self._plain_bodies.get(name)
        if plain is None:
            plain = not any(t in self.objects or t in self.functions for t in body)
            self._plain_bodies[name] = plain
        return plain

    def expand(self, tokens: Sequence[str], hidden: frozenset[str], depth: int) -> list[str]:
        out: list[str] = []
        i = 0
        n = len(tokens)
        while i < n:
            tok = tokens[i]
            self.produced += len(tok)
            if self.produced > MAX_OUTPUT_CHARS or depth > MAX_DEPTH:
                out.extend(tokens[i:])
                return out
            if tok in hidden or not (tok[0].isalpha() or tok[0] == "_"):
                out.append(tok)
                i += 1
                continue
            if tok in self.functions:
                j = i + 1
                while j < n and tokens[j].isspace():
                    j += 1
                if j < n and tokens[j] == "(":
                    args, end = _collect_args(tokens, j)
                    if args is not None:
                        params, body = self.functions[tok]
                        replaced = _substitute(_body_tokens(body), params, args, self, hidden | {tok}, depth)
                        out.extend(self.expand(replaced, hidden | {tok}, depth + 1))
                        i = end
                        continue
                out.append(tok)
                i += 1
                continue
            if tok in self.objects:
                body_tokens = _body_tokens(self.objects[tok])
                out.append(" ")
                if depth < MAX_DEPTH and self._is_plain(tok, body_tokens):
                    # what `expand` would return: the body's tokens, their length produced (past
                    # the cap the count no longer matters: every later check stops alike)
                    self.produced += sum(map(len, body_tokens))
                    out.extend(body_tokens)
                else:
                    out.extend(self.expand(body_tokens, hidden | {tok}, depth + 1))
                out.append(" ")
                i += 1
                continue
            out.append(tok)
            i += 1
        return out


def _collect_args(tokens: Sequence[str], open_at: int) -> tuple[list[list[str]] | None, int]:
    depth = 0
    args: list[list[str]] = [[]]
    for k in range(open_at, len(tokens)):
        tok = tokens[k]
        if tok == "(":
            depth += 1
            if depth == 1:
                continue
        elif tok == ")":
            depth -= 1
            if depth == 0:
                if len(args) == 1 and not "".join(args[0]).strip():
                    args = []
                return args, k + 1
        elif tok == "," and depth == 1:
            args.append([])
            continue
        args[-1].append(tok)
    return None, len(tokens)


def _substitute(body: Sequence[str], params: tuple[str, ...], args: list[list[str]], expander: _Expander,
                hidden: frozenset[str], depth: int) -> list[str]:
    mapping: dict[str, list[str]] = {}
    for index, name in enumerate(params):
        if name == "__VA_ARGS__":
            rest: list[str] = []
            for k, arg in enumerate(args[index:]):
                if k:
                    rest.append(",")
                rest.extend(arg)
            mapping[name] = rest
        else:
            mapping[name] = args[index] if index < len(args) else []
    out: list[str] = []
    k = 0
    while k < len(body):
        tok = body[k]
        if tok == "#" and k + 1 < len(body):
            nxt = k + 1
            while nxt < len(body) and body[nxt].isspace():
                nxt += 1
            if nxt < len(body) and body[nxt] in mapping:
                text = "".join(mapping[body[nxt]]).strip().replace("\\", "\\\\").replace('"', '\\"')
                out.append(f'"{text}"')
                k = nxt + 1
                continue
        if tok == "##":
            while out and out[-1].isspace():
                out.pop()
            nxt = k + 1
            while nxt < len(body) and body[nxt].isspace():
                nxt += 1
            if nxt < len(body):
                right = mapping.get(body[nxt], [body[nxt]])
                left = out.pop() if out else ""
                out.append(left + "".join(right).strip())
                k = nxt + 1
                continue
            k += 1
            continue
        if tok in mapping:
            # arguments are fully expanded before substitution (unless next to # or ##)
            nxt = k + 1
            while nxt < len(body) and body[nxt].isspace():
                nxt += 1
            if nxt < len(body) and body[nxt] == "##":
                out.extend(mapping[tok])
            else:
                out.extend(expander.expand(list(mapping[tok]), hidden - {body[k]}, depth + 1))
            k += 1
            continue
        out.append(tok)
        k += 1
    return out
