"""evaluate_llm on a tiny labeled set (tests/data/llm_eval) against a loopback OpenAI server
whose answers are scripted per kernel: scores, fallbacks, overrides and tokens per kernel."""

from __future__ import annotations

import json
from pathlib import Path

from llm_fakes import Recorded, Reply, ScriptedServer, Wire

from perflsp.evaluation.labels import read_labels
from perflsp.evaluation.llm_eval import (
    RowAnalyzer,
    evaluate_llm,
    run_llm_eval,
    summarize,
)
from perflsp.hardware import load_database
from perflsp.llm.config import LlmSettings, create_advisor

DATA = Path(__file__).resolve().parents[1] / "data" / "llm_eval"
GPU = load_database().get("RTX 3080")
OPENAI = Wire("openai")


def verdict(kind: str) -> str:
    return json.dumps({"verdict": kind, "confidence": 0.7, "rationale": "Scripted answer.", "factors": [],
                       "proposals": {"block_size": None, "launch_bounds": None, "num_teams": None,
                                     "thread_limit": None, "code_changes": []}})


def scripted(record: Recorded) -> Reply:
    """axpy: bandwidth (right); poly: latency (wrong under a compute label); the OpenMP region:
    no valid JSON, twice (the advisor falls back to the static verdict)."""
    prompt = OPENAI.prompt_text(record)
    if "OpenMP target region" in prompt.split("\n", 1)[-1]:
        return OPENAI.reply("I think it is bandwidth-bound.")
    if "`poly`" in prompt:
        return OPENAI.reply(verdict("latency"))
    return OPENAI.reply(verdict("bandwidth"))


def make_advisor(url: str, **settings):
    llm = LlmSettings(enabled=True, provider="openai", base_url=url, model="fake-model", cache_enabled=False,
                      max_concurrent=2, **settings)
    advisor, decision = create_advisor(llm, workspace_trusted=False, api_key="sk-eval-test-0a1b2c3d")
    assert decision.allowed, decision.reason
    return advisor


async def test_scores_fallbacks_and_tokens():
    rows = read_labels(DATA / "labels.csv")
    with ScriptedServer(scripted) as server:
        advisor = make_advisor(server.url)
        progress: list[tuple[int, int]] = []
        try:
            result = await evaluate_llm(rows, DATA / "src", GPU, advisor,
                                        progress=lambda done, total: progress.append((done, total)))
        finally:
            await advisor.aclose()
        assert server.max_active <= 2  # the advisor's max_concurrent bounds the requests in flight

    assert (result.listed, result.asked, result.llm_answers, result.static_fallbacks) == (4, 3, 2, 1)
    assert progress[-1] == (3, 3)
    (reason,) = result.fallback_reasons
    assert "gave no valid answer after one repair" in reason and result.fallback_reasons[reason] == 1
    # final: axpy right, poly "latency" wrong, the OpenMP fallback (static bandwidth) right, ghost not located
    assert result.final.accuracy == 0.5 and result.final.confusion["compute"] == {"latency": 1, "not located": 1}
    assert result.llm_only.listed == 2 and result.llm_only.accuracy == 0.5
    assert result.static.accuracy == 0.75  # the engine got the three located kernels right
    assert result.overrides == {"total": 1, "right": 0, "wrong": 1}
    assert set(result.by_language) == {"cuda", "omp"} and result.by_language["omp"].accuracy == 1.0
    # tokens as the endpoint counted them (the fake reports 120 + 45 per answer), and our estimate
    assert (result.prompt_tokens.kernels, result.prompt_tokens.median, result.prompt_tokens.total) == (2, 120.0, 240)
    assert (result.completion_tokens.median, result.completion_tokens.total) == (45.0, 90)
    assert result.estimated_prompt_tokens.kernels == 3 and 150 < result.estimated_prompt_tokens.median < 2000

    data = result.to_json(with_rows=True)
    assert data["model"] == "fake-model" and data["tokens_per_kernel"]["prompt"]["total"] == 240
    ghost = next(r for r in data["rows"] if r["kernel"] == "ghost")
    assert ghost["verdict"] is None and "not found" in ghost["reason"]
    assert "rows" not in result.to_json()
    json.dumps(data)  # serialisable as is
    text = "\n".join(result.summary_lines())
    assert "3 asked, 2 answered by the LLM (0 from the cache), 1 static fallbacks" in text
    assert "LLM answers only: accuracy 0.500" in text and "static engine alone: accuracy 0.750" in text
    assert "prompt median 120, total 240" in text and "fallback (1x): " in text


async def test_questions_carry_the_static_evidence_and_program_arguments():
    rows = read_labels(DATA / "labels.csv")
    analyzer = RowAnalyzer(DATA / "src", GPU)
    analysis = analyzer.analyze(rows[1][0])
    question = analyzer.question(analysis)
    assert question.name == "poly" and question.static.verdict == "compute"
    assert [f.name for f in question.device_functions] == ["step"]
    assert [d.source for d in question.definitions] == ["#define BLOCK 256", "#define TERMS 256"]
    assert any(s.text.endswith("1048576") for s in question.launch_sites)
    assert any("4,096 blocks" in e or "1,048,576 threads" in e for e in question.static.evidence)
    assert analyzer.question(analyzer.analyze(rows[3][0])) is None


def test_endpoint_down_counts_every_row_as_a_fallback():
    rows = read_labels(DATA / "labels.csv")[:2]
    with ScriptedServer([OPENAI.error(500, "down")] * 12) as server:
        advisor = make_advisor(server.url, max_retries=0, breaker_threshold=10)
        result = run_llm_eval(rows, DATA / "src", GPU, advisor)  # closes the advisor
    assert result.llm_answers == 0 and result.static_fallbacks == 2
    assert result.final.accuracy == result.static.accuracy == 1.0
    assert result.prompt_tokens.median is None and result.prompt_tokens.total == 0
    (reason,) = result.fallback_reasons
    assert "500" in reason


def test_summarize_groups_reasons_whatever_their_figures():
    from perflsp.evaluation.llm_eval import RowOutcome

    rows = [row for row, _ in read_labels(DATA / "labels.csv")]
    outcomes = [RowOutcome(rows[i], "bandwidth", "bandwidth", "bandwidth", "static",
                           fallback_reason=f"kernel k{i} needs about {900 + i} prompt tokens, over the budget of 500")
                for i in range(3)]
    result = summarize(outcomes, GPU.name)
    assert result.fallback_reasons == {"kernel K needs about N prompt tokens, over the budget of N": 3}
