"""Score `perflsp check` on real-world kernels exactly as a user runs it.

The CSV (e.g. ../shared/eval/realworld-dev.csv) has the columns `repo, commit, path, line, kernel,
expected, why`: a kernel of a public repository at a fixed commit and the verdict a performance
engineer expects (`compute` or `bandwidth`) at production sizes. For every (repo, commit) the source
tree is materialised into a temporary folder from a bare git mirror (`--mirrors DIR` holding
`OWNER+NAME/repo`, as `fetch` leaves them; blobs missing from the mirror and files over 4 MiB are
left out), then each listed file is checked in a fresh process, from the tree's root:

    perflsp check PATH --gpu H100,A100 --json

Kernels are matched by name (CUDA; the nearest definition to `line` when the name repeats) or as
`omp@LINE` (the OpenMP region whose pragma is at LINE). A kernel *agrees* when its verdict on every
GPU is the expected one; balanced agreement is the mean over the two classes of the share that
agrees (per GPU too). Uncertain verdicts and kernels not found count as disagreeing. A verdict rests
on a *degenerate* analysis when the engine says so (`facts.degenerate`), or else when it found no
global memory access or a single work item; the count reported is of verdicts (not `uncertain`)
that rest on one.

`--holdout-repo OWNER/NAME` (repeatable) sets repositories aside: their kernels are scored
separately and only in aggregate (no per-kernel line, no per-kernel JSON).

    python benchmarks/realworld.py --csv ../shared/eval/realworld-dev.csv --mirrors /work/.mirror \\
        --holdout-repo UoB-HPC/BabelStream [--no-compile] [--json] [--show-kernels]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

CLASSES = ("compute", "bandwidth")
DEFAULT_GPUS = ("H100", "A100")
MAX_BLOB_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Case:
    repo: str
    commit: str
    path: str
    line: int
    kernel: str
    expected: str


@dataclass(slots=True)
class Outcome:
    case: Case
    verdicts: dict[str, str | None]  # GPU as given on the command line -> verdict (None: not found)
    found: bool
    degenerate: bool = False
    reason: str | None = None  # why not found, or the check's failure
    compiled: bool = False  # its operations counted in the compiled code (else the source engine's)
    confidence: dict[str, float | None] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.found and all(v == self.case.expected for v in self.verdicts.values())

    @property
    def uncertain(self) -> bool:
        return any(v == "uncertain" for v in self.verdicts.values())


def read_cases(path: Path) -> list[Case]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"repo", "commit", "path", "line", "kernel", "expected"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        cases = []
        for number, raw in enumerate(reader, start=2):
            expected = raw["expected"].strip().lower()
            if expected not in CLASSES:
                raise ValueError(f"{path}:{number}: expected must be compute or bandwidth (got {raw['expected']!r})")
            cases.append(Case(raw["repo"].strip(), raw["commit"].strip(), raw["path"].strip(), int(raw["line"]),
                              raw["kernel"].strip(), expected))
        return cases


# ---------------------------------------------------------------------------------------------
# Source trees from bare mirrors


def mirror_dir(mirrors: Path, repo: str) -> Path:
    """The git directory of `repo` under `mirrors`: OWNER+NAME/repo (fetch's layout), else
    OWNER+NAME or OWNER/NAME itself."""
    base = repo.replace("/", "+")
    for candidate in (mirrors / base / "repo", mirrors / base, mirrors / repo, mirrors / repo / ".git"):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise FileNotFoundError(f"no git mirror of {repo} under {mirrors} (expected {mirrors / base / 'repo'})")


def materialise(git_dir: Path, commit: str, into: Path, max_bytes: int = MAX_BLOB_BYTES) -> tuple[int, int]:
    """Write the tree of `commit` under `into`; returns (files written, files left out). Blobs
    absent from the mirror (a partial or shallow fetch) and blobs over `max_bytes` are left out."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1"}
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-l", "-z", commit],
                             capture_output=True, check=True, env=env).stdout
    wanted: list[tuple[str, str]] = []
    skipped = 0
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha, size = meta.split()
        if kind != b"blob" or mode == b"120000":  # submodules and symbolic links
            skipped += 1
            continue
        if not size.isdigit() or int(size) > max_bytes:  # `BAD`: the blob is not in the mirror
            skipped += 1
            continue
        wanted.append((sha.decode(), path.decode("utf-8", "surrogateescape")))
    if not wanted:
        return 0, skipped
    request = "".join(f"{sha}\n" for sha, _ in wanted).encode()
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch"], input=request,
                          capture_output=True, env=env)
    out = proc.stdout
    position = written = 0
    root = into.resolve()
    for _sha, path in wanted:
        header_end = out.find(b"\n", position)
        if header_end < 0:
            skipped += 1
            continue
        header = out[position:header_end].split()
        position = header_end + 1
        if len(header) < 3 or header[1] == b"missing":
            skipped += 1
            continue
        length = int(header[2])
        data = out[position:position + length]
        position += length + 1  # the content is followed by a newline
        target = (into / path).resolve()
        if root not in target.parents:
            skipped += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    return written, skipped


