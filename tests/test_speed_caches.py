"""The memos that keep `perflsp check` over a corpus fast (issue 13) give what the work they
save would have given: macro expansion, number literals, the lint rules' node lists, the parse
shared by the readers of one text, the may-define scan."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.lints.context import LintContext, walk
from perflsp.analysis.folding import number_literal as _number_literal
from perflsp.kernels import preprocess
from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.preprocess import expand_macros
from perflsp.kernels.program import ProgramModel, parsed_text, read_source
from perflsp.source.parser import parse

_MACROS = ConstEnv(
    macros={"WIDTH": "64", "ROW": "(y * WIDTH)", "REAL": "double", "SCALE": "2.5f", "CHAIN": "ROW + SCALE"},
    function_macros={"IDX": (("i", "j"), "((i) * WIDTH + (j))"), "SQ": (("x",), "((x) * (x))")},
)


def test_macro_bodies_expand_alike_through_the_plain_body_shortcut() -> None:
    text = "REAL v = SQ(a[IDX(ROW, x)]) * SCALE + CHAIN;"
    # (what the expander gave before the shortcut, spaces included)
    expected = (" double  v = ((a[(( (y *  64 ) ) *  64  + ( x))]) * (a[(( (y *  64 ) ) *  64  + ( x))]))"
                " *  2.5f  +   (y *  64 )  +  2.5f  ;")
    assert expand_macros(text, _MACROS) == expected
    hits = preprocess._body_tokens.cache_info().hits
    assert expand_macros(text, _MACROS) == expected  # the second time from tokenized bodies
    assert preprocess._body_tokens.cache_info().hits > hits


def test_a_self_referencing_macro_still_stops() -> None:
    env = ConstEnv(macros={"LOOP": "LOOP + 1", "PLAIN": "7"})
    assert expand_macros("x = LOOP * PLAIN;", env) == "x =  LOOP + 1  *  7 ;"


def test_number_literals_are_read_once_per_spelling() -> None:
    assert _number_literal("0x10").value == 16.0
    assert _number_literal("010").value == 8.0
    wide = _number_literal("10UL")
    assert wide.value == 10.0 and wide.static
    single = _number_literal("1e-3f")
    assert single.ctype.kind == "f32" and single.value == 0.001
    assert _number_literal("2.5").ctype.kind == "f64"
    assert _number_literal("1e-3f") is single  # one Val per spelling (Vals are never changed)


def test_lint_rules_share_one_node_list_per_node() -> None:
    data = b"__global__ void k(float *y, int n) { int i = threadIdx.x; if (i < n) y[i] = y[i] * 0.5; }\n"
    tree = parse(data)
    ctx = LintContext(ProgramModel(data, tree, extract(data, tree, "k.cu")))
    kernel = tree.root_node.named_children[0]
    nodes = ctx.descendants(kernel)
    assert [n.type for n in nodes] == [n.type for n in walk(kernel)]
    assert ctx.descendants(kernel) is nodes


def test_one_parse_is_shared_and_each_reader_gets_its_own_copy(tmp_path: Path) -> None:
    data = b"__device__ float twice(float x) { return 2.0f * x; }\n__global__ void k(float *a) { a[0] = twice(a[0]); }\n"
    path = tmp_path / "k.cu"
    path.write_bytes(data)
    first = read_source(path, data, IncludeResolver())
    second = read_source(path, data, IncludeResolver())
    assert first.tree is not second.tree
    assert str(first.tree.root_node) == str(second.tree.root_node) == str(parse(data).root_node)
    # an edit of one reader's tree leaves the shared one as parsed
    first.tree.edit(start_byte=0, old_end_byte=10, new_end_byte=0, start_point=(0, 0), old_end_point=(0, 10),
                    new_end_point=(0, 0))
    assert parsed_text(data).root_node.end_byte == len(data)
    assert [k.name for k in second.kernels.kernels] == ["k"]


def test_the_may_define_scan_is_remembered_per_name() -> None:
    data = b"__device__ float twice(float x) { return 2.0f * x; }\n__global__ void k(float *a) { a[0] = sqrtf(a[0]); }\n"
    tree = parse(data)
    model = ProgramModel(data, tree, extract(data, tree, None))
    assert model._may_define("twice") and not model._may_define("sqrtf")
    assert model._defines_name == {"twice": True, "sqrtf": False}


def test_the_depth_and_output_caps_cut_where_they_did() -> None:
    chain = ConstEnv(macros={**{f"M{i}": f"M{i + 1} + {i}" for i in range(30)}, "M30": "7"})
    expanded = expand_macros("x = M0;", chain)
    assert expanded.split() == ["x", "=", "M25", *" ".join(f"+ {i}" for i in range(24, -1, -1)).split(), ";"]
    big = ConstEnv(macros={"BIG": " ".join(["v"] * 50_000), "NINE": " ".join(["BIG"] * 9)})
    capped = expand_macros("a = NINE; b = BIG;", big)
    # past the cap the rest is copied unexpanded, the plain `BIG` bodies as before
    assert len(capped) == 400_043
    assert capped.rstrip().endswith("BIG BIG BIG BIG BIG ; b = BIG;")
