"""Model text is data: control sequences out, length bounded, before anything prints or shows it.

A model (or a hostile endpoint) can answer with terminal control sequences: ANSI/CSI colour and
cursor codes, OSC sequences that set a terminal's title or clipboard or write hyperlinks, DCS
and other escape strings, C0 and C1 control characters, bidirectional-text overrides that make
code read differently from what it is. `clean` removes all of them (newline and tab stay;
CR LF becomes LF) from any text that came from a model or an endpoint; `StreamCleaner` does the
same for a stream whose sequences may be split between chunks, and stops it at a character
bound derived from the configured token limit (`char_limit`).
"""

from __future__ import annotations

import re

# Generous: English prose averages ~4 characters per token, code ~3.
CHARS_PER_TOKEN = 6

_SEQUENCE = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]                       # CSI ... final byte
    | \x9b[0-?]*[ -/]*[@-~]                         # 8-bit CSI
    | \x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)  # OSC, DCS, SOS, PM, APC ... BEL or ST
    | [\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)  # their 8-bit forms
    | \x1b[ -/]*[0-OQ-WYZ\\`a-~]                    # any other escape sequence
    """,
    re.VERBOSE,
)
# C0 except tab and newline, DEL, C1, and the bidirectional overrides/isolates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_STARTERS = "\x1b\x9b\x90\x98\x9d\x9e\x9f\r"
_HOLD_MAX = 512  # an escape sequence longer than this is not waited for


def clean(text: str) -> str:
    """`text` without control sequences and control characters (newline and tab stay)."""
    if not text:
        return text
    text = text.replace("\r\n", "\n")
    text = _SEQUENCE.sub("", text)
    return _CONTROL.sub("", text)


def char_limit(max_output_tokens: int) -> int:
    """The most characters an answer of `max_output_tokens` tokens may have."""
    return max(1, max_output_tokens) * CHARS_PER_TOKEN


def truncation_note(limit: int) -> str:
    return (f"\n\n[perflsp: the answer was cut off after {limit} characters: "
            f"more than its output token limit allows]\n")


class StreamCleaner:
    """`clean` for a text that arrives in chunks, bounded to `limit` characters.

    `feed(chunk)` returns what can be shown now (an escape sequence that may continue in the
    next chunk is held back); `flush()` the rest at the end. Once `limit` characters went out,
    `truncated` is set and everything else is dropped.
    """

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.emitted = 0
        self.truncated = False
        self._held = ""

    def feed(self, chunk: str) -> str:
        if self.truncated:
            return ""
        text = self._held + chunk
        self._held = ""
        start = _incomplete_from(text)
        if start is not None:
            text, self._held = text[:start], text[start:]
        return self._bounded(clean(text))

    def flush(self) -> str:
        text, self._held = self._held, ""
        return "" if self.truncated else self._bounded(clean(text))

    def _bounded(self, text: str) -> str:
        if self.limit is None:
            self.emitted += len(text)
            return text
        room = self.limit - self.emitted
        if len(text) > room:
            self.truncated = True
            text = text[:max(0, room)]
        self.emitted += len(text)
        return text


_STARTER = re.compile("[" + _STARTERS + "]")


def _incomplete_from(text: str) -> int | None:
    """Where a sequence begins that the next chunk may complete (None: nothing to hold)."""
    pos = max(0, len(text) - _HOLD_MAX)
    while (found := _STARTER.search(text, pos)) is not None:
        start = found.start()
        if text[start] == "\r":
            if start + 1 == len(text):
                return start  # a CR LF may be split
            pos = start + 1
            continue
        match = _SEQUENCE.match(text, start)
        if match is None:
            return start
        pos = match.end()
    return None
