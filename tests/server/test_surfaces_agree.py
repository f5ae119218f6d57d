"""One answer per kernel (issue 26): every surface quotes the same verdict, roof (precision),
intensity and ridge for a kernel on a GPU, static and measured side by side and labelled, and
nothing stale after an edit.

Through a real LSP client and server: the verdict diagnostics (Problems), the hover, the code
lens, the inlay hints and `perflsp.rooflineData`; through the CLI on the same text: `perflsp check`
(text, --json, --sarif) and `perflsp explain` (text and --json). The file has two kernels with a
stored Nsight Compute measurement on the RTX 3080 (imported from the synthetic ncu CSV fixture:
`ns::saxpy`, bandwidth-bound, whose INT32 roof is nearer than its FP32 one, and `dgemm_tile`,
compute-bound by FP64) and one kernel never measured (`poly`). Two GPUs are configured, so each
kernel has two answers, the H100 one without a measurement.

The server runs in an untrusted workspace (no compiler: operations counted from the source), so
the CLI runs with --no-compile: both count the same way (that `explain` and `check` compile alike
is tested in tests/test_explain_cli.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from tests.profiling_helpers import MIXED
from tests.server.lsp_session import ROOT, Session, server_env, session

pytestmark = pytest.mark.asyncio

RTX, H100 = "GeForce RTX 3080 (10GB)", "H100 SXM5 80GB"
GPUS = {"rtx3080": RTX, "h100": H100}
KERNELS = ("ns::saxpy", "dgemm_tile", "poly")
MEASURED = {"ns::saxpy": "bandwidth", "dgemm_tile": "compute"}  # on the RTX 3080 (the fixture's GPU)

SOURCE = """\
namespace ns {
template <typename T>
__global__ void saxpy(const T *x, T *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + y[i];
}
}  // namespace ns

__global__ void dgemm_tile(const double *a, const double *b, double *c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

__global__ void poly(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i], acc = 1.0f;
        for (int k = 0; k < 4; ++k) acc = acc * v + 0.5f;
        y[i] = acc;
    }
}

