"""The tuning loop over Kernel Tuner against recorded caches (simulation mode): spaces and their
restrictions, the cache format, perflsp's strategies, the LLM proposer against a real loopback
server (including proposals outside the space), failing/slow evaluations, cancellation, a space
the restrictions empty, the problem from code markers, tuned edits, and a missing Kernel Tuner."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from perflsp.hardware.database import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.program import ProgramModel, read_source
from perflsp.llm.providers import ProviderConfig
from perflsp.source.parser import parse
from perflsp.tuning.cache import CacheError, TuningStore, new_record, read_cache
from perflsp.tuning.edits import tuned_fix
from perflsp.tuning.llm_proposer import LlmProposer, parse_answer
from perflsp.tuning.problem import ProblemError, current_value, problem_for
from perflsp.tuning.results import offers, portability
from perflsp.tuning.search import (
    Measurement,
    TuningUnavailable,
    kernel_tuner_available,
    run_search,
)
from perflsp.tuning.space import SpaceError, TuningSpace
from perflsp.tuning.strategies import (
    LlmStrategy,
    PriorStrategy,
    static_proposal,
    static_ranking,
)
from tests.stand_ins.tuning_llm import TuningLlmServer

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tuning"
RESTRICTIONS = [
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+(filter_height-1)))) < 12*1024",
]
SMEM = "use_shmem*(block_size_x*tile_size_x+filter_width-1)*(block_size_y*tile_size_y+filter_height-1)*4"


@pytest.fixture(scope="module")
def a100():
    return read_cache(FIXTURES / "convolution_A100.json", source="fixture")


@pytest.fixture(scope="module")
def gpu():
    return load_database().get("a100-sxm4-40gb")


def conv_space(record) -> TuningSpace:
    return TuningSpace(record.kernel_name, record.tune_params, RESTRICTIONS, ("block_size_x", "block_size_y"), SMEM)


# ----------------------------------------------------------------------------- spaces and caches


def test_space_restrictions_and_keys(a100):
    space = conv_space(a100)
    valid = space.valid_configs()
    # every valid configuration of the cut is in the recorded cache, under Kernel Tuner's key
    assert len(valid) == 416 and all(space.key(c) in a100.entries for c in valid)
    config = dict(valid[0])
    assert space.problem({**config, "block_size_x": 512}).startswith("block_size_x=512 is not one of")
    assert "violates `use_padding==0 or block_size_x % 32 != 0`" in space.problem(
        {**config, "block_size_x": 32, "use_padding": 1, "use_shmem": 1})
    assert space.problem({**config, "bogus": 1}) == "bogus is not a tuning parameter"
    with pytest.raises(SpaceError, match="not allowed|only min"):
        TuningSpace("k", {"a": [1]}, ["__import__('os').system('true')"])
    with pytest.raises(SpaceError, match="names b, which is not a tuning parameter"):
        TuningSpace("k", {"a": [1]}, ["b > 1"])


def test_cache_round_trip_gzip_and_unfinished_files(tmp_path, a100):
    record = new_record(conv_space(a100), "Test GPU", {"kind": "measured"})
    record.entries = dict(list(a100.entries.items())[:5])
    path = TuningStore(tmp_path).save(record, "convolution_kernel")
    assert (tmp_path / ".perflsp" / ".gitignore").read_text() == "*\n"
    again = read_cache(path)
    assert again.device_name == "Test GPU" and not again.recorded and len(again.entries) == 5
    # what Kernel Tuner leaves when a run is interrupted: the closing braces missing
    text = json.dumps(again.to_json(), indent=1)
    unfinished = tmp_path / "open.json"
    unfinished.write_text(text[: text.rindex("}", 0, len(text) - 2)] + "},\n")
    assert len(read_cache(unfinished).entries) == 5
    gz = tmp_path / "c.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert read_cache(gz, source="colleague").recorded
    (tmp_path / "bad.json").write_text('{"results": []}')
    with pytest.raises(CacheError, match="T4 format"):
        read_cache(tmp_path / "bad.json")


# ----------------------------------------------------------------------------- the search loop


def test_replay_with_kernel_tuner_strategies_and_progress(a100):
    space = conv_space(a100)
    seen = []
    result = run_search(space, a100, strategy="random_sample", max_fevals=25, seed=3, on_evaluation=seen.append)
    assert len(result.evaluations) == 25 == len(seen)
    assert [e.index for e in seen] == list(range(1, 26))
    bests = [e.best_ms for e in seen if e.best_ms is not None]
    assert bests == sorted(bests, reverse=True)  # best so far never gets worse
    assert result.best[1] == min(e.time_ms for e in seen if e.time_ms is not None)
    again = run_search(space, a100, strategy="random_sample", max_fevals=25, seed=3)
    assert [e.config for e in again.evaluations] == [e.config for e in seen]  # seeded: reproducible
    ga = run_search(space, a100, strategy="genetic_algorithm", max_fevals=30, seed=1)
    assert 0 < len(ga.evaluations) <= 30
    with pytest.raises(TuningUnavailable, match="unknown strategy"):
        run_search(space, a100, strategy="no_such_strategy", max_fevals=5)


def test_prior_strategy_starts_at_the_static_proposal_and_improves(a100, gpu):
    space = conv_space(a100)
    proposal = static_proposal(space, gpu)
    ranking = static_ranking(space, gpu)
    assert ranking[0] == proposal and len(ranking) == 416
    result = run_search(space, a100, strategy=PriorStrategy(space, gpu), max_fevals=40)
    assert result.evaluations[0].config == proposal
    assert len({space.key(e.config) for e in result.evaluations}) == 40  # never the same configuration twice
    optimum = a100.best()[1]
    assert result.best[1] <= a100.time_of(proposal)
    assert result.best[1] / optimum < 1.3


def test_restrictions_that_exclude_everything(a100):
    space = TuningSpace(a100.kernel_name, a100.tune_params, [*RESTRICTIONS, "block_size_x * block_size_y > 4096"],
                        ("block_size_x", "block_size_y"))
    with pytest.raises(TuningUnavailable, match="exclude every configuration"):
        run_search(space, a100, strategy="random_sample", max_fevals=10)


def test_cancelled_run_stops_after_the_evaluation_in_flight(a100, gpu):
    space = conv_space(a100)
    cancel = threading.Event()

    def on_evaluation(evaluation):
        if evaluation.index == 5:
            cancel.set()

    result = run_search(space, a100, strategy=PriorStrategy(space, gpu), max_fevals=100, cancel=cancel,
                        on_evaluation=on_evaluation)
    assert result.cancelled and result.stopped == "cancelled"
    assert len(result.evaluations) == 5


def test_failing_and_slow_evaluations_when_measuring(a100, gpu):
    """Measuring (a callable stands in for the GPU): a configuration that fails to build or run is
    recorded as failed and the search goes on; the time budget counts the measured time."""
    space = conv_space(a100)
    record = new_record(space, "Stand-in GPU", {"kind": "measured"})
    calls = []

    def evaluate(config):
        calls.append(config)
        if config["block_size_x"] == 48:
            raise RuntimeError("launch failed: too many resources requested")
        if config["tile_size_x"] == 2 and config["tile_size_y"] == 2:
            return Measurement(None, "CompilationFailedConfig: ptxas error")
        time.sleep(0.01)
        return Measurement(1.0 + config["block_size_y"] / 10, compile_ms=200, benchmark_ms=50)

    result = run_search(space, record, strategy="random_sample", max_fevals=60, seed=0, evaluate=evaluate)
    failed = [e for e in result.evaluations if e.time_ms is None]
    assert failed and all(e.error for e in failed)
    assert any("too many resources" in e.error for e in failed)
    assert len(result.evaluations) == len(calls) == 60
    stored = [record.entries[space.key(e.config)] for e in failed]
    assert {s["time"] for s in stored} <= {"RuntimeFailedConfig", "CompilationFailedConfig"}
    assert result.best is not None and result.best[0]["block_size_y"] == 1

    # a slow evaluation and a time budget: 250 ms of compile and benchmark time each, 1 s allowed
    slow = new_record(space, "Stand-in GPU", {"kind": "measured"})
    budget = run_search(space, slow, strategy="random_sample", max_fevals=60, time_limit_s=1.0, seed=0,
                        evaluate=lambda c: Measurement(2.0, compile_ms=200, benchmark_ms=50))
    assert 3 <= len(budget.evaluations) <= 6


# ----------------------------------------------------------------------------- the LLM strategy


def proposer_for(server: TuningLlmServer, gpu) -> LlmProposer:
    config = ProviderConfig(kind="openai", base_url=server.url + "/v1", model="stand-in", api_key_env="PERFLSP_NO_KEY")
    return LlmProposer(config, "sk-test", source="__global__ void convolution_kernel() {}", gpu=gpu)


def test_llm_proposals_outside_the_space_are_rejected_never_evaluated(a100, gpu):
    space = conv_space(a100)
    with TuningLlmServer(out_of_space=True) as server:
        proposer = proposer_for(server, gpu)
        strategy = LlmStrategy(space, gpu, proposer)
        try:
            result = run_search(space, a100, strategy=strategy, max_fevals=20)
        finally:
            proposer.close()
        prompt = server.requests[0].json["messages"][1]["content"]
    assert proposer.requests >= 3
    assert '"measurements": [{"config"' in prompt and "A100 SXM4 40GB" in prompt
    reasons = [r["reason"] for r in strategy.rejected()]
    assert any("is not one of" in r for r in reasons)
    assert any("no_such_parameter is not a tuning parameter" in r for r in reasons)
    assert any(r == "block_size_x=2048 is not one of [16, 32, 48, 64, 128, 256]" for r in reasons)
    assert all(space.valid(e.config) for e in result.evaluations)
    assert len(result.evaluations) == 20
    assert result.best[1] <= a100.time_of(static_proposal(space, gpu))


def test_llm_failures_fall_back_to_the_prior(a100, gpu):
    space = conv_space(a100)
    with TuningLlmServer(fail_first=10) as server:
        proposer = proposer_for(server, gpu)
        strategy = LlmStrategy(space, gpu, proposer, max_failures=2)
        try:
            result = run_search(space, a100, strategy=strategy, max_fevals=15)
        finally:
            proposer.close()
    assert len(result.evaluations) == 15  # the budget is spent by the prior's steps
    assert sum(1 for r in strategy.rounds if r.error) == 2  # asked twice, then not again
    assert all(r.fallback for r in strategy.rounds if not r.proposed)


def test_parse_answer_tolerates_fences_and_rejects_prose():
    assert parse_answer('```json\n{"configs": [{"a": 1}], "reason": "x"}\n```') == [{"a": 1}]
    with pytest.raises(ValueError):
        parse_answer("I would try larger blocks.")


# ----------------------------------------------------------------------------- code, edits, results


def file_context(text: str) -> ProgramModel:
    data = text.encode()
    tree = parse(data)
    return ProgramModel(data, tree, extract(data, tree))


def test_problem_from_markers_and_the_tuned_edit(a100, gpu):
    model = file_context((FIXTURES / "convolution.cu").read_text())
    data, kernel = model.data, model.kernels.kernels[0]
    space = problem_for(model, kernel, gpu)
    assert list(space.tune_params) == list(a100.tune_params)
    assert space.block_params == ("block_size_x", "block_size_y")
    assert space.current["block_size_x"] == 16 and space.current["use_padding"] == 1
    assert "block_size_x*block_size_y <= 1024" in space.restrictions  # the GPU's limit
    assert any(r.endswith("<= 49152") for r in space.restrictions)  # its static shared memory per block
    best = a100.best()[0]
    fix = tuned_fix(model, kernel, space, best, "apply")
    from perflsp.analysis.fixes import apply_edits

    new = apply_edits(data, fix.edits).decode()
    assert "#define block_size_x 48" in new and "#define tile_size_x 2" in new and "#define read_only 1" in new
    assert not parse(new.encode()).root_node.has_error
    found = offers([a100], space)
    assert len(found) == 1 and found[0].config == best
    assert found[0].title() == ("Apply the A100-PCIE-40GB-tuned configuration: 1.71x faster than current, "
                                "recorded on NVIDIA A100-PCIE-40GB")


def test_problem_from_a_plain_launch_and_missing_markers(gpu):
    model = file_context(
        "__global__ void scale(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }\n"
        "__global__ void lonely(float *x) { x[0] = 1; }\n"
        "int main() { float *x; int n = 1 << 20; scale<<<(n + 127) / 128, 128>>>(x, n); }\n")
    data = model.data
    scale, lonely = model.kernels.kernels
    space = problem_for(model, scale, gpu)
    assert space.tune_params["block_size_x"] == list(range(32, 1025, 32)) and space.current == {"block_size_x": 128}
    fix = tuned_fix(model, scale, space, {"block_size_x": 256}, "t")
    from perflsp.analysis.fixes import apply_edits

    assert "(n + 255) / 256, 256" in apply_edits(data, fix.edits).decode()
    with pytest.raises(ProblemError, match="nothing to tune"):
        problem_for(model, lonely, gpu)
    model = file_context("// perflsp:tune TILE=1,2\n__global__ void k(float *x) { x[0] = 1; }\n")
    with pytest.raises(ProblemError, match="neither a `#define TILE"):
        problem_for(model, model.kernels.kernels[0], gpu)


def test_portability_across_devices(a100):
    w7800 = read_cache(FIXTURES / "convolution_W7800.json", source="fixture")
    rows = {r["from"]: r["on"] for r in portability([a100, w7800])}
    assert rows[a100.device_name][a100.device_name] == 1.0
    assert rows[a100.device_name][w7800.device_name] > 10  # the A100's best is >10x slower than the W7800's on it


def test_without_kernel_tuner_everything_says_so(monkeypatch, a100):
    monkeypatch.setitem(sys.modules, "kernel_tuner", None)
    assert "pip install 'perflsp[tune]'" in kernel_tuner_available()
    with pytest.raises(TuningUnavailable, match="Kernel Tuner is not installed"):
        run_search(conv_space(a100), a100, strategy="random_sample", max_fevals=5)


def test_cli_import_and_replay(tmp_path):
    from click.testing import CliRunner

    from perflsp.cli import cli

    source = tmp_path / "convolution.cu"
    shutil.copy(FIXTURES / "convolution.cu", source)
    runner = CliRunner()
    imported = runner.invoke(cli, ["tune", "import", str(FIXTURES / "convolution_A100.json"), "--workspace",
                                   str(tmp_path), "--json"])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["configurations"] == 416
    replayed = runner.invoke(cli, ["tune", "run", str(source), "-k", "convolution_kernel", "--replay",
                                   str(FIXTURES / "convolution_A100.json"), "--max-fevals", "10", "--json",
                                   "--workspace", str(tmp_path)])
    assert replayed.exit_code == 0, replayed.output
    payload = json.loads(replayed.output)
    assert payload["evaluations"] == 10 and payload["recorded"] and payload["bestMs"] <= payload["currentMs"]
    shown = runner.invoke(cli, ["tune", "show", str(source), "-k", "convolution_kernel", "--workspace", str(tmp_path)])
    assert shown.exit_code == 0 and "Apply the A100-PCIE-40GB-tuned configuration" in shown.output
    measured = runner.invoke(cli, ["tune", "run", str(source), "-k", "convolution_kernel", "--workspace",
                                   str(tmp_path)], env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")})
    assert measured.exit_code != 0 and "profiling is off" in measured.output


def test_measuring_through_the_profiling_runner(tmp_path, monkeypatch, gpu):
    """Tuning a plain launch on "the GPU": the stand-in nvcc builds each configuration's edited copy,
    the stand-in ncu times the kernel per block size; a block size it cannot time fails and the search
    goes on; the measurements are stored as the GPU's Kernel Tuner cache and continued next time."""
    from perflsp.profiling.settings import ProfilingSettings
    from perflsp.tuning.measure import program_evaluator
    from perflsp.tuning.session import load_file, tune
    from tests.profiling_helpers import install_fake_ncu, install_fake_nvcc

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = install_fake_ncu(bin_dir)
    nvcc = install_fake_nvcc(bin_dir)
    times = {b: 2000 + 4 * abs(b - 256) for b in range(32, 1025, 32)}  # ns per launch, fastest at 256
    del times[160]  # the "program" cannot be timed at 160 threads: a failed evaluation
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", ",".join(f"{b}:{t}" for b, t in times.items()))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    source = tmp_path / "saxpy.cu"
    source.write_text("__global__ void saxpy(const float *x, float *y, int n) {\n"
                      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] += 2.0f * x[i];\n}\n"
                      "int main() { float *x, *y; int n = 1 << 20; saxpy<<<(n + 127) / 128, 128>>>(x, y, n); }\n")
    settings = ProfilingSettings(enabled=True, ncu_path=str(ncu),
                                 build_command=[str(nvcc), "-O3", "-o", "{exe}", "{file}"])
    ctx = load_file(source)
    kernel = ctx.kernel("saxpy")
    space = problem_for(ctx.model, kernel, gpu)
    evaluate = program_evaluator(settings, source, ctx.model, kernel, space, tmp_path)
    result, space, stored = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=12, evaluate=evaluate)
    assert len(result.evaluations) == 12 and stored == TuningStore(tmp_path).path_for("saxpy", gpu.name)
    best_block = min(times, key=times.get)
    assert result.best[0] == {"block_size_x": best_block} and result.best[1] == times[best_block] / 1e6
    failed = [e for e in result.evaluations if e.time_ms is None]
    assert [e.config for e in failed] == [{"block_size_x": 160}] and failed[0].error
    calls = [json.loads(line) for line in (tmp_path / "ncu.log").read_text().splitlines()]
    assert {c["block_env"] for c in calls} == {str(e.config["block_size_x"]) for e in result.evaluations}
    assert not list(tmp_path.glob(".perflsp-tune-*")), "the edited copies are removed after the build"
    record = read_cache(stored)
    assert not record.recorded and len(record.entries) == 12 and record.device_name == gpu.name
    # a second run continues from the cache: nothing measured twice
    before = len(calls)
    again, _space, _stored = tune(ctx, kernel, gpu, tmp_path, strategy="random_sample", max_fevals=20, seed=1,
                                  evaluate=evaluate)
    calls = [json.loads(line) for line in (tmp_path / "ncu.log").read_text().splitlines()]
    measured_again = {c["block_env"] for c in calls[before:]}
    assert not measured_again & {str(e.config["block_size_x"]) for e in result.evaluations}
    assert len(read_cache(stored).entries) == 12 + len(calls) - before
    assert len(again.evaluations) == 20


