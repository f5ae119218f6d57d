"""Token-level helpers on raw bytes: used where the tree cannot be trusted (ERROR regions) and
for normalising text before hashing."""

from __future__ import annotations

import hashlib
import re

# Comments and string/char literals (unterminated ones run to the end of the line or file).
# Written as unrolled loops (`[^x]*(?:\\.[^x]*)*`) rather than per-character alternations:
# the same matches, ~1.7x faster over the benchmark sources.
COMMENT_OR_STRING = re.compile(
    rb"""//[^\n\\]*(?:\\(?:\r?\n|.)?[^\n\\]*)*"""
    rb"""|/\*[^*]*(?:\*+[^*/][^*]*)*(?:\*+/|\*+\Z|\Z)"""
    rb"""|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?"""
    rb"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'?""",
    re.DOTALL,
)
# `'` first: a pattern that starts with a look-behind is tried at every byte.
DIGIT_SEPARATOR = re.compile(rb"'(?<=[0-9a-fA-F]')(?=[0-9a-fA-F])")
# every byte but CR and LF becomes a space, so offsets and line numbers survive blanking
_BLANK_TABLE = bytes(b if b in (10, 13) else 32 for b in range(256))


def blank_comments_and_strings(data: bytes) -> bytes:
    """Replace comments and string/char literals by spaces, keeping every byte offset and newline.

    Digit separators (`1'000'000`) are left alone so they are not mistaken for char literals.
    """
    data_wo_sep = DIGIT_SEPARATOR.sub(b"0", data)

    return COMMENT_OR_STRING.sub(lambda m: m.group().translate(_BLANK_TABLE), data_wo_sep)


_SPACE_WORDS = (b"__global__", b"__device__")


def function_space_mentions(data: bytes, more_than: int = -1) -> int:
    """How many `__global__`/`__device__` tokens stand in code, not in comments.

    Each CUDA function the tree finds accounts for one; a surplus means the token-level
    fallback must look for definitions the tree lost. Comments are only searched when the raw
    count exceeds `more_than` (the usual case needs no scan at all).
    """
    mentions = sum(data.count(w) for w in _SPACE_WORDS)
    if mentions <= more_than:
        return mentions
    for m in COMMENT_OR_STRING.finditer(data):
        if data[m.start()] == 0x2F:  # "/": a comment
            text = m.group()
            mentions -= sum(text.count(w) for w in _SPACE_WORDS)
    return mentions


_WS = re.compile(rb"\s+")
_ONLY_COMMENTS = re.compile(rb"//[^\n]*|/\*[^*]*(?:\*+[^*/][^*]*)*(?:\*+/|\*+\Z|\Z)")


def normalised(data: bytes) -> bytes:
    """Text with comments removed and whitespace runs collapsed: edits that change neither
    (re-indenting, commenting) keep the same hash."""
    return _WS.sub(b" ", _ONLY_COMMENTS.sub(b" ", data)).strip()


def text_hash(data: bytes) -> str:
    return hashlib.blake2b(normalised(data), digest_size=12).hexdigest()


_OPEN_TO_CLOSE = {ord("("): b")", ord("{"): b"}", ord("["): b"]", ord("<"): b">"}
_BRACKETS = {opener: re.compile(re.escape(bytes([opener])) + b"|" + re.escape(closer)) for opener, closer in _OPEN_TO_CLOSE.items()}


def match_close(blanked: bytes, open_pos: int) -> int | None:
    """Offset just after the bracket matching the one at `open_pos` (in blanked text)."""
    opener = blanked[open_pos]
    depth = 0
    for m in _BRACKETS[opener].finditer(blanked, open_pos):
        if m.group()[0] == opener:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def line_is_directive(data: bytes, pos: int) -> bool:
    """Whether `pos` lies on a preprocessor directive line (following `\\` continuations)."""
    start = pos
    while True:
        nl = data.rfind(b"\n", 0, start)
        line_start = nl + 1
        if nl > 0 and data[max(0, nl - 2):nl].rstrip(b"\r").endswith(b"\\"):
            start = nl
            continue
        break
    return data[line_start:pos].lstrip().startswith(b"#")


def split_top_level(text: str, sep: str = ",", angles: bool = False) -> list[str]:
    """The non-empty `sep`-separated items of `text` outside brackets (`a, f(b, c), {d, e}` ->
    3 items), stripped: an argument list, an initializer list, an OpenMP clause's list; with
    `angles`, template arguments (`float, Op<int, 2>` -> 2 items)."""
    opening, closing = ("([{<", ")]}>") if angles else ("([{", ")]}")
    parts: list[str] = []
    depth = 0
    start = 0
    for k, ch in enumerate(text):
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:k].strip())
            start = k + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]
