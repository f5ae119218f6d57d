"""Output of large results stays linear: `perflsp kernels` prints plain aligned columns above
TABLE_MAX_ROWS rows (a rich table below), `check --json` is compact above JSON_INDENT_MAX_BYTES."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner

from perflsp.cli import check_cmd
from perflsp.cli.kernels_cmd import TABLE_MAX_ROWS, kernels

KERNEL = "__global__ void k{n}(float *d) {{ d[threadIdx.x] = 1.0f; }}\n"


def _run(tmp_path, count: int, launched: int | None = None) -> str:
    text = "".join(KERNEL.format(n=n) for n in range(count))
    if launched is not None:
        text += f"void host(float *d) {{ k{launched}<<<4, 128>>>(d); }}\n"
    path = tmp_path / "many.cu"
    path.write_text(text)
    result = CliRunner().invoke(kernels, [str(path)])
    assert result.exit_code == 0, result.output
    return result.output


def test_many_rows_print_as_plain_columns(tmp_path):
    count = TABLE_MAX_ROWS + 5
    output = _run(tmp_path, count, launched=7)
    lines = output.splitlines()
    assert lines[0].split() == ["location", "kind", "name", "details"]
    rows = [line for line in lines[1:] if ".cu:" in line]
    assert len(rows) == count
    assert rows[0].split()[1:] == ["cuda", "k0", "no", "launch", "in", "file"]
    assert "launched l" in rows[7] and "<<<4, 128>>>" in rows[7]
    assert rows[1].index("cuda") == rows[-1].index("cuda")  # aligned
    assert lines[-1] == f"{count} kernels"
    assert "─" not in output and "│" not in output  # no table borders


def test_few_rows_print_as_a_table(tmp_path):
    output = _run(tmp_path, 3, launched=1)
    assert "│" in output or "┃" in output
    assert "k2" in output and "3 kernels" in output


def test_json_reports_are_indented_unless_large(monkeypatch):
    data = {"files": [{"kernel": f"k{n}", "verdict": "bandwidth"} for n in range(50)]}
    small = io.StringIO()
    check_cmd._write_json(small, data)
    assert small.getvalue().startswith('{\n  "files": [')
    monkeypatch.setattr(check_cmd, "JSON_INDENT_MAX_BYTES", 100)
    large = io.StringIO()
    check_cmd._write_json(large, data)
    assert large.getvalue().count("\n") == 1
    assert json.loads(large.getvalue()) == json.loads(small.getvalue()) == data


def test_check_text_without_colour_is_the_coloured_text_unstyled(tmp_path):
    from rich.console import Console
    from rich.text import Text

    from perflsp.hardware import load_database

    source = tmp_path / "two.cu"
    source.write_text("__global__ void twice(float *d, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) d[i] = d[i] * 2.0;\n}\n"
                      "int main() { float *d; cudaMalloc(&d, 1024 * sizeof(float)); twice<<<4, 256>>>(d, 1024); }\n")
    run = check_cmd.check_paths([source], [load_database().get(check_cmd.DEFAULT_GPU)], check_cmd.check_settings())
    plain, coloured = io.StringIO(), io.StringIO()
    check_cmd._print_text(Console(file=plain, highlight=False, soft_wrap=True), run)
    check_cmd._print_text(Console(file=coloured, highlight=False, soft_wrap=True, force_terminal=True,
                                  color_system="truecolor"), run)
    assert "\x1b[" in coloured.getvalue()
    assert len(plain.getvalue().splitlines()) >= 2  # a verdict and a finding at least
    assert plain.getvalue() == Text.from_ansi(coloured.getvalue()).plain
