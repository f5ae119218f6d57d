"""One reader: every entry point reads a file in the same context and gets the same program.

A small project with a compile database (`-DREPS=8`): a kernel defined in a header (`kern.cuh`,
launched from `main.cu`, which includes it), launches whose sizes fold from the program's
arguments, and an OpenMP file. `REPS` is defined by the build only, so a path that skipped the
compile database (or the includer) would read other trip counts and other launch sizes. Each
path — `check`, `explain`, `eval` in both modes, the LLM evaluation's question, `profile`, `kernels`,
`tune`'s loader, the server's documents and its workspace scan — must give the same model (kernels,
launch sites, folded values) and the same verdicts and evidence as `check`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_file
from perflsp.checking.run import check_file, check_settings, prepare_checked
from perflsp.evaluation.labels import KernelRow
from perflsp.evaluation.run import predict_rows, prediction_from
from perflsp.hardware.models import Gpu
from perflsp.kernels.compile_db import DiscoveredDatabases
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import ConstValue, FileKernels, LaunchSite, OmpRegion
from perflsp.kernels.program import ProgramModel
from perflsp.server.config import Layer, Origin, ResolvedConfig, resolve
from perflsp.server.features.commands.serialize import report_json
from perflsp.source.files import SkippedFile

HEADER = """\
#pragma once
#ifndef REPS
#define REPS 1
#endif
__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int r = 0; r < REPS; r++)
            v = v * 1.5f + 0.5f;
        x[i] = v;
    }
}
"""

MAIN = """\
#include <cstdlib>
#include "kern.cuh"

