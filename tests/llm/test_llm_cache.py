"""The SQLite answer cache: keys, LRU size cap, stats/clear, the CLI, and the end-to-end promise
that re-opening a file asks nothing and editing one kernel of five asks exactly once."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import API_KEY, KERNEL, answer, make_question
from llm_fakes import ScriptedServer, Wire

from perflsp.cli import cli
from perflsp.llm.advisor import Advisor, AdvisorSettings
from perflsp.llm.cache import CacheError, CacheKey, VerdictCache, default_cache_path
from perflsp.llm.providers import ProviderConfig, make_provider

KEY = CacheKey("h1", "RTX 3080", "openai", "http://127.0.0.1:8000/v1", "m", "1", "0.1.0", "verdict", "d1")


def test_every_key_field_matters():
    digests = {KEY.digest()}
    for field in dataclasses.fields(CacheKey):
        digests.add(dataclasses.replace(KEY, **{field.name: "changed"}).digest())
    assert len(digests) == 1 + len(dataclasses.fields(CacheKey))


def test_put_get_hits_and_stats(tmp_path: Path):
    cache = VerdictCache(tmp_path / "c.sqlite3")
    assert cache.get(KEY) is None
    cache.put(KEY, json.dumps({"answer": {"verdict": "compute"}}))
    assert json.loads(cache.get(KEY).payload)["answer"]["verdict"] == "compute"
    assert cache.get(KEY).hits == 2
    stats = cache.stats()
    assert stats.entries == 1 and stats.hits == 2 and stats.by_model == {"m": 1}
    assert stats.by_task == {"verdict": 1} and stats.file_bytes > 0
    assert cache.clear() == 1 and cache.stats().entries == 0


def test_size_cap_evicts_least_recently_used(tmp_path: Path):
    payload = json.dumps({"text": "x" * 400})
    cache = VerdictCache(tmp_path / "c.sqlite3", max_bytes=3 * len(payload))
    keys = [dataclasses.replace(KEY, kernel_hash=f"h{i}") for i in range(4)]
    for key in keys[:3]:
        cache.put(key, payload)
    cache.get(keys[0])  # keys[1] is now the least recently used
    cache.put(keys[3], payload)
    assert [cache.get(k) is not None for k in keys] == [True, False, True, True]
    assert cache.stats().payload_bytes <= cache.max_bytes


def test_only_json_goes_in(tmp_path: Path):
    with pytest.raises(ValueError):
        VerdictCache(tmp_path / "c.sqlite3").put(KEY, "Authorization: Bearer x")


def test_unusable_file_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheError, match="unusable"):
        VerdictCache(path).get(KEY)


def test_default_path_honours_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("PERFLSP_CACHE_DIR", str(tmp_path))
    assert default_cache_path() == tmp_path / "llm-cache.sqlite3"


def test_cli_stats_and_clear(tmp_path: Path):
    VerdictCache(tmp_path / "llm-cache.sqlite3").put(KEY, json.dumps({"text": "hi"}))
    runner = CliRunner()
    out = runner.invoke(cli, ["cache", "--cache-dir", str(tmp_path), "stats", "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["entries"] == 1
    out = runner.invoke(cli, ["cache", "--cache-dir", str(tmp_path), "stats"])
    assert out.exit_code == 0 and "entries" in out.output
    out = runner.invoke(cli, ["cache", "--cache-dir", str(tmp_path), "clear"])
    assert out.exit_code == 0 and "removed 1" in out.output
    assert VerdictCache(tmp_path / "llm-cache.sqlite3").stats().entries == 0


def test_cli_reports_a_broken_cache_without_traceback(tmp_path: Path):
    (tmp_path / "llm-cache.sqlite3").write_bytes(b"garbage" * 200)
    proc = subprocess.run(
        [sys.executable, "-m", "perflsp", "cache", "--cache-dir", str(tmp_path), "stats"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1
    assert "unusable" in proc.stderr and "Traceback" not in proc.stderr


def _five_kernels() -> list:
    return [make_question(f"k{i}", KERNEL.replace("axpy_like", f"k{i}"), first_line=1 + 10 * i) for i in range(5)]


async def test_reopen_asks_nothing_and_one_edit_asks_once(wire: Wire, server: ScriptedServer, tmp_path: Path):
    server.push(*(wire.reply(answer()) for _ in range(6)))
    config = ProviderConfig(kind=wire.kind, base_url=server.url, model="fake-model")

    def open_session() -> Advisor:
        return Advisor(make_provider(config, API_KEY), AdvisorSettings(),
                       cache=VerdictCache(tmp_path / "llm-cache.sqlite3"))

    first = open_session()
    assert all(r.source == "llm" and not r.from_cache for r in [await first.ask(q) for q in _five_kernels()])
    await first.aclose()
    assert len(server.requests) == 5

    reopened = open_session()
    results = [await reopened.ask(q) for q in _five_kernels()]
    assert all(r.from_cache and r.source == "llm" for r in results) and len(server.requests) == 5
    # moving every kernel down the file (an edit above them) changes no question
    moved = [q.model_copy(update={"first_line": q.first_line + 3}) for q in _five_kernels()]
    assert all([(await reopened.ask(q)).from_cache for q in moved])
    assert [f.line for f in (await reopened.ask(moved[0])).factors] == [7, None]  # L4 of a kernel at line 4

    edited = _five_kernels()
    edited[2] = make_question("k2", KERNEL.replace("axpy_like", "k2").replace("y[i] = ", "y[i] = 3.0f * "),
                              first_line=21)
    results = [await reopened.ask(q) for q in edited]
    assert len(server.requests) == 6
    assert [r.from_cache for r in results] == [True, True, False, True, True]
    await reopened.aclose()

    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert API_KEY.encode() not in raw
    rows = sqlite3.connect(tmp_path / "llm-cache.sqlite3").execute("SELECT payload FROM entries").fetchall()
    assert all(set(json.loads(p)) == {"answer", "model"} for (p,) in rows)


async def test_other_model_or_gpu_is_a_different_entry(server: ScriptedServer, tmp_path: Path):
    wire = Wire("openai")
    server.push(*(wire.reply(answer()) for _ in range(3)))
    cache = VerdictCache(tmp_path / "c.sqlite3")

    async def ask(model: str, question) -> bool:
        config = ProviderConfig(kind="openai", base_url=server.url, model=model)
        advisor = Advisor(make_provider(config), cache=cache)
        try:
            return (await advisor.ask(question)).from_cache
        finally:
            await advisor.aclose()

    q = make_question()
    other_gpu = q.model_copy(update={"gpu": q.gpu.model_copy(update={"name": "A100"})})
    assert [await ask("m1", q), await ask("m2", q), await ask("m1", other_gpu), await ask("m1", q)] == [
        False, False, False, True
    ]
