import random

from perflsp.source.document import SourceDocument, TextEdit
from perflsp.source.positions import Position

SOURCE = """// ünïcode comment 😀
__global__ void k(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= 2.0f;
}
"""


def sexp(doc: SourceDocument) -> str:
    return str(doc.tree.root_node)


def test_incremental_edit_matches_fresh_parse():
    doc = SourceDocument(SOURCE)
    col = SOURCE.splitlines()[3].index("2.0f")
    doc.apply_edits([TextEdit(Position(3, col), Position(3, col + 4), "3.0f")], version=2)
    fresh = SourceDocument(doc.text)
    assert doc.text == SOURCE.replace("2.0f", "3.0f")
    assert sexp(doc) == sexp(fresh)
    assert doc.version == 2


def test_edit_after_non_ascii_uses_utf16_columns():
    doc = SourceDocument(SOURCE)
    # replace the emoji (2 UTF-16 units at column 19) by "X"
    doc.apply_edits([TextEdit(Position(0, 19), Position(0, 21), "X")])
    assert doc.text.splitlines()[0] == "// ünïcode comment X"


def test_random_edit_sequences_match_fresh_parse():
    rng = random.Random(7)
    doc = SourceDocument(SOURCE)
    pieces = ["{", "}", "(", "\n", "é", "😀", "/*", "#pragma omp target\n", "x", ""]
    for _ in range(200):
        text = doc.text
        lines = text.split("\n")
        line = rng.randrange(len(lines))
        col = rng.randrange(len(lines[line].encode("utf-16-le")) // 2 + 1)
        # never split a surrogate pair
        prefix = lines[line].encode("utf-16-le")[: col * 2]
        if prefix and 0xD800 <= int.from_bytes(prefix[-2:], "little") <= 0xDBFF:
            col -= 1
        end = Position(line, col + rng.randrange(2)) if rng.random() < 0.5 else Position(line, col)
        edits = [TextEdit(Position(line, col), end, rng.choice(pieces))]
        before = doc.text
        doc.apply_edits(edits)
        assert sexp(doc) == sexp(SourceDocument(doc.text)), (before, edits)