__global__ void copy(const float *a, float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i] * (float)REPS;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : (1 << 22);
    float *a, *b;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    copy<<<(n + 255) / 256, 256>>>(a, b, n);
    scale<<<(n + 127) / 128, 128>>>(b, n);
    cudaDeviceSynchronize();
    return 0;
}
"""

OMP = """\
#include <cstdlib>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    double *x = (double *)malloc(n * sizeof(double));
    #pragma omp target teams distribute parallel for map(tofrom: x[0:n])
    for (int i = 0; i < n; i++) {
        double v = x[i];
        for (int r = 0; r < REPS; r++)
            v = v * 1.5 + 0.5;
        x[i] = v;
    }
    free(x);
    return 0;
}
"""

FILES = ("main.cu", "kern.cuh", "omp.cpp")
ARGS = "4096"  # the program's arguments of the runs that give them (eval's launch-given rows)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-reader") / "proj"
    root.mkdir()
    (root / "kern.cuh").write_text(HEADER)
    (root / "main.cu").write_text(MAIN)
    (root / "omp.cpp").write_text(OMP)
    (root / "compile_commands.json").write_text(json.dumps([
        {"directory": str(root), "file": "main.cu", "arguments": ["nvcc", "-DREPS=8", "-I.", "-c", "main.cu"]},
        {"directory": str(root), "file": "omp.cpp",
         "arguments": ["clang++", "-fopenmp", "-DREPS=8", "-c", "omp.cpp"]},
    ]))
    return root


@pytest.fixture(scope="module")
def config() -> ResolvedConfig:
    return resolve([Layer(Origin.INIT_OPTIONS, "test", {"gpus": ["h100"]})])


@pytest.fixture(scope="module")
def gpu(config: ResolvedConfig) -> Gpu:
    return config.gpus[0]


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PERFLSP_CONFIG", str(tmp_path / "none.toml"))


# ------------------------------------------------------------------ what is compared


def value(v: ConstValue | None) -> Any:
    return None if v is None else (v.text, v.value)


def site_facts(site: LaunchSite) -> tuple[Any, ...]:
    return (site.kernel, value(site.grid), value(site.block), tuple(value(a) for a in site.args),
            tuple(site.arg_extents))


def kernel_facts(kernels: FileKernels) -> dict[str, Any]:
    """Kernels, regions, device functions and launch sites with their folded values."""
    return {
        "kernels": [(k.qualified_name, k.span.start_byte, k.span.end_byte) for k in kernels.kernels],
        "device": [(f.qualified_name, f.span.start_byte) for f in kernels.device_functions],
        "regions": [(r.name, r.line, tuple((c.name, c.text) for c in r.clauses)) for r in kernels.omp_regions],
        "launches": [(site_facts(s), s.span.start_byte) for s in kernels.launches],
    }


def model_facts(model: ProgramModel) -> dict[str, Any]:
    """What the analysis reads of the model: its kernels and launches, the build's macro, the
    constants folded at each launch (with the program's arguments), its headers."""
    facts = kernel_facts(model.kernels)
    facts["REPS"] = model.constant("REPS")
    facts["argv"] = model.env.program_arguments()
    facts["n at each launch"] = [model.fold_at(s.span.start_byte, "n") for s in model.kernels.launches]
    facts["headers"] = [h.name for h in model.headers]
    return facts


def report_facts(report: KernelReport) -> dict[str, Any]:
    """A report's model-derived figures, verdicts and evidence."""
    facts = report.facts
    return {
        "name": report.name,
        "launches": [site_facts(s) for s in report.launches],
        "work_items": facts.work_items,
        "dram_bytes": facts.dram_bytes,
        "ops": (facts.total.fp64, facts.total.fp32, facts.total.fp16, facts.total.int32),
        "uncertain": facts.uncertain,
        "assumptions": list(facts.assumptions),
        "estimates": [(e.gpu, e.verdict, e.confidence, dict(e.intensity), list(e.evidence)) for e in report.estimates],
    }


def checked(project: Path, name: str, gpu: Gpu, argv: tuple[str, ...] | None = None) -> list[KernelReport]:
    """`perflsp check FILE` (the compile database found beside the file, as check finds it)."""
    result = check_file(project / name, [gpu], check_settings(argv=argv), IncludeResolver(), DiscoveredDatabases())
    assert not isinstance(result, str), result
    return result.kernels


def check_model(project: Path, name: str, gpu: Gpu, argv: tuple[str, ...] | None = None) -> ProgramModel:
    path = project / name
    return prepare_checked(path, path.read_bytes(), [gpu], check_settings(argv=argv), IncludeResolver(),
                           DiscoveredDatabases()).model


# ------------------------------------------------------------------ the context reaches the reader


def test_the_build_flags_and_the_includer_reach_a_header_defined_kernel(project: Path, gpu: Gpu) -> None:
    """The baseline the other tests compare against reads what the build and the includer say."""
    model = check_model(project, "kern.cuh", gpu)
    assert model.constant("REPS") == (8.0, "int")  # from compile_commands.json, not the header's default
    alone = read_file(project / "kern.cuh", ReadContext(IncludeResolver()))
    assert not isinstance(alone, SkippedFile)
    assert alone.model.constant("REPS") == (1.0, "int")  # (without the database: the header's fallback)
    [scale] = checked(project, "kern.cuh", gpu)
    # launched from main.cu, whose `n` folds to its default when the arguments are not known
    assert scale.facts.work_items == 1 << 22
    with_args = checked(project, "kern.cuh", gpu, argv=(ARGS,))[0]
    assert with_args.facts.work_items == int(ARGS)
    assert with_args.facts.uncertain is None
    [region] = checked(project, "omp.cpp", gpu)
    assert isinstance(region.kernel, OmpRegion) and region.facts.uncertain is None


# ------------------------------------------------------------------ the command line's paths


def test_explain_reads_and_judges_as_check(project: Path, gpu: Gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    from perflsp.cli.explain_cmd import _select

    monkeypatch.chdir(project)
    for name in FILES:
        selected = _select(project / name, None, gpu, compile_device_code=False)
        assert kernel_facts(selected.kernels) == kernel_facts(check_model(project, name, gpu).kernels)
        assert [report_facts(r) for r in selected.reports] == [report_facts(r) for r in checked(project, name, gpu)]


def test_profile_kernels_and_tune_read_the_same_model(project: Path, gpu: Gpu) -> None:
    from perflsp.cli.profile_cmd import _extract
    from perflsp.tuning.session import load_file

    for name in FILES:
        expected = check_model(project, name, gpu)
        extracted = _extract(project / name)
        assert extracted is not None and kernel_facts(extracted) == kernel_facts(expected.kernels)
        tuned = load_file(project / name)
        assert tuned.model is not None and model_facts(tuned.model) == model_facts(expected)


def launch_entries(listing: Any) -> list[dict[str, Any]]:
    """The launch sites of `perflsp kernels --json`, wherever they are listed (alone, or under
    the kernel they launch)."""
    if isinstance(listing, list):
        return [site for item in listing for site in launch_entries(item)]
    if isinstance(listing, dict):
        own = [listing] if listing.get("entry") == "launch" else []
        return own + [site for key, item in listing.items() if key != "grid" for site in launch_entries(item)]
    return []


def test_the_kernels_command_lists_the_folded_launches_check_reads(project: Path, gpu: Gpu) -> None:
    from click.testing import CliRunner

    from perflsp.cli import cli
    from perflsp.kernels.serialize import launch_json

    path = project / "main.cu"
    result = CliRunner().invoke(cli, ["kernels", "--json", str(path)])
    assert result.exit_code == 0, result.output
    listed = sorted(launch_entries(json.loads(result.output)), key=lambda e: e["line"])
    expected = read_file(path, ReadContext.of(path, IncludeResolver(), DiscoveredDatabases()))
    assert not isinstance(expected, SkippedFile)
    assert listed == json.loads(json.dumps([launch_json(s, listed[0]["file"]) for s in expected.kernels.launches]))
    assert [e["name"] for e in listed] == ["copy", "scale"]


def rows(project: Path, exe_args: str) -> list[KernelRow]:
    return [
        KernelRow(project.name, "cuda", "copy", "", f"{project.name}/main.cu", 4, None, None, exe_args),
        KernelRow(project.name, "cuda", "scale", "", f"{project.name}/kern.cuh", 5, None, None, exe_args),
        KernelRow(project.name, "omp", "main", "", f"{project.name}/omp.cpp", 6, None, None, exe_args),
    ]


def _check_report(project: Path, row: KernelRow, gpu: Gpu, argv: tuple[str, ...] | None) -> KernelReport:
    for report in checked(project, Path(row.file).name, gpu, argv):
        if report.kernel.line == row.line:
            return report
    raise AssertionError(f"check has no kernel at {row.file}:{row.line}")


def test_eval_in_both_modes_scores_what_check_reports(project: Path, gpu: Gpu) -> None:
    """`--editor`: as `check` (arguments unknown); launch-given: as `check --args` with the row's
    arguments (the header's kernel read in its includer's context in both)."""
    editor_rows = rows(project, "")
    editor = predict_rows(editor_rows, project.parent, gpu, compile_db=DiscoveredDatabases(), mode="editor")
    for row, prediction in zip(editor_rows, editor):
        assert prediction == prediction_from(row, _check_report(project, row, gpu, None))
    given_rows = rows(project, ARGS)
    given = predict_rows(given_rows, project.parent, gpu, compile_db=DiscoveredDatabases(), mode="launch-given")
    for row, prediction in zip(given_rows, given):
        expected = prediction_from(row, _check_report(project, row, gpu, (ARGS,)))
        assert prediction == expected, row.file
    assert given[1].totals is not None and given[1].totals.work_items == int(ARGS)


def test_the_llm_evaluation_asks_about_what_check_reports(project: Path, gpu: Gpu) -> None:
    from perflsp.evaluation.llm_eval import RowAnalyzer
    from perflsp.llm.questions import question_for

    analyzer = RowAnalyzer(project.parent, gpu, compile_db=DiscoveredDatabases())
    for row in rows(project, ARGS):
        analysis = analyzer.analyze(row)
        assert analysis.report is not None, analysis.reason
        expected = _check_report(project, row, gpu, (ARGS,))
        assert report_facts(analysis.report) == report_facts(expected)
        question = analyzer.question(analysis)
        assert question is not None
        path = project.parent / row.file
        program = read_file(path, ReadContext.of(path, IncludeResolver(), DiscoveredDatabases()))
        assert not isinstance(program, SkippedFile)
        direct = question_for(expected, expected.estimates[0], gpu, program.data, program.kernels,
                              tree=program.tree, kernel_id=question.kernel_id)
        assert question.launch_sites[:len(direct.launch_sites)] == direct.launch_sites
        assert question.static == direct.static and question.definitions == direct.definitions


# ------------------------------------------------------------------ the server


def test_an_open_document_holds_the_model_a_fresh_read_gives(project: Path, gpu: Gpu, config: ResolvedConfig) -> None:
    """The server's own classes: the workspace's reading context, the incremental text state,
    the analyzer, the snapshot and the model it carries."""
    from perflsp.server.oneshot import analyse_text
    from perflsp.server.workspace import WorkspaceState

    workspace = WorkspaceState([(project.as_uri(), project)], {"gpus": ["h100"]})
    for name in FILES:
        path = project / name
        snap = analyse_text(path.read_text(), path.as_uri(), config, str(path), workspace.reading_for(path.as_uri()))
        assert snap.model is not None
        assert model_facts(snap.model) == model_facts(check_model(project, name, gpu))
        assert [report_facts(r) for r in snap.reports()] == [report_facts(r) for r in checked(project, name, gpu)]


def test_the_server_and_its_workspace_scan_show_what_check_reports(project: Path, gpu: Gpu) -> None:
    """The real server over stdio: `main.cu` open (its snapshot), the header and the OpenMP file
    read from disk by the workspace scan (`perflsp.rooflineData`)."""
    from tests.server.lsp_session import session

    async def scenario() -> dict[str, Any]:
        async with session(project, init_options={"gpus": ["h100"]}) as s:
            await s.open(project / "main.cu")
            return dict(await s.command("perflsp.rooflineData", {"scope": "workspace"}, timeout=120))

    scanned = asyncio.run(scenario())
    gpus = {gpu.name: gpu}
    for name in FILES:
        uri = (project / name).as_uri()
        shown = [k for k in scanned["kernels"] if k["uri"] == uri]
        expected = [report_json(uri, r, gpus) for r in checked(project, name, gpu)]
        assert json.loads(json.dumps(shown)) == json.loads(json.dumps(expected)), name


def test_the_language_standard_of_the_build_is_the_preprocessor_s(tmp_path: Path) -> None:
    """`-std=c++14` in the compile database: `#if __cplusplus >= 201703L` takes its other branch."""
    (tmp_path / "k.cu").write_text("#if __cplusplus >= 201703L\n#define WIDTH 4\n#else\n#define WIDTH 2\n#endif\n"
                                   "__global__ void k(float *x) { x[threadIdx.x * WIDTH] = 0.0f; }\n")
    (tmp_path / "compile_commands.json").write_text(json.dumps([
        {"directory": str(tmp_path), "file": "k.cu", "arguments": ["nvcc", "-std=c++14", "-c", "k.cu"]}]))
    path = tmp_path / "k.cu"
    built = read_file(path, ReadContext.of(path, IncludeResolver(), DiscoveredDatabases()))
    plain = read_file(path, ReadContext(IncludeResolver()))
    assert not isinstance(built, SkippedFile) and not isinstance(plain, SkippedFile)
    assert built.model.constant("WIDTH") == (2.0, "int")
    assert plain.model.constant("WIDTH") == (4.0, "int")  # (no database: the default standard, C++17)


def test_the_server_reads_its_documents_again_when_the_compile_database_changes(tmp_path: Path) -> None:
    """An open document's model follows its `compile_commands.json` (watched like the headers)."""
    from lsprotocol import types as lsp

    from tests.server.lsp_session import session

    root = tmp_path / "proj"
    root.mkdir()
    (root / "kern.cuh").write_text(HEADER)
    (root / "main.cu").write_text(MAIN)
    database = root / "compile_commands.json"

    def flags(reps: int) -> None:
        database.write_text(json.dumps([{"directory": str(root), "file": "main.cu",
                                         "arguments": ["nvcc", f"-DREPS={reps}", "-c", "main.cu"]}]))

    def fp32_of(data: dict[str, Any], name: str) -> float:
        return next(k["ops"]["fp32"] for k in data["kernels"] if k["name"] == name)

    async def scenario() -> tuple[float, float]:
        flags(8)
        async with session(root, init_options={"gpus": ["h100"]}) as s:
            uri = (root / "kern.cuh").as_uri()
            await s.open(root / "kern.cuh")
            before = fp32_of(await s.command("perflsp.rooflineData", {"uri": uri}), "scale")
            flags(2)
            waiter = s.expect_diagnostics(uri)
            s.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
                changes=[lsp.FileEvent(uri=database.as_uri(), type=lsp.FileChangeType.Changed)]))
            await asyncio.wait_for(waiter, 30)
            await s.settled(uri)
            after = fp32_of(await s.command("perflsp.rooflineData", {"uri": uri}), "scale")
            return before, after

    before, after = asyncio.run(scenario())
    assert before == 4 * after  # the loop runs REPS times: 8, then 2
