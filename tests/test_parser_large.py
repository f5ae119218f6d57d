"""source.parser.parse on texts above the chunked-read threshold: the tree holds its own text, so
reading node text never goes back through the chunked reader (that made lints quadratic)."""

from __future__ import annotations

from perflsp.source import parser as parser_module
from perflsp.source.parser import YIELDING_PARSE_BYTES, parse

KERNEL = "__global__ void scale_{n}(float *d, int n) {{ int i = threadIdx.x; if (i < n) d[i] *= 2.0f; }}\n"


def _large_text() -> bytes:
    parts, size, n = [], 0, 0
    while size <= YIELDING_PARSE_BYTES + 1024:
        part = KERNEL.format(n=n)
        parts.append(part)
        size += len(part)
        n += 1
    return "".join(parts).encode()


def test_a_large_parse_yields_while_parsing_but_not_when_text_is_read(monkeypatch):
    import threading

    sleeps = []
    monkeypatch.setattr(parser_module.time, "sleep", lambda seconds: sleeps.append(seconds))
    data = _large_text()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # (a thread to yield to: a language server's)
    other.start()
    try:
        tree = parse(data)
    finally:
        stop.set()
        other.join()
    assert sleeps, "a text above the threshold is read in chunks that yield"
    sleeps.clear()
    functions = [n for n in tree.root_node.named_children if n.type == "function_definition"]
    assert len(functions) == data.count(b"__global__")
    assert functions[-1].text == data[functions[-1].start_byte:functions[-1].end_byte]
    assert functions[0].text.startswith(b"__global__ void scale_0(")
    assert sleeps == []


def test_with_no_other_thread_a_large_text_is_parsed_whole(monkeypatch):
    """`perflsp check`: no thread to let run, so no yield (each gave the CPU away on a loaded machine)."""
    import threading

    sleeps = []
    monkeypatch.setattr(parser_module.time, "sleep", lambda seconds: sleeps.append(seconds))
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    data = _large_text()
    tree = parse(data)
    assert sleeps == [] and not tree.root_node.has_error
    assert tree.root_node.named_children[0].text.startswith(b"__global__ void scale_0(")


def test_an_incremental_large_parse_keeps_its_text():
    data = _large_text()
    tree = parse(data)
    edited = data.replace(b"scale_0(", b"scale_x(", 1)
    tree.edit(start_byte=16, old_end_byte=23, new_end_byte=23, start_point=(0, 16), old_end_point=(0, 23),
              new_end_point=(0, 23))
    new_tree = parse(edited, tree)
    first = new_tree.root_node.named_children[0]
    assert first.text.startswith(b"__global__ void scale_x(")
    assert not new_tree.root_node.has_error