int main() {
    const int n = 1 << 20;
    float *x, *y;
    ns::saxpy<float><<<(n + 127) / 128, 128>>>(x, y, n);
    double *a, *b, *c;
    dgemm_tile<<<dim3(64, 64), dim3(16, 16)>>>(a, b, c, 1024);
    poly<<<(n + 255) / 256, 256>>>(x, y, n);
    return 0;
}
"""

# the edit: more FMAs per element in both a measured and an unmeasured kernel
EDITS = {
    "if (i < n) y[i] = 2.0f * x[i] + y[i];":
        "if (i < n) { T v = x[i]; for (int k = 0; k < 64; ++k) v = v * 1.5f + 2.0f; y[i] = v + y[i]; }",
    "for (int k = 0; k < 4; ++k)": "for (int k = 0; k < 512; ++k)",
}

# `FP32 intensity 0.17 < ridge 39.2 FLOP/B`: how every surface writes a roof
ROOF = re.compile(r"(FP64|FP32|FP16|INT32) intensity (\S+) (<|≥) ridge (\S+) (FLOP/B|op/B)")


@dataclass(frozen=True)
class Roof:
    """A quoted roof as displayed: precision, intensity, relation, ridge."""

    precision: str
    intensity: str
    relation: str
    ridge: str

    @classmethod
    def first_in(cls, text: str) -> Roof:
        match = ROOF.search(text)
        assert match is not None, f"no roof quoted in {text!r}"
        label, ai, relation, ridge, unit = match.groups()
        assert unit == ("op/B" if label == "INT32" else "FLOP/B"), text
        return cls(label.lower(), ai, relation, ridge)

    def matches(self, intensity: float, ridge: float) -> None:
        """The displayed figures are the numbers, to the displayed precision."""
        for shown, value in ((self.intensity, intensity), (self.ridge, ridge)):
            digits = len(shown.replace(".", "").lstrip("0")) or 1
            assert float(shown) == pytest.approx(value, rel=10 ** (1 - digits), abs=0.006), (shown, value)
        assert self.relation == ("≥" if intensity >= ridge else "<")


@dataclass(frozen=True)
class Answer:
    verdict: str
    roof: Roof


def position(text: str, needle: str) -> lsp.Position:
    index = text.index(needle)
    return lsp.Position(text[:index].count("\n"), index - (text.rfind("\n", 0, index) + 1))


def gpu_of(name: str) -> str:
    return next(gpu for gpu in GPUS.values() if gpu == name or name.startswith(gpu.split(" ")[0]))


# ---------------------------------------------------------------------------------------------
# each surface's answers: {(kernel, gpu): Answer} (static) and {(kernel, gpu): Answer} (measured)


def parse_message(message: str) -> tuple[Answer, Answer | None]:
    """A verdict diagnostic's text: the static answer, and the measured one when it leads
    (`measured bandwidth-bound (FP32 intensity …), predicted bandwidth-bound: FP32 intensity …`)."""
    head, sep, predicted = message.partition(", predicted ")
    if sep:
        found = re.search(r": measured (compute|bandwidth)-bound \(", head)
        verdict = re.match(r"(compute|bandwidth)-bound: ", predicted)
        assert found and verdict, message
        return Answer(verdict.group(1), Roof.first_in(predicted)), Answer(found.group(1), Roof.first_in(head))
    verdict = re.search(r"` is (compute|bandwidth)-bound on ", message)
    assert verdict, message
    # no current measurement: none quoted before the stale note (if any)
    assert ": measured " not in message
    return Answer(verdict.group(1), Roof.first_in(message)), None


def from_diagnostics(params: lsp.PublishDiagnosticsParams) -> tuple[dict, dict]:
    static, measured = {}, {}
    for d in params.diagnostics:
        if not str(d.code).startswith("roofline/"):
            continue
        key = (d.data["kernel"], d.data["gpu"])
        static[key], current = parse_message(d.message)
        assert d.data["static"] == static[key].verdict
        if current is not None:
            measured[key] = current
            assert d.data["source"] == "measured" and not d.data["measured"]["stale"]
        else:
            assert d.data["source"] == "static"
        assert d.code == f"roofline/{(current or static[key]).verdict}-bound"
    return static, measured


def from_hover(kernel: str, markdown: str) -> tuple[dict, dict]:
    static, measured = {}, {}
    for gpu in GPUS.values():
        row = re.search(rf"^\| {re.escape(gpu)} \| \*\*(compute|bandwidth)-bound\*\* \| ([^|]+) \|", markdown, re.M)
        assert row, markdown
        static[(kernel, gpu)] = Answer(row.group(1), Roof.first_in(row.group(2)))
        section = markdown.partition(f"**Predicted vs measured on {gpu}**")[2]
        if section:
            verdicts = re.search(r"^\| verdict \| \*\*(\w+)-bound\*\* \| \*\*(\w+)-bound\*\* \|", section, re.M)
            roofs = re.search(r"^\| intensity vs ridge \| ([^|]+) \| ([^|]+) \|", section, re.M)
            assert verdicts and roofs, section
            assert "| | predicted (static) | measured |" in section  # the columns say which is which
            assert Answer(verdicts.group(1), Roof.first_in(roofs.group(1))) == static[(kernel, gpu)]
            if not section.startswith(" — **stale**: the kernel changed since it was measured"):
                measured[(kernel, gpu)] = Answer(verdicts.group(2), Roof.first_in(roofs.group(2)))
    return static, measured


def from_lens(kernel: str, title: str) -> tuple[dict, dict]:
    static, measured = {}, {}
    for part in title.split(" | "):
        found = re.match(r"(compute|bandwidth)-bound on (.+?) · ", part)
        assert found, title
        key = (kernel, found.group(2))
        own, _, tail = part.partition(" · measured ")
        static[key] = Answer(found.group(1), Roof.first_in(own))
        if tail:
            label = re.match(r"(compute|bandwidth)-bound \(", tail)
            assert label, part
            if not tail.endswith(" (stale)"):  # a measurement before the last edit is labelled so
                measured[key] = Answer(label.group(1), Roof.first_in(tail))
    return static, measured


def from_hint(kernel: str, hint: lsp.InlayHint) -> tuple[dict, dict]:
    """The label: the static verdict per GPU, `measured <verdict>` beside it; the tooltip: each
    GPU's diagnostic text (whose roofs are the hint's answers)."""
    static, measured = {}, {}
    label = hint.label if isinstance(hint.label, str) else "".join(p.value for p in hint.label)
    tooltip = hint.tooltip.value if isinstance(hint.tooltip, lsp.MarkupContent) else str(hint.tooltip)
    paragraphs = tooltip.split("\n\n")
    parts = label.strip().split(" | ")
    assert len(parts) == len(paragraphs) == len(GPUS), (label, tooltip)
    for part, paragraph in zip(parts, paragraphs):
        gpu_word, _, text = part.partition(": ")
        key = (kernel, gpu_of(gpu_word))
        assert f" on {key[1]}" in paragraph, (part, paragraph)
        found = re.search(r"(compute|bandwidth)-bound(?: · measured (compute|bandwidth)( \(stale\))?)?$", text)
        assert found, label
        static[key], current = parse_message(paragraph)
        assert static[key].verdict == found.group(1)
        stale = bool(found.group(3))  # a measurement before the last edit: labelled so, not current
        assert stale == ("measured before the last edit (stale): " in paragraph), (label, paragraph)
        assert (current.verdict if current else None) == (None if stale else found.group(2)), (label, paragraph)
        if current is not None:
            measured[key] = current
    return static, measured


def from_roofline_data(data: dict) -> tuple[dict, dict, dict]:
    """Static and measured answers, and the numbers they must display ({key: (roof, ai, ridge)})."""
    static, measured, numbers = {}, {}, {}
    for kernel in data["kernels"]:
        for e in kernel["estimates"]:
            key = (kernel["name"], e["gpuName"])
            roof = e["roof"]
            assert roof == e["deciding"] == e["judgedBy"]  # one precision, whatever the field
            numbers[key] = (roof, e["intensity"][roof], e["ridge"][roof])
            static[key] = Answer(e["verdict"], Roof(roof, "", "", ""))
            m = e["measured"]
            if m is not None and not m["stale"]:
                assert m["source"] == "measured" and m["gpu"] == "NVIDIA GeForce RTX 3080"
                numbers[("measured", *key)] = (m["precision"], m["intensities"][m["precision"]],
                                               m["ridges"][m["precision"]])
                measured[key] = Answer(m["verdict"], Roof(m["precision"], "", "", ""))
                assert m["intensity"] == pytest.approx(m["intensities"][m["precision"]])
    return static, measured, numbers


# ---------------------------------------------------------------------------------------------
# the CLI on the same text


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = server_env(PERFLSP_CONFIG=str(cwd / "none.toml"), NO_COLOR="1", COLUMNS="400")
    return subprocess.run([sys.executable, "-m", "perflsp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def from_cli(path: Path) -> tuple[dict[str, dict], dict[str, tuple]]:
    """{surface: {(kernel, gpu): Answer}} of `perflsp check` (text, JSON, SARIF) and `perflsp explain`,
    and the parts of each kernel's intensity in check --json ({kernel: (DRAM bytes, ops)})."""
    root, gpus = path.parent, [f"--gpu={g}" for g in GPUS]
    out: dict[str, dict] = {"check": {}, "check --json": {}, "check --sarif": {}, "explain": {},
                            "explain --json": {}}
    by_line, parts = {}, {}
    dram_on = {}  # (kernel, GPU) -> the DRAM bytes judged on that GPU (its own L2)
    report = cli(root, "check", "--json", "--no-compile", "--no-progress", *gpus, path.name)
    assert report.returncode == 0, report.stderr
    for kernel in json.loads(report.stdout)["files"][0]["kernels"]:
        by_line[kernel["line"]] = kernel["name"]
        total = kernel["facts"]["total"]
        parts[kernel["name"]] = (kernel["facts"]["dram_bytes"], {p: total[p] for p in ("fp64", "fp32", "fp16", "int32")})
        for e in kernel["estimates"]:
            answer = Answer(e["verdict"], Roof.first_in(e["summary"]))
            assert answer.roof.precision == e["roof"]
            answer.roof.matches(e["intensity"][e["roof"]], e["ridge"][e["roof"]])
            out["check --json"][(kernel["name"], e["gpu_name"])] = answer
            dram_on[(kernel["name"], e["gpu_name"])] = e["dram_bytes"]
        # the facts' DRAM bytes are those judged on the first GPU named
        assert kernel["facts"]["dram_bytes"] == pytest.approx(dram_on[(kernel["name"], next(iter(GPUS.values())))])
    text = cli(root, "check", "--no-compile", "--no-progress", *gpus, path.name)
    assert text.returncode == 0, text.stderr
    for line in text.stdout.splitlines():
        found = re.match(rf"{re.escape(path.name)}:(\d+) (\S+) — (compute|bandwidth)-bound on (.+?) · ", line)
        if found:
            out["check"][(found.group(2), found.group(4))] = Answer(found.group(3), Roof.first_in(line))
    sarif = cli(root, "check", "--sarif", "--no-compile", "--no-progress", *gpus, path.name)
    assert sarif.returncode == 0, sarif.stderr
    for result in json.loads(sarif.stdout)["runs"][0]["results"]:
        props = result.get("properties") or {}
        if "verdict" in props:
            line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
            answer = Answer(props["verdict"], Roof.first_in(result["message"]["text"]))
            assert answer.roof.precision == props["roof"]
            out["check --sarif"][(by_line[line], props["gpuName"])] = answer
    for gpu_id, gpu in GPUS.items():
        explained = cli(root, "explain", "--static", "--no-compile", "--gpu", gpu_id, path.name)
        assert explained.returncode == 0, explained.stderr
        for kernel, block in re.findall(r"^## CUDA kernel (\S+) .*?\n(Static estimate: .*)$", explained.stdout, re.M):
            verdict = re.match(rf"Static estimate: (compute|bandwidth)-bound on {re.escape(gpu)} · ", block)
            assert verdict, block
            out["explain"][(kernel, gpu)] = Answer(verdict.group(1), Roof.first_in(block))
        as_json = cli(root, "explain", "--static", "--no-compile", "--json", "--gpu", gpu_id, path.name)
        assert as_json.returncode == 0, as_json.stderr
        for item in json.loads(as_json.stdout)["kernels"]:
            estimate = item["static"]
            answer = Answer(estimate["verdict"], Roof.first_in(estimate["headline"]))
            assert answer.roof.precision == estimate["roof"]
            out["explain --json"][(item["name"], gpu)] = answer
            assert item["static"]["dram_bytes"] == pytest.approx(dram_on[(item["name"], gpu)])
    return out, parts