# ---------------------------------------------------------------------------------------------
# Running check and reading its JSON


def run_check(perflsp: list[str], tree: Path, path: str, gpus: tuple[str, ...], timeout_s: float,
              extra: tuple[str, ...] = ()) -> dict | str:
    """`perflsp check PATH --gpu ... --json [EXTRA]` from the tree's root; the JSON, or why there is none."""
    command = [*perflsp, "check", path, "--gpu", ",".join(gpus), "--json", *extra]
    try:
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"`perflsp check` timed out after {timeout_s:.0f} s"
    if proc.returncode not in (0, 1, 3):
        return f"`perflsp check` exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''}"
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return f"`perflsp check` printed no JSON (exit {proc.returncode})"


def is_degenerate(facts: dict) -> bool:
    """The engine's flag when it reports one; else the engine's `uncertain` reason, no global memory
    access, or one work item (the rule of `perflsp.evaluation.run.is_degenerate`)."""
    flag = facts.get("degenerate")
    if isinstance(flag, bool):
        return flag
    if facts.get("uncertain"):
        return True
    total = facts.get("total") or {}
    accessed = sum((total.get(k) or 0) for k in ("global_load_bytes", "global_store_bytes", "atomics"))
    work_items = facts.get("work_items")
    return accessed <= 0 or (work_items is not None and work_items <= 1)


def _simple_name(name: str) -> str:
    return name.split("<", 1)[0].split("(", 1)[0].split("::")[-1].strip()


def find_kernel(report: dict, case: Case) -> dict | None:
    kernels = [k for f in report.get("files", []) for k in f.get("kernels", [])]
    if case.kernel.startswith("omp@"):
        try:
            line = int(case.kernel[4:])
        except ValueError:
            return None
        return next((k for k in kernels if k.get("kind") == "omp" and k.get("line") == line), None)
    named = [k for k in kernels if k.get("kind") == "cuda" and _simple_name(k.get("name", "")) == case.kernel]
    if not named:
        return None
    return min(named, key=lambda k: abs((k.get("line") or 0) - case.line))


def outcome_of(case: Case, report: dict | str, gpus: tuple[str, ...]) -> Outcome:
    empty = {g: None for g in gpus}
    if isinstance(report, str):
        return Outcome(case, empty, False, reason=report)
    kernel = find_kernel(report, case)
    if kernel is None:
        skipped = [s.get("reason") for s in report.get("skipped", [])]
        why = f"skipped: {skipped[0]}" if skipped else f"no kernel `{case.kernel}` in the check's report"
        return Outcome(case, empty, False, reason=why)
    ids = [g.get("id") for g in report.get("gpus", [])]
    by_id = {e.get("gpu"): e for e in kernel.get("estimates", [])}
    verdicts: dict[str, str | None] = {}
    confidence: dict[str, float | None] = {}
    for given, gpu_id in zip(gpus, ids):
        estimate = by_id.get(gpu_id) or {}
        verdicts[given] = estimate.get("verdict")
        confidence[given] = estimate.get("confidence")
    facts = kernel.get("facts") or {}
    compiled = any(r.get("kind") == "compiled-counts" for r in facts.get("evidence_records") or [])
    return Outcome(case, verdicts, True, degenerate=is_degenerate(facts), confidence=confidence, compiled=compiled)


