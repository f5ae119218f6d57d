"""benchmarks/realworld.py on tiny git repositories made here: trees materialised from bare
mirrors (missing blobs tolerated), `perflsp check` run as a user runs it, kernels matched by name
or `omp@LINE`, agreement scored, held-out repositories reported in aggregate only."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import realworld

ROOT = Path(__file__).resolve().parents[1]

STREAM = """__global__ void scale(const float *x, float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i];
}

__global__ void spin(float *x)
{
    float v = x[threadIdx.x + blockIdx.x * blockDim.x];
    for (int s = 0; s < 100000; ++s)
        v = v * 0.999f + 0.001f;
    x[threadIdx.x + blockIdx.x * blockDim.x] = v;
}

int main()
{
    int n = 1 << 26;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    scale<<<n / 256, 256>>>(x, y, 2.0f, n);
    spin<<<n / 256, 256>>>(x);
    return 0;
}
"""

OMP = """#include <cstdlib>
int main()
{
    const int n = 1 << 26;
    float *a = (float *)malloc(n * sizeof(float));
    float *b = (float *)malloc(n * sizeof(float));
    #pragma omp target teams distribute parallel for map(to: a[0:n]) map(from: b[0:n])
    for (int i = 0; i < n; ++i)
        b[i] = a[i];
    return 0;
}
"""


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main",
                           *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(work: Path, mirrors: Path, name: str, files: dict[str, str]) -> str:
    """A repository with `files`, cloned bare into mirrors/OWNER+NAME/repo; returns the commit."""
    src = work / name.replace("/", "_")
    src.mkdir(parents=True)
    git("init", "-q", cwd=src)
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    git("add", ".", cwd=src)
    git("commit", "-q", "-m", "kernels", cwd=src)
    commit = git("rev-parse", "HEAD", cwd=src)
    target = mirrors / name.replace("/", "+") / "repo"
    target.parent.mkdir(parents=True)
    git("clone", "-q", "--bare", "--no-local", str(src), str(target), cwd=work)
    return commit


def write_cases(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["repo", "commit", "path", "line", "kernel", "expected", "why"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def run_main(*args: str, capsys) -> str:
    code = realworld.main([*args, "--perflsp", f"{sys.executable} -m perflsp"])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


@pytest.fixture
def setup(tmp_path: Path):
    mirrors = tmp_path / "mirrors"
    one = make_repo(tmp_path / "work", mirrors, "someone/kernels",
                    {"src/stream.cu": STREAM, "omp/copy.cpp": OMP, "README.md": "tiny\n"})
    two = make_repo(tmp_path / "work", mirrors, "other/secret", {"k.cu": STREAM})
    rows = [
        {"repo": "someone/kernels", "commit": one, "path": "src/stream.cu", "line": "1", "kernel": "scale",
         "expected": "bandwidth", "why": "streams"},
        {"repo": "someone/kernels", "commit": one, "path": "src/stream.cu", "line": "8", "kernel": "spin",
         "expected": "compute", "why": "100k FMA per element"},
        {"repo": "someone/kernels", "commit": one, "path": "omp/copy.cpp", "line": "7", "kernel": "omp@7",
         "expected": "bandwidth", "why": "copy"},
        {"repo": "someone/kernels", "commit": one, "path": "src/stream.cu", "line": "1", "kernel": "absent",
         "expected": "bandwidth", "why": "not there"},
        {"repo": "other/secret", "commit": two, "path": "k.cu", "line": "8", "kernel": "spin",
         "expected": "compute", "why": "held out"},
        {"repo": "other/secret", "commit": two, "path": "k.cu", "line": "1", "kernel": "scale",
         "expected": "compute", "why": "held out, deliberately wrong"},
    ]
    return tmp_path, mirrors, write_cases(tmp_path / "cases.csv", rows)


def check_verdicts(path: Path) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-m", "perflsp", "check", str(path), "--gpu", "H100,A100", "--json"],
                         capture_output=True, text=True, cwd=path.parent)
    report = json.loads(out.stdout)
    return {k["name"] if k["kind"] == "cuda" else f"omp@{k['line']}": [e["verdict"] for e in k["estimates"]]
            for f in report["files"] for k in f["kernels"]}


def compiled_kernels(path: Path) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "perflsp", "check", str(path), "--gpu", "H100", "--json"],
                         capture_output=True, text=True, cwd=path.parent)
    return {k["name"] if k["kind"] == "cuda" else f"omp@{k['line']}" for f in json.loads(out.stdout)["files"]
            for k in f["kernels"] if any(r["kind"] == "compiled-counts" for r in k["facts"]["evidence_records"])}


def test_scores_agree_with_what_check_prints(setup, capsys):
    tmp_path, mirrors, cases = setup
    result = json.loads(run_main("--csv", str(cases), "--mirrors", str(mirrors), "--holdout-repo", "other/secret",
                                 "--json", capsys=capsys))
    kernels = {k["kernel"]: k for k in result["kernels"]}
    assert set(kernels) == {"scale", "spin", "omp@7", "absent"}
    expected = check_verdicts(tmp_path / "work" / "someone_kernels" / "src" / "stream.cu")
    expected.update(check_verdicts(tmp_path / "work" / "someone_kernels" / "omp" / "copy.cpp"))
    for name in ("scale", "spin", "omp@7"):
        assert list(kernels[name]["verdicts"].values()) == expected[name]
        assert list(kernels[name]["verdicts"]) == ["H100", "A100"]
        assert kernels[name]["agrees"] == all(v == kernels[name]["expected"] for v in expected[name])
    assert kernels["absent"]["agrees"] is False and "no kernel `absent`" in kernels["absent"]["reason"]
    dev = result["dev"]
    assert dev["kernels"] == 4 and dev["not_found"] == 1 and dev["found"] == 3
    agree = {name: kernels[name]["agrees"] for name in kernels}
    bandwidth_recall = (agree["scale"] + agree["omp@7"]) / 3  # the missing kernel counts against its class
    assert dev["balanced_agreement"] == pytest.approx((bandwidth_recall + agree["spin"]) / 2, abs=1e-4)
    assert dev["recall"]["compute"] == {"agree": int(agree["spin"]), "of": 1}
    assert set(dev["by_gpu"]) == {"H100", "A100"}
    assert result["by_repo"]["someone/kernels"] == dev
    assert "other/secret" not in result["by_repo"]
    # (the kernels whose operations the check counted from compiled code, as it says)
    compiled = compiled_kernels(tmp_path / "work" / "someone_kernels" / "src" / "stream.cu") | \
        compiled_kernels(tmp_path / "work" / "someone_kernels" / "omp" / "copy.cpp")
    assert dev["compiled"] == len(compiled & {"scale", "spin", "omp@7"})


def test_held_out_repository_is_aggregate_only(setup, capsys):
    _, mirrors, cases = setup
    text = run_main("--csv", str(cases), "--mirrors", str(mirrors), "--holdout-repo", "other/secret",
                    "--show-kernels", capsys=capsys)
    lines = text.splitlines()
    assert any(line.startswith("held out other/secret (aggregate only): 2 kernels") for line in lines)
    assert any("someone/kernels src/stream.cu:1 scale" in line for line in lines)
    assert not any("k.cu" in line for line in lines)  # no per-kernel line of the held-out repository
    result = json.loads(run_main("--csv", str(cases), "--mirrors", str(mirrors), "--holdout-repo", "other/secret",
                                 "--json", capsys=capsys))
    assert all(k["repo"] != "other/secret" for k in result["kernels"])
    held = result["holdout"]["other/secret"]
    assert held["kernels"] == 2 and held["expected"] == {"compute": 2, "bandwidth": 0}
    assert "secret" not in json.dumps(result["kernels"])
    assert result["all"]["kernels"] == 6 and result["dev"]["kernels"] == 4


def test_missing_blobs_and_large_files_are_left_out(tmp_path):
    mirrors = tmp_path / "mirrors"
    commit = make_repo(tmp_path / "work", mirrors, "a/b", {"k.cu": STREAM, "data/big.bin": "x" * 5000,
                                                            "doc/gone.txt": "lost blob\n"})
    git_dir = realworld.mirror_dir(mirrors, "a/b")
    sha = git("rev-parse", f"{commit}:doc/gone.txt", cwd=git_dir)
    # a clone may store its objects in a pack: turn them into loose objects, then drop the blob
    packs = list((git_dir / "objects" / "pack").glob("*.pack"))
    saved = [pack.read_bytes() for pack in packs]
    for pack in list((git_dir / "objects" / "pack").iterdir()):
        pack.unlink()
    for data in saved:
        subprocess.run(["git", "--git-dir", str(git_dir), "unpack-objects", "-q"], input=data, check=True,
                       capture_output=True, cwd=tmp_path)
    (git_dir / "objects" / sha[:2] / sha[2:]).unlink()
    into = tmp_path / "tree"
    written, left_out = realworld.materialise(git_dir, commit, into, max_bytes=4096)
    assert (into / "k.cu").read_text() == STREAM
    assert not (into / "doc" / "gone.txt").exists() and not (into / "data" / "big.bin").exists()
    assert (written, left_out) == (1, 2)


def test_missing_mirror_counts_as_not_found(tmp_path, capsys):
    cases = write_cases(tmp_path / "cases.csv", [{"repo": "no/where", "commit": "0" * 40, "path": "k.cu", "line": "1",
                                                  "kernel": "k", "expected": "bandwidth", "why": ""}])
    result = json.loads(run_main("--csv", str(cases), "--mirrors", str(tmp_path), "--json", capsys=capsys))
    assert result["dev"]["not_found"] == 1 and result["dev"]["balanced_agreement"] == 0.0
    assert "no git mirror of no/where" in result["kernels"][0]["reason"]


def test_kernel_matching_and_degenerate_facts():
    case = realworld.Case("r", "c", "p", 30, "k", "bandwidth")
    report = {"files": [{"kernels": [
        {"name": "ns::k", "kind": "cuda", "line": 10}, {"name": "k", "kind": "cuda", "line": 28},
        {"name": "main", "kind": "omp", "line": 30}]}]}
    assert realworld.find_kernel(report, case)["line"] == 28  # the nearest definition of that name
    omp = realworld.Case("r", "c", "p", 30, "omp@30", "bandwidth")
    assert realworld.find_kernel(report, omp)["kind"] == "omp"
    assert realworld.find_kernel(report, realworld.Case("r", "c", "p", 30, "omp@31", "bandwidth")) is None
    assert realworld.is_degenerate({"total": {"global_load_bytes": 0, "global_store_bytes": 0}, "work_items": 100})
    assert realworld.is_degenerate({"total": {"global_load_bytes": 8}, "work_items": 1})
    assert not realworld.is_degenerate({"total": {"global_load_bytes": 8}, "work_items": 4096})
    assert realworld.is_degenerate({"degenerate": True, "total": {"global_load_bytes": 8}, "work_items": 4096})
    assert realworld.is_degenerate({"uncertain": "no global-memory access found", "total": {}, "work_items": 4096})


def test_bad_csv_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("repo,commit\nx,y\n")
    assert realworld.main(["--csv", str(bad), "--mirrors", str(tmp_path)]) == 2
    assert "missing column(s)" in capsys.readouterr().err