# ----------------------------------------------------------------------------- issue 26: tuning as a user


SAXPY = ("__global__ void saxpy(const float *x, float *y, int n) {\n"
         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] += 2.0f * x[i];\n}\n"
         "int main() { float *x, *y; int n = 1 << 20; saxpy<<<(n + 127) / 128, 128>>>(x, y, n); }\n")


def _saxpy_setup(tmp_path, monkeypatch, *, ncu: bool = True, nvcc: bool = True):
    from perflsp.profiling.settings import ProfilingSettings
    from perflsp.tuning.session import load_file
    from tests.profiling_helpers import install_fake_ncu, install_fake_nvcc

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    ncu_path = install_fake_ncu(bin_dir) if ncu else bin_dir / "no-such-ncu"
    nvcc_path = install_fake_nvcc(bin_dir) if nvcc else bin_dir / "no-such-nvcc"
    times = {b: 2000 + 4 * abs(b - 256) for b in range(32, 1025, 32)}
    monkeypatch.setenv("FAKE_NCU_MODE", "timing")
    monkeypatch.setenv("FAKE_NCU_TIMES", ",".join(f"{b}:{t}" for b, t in times.items()))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    source = tmp_path / "saxpy.cu"
    source.write_text(SAXPY)
    settings = ProfilingSettings(enabled=True, ncu_path=str(ncu_path),
                                 build_command=[str(nvcc_path), "-O3", "-o", "{exe}", "{file}"])
    ctx = load_file(source)
    return settings, ctx, ctx.kernel("saxpy"), source


