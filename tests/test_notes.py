"""Evidence and assumptions are typed records (`perflsp.analysis.notes.Note`): each carries its
kind, subject, figure and source, renders the sentence every surface shows, and that sentence is
what `check --json` carries beside the record."""

from __future__ import annotations

import json

from perflsp.analysis.engine import AnalysisOptions, analyze
from perflsp.analysis.notes import Note, NoteKind, NoteSource, assumed, problem_size_unknown, records, texts
from perflsp.analysis.report import kernel_json
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.source.parser import parse

GPU = load_database().get("H100 SXM5 80GB")

UNSIZED = b"""
__device__ float unseen(float v);
__global__ void scale(float *x, const int *len, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < len[i]; ++j)
        x[i] = unseen(x[i]) * 2.0f;
}
"""


def _report(data: bytes):
    tree = parse(data)
    kernels = extract(data, tree, "k.cu")
    (report,) = analyze(data, tree, kernels, [GPU], AnalysisOptions()).kernels
    return report


def test_a_note_renders_its_line_and_its_summary():
    loop = assumed(NoteKind.LOOP_TRIP, "trip count of the `j` loop unknown (`len[i]`): assumed 64", subject="j",
                   line=12, value=64.0, unit="iterations")
    assert loop.text == str(loop) == "line 12: trip count of the `j` loop unknown (`len[i]`): assumed 64"
    assert loop.text_at(3) == "line 3: trip count of the `j` loop unknown (`len[i]`): assumed 64"
    assert loop.summary == loop.text and loop.source == NoteSource.ASSUMED
    size = problem_size_unknown("1,048,576 iterations", 1048576.0, "iterations")
    assert size.text == "problem size unknown: assumed large (1,048,576 iterations), data beyond L2"
    assert size.summary == "problem size unknown: assumed large"
    assert (size.kind, size.value, size.unit) == (NoteKind.PROBLEM_SIZE_UNKNOWN, 1048576.0, "iterations")


def test_records_round_trip_to_the_same_text():
    notes = [assumed(NoteKind.LOOP_TRIP, "range-based loop: assumed 64 iterations", line=7, value=64.0,
                     unit="iterations"),
             Note(NoteKind.INTENSITY, NoteSource.COMPILED, "FP32: 0.5 FLOP/B < ridge 20", subject="FP32", value=0.5,
                  unit="FLOP/B"),
             Note(NoteKind.DRAM_TRAFFIC, NoteSource.SOURCE, "DRAM: the floor", value=float("inf"), unit="B")]
    decoded = json.loads(json.dumps(records(notes)))
    assert [r["text"] for r in decoded] == texts(notes)
    assert [(r["kind"], r["source"]) for r in decoded] == [("loop-trip", "assumed"), ("intensity", "compiled"),
                                                           ("dram-traffic", "source")]
    assert decoded[0]["line"] == 7 and decoded[1]["subject"] == "FP32" and decoded[2]["value"] is None


def test_the_engine_builds_records_of_the_right_kind_and_source():
    report = _report(UNSIZED)
    facts = report.facts
    first = facts.assumptions[0]
    assert (first.kind, first.source, first.unit) == (NoteKind.PROBLEM_SIZE_UNKNOWN, NoteSource.ASSUMED, "threads")
    trip = next(a for a in facts.assumptions if a.kind == NoteKind.LOOP_TRIP)
    assert (trip.subject, trip.line, trip.source) == ("j", 6, NoteSource.ASSUMED)
    assert trip.text.startswith("line 6: trip count of the `j` loop unknown")
    kinds = [(e.kind, e.source) for e in facts.evidence]
    assert kinds[:2] == [(NoteKind.PER_ITEM_COUNTS, NoteSource.SOURCE), (NoteKind.DRAM_TRAFFIC, NoteSource.SOURCE)]
    (call,) = [e for e in facts.evidence if e.kind == NoteKind.UNANALYSED_CALL]
    assert call.subject == "unseen" and call.text == "call to `unseen` not analysed (definition not visible)"
    assert {e.kind for e in report.estimates[0].evidence} == {NoteKind.INTENSITY}
    assert all(e.subject and e.unit for e in report.estimates[0].evidence)


def test_check_json_carries_the_text_and_the_record_of_each_note():
    report = _report(UNSIZED)
    facts = kernel_json(report, [])["facts"]
    assert facts["assumptions"] == [r["text"] for r in facts["assumption_records"]] == texts(report.facts.assumptions)
    assert facts["evidence"] == [r["text"] for r in facts["evidence_records"]] == texts(report.facts.evidence)
    assert facts["assumption_records"][0]["kind"] == "problem-size-unknown"