# ---------------------------------------------------------------------------------------------
# Scoring


def balanced(outcomes: list[Outcome], agrees) -> float | None:
    recalls = []
    for cls in CLASSES:
        members = [o for o in outcomes if o.case.expected == cls]
        if members:
            recalls.append(sum(agrees(o) for o in members) / len(members))
    return sum(recalls) / len(recalls) if recalls else None


def summary(outcomes: list[Outcome], gpus: tuple[str, ...]) -> dict:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return {
        "kernels": len(outcomes),
        "expected": {cls: sum(o.case.expected == cls for o in outcomes) for cls in CLASSES},
        "found": sum(o.found for o in outcomes),
        "agree": sum(o.agrees for o in outcomes),
        "balanced_agreement": r(balanced(outcomes, lambda o: o.agrees)),
        "by_gpu": {g: {"agree": sum(o.verdicts.get(g) == o.case.expected for o in outcomes),
                       "balanced_agreement": r(balanced(outcomes, lambda o, g=g: o.verdicts.get(g) == o.case.expected))}
                   for g in gpus},
        "recall": {cls: {"agree": sum(o.agrees for o in outcomes if o.case.expected == cls),
                         "of": sum(o.case.expected == cls for o in outcomes)} for cls in CLASSES},
        "uncertain": sum(o.uncertain for o in outcomes),
        "degenerate_verdicts": sum(o.found and o.degenerate and not o.uncertain for o in outcomes),
        "not_found": sum(not o.found for o in outcomes),
        "compiled": sum(o.compiled for o in outcomes),
    }


def score_cases(cases: list[Case], mirrors: Path, gpus: tuple[str, ...], perflsp: list[str], timeout_s: float,
                log=None, extra: tuple[str, ...] = ()) -> list[Outcome]:
    by_tree: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in cases:
        by_tree[(case.repo, case.commit)].append(case)
    outcomes: dict[Case, Outcome] = {}
    for (repo, commit), members in by_tree.items():
        try:
            git_dir = mirror_dir(mirrors, repo)
        except FileNotFoundError as exc:
            for case in members:
                outcomes[case] = Outcome(case, {g: None for g in gpus}, False, reason=str(exc))
            continue
        with tempfile.TemporaryDirectory(prefix="perflsp-realworld-") as folder:
            tree = Path(folder)
            started = time.perf_counter()
            try:
                written, left_out = materialise(git_dir, commit, tree)
            except subprocess.CalledProcessError as exc:
                reason = f"cannot read {commit[:12]} from the mirror of {repo}: {exc.stderr.decode(errors='replace').strip()}"
                for case in members:
                    outcomes[case] = Outcome(case, {g: None for g in gpus}, False, reason=reason)
                continue
            if log:
                log(f"{repo}@{commit[:12]}: {written} files ({left_out} left out) in {time.perf_counter() - started:.1f} s")
            reports: dict[str, dict | str] = {}
            for case in members:
                if case.path not in reports:
                    reports[case.path] = run_check(perflsp, tree, case.path, gpus, timeout_s, extra)
                outcomes[case] = outcome_of(case, reports[case.path], gpus)
    return [outcomes[case] for case in cases]