# ---------------------------------------------------------------------------------------------


async def surfaces(s: Session, path: Path, text: str, published: lsp.PublishDiagnosticsParams) -> dict[str, Any]:
    """Every editor surface's answers for the current version, asked for as an editor does once
    the version's diagnostics arrived (lenses and hints again: a fresh request, nothing cached)."""
    uri = path.as_uri()
    doc = lsp.TextDocumentIdentifier(uri=uri)
    found: dict[str, Any] = {}
    found["diagnostics"] = from_diagnostics(published)
    hovers: tuple[dict, dict] = ({}, {})
    for kernel, needle in (("ns::saxpy", "saxpy(const"), ("dgemm_tile", "dgemm_tile(const"), ("poly", "poly(const")):
        shown = await s.client.text_document_hover_async(lsp.HoverParams(doc, position(text, needle)))
        assert shown is not None
        static, measured = from_hover(kernel, shown.contents.value)
        hovers[0].update(static)
        hovers[1].update(measured)
    found["hover"] = hovers
    lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    verdicts = {lens.command.arguments[0]["kernel"]: lens.command.title for lens in lenses
                if lens.command is not None and lens.command.command == "perflsp.explainKernel"
                and "-bound on " in lens.command.title}
    assert set(verdicts) == set(KERNELS)
    found["code lens"] = ({}, {})
    for kernel, title in verdicts.items():
        static, measured = from_lens(kernel, title)
        found["code lens"][0].update(static)
        found["code lens"][1].update(measured)
    hints = await s.client.text_document_inlay_hint_async(lsp.InlayHintParams(
        doc, lsp.Range(lsp.Position(0, 0), lsp.Position(text.count("\n") + 1, 0))))
    assert len(hints) == 3  # one per launch
    found["inlay hint"] = ({}, {})
    for hint, kernel in zip(sorted(hints, key=lambda h: (h.position.line, h.position.character)), KERNELS):
        static, measured = from_hint(kernel, hint)
        found["inlay hint"][0].update(static)
        found["inlay hint"][1].update(measured)
    data = await s.command("perflsp.rooflineData", {"uri": uri})
    found["rooflineData"] = from_roofline_data(data)
    found["parts"] = {k["name"]: (k["dramBytes"], k["ops"]) for k in data["kernels"]}
    return found


