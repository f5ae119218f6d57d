"""Incremental extraction equals a full extraction of the same text and tree."""

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perflsp.kernels import extract
from perflsp.kernels.incremental import _TRACKED as TRACKED
from perflsp.kernels.incremental import Occurrences, changed_region
from perflsp.server.text import Change, TextState
from perflsp.source.positions import Position
from tests.server.kernel_dump import dump_file

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "examples").rglob("*.cu")) + sorted((ROOT / "examples").rglob("*.cpp"))
SNIPPETS = ["{", "}", "(", ")", '"', "'", ";", "\n", "\r\n", "/*", "*/", "//", "é", "𝄞", "x", " ", "0.5", "__global__ ",
            "<<<", ">>>", "k<<<1, 256>>>(n);", "#pragma omp target teams distribute parallel for\n",
            "#define B 128\n", "int N = 4;", "__device__ float f(float a) { return a * 2.0f; }\n"]


def position(text: str, index: int) -> Position:
    before = text[:index]
    start = before.rfind("\n") + 1
    return Position(before.count("\n"), len(before[start:].encode("utf-16-le")) // 2)


def full(state: TextState):
    return extract(state.data, tree=state.tree, path=state.path, env=state.resolver.env_for(Path(state.path), state.data))


edit = st.tuples(st.floats(0, 1), st.integers(0, 6), st.sampled_from(SNIPPETS), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FILES), st.lists(edit, min_size=5, max_size=40), st.booleans())
def test_incremental_equals_full_extraction(path, edits, in_kernels):
    state = TextState(path.read_text(), 0, str(path))
    for version, (where, delete, snippet, insert) in enumerate(edits, 1):
        text = state.data.decode()
        kernels = state.extracted.kernels.kernels
        if in_kernels and kernels:  # most edits land inside kernel bodies, as when typing
            kernel = kernels[int(where * len(kernels)) % len(kernels)]
            lo = len(state.data[: kernel.body_span.start_byte + 1].decode(errors="ignore"))
            hi = len(state.data[: kernel.body_span.end_byte - 1].decode(errors="ignore"))
            index = lo + int(where * max(0, hi - lo))
        else:
            index = int(where * len(text))
        end = min(len(text), index + delete)
        state.apply([Change(snippet if insert else "", position(text, index), position(text, end))], version)
        # the tokens that switch extraction passes are tracked over every edit, held ones too
        assert state.extracted.tokens == {token: Occurrences.of(token, state.data) for token in TRACKED}
        if not state.tree.root_node.has_error:
            assert dump_file(state.extracted.kernels) == dump_file(full(state)), (path.name, version)


def test_typing_in_a_kernel_of_a_large_file_stays_incremental():
    from benchmarks.lsp_latency import generate_big_file, kernel_body_line

    text = generate_big_file(3000)
    state = TextState(text, 0, None)
    line = kernel_body_line(text)
    typed = "    float extra = acc * 2.0f;\n"
    column = 0
    for version, ch in enumerate(typed, 1):
        state.apply([Change(ch, Position(line, column), Position(line, column))], version)
        line, column = (line + 1, 0) if ch == "\n" else (line, column + 1)
    assert state.full_extractions == 1 and state.incremental_extractions == len(typed)
    assert state.extracted.change == "kernel"
    assert dump_file(state.extracted.kernels) == dump_file(
        extract(state.data, tree=state.tree, env=state.resolver.env_for(None, state.data)))


def test_changed_region():
    assert changed_region(b"abc", b"abc") is None
    assert changed_region(b"abcdef", b"abXdef") == (2, 3, 3)
    assert changed_region(b"aaaa", b"aaaaa") == (4, 4, 5)
    assert changed_region(b"abc", b"") == (0, 3, 0)


def test_edit_between_definitions_falls_back_to_full_extraction():
    text = (ROOT / "examples" / "cuda" / "saxpy.cu").read_text()
    state = TextState(text, 0, None)
    state.apply([Change("#define EXTRA 4\n", Position(10, 0), Position(10, 0))], 1)
    assert state.extracted.change == "full" and state.full_extractions == 2


def test_a_syntax_error_typed_into_a_kernel_holds_it_until_it_parses(tmp_path):
    # The half-typed statement does not parse: the kernel keeps its last extraction (its spans
    # stretched over the edit), the other kernel moves; completing the statement extracts the
    # kernel again, and the result equals a full extraction. No full extraction on the way.
    text = ("// a __device__ helper and two kernels\n"
            "__device__ float f(float x) { return x; }\n"
            "__global__ void a(float *x) {\n    x[0] = f(x[0]);\n}\n"
            "__global__ void b(float *y) { y[0] = 1.0f; }\n")
    state = TextState(text, 0, str(tmp_path / "k.cu"))
    kernel_a, kernel_b = state.extracted.kernels.kernels
    a_end, b_start = kernel_a.span.end_byte, kernel_b.span.start_byte
    typed = "    x[1] = ;\n"
    state.apply([Change(typed, Position(3, 0), Position(3, 0))], 1)
    assert state.tree.root_node.has_error
    held = state.extracted
    assert held.change == "held" and held.held == (kernel_a.span.start_byte, a_end + len(typed))
    assert held.kernels.kernels == [kernel_a, kernel_b]  # the same items, moved
    assert kernel_a.span.end_byte == a_end + len(typed) and kernel_b.span.start_byte == b_start + len(typed)
    assert kernel_b.span.start.line == 6  # its position follows the new line
    assert state.data[kernel_b.span.start_byte:kernel_b.span.end_byte].startswith(b"__global__ void b")

    state.apply([Change("2", Position(3, 11), Position(3, 11))], 2)
    assert not state.tree.root_node.has_error
    assert state.extracted.change == "kernel" and state.extracted.held is None
    assert state.full_extractions == 1
    assert dump_file(state.extracted.kernels) == dump_file(full(state))