def report(outcomes: list[Outcome], gpus: tuple[str, ...], holdout: set[str]) -> dict:
    dev = [o for o in outcomes if o.case.repo not in holdout]
    held = [o for o in outcomes if o.case.repo in holdout]
    repos = sorted({o.case.repo for o in dev})
    out = {
        "gpus": list(gpus),
        "all": summary(outcomes, gpus),
        "dev": summary(dev, gpus),
        "by_repo": {repo: summary([o for o in dev if o.case.repo == repo], gpus) for repo in repos},
        "holdout": {repo: summary([o for o in held if o.case.repo == repo], gpus) for repo in sorted(holdout)},
        # per-kernel rows of the development repositories only: never the held-out ones'
        "kernels": [{"repo": o.case.repo, "path": o.case.path, "line": o.case.line, "kernel": o.case.kernel,
                     "expected": o.case.expected, "verdicts": o.verdicts, "confidence": o.confidence,
                     "agrees": o.agrees, "degenerate": o.degenerate, "reason": o.reason} for o in dev],
    }
    return out


def _line(name: str, s: dict, gpus: tuple[str, ...]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    per_gpu = ", ".join(f"{g} {f(s['by_gpu'][g]['balanced_agreement'])}" for g in gpus)
    recall = ", ".join(f"{cls} {s['recall'][cls]['agree']}/{s['recall'][cls]['of']}" for cls in CLASSES)
    return (f"{name}: {s['kernels']} kernels, balanced agreement {f(s['balanced_agreement'])} ({per_gpu}); "
            f"agree {s['agree']} ({recall}); uncertain {s['uncertain']}; degenerate verdicts "
            f"{s['degenerate_verdicts']}; not found {s['not_found']}; counted from compiled code {s['compiled']}")


def print_text(result: dict, gpus: tuple[str, ...], show_kernels: bool) -> None:
    if result["holdout"]:
        print(_line("all repositories", result["all"], gpus))
    print(_line("development repositories", result["dev"], gpus))
    for repo, s in result["by_repo"].items():
        print("  " + _line(repo, s, gpus))
    for repo, s in result["holdout"].items():
        print(_line(f"held out {repo} (aggregate only)", s, gpus))
    if show_kernels:
        for k in result["kernels"]:
            verdicts = ", ".join(f"{g} {k['verdicts'][g] or '-'}" for g in gpus)
            mark = "ok " if k["agrees"] else "MISS"
            extra = (" [degenerate]" if k["degenerate"] else "") + (f" ({k['reason']})" if k["reason"] else "")
            print(f"{mark} {k['repo']} {k['path']}:{k['line']} {k['kernel']} expected {k['expected']}: {verdicts}{extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, required=True, help="repo,commit,path,line,kernel,expected,why")
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of OWNER+NAME/repo bare git mirrors")
    parser.add_argument("--gpu", default=",".join(DEFAULT_GPUS), help="GPUs, comma-separated (default H100,A100)")
    parser.add_argument("--holdout-repo", action="append", default=[], metavar="OWNER/NAME",
                        help="score this repository apart, aggregate only (repeatable)")
    parser.add_argument("--perflsp", default=f"{shlex.quote(sys.executable)} -m perflsp",
                        help="how to run perflsp (default: this Python's `-m perflsp`)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per `perflsp check` (default 300)")
    parser.add_argument("--no-compile", action="store_true",
                        help="check with `--no-compile` (the source engine alone, as without a toolchain)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--show-kernels", action="store_true",
                        help="list every kernel of the development repositories (never the held-out ones)")
    args = parser.parse_args(argv)
    gpus = tuple(g.strip() for g in args.gpu.split(",") if g.strip())
    try:
        cases = read_cases(args.csv)
    except (OSError, ValueError, KeyError) as exc:
        print(f"realworld: error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    outcomes = score_cases(cases, args.mirrors, gpus, shlex.split(args.perflsp), args.timeout,
                           log=lambda m: print(m, file=sys.stderr),
                           extra=("--no-compile",) if args.no_compile else ())
    result = report(outcomes, gpus, set(args.holdout_repo))
    result["elapsed_s"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_text(result, gpus, args.show_kernels)
        print(f"{len(cases)} kernels in {result['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