@pytest.mark.parametrize("missing", ["ncu", "nvcc"])
def test_a_missing_tool_stops_the_run_and_is_not_stored_as_a_failed_configuration(tmp_path, monkeypatch, gpu, missing):
    """ncu (or the compiler) missing: the run stops at the first configuration with the tool's
    message, and nothing is stored as a failed configuration; once the tool is there, the same
    configurations are measured."""
    from perflsp.tuning.measure import program_evaluator
    from perflsp.tuning.search import ToolFailure
    from perflsp.tuning.session import tune

    settings, ctx, kernel, source = _saxpy_setup(tmp_path, monkeypatch, ncu=missing != "ncu",
                                                 nvcc=missing != "nvcc")
    space = problem_for(ctx.model, kernel, gpu)
    evaluate = program_evaluator(settings, source, ctx.model, kernel, space, tmp_path)
    seen = []
    with pytest.raises(ToolFailure, match="program not found"):
        tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=10, evaluate=evaluate, on_evaluation=seen.append)
    assert not seen, "no configuration was evaluated"
    stored = TuningStore(tmp_path).path_for("saxpy", gpu.name)
    assert not stored.exists() or not read_cache(stored).entries

    settings, ctx, kernel, source = _saxpy_setup(tmp_path, monkeypatch)
    evaluate = program_evaluator(settings, source, ctx.model, kernel, space, tmp_path)
    result, _space, stored = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=10, evaluate=evaluate)
    assert len(result.evaluations) == 10 and all(e.time_ms is not None for e in result.evaluations)
    assert result.measured_ok == 10 and result.provenance() == f"measured on {gpu.name}"
    assert not read_cache(stored).failures()


