"""The token estimate: shaped like BPE splits, above the real count on code and prose."""

from perflsp.llm.tokens import estimate_tokens


def test_pieces():
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world") == 2  # a word up to 6 letters is one token
    assert estimate_tokens("accumulate") == 2
    assert estimate_tokens("1048576") == 3  # digits go in groups of three
    assert estimate_tokens("a[i] = b;\n") == 8  # a [ i ] = b ; and the line break
    assert estimate_tokens("    indent") == 1  # spaces merge into the next piece


def test_dense_numeric_code_costs_more_than_a_third_of_its_characters():
    table = "{" + ", ".join(f"{i * 0.123456:.6f}f" for i in range(200)) + "};"
    assert estimate_tokens(table) > len(table) / 3
