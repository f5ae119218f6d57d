"""Where a TOML file sets a key or breaks (perflsp.source.toml_text): what error messages name."""

from __future__ import annotations

import tomllib

import pytest

from perflsp.source.toml_text import key_line, syntax_error, where

TEXT = '''# project
gpus = ["h100",
  "h1000"]
[rules]
"occupancy/low" = "loud"
[[gpu]]
id = "a"
[[gpu]]
id = "b"
memory_bandwidth_gbs = -5
[profiling]
args = ["x=y"]  # a comment
llm.model = "m"
'''


@pytest.mark.parametrize(("keys", "line"), [
    (("gpus",), 2), (("rules", "occupancy/low"), 5), (("rules",), 4), (("gpu", 0), 6), (("gpu", 1, "id"), 9),
    (("gpu", 1, "memory_bandwidth_gbs"), 10), (("gpu", 1, "sm_count"), 8), (("profiling", "args"), 12),
    (("profiling", "llm", "model"), 13), (("nowhere",), None),
])
def test_key_line_finds_keys_tables_and_array_tables(keys, line):
    assert key_line(TEXT, *keys) == line
    assert tomllib.loads(TEXT)  # (the text is valid TOML)


def test_where_and_syntax_errors_name_the_line():
    assert where("f.toml", TEXT, "gpu", 1, "memory_bandwidth_gbs") == "f.toml:10"
    assert where("f.toml", TEXT, "nowhere") == "f.toml"
    for bad, expected in [('[[gpu]\nid = 1\n', "f.toml:1:6: invalid TOML: "), ('a = [1,\n', "f.toml:1: invalid TOML: "),
                          ('a = 1\n\nb = = 2\n', "f.toml:3:5: invalid TOML: ")]:
        with pytest.raises(tomllib.TOMLDecodeError) as info:
            tomllib.loads(bad)
        assert syntax_error("f.toml", bad, info.value).startswith(expected)