def test_a_tool_failure_mid_run_keeps_what_was_measured_and_old_tool_failures_are_measured_again(tmp_path, gpu):
    """The tool fails after three configurations: those three are stored, the fourth is not. A
    cache an earlier version wrote with a tool failure stored as a failed configuration gets that
    configuration measured again."""
    from perflsp.tuning.search import ToolFailure
    from perflsp.tuning.session import load_file, tune

    source = tmp_path / "saxpy.cu"
    source.write_text(SAXPY)
    ctx = load_file(source)
    kernel = ctx.kernel("saxpy")
    calls = []

    def evaluate(config):
        calls.append(config["block_size_x"])
        if len(calls) > 3:
            raise ToolFailure("timing: ncu: program not found: ncu")
        return Measurement(1.0 + config["block_size_x"] / 1000)

    with pytest.raises(ToolFailure):
        tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=10, evaluate=evaluate)
    record = read_cache(TuningStore(tmp_path).path_for("saxpy", gpu.name))
    assert len(record.entries) == 3 and not record.failures()
    assert sorted(int(k) for k in record.entries) == sorted(calls[:3])

    # a cache of an earlier version: the fourth configuration stored as failed because ncu was missing
    key = str(calls[3])
    record.entries[key] = {"block_size_x": calls[3], "time": "RuntimeFailedConfig",
                           "perflsp_error": "timing: ncu: program not found: ncu"}
    record.write(TuningStore(tmp_path).path_for("saxpy", gpu.name))
    calls.clear()
    _result, _space, stored = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=4,
                                   evaluate=lambda c: (calls.append(c["block_size_x"]), Measurement(2.0))[1])
    assert int(key) in calls, "the configuration a missing tool failed is measured again"
    assert not read_cache(stored).failures()


