"""Bounded cost on any input (issue 13): the per-file ceilings of `check`, fixes built only for
output that shows them, and the indexes that replaced per-kernel scans."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import perflsp.analysis.report as report
from perflsp.analysis.report import CheckSettings, check_document
from perflsp.cli import cli
from perflsp.hardware import load_database
from perflsp.kernels.extract import extract
from perflsp.kernels.models import FileKernels
from perflsp.kernels.program import ProgramModel
from perflsp.server.text import Change, TextState
from perflsp.source.parser import parse
from perflsp.source.positions import Position

H100 = load_database().get("h100")


def kernel(i: int) -> str:
    # `2.5` promotes the float product to double: one precision finding per kernel
    return f"__global__ void k{i}(float* x, int n) {{ int t = threadIdx.x; if (t < n) x[t] = x[t] * 2.5; }}\n"


def program(kernels: int, launched: int) -> str:
    launches = "".join(f"    k{i}<<<n / 128, 128>>>(x, n);\n" for i in range(launched))
    return ("".join(kernel(i) for i in range(kernels))
            + f"void run(float* x, int n) {{\n{launches}}}\n"
            + "int main() { float* x; cudaMalloc(&x, 4096 * sizeof(float)); run(x, 4096); return 0; }\n")


def check_text(text: str, settings: CheckSettings | None = None):
    data = text.encode()
    tree = parse(data)
    return check_document(data, tree, extract(data, tree, path="gen.cu"), [H100], settings or CheckSettings())


def test_a_file_above_the_kernel_ceiling_is_analysed_up_to_it_with_one_note():
    below = check_text(program(5, 5), CheckSettings(max_kernels=5))
    assert len(below.kernels) == 5 and not any("ceiling" in n for n in below.notes)

    above = check_text(program(5, 5), CheckSettings(max_kernels=2))
    assert [r.kernel.name for r in above.kernels] == ["k0", "k1"]
    notes = [n for n in above.notes if "ceiling" in n]
    assert notes == ["2 of 5 kernels and OpenMP regions analysed: the per-file ceiling is 2 "
                     "(the first ones in the file; see 'Large files' in docs/cli.md)"]
    # lints stop at the ceiling too: no finding in k2..k4
    k2_start = program(5, 5).encode().index(b"__global__ void k2")
    assert above.lints and all(f.span.start_byte < k2_start for f in above.lints)


def test_check_text_builds_no_fix_and_json_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls: list[int] = []
    real = report.with_fixes

    def counting(findings, *args):
        calls.append(len(list(findings)))
        return real(findings, *args)

    monkeypatch.setattr(report, "with_fixes", counting)
    source = tmp_path / "gen.cu"
    source.write_text(program(3, 3))
    runner = CliRunner()
    text = runner.invoke(cli, ["check", "--gpu", "h100", "--fail-on", "none", "--no-progress", str(source)])
    assert text.exit_code == 0, text.output
    assert "missing-launch-bounds" in text.output and calls == []
    as_json = runner.invoke(cli, ["check", "--json", "--gpu", "h100", "--fail-on", "none", "--no-progress",
                                   str(source)])
    assert as_json.exit_code == 0, as_json.output
    assert len(calls) == 1 and '"edits"' in as_json.output


def test_fixes_are_built_up_to_the_reparse_ceiling(monkeypatch: pytest.MonkeyPatch):
    text = program(6, 6)
    monkeypatch.setattr(report, "MAX_FIX_REPARSE_BYTES", 2 * len(text.encode()))
    checked = check_text(text)
    offering = [f for f in checked.lints if f.fixes or f.fix_requests]
    assert len(offering) > 2
    assert [bool(f.fixes) for f in offering] == [True, True] + [False] * (len(offering) - 2)
    assert sum("re-parsed text" in n for n in checked.notes) == 1
    # below the ceiling, every fix is built
    assert all(f.fixes and not f.fix_requests for f in check_text(program(2, 2)).lints if f.fixes or f.fix_requests)


def test_launches_of_follows_appended_and_replaced_launch_lists():
    data = program(3, 2).encode()
    fk = extract(data, parse(data))
    k0, k2 = fk.kernels[0], fk.kernels[2]
    assert [s.kernel for s in fk.launches_of(k0)] == ["k0"] and fk.launches_of(k2) == []
    fk.launches.append(fk.launches[0])  # grows in place
    assert len(fk.launches_of(k0)) == 2
    fk.launches = [s for s in fk.launches if s.kernel != "k0"]  # replaced
    assert fk.launches_of(k0) == [] and len(fk.launches_of(fk.kernels[1])) == 1
    assert fk == FileKernels(fk.path, fk.kernels, fk.device_functions, fk.omp_regions, fk.launches, fk.has_errors,
                             fk.notes)  # the index is not part of the value


def test_launches_of_stays_right_after_incremental_edits():
    text = program(3, 1)
    state = TextState(text, 0, None)
    lines = text.split("\n")
    run_line = next(i for i, line in enumerate(lines) if line.startswith("void run"))
    edits = ["    k1<<<n / 128, 128>>>(x, n);\n", "    k2<<<n / 64, 64>>>(x, n);\n", "    k1<<<1, 32>>>(x, n);\n"]
    for version, added in enumerate(edits, 1):
        state.apply([Change(added, Position(run_line + 1, 0), Position(run_line + 1, 0))], version)
        fk = state.extracted.kernels
        for k in fk.kernels:
            assert fk.launches_of(k) == [s for s in fk.launches if s.kernel == k.qualified_name], (version, k.name)
    fk = state.extracted.kernels
    assert [len(fk.launches_of(k)) for k in fk.kernels] == [1, 2, 1]
    # and an edit inside a kernel body keeps the sites' index in step
    body_line = next(i for i, line in enumerate(state.data.decode().split("\n")) if "void k0" in line)
    state.apply([Change("\n", Position(body_line, 0), Position(body_line, 0))], len(edits) + 1)
    fk = state.extracted.kernels
    assert [[s.line for s in fk.launches_of(k)] for k in fk.kernels] == [
        [s.line for s in fk.launches if s.kernel == k.qualified_name] for k in fk.kernels]


def test_calls_to_answers_from_one_index_of_call_sites():
    data = (b"template <int B> int f(int x) { return x + B; }\n"
            b"int g(int i, int n) { if (i < n) return f<4>(i) + f(i); return g(i + 1, n); }\n"
            b"int h(int v) { return g (v, 3) + f < 2 > (v) + ff(v) + af(v); }\n")
    tree = parse(data)
    model = ProgramModel(data, tree, extract(data, tree))
    assert [data[c.start_byte:c.end_byte] for c in model.calls_to("f")] == [b"f<4>(i)", b"f(i)", b"f < 2 > (v)"]
    assert len(model.calls_to("g")) == 2
    assert model.calls_to("missing") == []