def test_a_pause_ends_a_hold_and_typing_on_holds_what_was_extracted_then(tmp_path):
    # The server settles a paused text with errors: a fresh parse and a full extraction (what a
    # fresh analysis sees). Typing on inside the broken kernel holds that extraction, until the
    # kernel parses again.
    text = ("__global__ void a(float *x) {\n    x[0] = 1.0f;\n}\n"
            "__global__ void b(float *y) {\n    y[0] = 1.0f;\n}\n")
    state = TextState(text, 0, str(tmp_path / "k.cu"))
    state.apply([Change("    x[1] = ;\n", Position(1, 0), Position(1, 0))], 1)
    assert state.extracted.held is not None
    assert state.settle() and state.extracted.held is None
    assert dump_file(state.extracted.kernels) == dump_file(full(state))
    state.apply([Change(" ", Position(1, 10), Position(1, 10))], 2)
    assert state.extracted.change == "held" and state.full_extractions == 2
    state.apply([Change("2", Position(1, 11), Position(1, 11))], 3)
    assert not state.tree.root_node.has_error and state.extracted.held is None
    assert dump_file(state.extracted.kernels) == dump_file(full(state))


def test_an_edit_outside_a_held_definition_extracts_in_full(tmp_path):
    text = ("__global__ void a(float *x) {\n    x[0] = 1.0f;\n}\n"
            "__global__ void b(float *y) {\n    y[0] = 1.0f;\n}\n")
    state = TextState(text, 0, str(tmp_path / "k.cu"))
    state.apply([Change("    x[1] = ;\n", Position(1, 0), Position(1, 0))], 1)
    assert state.extracted.change == "held"
    state.apply([Change("    y[1] = 2.0f;\n", Position(5, 0), Position(5, 0))], 2)
    assert state.extracted.change == "full" and state.extracted.held is None
    assert dump_file(state.extracted.kernels) == dump_file(full(state))


def test_no_hold_for_an_edit_that_may_reach_past_its_definition(tmp_path):
    # An unclosed comment comments out the rest of the file, a directive changes the
    # preprocessor's view of it: both are extracted in full, as they read.
    text = ("__global__ void a(float *x) {\n    x[0] = 1.0f;\n}\n"
            "__global__ void b(float *y) {\n    y[0] = 1.0f;\n}\n")
    for typed in ("    x[1] = /* \n", "#define N ;\n    x[1] = ;\n"):
        state = TextState(text, 0, str(tmp_path / "k.cu"))
        state.apply([Change(typed, Position(1, 0), Position(1, 0))], 1)
        assert state.extracted.held is None, typed
        assert dump_file(state.extracted.kernels) == dump_file(full(state)), typed


def test_changed_region_from_a_known_edit_equals_the_whole_text_comparison():
    # the server knows the edit it applied: the region grows outwards from it and must be the
    # one a comparison of the whole texts finds (typing what follows, repeated bytes, deletions)
    import random

    rng = random.Random(7)
    alphabet = b"ab\n"
    for _ in range(3000):
        old = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        start = rng.randrange(0, len(old) + 1)
        old_end = rng.randrange(start, len(old) + 1)
        typed = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))
        new = old[:start] + typed + old[old_end:]
        assert changed_region(old, new, (start, old_end, start + len(typed))) == changed_region(old, new)
    long = b"x" * 5000
    assert changed_region(long, long + b"x", (10, 10, 11)) == (5000, 5000, 5001)
    assert changed_region(long, long[:-1], (10, 11, 10)) == (4999, 5000, 4999)


def test_an_edit_that_splits_a_definition_into_two_valid_ones_is_not_held():
    # `float silu(...)` typed into as `fint N = 4;loat silu(...)`: the definition's text has no
    # syntax error, it is now a declaration and another function; the file parses as usual and
    # its extraction is a full one's (a hold would keep the old function)
    path = ROOT / "examples" / "cuda" / "activations.cu"
    text = path.read_text()
    state = TextState(text, 0, str(path))
    index = text.index("float silu(") + 1
    state.apply([Change("int N = 4;", position(text, index), position(text, index))], 1)
    assert state.extracted.change != "held" and not state.tree.root_node.has_error
    assert dump_file(state.extracted.kernels) == dump_file(full(state))


def test_occurrences_of_a_token_follow_any_edit():
    # where a token first and last occurs, kept over edits (`Occurrences.edited`) without
    # searching the whole text: always what a search of the new text finds
    import random

    rng = random.Random(5)
    pieces = [b"o", b"m", b"p", b"omp", b"<", b"<<<", b"_Pragma", b"x", b" "]
    for _ in range(4000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30)))
        start = rng.randrange(0, len(data) + 1)
        old_end = rng.randrange(start, len(data) + 1)
        typed = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 4)))
        new = data[:start] + typed + data[old_end:]
        for token in TRACKED:
            edited = Occurrences.of(token, data).edited(token, new, (start, old_end, start + len(typed)))
            assert edited == Occurrences.of(token, new), (token, data, new)