def test_a_build_command_without_the_file_placeholder_is_refused(tmp_path, monkeypatch, gpu):
    from perflsp.profiling.errors import ProfilingError
    from perflsp.tuning.measure import program_evaluator

    settings, ctx, kernel, source = _saxpy_setup(tmp_path, monkeypatch)
    settings = settings.model_copy(update={"build_command": ["make", "saxpy"]})
    space = problem_for(ctx.model, kernel, gpu)
    with pytest.raises(ProfilingError, match=r"buildCommand has no \{file\}") as refused:
        program_evaluator(settings, source, ctx.model, kernel, space, tmp_path)
    assert "edited copy" in refused.value.message


def test_nothing_measured_is_never_called_measured(tmp_path, gpu):
    """A measuring run whose configurations all come from the stored cache (or all fail) does not
    say "measured on <GPU>"."""
    from perflsp.tuning.session import load_file, tune

    source = tmp_path / "saxpy.cu"
    source.write_text(SAXPY)
    ctx = load_file(source)
    kernel = ctx.kernel("saxpy")
    failing, _s, _p = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=3,
                           evaluate=lambda c: Measurement(None, "RuntimeFailedConfig: launch failed"))
    assert failing.best is None and failing.provenance() == f"nothing ran on {gpu.name}"
    first, _s, _p = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=6,
                         evaluate=lambda c: Measurement(1.0 + c["block_size_x"] / 1000))
    assert first.provenance() == f"measured on {gpu.name}"
    # the same search again: every configuration it asks for is in the cache, nothing runs
    again, _s, _p = tune(ctx, kernel, gpu, tmp_path, strategy="prior", max_fevals=6,
                         evaluate=lambda c: pytest.fail("nothing should run"))
    assert again.best is not None and again.measured == 0
    assert "measured on" not in again.provenance() and "nothing ran in this run" in again.provenance()