def assert_one_answer(editor: dict[str, Any], cli: tuple[dict[str, dict], dict[str, tuple]],
                      current: dict[str, str]) -> dict:
    """Every surface: the same verdict and roof per (kernel, GPU) as the roofline data's numbers;
    measured answers only where a current measurement is (`current`: kernel -> measured verdict on
    the RTX 3080), labelled, and the same everywhere. Returns the quoted
    roofs ({key: Roof})."""
    editor = dict(editor)
    reference, reference_measured, numbers = editor.pop("rooflineData")
    cli_answers, cli_parts = cli
    # the parts of the intensity: the roofline view's DRAM bytes and operations are check's
    for kernel, (dram, ops) in editor.pop("parts").items():
        assert dram == pytest.approx(cli_parts[kernel][0]) and ops == pytest.approx(cli_parts[kernel][1]), kernel
    keys = {(k, g) for k in KERNELS for g in GPUS.values()}
    assert set(reference) == keys
    quoted: dict = {}
    for key in sorted(keys):
        roof, ai, ridge = numbers[key]
        answers = {name: static[key] for name, (static, _) in editor.items()}
        answers.update({name: found[key] for name, found in cli_answers.items()})
        for name, answer in answers.items():
            assert answer.verdict == reference[key].verdict, (name, key, answer)
            if answer.roof is not None:
                assert answer.roof.precision == roof, (name, key, answer)
                answer.roof.matches(ai, ridge)
        shown = {a.roof for a in answers.values() if a.roof is not None}
        assert len(shown) == 1, (key, answers)  # written the same, to the last digit
        quoted[key] = shown.pop()
    # measured: on the RTX 3080 only, for the measured kernels, on every editor surface that shows
    # verdicts, with the measured roof where a surface shows one
    expected = {(k, RTX): v for k, v in current.items()}
    assert {k: a.verdict for k, a in reference_measured.items()} == expected
    for name, (_, measured) in editor.items():
        assert {k: a.verdict for k, a in measured.items()} == expected, name
    for key in expected:
        roof, ai, ridge = numbers[("measured", *key)]
        shown = {name: found[1][key].roof for name, found in editor.items()}
        assert set(shown) == {"diagnostics", "hover", "code lens", "inlay hint"}
        for name, measured_roof in shown.items():
            assert measured_roof.precision == roof, (name, key, measured_roof)
            measured_roof.matches(ai, ridge)
        assert len(set(shown.values())) == 1, shown
    return quoted


