from hypothesis import given
from hypothesis import strategies as st

from perflsp.source.positions import LineIndex, Position


def test_ascii_roundtrip():
    data = b"int a;\nfloat b;\n"
    idx = LineIndex(data)
    assert idx.position(7) == Position(1, 0)
    assert idx.offset(Position(1, 6)) == 13
    assert idx.line_count == 3


def test_utf16_columns_for_non_ascii():
    text = "// héllo 😀 wörld\nint x;"
    data = text.encode()
    idx = LineIndex(data)
    # 'x' on line 1; the emoji on line 0 is two UTF-16 units, four UTF-8 bytes
    emoji_start = data.index("😀".encode())
    after_emoji = emoji_start + 4
    assert idx.position(emoji_start) == Position(0, 9)
    assert idx.position(after_emoji) == Position(0, 11)
    assert idx.offset(Position(0, 11)) == after_emoji
    w = data.index(b"w", after_emoji)
    assert idx.position(w) == Position(0, 12)


def test_crlf_and_lone_cr_end_lines():
    data = b"a\r\nb\rc\nd"
    idx = LineIndex(data)
    assert [idx.position(data.index(ch)).line for ch in (b"a", b"b", b"c", b"d")] == [0, 1, 2, 3]
    assert idx.line_end(0) == 1
    # a column past the end of a line clamps to the line end, not into the next line
    assert idx.offset(Position(0, 99)) == 1


def test_position_out_of_range_clamps():
    idx = LineIndex(b"abc")
    assert idx.offset(Position(5, 0)) == 3
    assert idx.offset(Position(-1, 0)) == 0
    assert idx.position(100) == Position(0, 3)


@given(st.text(alphabet=st.sampled_from(list("ab\n\r\té😀字 ")), max_size=60))
def test_roundtrip_every_character_boundary(text):
    data = text.encode()
    idx = LineIndex(data)
    offset = 0
    for ch in text:
        if data[offset - 1 : offset + 1] != b"\r\n":  # between CR and LF is not a position
            assert idx.offset(idx.position(offset)) == offset
        offset += len(ch.encode())


def test_an_edited_index_answers_as_one_built_from_the_new_text():
    # `LineIndex.edited` keeps an edit inside one line as a pending shift of the later line
    # starts (typing in a large file), and splices the starts of an edit across lines: after any
    # sequence of edits every answer equals that of an index built from the text
    import random

    rng = random.Random(11)
    alphabet = [b"a", b"b", b" ", b"\n", "é".encode(), "𝄞".encode()]
    for _ in range(300):
        chars = [rng.choice(alphabet) for _ in range(rng.randrange(0, 60))]  # (edits cut no character)
        data = b"".join(chars)
        index = LineIndex(data)
        for _ in range(rng.randrange(1, 12)):
            first = rng.randrange(0, len(chars) + 1)
            last = rng.randrange(first, min(len(chars), first + 4) + 1)
            typed = [rng.choice(alphabet) for _ in range(rng.randrange(0, 4))]
            start, old_end = len(b"".join(chars[:first])), len(b"".join(chars[:last]))
            chars[first:last] = typed
            data = b"".join(chars)
            index = index.edited(data, start, old_end, b"".join(typed))
            fresh = LineIndex(data)
            assert index.line_count == fresh.line_count
            for offset in range(len(data) + 1):
                assert index.line_of(offset) == fresh.line_of(offset)
                assert index.position(offset) == fresh.position(offset)
            for line in range(fresh.line_count + 1):
                assert index.offset((line, 3)) == fresh.offset((line, 3))
                assert index.line_end(line) == fresh.line_end(line)
        assert index.line_starts == fresh.line_starts