def test_a_cache_without_a_device_name_is_named_after_its_file_and_never_overwrites_another(tmp_path, a100):
    from perflsp.tuning.session import import_cache

    data = a100.to_json()
    data["device_name"] = ""
    first, second = tmp_path / "one" / "cache.json", tmp_path / "two" / "cache.json"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(json.dumps(data))
    workspace = tmp_path / "ws"
    record, stored = import_cache(first, workspace)
    assert record.device_name == "cache" and stored.name == "cache.json"
    assert "recorded on cache" in record.label() and "names no device" in record.label()
    other, other_stored = import_cache(second, workspace)
    assert other_stored != stored and other.device_name == "cache (2)"
    again, again_stored = import_cache(first, workspace)  # the same file again replaces its own
    assert again_stored == stored and again.device_name == "cache"
    records = TuningStore(workspace).records_for(a100.kernel_name)
    assert sorted(r.device_name for r in records) == ["cache", "cache (2)"]
    assert not (workspace / ".perflsp" / "tuning" / a100.kernel_name / "unnamed.json").exists()
    space = conv_space(a100)
    assert all(o.title().endswith(f"recorded on {o.record.device_name}") and o.record.device_name
               for o in offers(records, space))


def test_marker_parameters_match_a_cache_by_name_in_any_order(tmp_path, a100):
    """A space listing the cache's parameters in another order replays the same measurements."""
    space = conv_space(a100)
    names = list(reversed(space.names))
    reordered = TuningSpace(space.kernel_name, {n: space.tune_params[n] for n in names}, space.restrictions,
                            space.block_params, space.shared_memory_bytes)
    assert a100.matches(reordered)
    result = run_search(reordered, a100, strategy="random_sample", max_fevals=15, seed=3)
    assert len(result.evaluations) == 15
    for evaluation in result.evaluations:
        assert evaluation.time_ms == a100.time_of(evaluation.config)
    assert list(result.record.tune_params) == names and list(a100.tune_params) == space.names
    best = next(c for c, _t in a100.timed() if reordered.valid(c))
    assert offers([a100], reordered)[0].config == best