async def test_every_surface_gives_one_answer_per_kernel_and_none_is_stale_after_an_edit(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".perflsp.toml").write_text('gpus = ["rtx3080", "h100"]\n')
    path = root / "kernels.cu"
    path.write_text(SOURCE)
    uri = path.as_uri()
    async with session(root, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        await s.open(path)
        imported = await s.command("perflsp.importProfile", {"path": str(MIXED), "quiet": True})
        assert "2 matched to sources" in imported["message"]
        published = await s.diagnostics_matching(uri, lambda p: {
            d.data["kernel"] for d in p.diagnostics if (d.data or {}).get("source") == "measured"} == set(MEASURED))
        before = assert_one_answer(await surfaces(s, path, SOURCE, published), from_cli(path), MEASURED)

        # the quoted roof: a float kernel's FP32 (or FP64) one, even where the INT32 roof is nearer
        assert before[("ns::saxpy", RTX)].precision == "fp32" and before[("dgemm_tile", RTX)].precision == "fp64"
        assert before[("poly", H100)].precision == "fp32"

        # an edit that adds FMAs: every surface shows the new numbers, none the old ones
        text = SOURCE
        for old, new in EDITS.items():
            text = text.replace(old, new)
        end = lsp.Position(SOURCE.count("\n"), 0)
        edited = await s.edit(uri, (0, 0), (end.line, end.character), text)
        assert edited.version == 2
        path.write_text(text)  # the CLI reads the file: the same text
        after_surfaces = await surfaces(s, path, text, edited)
        # the measurement is stale for the edited saxpy: no surface shows it as current
        for name, found in after_surfaces.items():
            if name != "parts":
                assert ("ns::saxpy", RTX) not in found[1], name
        stale = next(d for d in edited.diagnostics if (d.data or {}).get("kernel") == "ns::saxpy"
                     and d.data["gpu"] == RTX)
        assert stale.data["measured"]["stale"] and "measured before the last edit (stale)" in stale.message
        lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        saxpy_lens = next(lens.command.title for lens in lenses if lens.command.arguments[0]["kernel"] == "ns::saxpy"
                          and "-bound on " in lens.command.title)
        assert " (stale)" in saxpy_lens.split(" | ")[0] and "(stale)" not in saxpy_lens.split(" | ")[1]
        after = assert_one_answer(after_surfaces, from_cli(path), {"dgemm_tile": "compute"})
        for gpu in GPUS.values():
            for kernel in ("ns::saxpy", "poly"):
                assert float(after[(kernel, gpu)].intensity) > 4 * float(before[(kernel, gpu)].intensity)
            assert after[("dgemm_tile", gpu)] == before[("dgemm_tile", gpu)]  # not edited
            assert after_surfaces["rooflineData"][0][("poly", gpu)].verdict == "compute"  # 1024 FLOP per 8 B


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFLSP_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.chdir(ROOT)
