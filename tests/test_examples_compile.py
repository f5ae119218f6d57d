"""The example programs compile, ptxas sees exactly the kernels listed in examples/expected.toml,
the OpenMP examples build and pass their own checks on the host, and expected.toml still points
at the right lines of the sources (so the static engine is never tested against stale numbers).

Compiler tests skip when nvcc or g++ is missing; the consistency tests need nothing but Python.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CUDA_FILES = sorted(EXAMPLES.glob("cuda/*.cu")) + sorted(EXAMPLES.glob("lints/*.cu"))
OMP_FILES = sorted(EXAMPLES.glob("openmp/*.cpp"))
CUDA_ARCH = "sm_86"
COMPILE_TIMEOUT_S = 300
WORKERS = max(1, min(4, os.cpu_count() or 1))

ENTRY_RE = re.compile(r"Compiling entry function '(\w+)'")
GLOBAL_RE = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
MANGLED_TYPES = {"float": "f", "double": "d", "int": "i", "unsigned": "j"}


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def ids(paths: list[Path]) -> list[str]:
    return [rel(p) for p in paths]


@pytest.fixture(scope="module")
def expected() -> dict:
    with (EXAMPLES / "expected.toml").open("rb") as fh:
        return tomllib.load(fh)


def source_line(file: str, line: int) -> str:
    lines = (ROOT / file).read_text().splitlines()
    assert 1 <= line <= len(lines), f"{file}:{line} is past the end of the file"
    return lines[line - 1]


# --- compilers ------------------------------------------------------------------------------


def _nvcc(src: Path, out_dir: Path) -> subprocess.CompletedProcess[str]:
    cmd = ["nvcc", f"-arch={CUDA_ARCH}", "-Xptxas", "-v", "-c", str(src), "-o", str(out_dir / f"{src.stem}.o")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=src.parent)


@pytest.fixture(scope="module")
def nvcc_results(tmp_path_factory) -> dict[Path, subprocess.CompletedProcess[str]]:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    out_dir = tmp_path_factory.mktemp("nvcc")
    with ThreadPoolExecutor(WORKERS) as pool:
        results = pool.map(lambda src: _nvcc(src, out_dir), CUDA_FILES)
        return dict(zip(CUDA_FILES, results))


def _gxx_build_and_run(src: Path, out_dir: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str] | None]:
    exe = out_dir / src.stem
    cmd = ["g++", "-O2", "-fopenmp", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    if build.returncode != 0:
        return build, None
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return build, subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def omp_results(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not on PATH")
    out_dir = tmp_path_factory.mktemp("omp")
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(OMP_FILES, pool.map(lambda src: _gxx_build_and_run(src, out_dir), OMP_FILES)))


@pytest.mark.parametrize("src", CUDA_FILES, ids=ids(CUDA_FILES))
def test_cuda_example_compiles(nvcc_results, src):
    result = nvcc_results[src]
    assert result.returncode == 0, f"nvcc failed on {rel(src)}:\n{result.stderr}"


def _mangled_fragment(kernel: dict) -> str:
    fragment = "".join(f"{len(part)}{part}" for part in kernel["qualified_name"].split("::"))
    args = kernel.get("template_args")
    if args:
        encoded = [f"Li{a}E" if a.isdigit() else MANGLED_TYPES[a] for a in args]
        fragment += "I" + "".join(encoded) + "E"
    return fragment


def test_ptxas_lists_exactly_the_expected_kernels(nvcc_results, expected):
    for src, result in nvcc_results.items():
        if result.returncode != 0:
            continue  # reported by test_cuda_example_compiles
        entries = ENTRY_RE.findall(result.stderr)
        kernels = [k for k in expected["kernel"] if k["file"] == rel(src)]
        assert len(entries) == len(kernels), f"{rel(src)}: ptxas compiled {entries}, expected.toml lists {len(kernels)}"
        for kernel in kernels:
            fragment = _mangled_fragment(kernel)
            assert any(fragment in e for e in entries), f"{rel(src)}: no entry for {fragment} in {entries}"


@pytest.mark.parametrize("src", OMP_FILES, ids=ids(OMP_FILES))
def test_openmp_example_builds_and_passes_on_host(omp_results, src):
    build, run = omp_results[src]
    assert build.returncode == 0, f"g++ failed on {rel(src)}:\n{build.stderr}"
    assert run is not None and run.returncode == 0, f"{rel(src)} failed its own check:\n{run.stdout}{run.stderr}"


# --- expected.toml stays in step with the sources -------------------------------------------


def test_every_kernel_in_the_sources_is_listed(expected):
    listed = {(k["file"], k["name"]) for k in expected["kernel"]}
    found = set()
    for src in CUDA_FILES:
        for name in GLOBAL_RE.findall(src.read_text()):
            found.add((rel(src), name))
    assert found == listed


def test_kernel_lines_name_the_kernel(expected):
    for k in expected["kernel"]:
        text = source_line(k["file"], k["line"])
        assert re.search(rf"\b{re.escape(k['name'])}\(", text), f"{k['file']}:{k['line']} does not name {k['name']}: {text!r}"


def test_launch_lines_launch_the_kernel(expected):
    for k in expected["kernel"]:
        assert k["launch"], f"{k['name']} has no launch site"
        callee = k["qualified_name"]
        if k.get("template_args"):
            callee += "<" + ", ".join(k["template_args"]) + ">"
        for launch in k["launch"]:
            text = source_line(k["file"], launch["line"])
            assert f"{callee}<<<" in text, f"{k['file']}:{launch['line']} does not launch {callee}: {text!r}"
            if launch.get("known", True) and k.get("group") != "lint":
                threads, blocks = math.prod(launch["block"]), math.prod(launch["grid"])
                assert threads % 32 == 0 and threads >= 128, f"clean kernel {k['name']} uses {threads} threads"
                assert blocks >= 256, f"clean kernel {k['name']} launches only {blocks} blocks"


def test_loop_lines_are_loops(expected):
    for k in expected["kernel"]:
        for loop in k.get("loop", []):
            assert "for (" in source_line(k["file"], loop["line"]), f"{k['file']}:{loop['line']}"


def test_totals_are_per_thread_times_active_threads(expected):
    for k in expected["kernel"]:
        first = k["launch"][0]
        assert k["launched_threads"] == math.prod(first["grid"]) * math.prod(first["block"])
        assert k["active_threads"] <= k["launched_threads"]
        for precision in ("fp32", "fp64"):
            per_thread = k[f"{precision}_flop_per_thread"]
            assert k[f"{precision}_flop_total"] == pytest.approx(per_thread * k["active_threads"])


def test_omp_regions_and_directives_are_all_accounted_for(expected):
    listed = {(r["file"], r["line"]) for r in expected["omp_region"]}
    not_kernels = {(d["file"], d["line"]) for d in expected["omp_not_a_kernel"]}
    found = set()
    for src in OMP_FILES:
        for number, text in enumerate(src.read_text().splitlines(), start=1):
            if re.match(r"\s*#pragma omp target\b", text):
                found.add((rel(src), number))
    assert found == listed | not_kernels
    assert not listed & not_kernels
    for r in expected["omp_region"]:
        text = source_line(r["file"], r["line"])
        assert "target teams distribute parallel for" in text
        assert r["name"] == f"{r['function']}@l{r['line']}"
        if r.get("collapse", 1) > 1:
            assert f"collapse({r['collapse']})" in text or f"collapse({r['collapse']})" in source_line(r["file"], r["line"] + 1)


def test_lint_entries_point_at_their_code(expected):
    for lint in expected["lint"]:
        assert lint["snippet"] in source_line(lint["file"], lint["line"]), f"{lint['file']}:{lint['line']}"


def test_every_marked_lint_line_is_listed(expected):
    required = {(l["file"], l["line"]) for l in expected["lint"] if not l["optional"]}
    for src in sorted(EXAMPLES.glob("lints/*.cu")):
        for number, text in enumerate(src.read_text().splitlines(), start=1):
            if "// LINT:" in text:
                assert (rel(src), number) in required, f"{rel(src)}:{number} is marked LINT but not listed"
    for file, line in required:
        assert "// LINT:" in source_line(file, line), f"{file}:{line} is listed but not marked `// LINT:`"


def test_clean_list_covers_every_non_lint_example(expected):
    clean = {rel(p) for p in EXAMPLES.glob("cuda/*.cu")} | {rel(p) for p in OMP_FILES}
    assert set(expected["clean"]["files"]) == clean


def test_expected_md_cites_every_kernel_and_region(expected):
    text = (EXAMPLES / "EXPECTED.md").read_text()
    for item in expected["kernel"] + expected["omp_region"]:
        if item.get("group") == "lint":
            assert f"(l.{item['line']})" in text, f"EXPECTED.md lacks {item['name']} (l.{item['line']})"
        else:
            cite = f"{Path(item['file']).name}:{item['line']}"
            assert cite in text, f"EXPECTED.md does not cite {cite}"