def test_the_prior_says_when_it_has_no_gpu_figures(tmp_path, a100):
    from perflsp.tuning.session import load_file, tune

    source = tmp_path / "convolution.cu"
    shutil.copy(FIXTURES / "convolution.cu", source)
    ctx = load_file(source)
    unknown = dataclasses.replace(a100, device_name="Imaginary GPU 9000")
    result, _space, _stored = tune(ctx, ctx.kernel("convolution_kernel"), None, tmp_path, strategy="prior",
                                   max_fevals=5, replay=unknown)
    assert any("without GPU figures" in n and "Imaginary GPU 9000 is not in the GPU database" in n
               for n in result.notes), result.notes
    known, _space, _stored = tune(ctx, ctx.kernel("convolution_kernel"), load_database().get("a100-sxm4-40gb"),
                                  tmp_path, strategy="prior", max_fevals=5, replay=a100)
    assert not any("GPU figures" in n for n in known.notes)


def test_knobs_are_read_from_the_model_s_macros_and_constants(tmp_path, gpu):
    """A knob is a macro the file itself defines, or one of its constants, written as an integer
    (the value a tuned edit rewrites); what it folds to is the model's."""
    (tmp_path / "config.h").write_text("#define HEADER_TILE 4\n")
    path = tmp_path / "k.cu"
    path.write_text('#include "config.h"\n#define TILE (8)\n#define WIDE 2 * 4\nconstexpr int UNROLL = 2;\n'
                    "__global__ void k(float *x) { x[threadIdx.x] = TILE * UNROLL; }\n")
    source = read_source(path, path.read_bytes(), IncludeResolver())
    model = ProgramModel(source.data, source.tree, source.kernels, source.env)
    assert current_value(model, "TILE") == ("define", 8)
    assert current_value(model, "UNROLL") == ("const", 2)
    assert current_value(model, "WIDE") is None  # folds (8), but is no literal a tuned edit could rewrite
    assert current_value(model, "HEADER_TILE") is None  # the header's: not this file's to edit
    assert model.evaluate("HEADER_TILE") == 4
    data = model.data.replace(b"__global__", b"// perflsp:tune TILE=4,8,16 UNROLL=1,2\n__global__")
    tree = parse(data)
    marked = ProgramModel(data, tree, extract(data, tree, str(path), env=source.env), source.env)
    space = problem_for(marked, marked.kernels.kernels[0], gpu)
    assert space.current == {"TILE": 8, "UNROLL": 2}
    fix = tuned_fix(marked, marked.kernels.kernels[0], space, {"TILE": 16, "UNROLL": 1}, "t")
    from perflsp.analysis.fixes import apply_edits

    edited = apply_edits(data, fix.edits)
    assert b"#define TILE (16)" in edited and b"constexpr int UNROLL = 1;" in edited
    header_marked = model.data.replace(b"__global__", b"// perflsp:tune HEADER_TILE=2,4\n__global__")
    tree = parse(header_marked)
    marked = ProgramModel(header_marked, tree, extract(header_marked, tree, str(path), env=source.env), source.env)
    with pytest.raises(ProblemError, match="neither a `#define HEADER_TILE"):
        problem_for(marked, marked.kernels.kernels[0], gpu)
