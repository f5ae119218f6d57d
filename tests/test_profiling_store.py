"""Stored results under .perflsp/profiles and their freshness."""

from __future__ import annotations

import json

from profiling_helpers import MIXED, cuda_kernel, file_kernels, omp_region

from perflsp.analysis.roofline import Precision
from perflsp.profiling.gpus import RTX_3080, MeasuredGpu
from perflsp.profiling.ncu_csv import parse_ncu_csv
from perflsp.profiling.runner import summarise
from perflsp.profiling.store import ProfileRecord, ProfileStore


def _outcome(workspace, files, gpu=RTX_3080):
    table = parse_ncu_csv(MIXED.read_text(encoding="utf-8"))
    return summarise(table, origin="import", gpu=gpu, files=files, workspace=workspace, report=str(MIXED))


def test_saved_record_round_trips(tmp_path):
    source = tmp_path / "src" / "k.cu"
    files = [file_kernels(source, [cuda_kernel("dgemm_tile", params=4, line=7, body_hash="d1")])]
    outcome = _outcome(tmp_path, files)
    store = ProfileStore(tmp_path)
    path = store.save(outcome.record)
    assert path.parent == tmp_path / ".perflsp" / "profiles" and path.suffix == ".json"
    assert (tmp_path / ".perflsp" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not list(path.parent.glob("*.tmp"))
    (record,) = store.records()
    assert record == ProfileRecord.model_validate(json.loads(path.read_text()))
    assert record.gpu == RTX_3080.name and record.device_name == "NVIDIA GeForce RTX 3080"
    dgemm = next(k for k in record.kernels if k.reported_name.startswith("dgemm_tile"))
    assert dgemm.mapping.file == "src/k.cu" and dgemm.mapping.body_hash == "d1" and dgemm.mapping.line == 7
    assert dgemm.evidence["verdict"] == "compute"
    assert dgemm.measured().counters == outcome.results[1].measured.counters


def test_evidence_is_recomputed_and_newest_first(tmp_path):
    source = tmp_path / "k.cu"
    kernel = cuda_kernel("dgemm_tile", params=4, line=7, body_hash="d1")
    store = ProfileStore(tmp_path)
    first = _outcome(tmp_path, [file_kernels(source, [kernel])]).record
    store.save(first)
    second = _outcome(tmp_path, [file_kernels(source, [kernel])]).record
    second = second.model_copy(update={"created_at": "2999-01-01T00:00:00+00:00", "id": "later"})
    store.save(second)
    (evidence,) = store.evidence_for(kernel, file=str(source))  # one per GPU: the newest
    assert evidence.verdict == "compute" and not evidence.stale
    # judged with other figures, the same counters give another verdict
    slow_dp = MeasuredGpu("Big-DP GPU", 1440, {Precision.FP64: 1e15, Precision.INT32: 1e15}, 1e11)
    (other,) = store.evidence_for(kernel, file=str(source), gpu=slow_dp)
    assert other.verdict == "bandwidth" and other.gpu == "Big-DP GPU"


def test_other_files_and_kernels_do_not_match(tmp_path):
    kernel = cuda_kernel("dgemm_tile", params=4, body_hash="d1")
    store = ProfileStore(tmp_path)
    store.save(_outcome(tmp_path, [file_kernels(tmp_path / "k.cu", [kernel])]).record)
    assert store.evidence_for(kernel, file=str(tmp_path / "other.cu")) == []
    assert store.evidence_for(cuda_kernel("dgemm_tile2", body_hash="d1"), file=str(tmp_path / "k.cu")) == []


def test_omp_regions_are_followed_when_moved_and_stale_when_edited(tmp_path):
    source = tmp_path / "s.cpp"
    store = ProfileStore(tmp_path)
    store.save(_outcome(tmp_path, [file_kernels(source, regions=[omp_region("smooth", 42, "o1")])]).record)
    (moved,) = store.evidence_for(omp_region("smooth", 50, "o1"), file=str(source))
    assert not moved.stale and moved.verdict == "compute"
    (edited,) = store.evidence_for(omp_region("smooth", 42, "o2"), file=str(source))
    assert edited.stale
    assert store.evidence_for(omp_region("other", 42, "o1"), file=str(source)) == []


def test_unreadable_records_are_skipped_with_a_reason(tmp_path):
    store = ProfileStore(tmp_path)
    store.save(_outcome(tmp_path, []).record)
    (store.directory / "broken.json").write_text("{not json", encoding="utf-8")
    (store.directory / "wrong.json").write_text('{"origin": "teleport"}', encoding="utf-8")
    assert len(store.records()) == 1
    assert {p.split(":")[0] for p in store.problems} == {"broken.json", "wrong.json"}


def test_empty_store(tmp_path):
    store = ProfileStore(tmp_path)
    assert store.records() == [] and store.evidence_for(cuda_kernel("k"), file=None) == []
    assert not (tmp_path / ".perflsp").exists()  # reading never creates the folder
