"""The static engine's per-thread counts on examples/ against the hand-derived figures in
examples/expected.toml (see examples/EXPECTED.md for the reasoning behind each number)."""

import tomllib
from pathlib import Path

import pytest

from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.includes import IncludeResolver
from perflsp.source.parser import parse

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = tomllib.loads((ROOT / "examples" / "expected.toml").read_text())
GPU = load_database().get("H100")


def _first_instantiations(kernels):
    """The engine analyses a template at its first launch site; later instantiations (another
    element type) are not separate kernels in the source."""
    seen = set()
    for k in kernels:
        key = (k["file"], k["line"])
        if key not in seen:
            seen.add(key)
            yield k


CASES = list(_first_instantiations(EXPECTED["kernel"]))


def report_for(entry):
    path = ROOT / entry["file"]
    data = path.read_bytes()
    tree = parse(data)
    env = IncludeResolver().env_for(path, data)
    kernels = extract(data, tree, str(path), env=env)
    report = analyze(data, tree, kernels, [GPU], AnalysisOptions(include_env=env))
    (found,) = [r for r in report.kernels if getattr(r.kernel, "name", None) == entry["name"] and r.kernel.line == entry["line"]]
    return found


def close(actual, expected, rel=0.05, abs_=0.02):
    return actual == pytest.approx(expected, rel=rel, abs=abs_)


@pytest.mark.parametrize("entry", CASES, ids=[f"{c['name']}@{Path(c['file']).name}" for c in CASES])
def test_memory_traffic_per_thread(entry):
    per = report_for(entry).facts.per_item
    assert close(per.global_load_bytes, entry["global_load_bytes_per_thread"]), per
    assert close(per.global_store_bytes, entry["global_store_bytes_per_thread"]), per
    assert close(per.shared_load_bytes, entry["shared_load_bytes_per_thread"], rel=0.05, abs_=0.25), per
    assert close(per.shared_store_bytes, entry["shared_store_bytes_per_thread"], rel=0.05, abs_=0.25), per


@pytest.mark.parametrize("entry", [c for c in CASES if not c["special_per_thread"]],
                         ids=lambda c: f"{c['name']}@{Path(c['file']).name}")
def test_flops_per_thread(entry):
    """Kernels without special functions: FP32/FP64 FLOP exactly as hand-counted (FMA = 2).
    Warp-shuffle reductions are averaged over the block, hence the small tolerance."""
    per = report_for(entry).facts.per_item
    assert close(per.fp32, entry["fp32_flop_per_thread"], rel=0.03, abs_=1.7), per
    assert close(per.fp64, entry["fp64_flop_per_thread"], rel=0.03, abs_=1.7), per


def test_special_functions_add_their_instruction_sequences():
    """`__expf` and an IEEE division cost more than the FLOP the source shows."""
    entry = next(c for c in CASES if c["name"] == "bias_silu")
    per = report_for(entry).facts.per_item
    assert per.fp32 > entry["fp32_flop_per_thread"]
    assert per.special >= sum(entry["special_per_thread"].values())


def test_launch_shape_and_totals():
    entry = next(c for c in CASES if c["name"] == "saxpy")
    facts = report_for(entry).facts
    assert facts.work_items == entry["launched_threads"]
    assert facts.total.fp32 == entry["fp32_flop_total"]
    # saxpy streams its arrays once: DRAM traffic is the compulsory footprint, writes half-counted
    assert facts.traffic.footprint_bytes == pytest.approx(entry["compulsory_dram_bytes"], rel=0.01)
