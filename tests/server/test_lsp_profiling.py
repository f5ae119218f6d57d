"""Nsight Compute results in the language server, end to end: import a report (the synthetic ncu
CSV fixtures) or run the stand-in `ncu` (tests/stand_ins/fake_ncu.py) through the real server;
hover, diagnostics and the roofline data show predicted beside measured, an edited kernel's
measurement shows as stale, and an untrusted repository cannot switch profiling on."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.profiling_helpers import MIXED, install_fake_ncu, install_fake_nvcc
from tests.server.lsp_session import Session, roofline, session

pytestmark = pytest.mark.asyncio
GPU = "GeForce RTX 3080 (10GB)"

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

int main() {
    const int n = 1 << 20;
    float *x, *y;
    ns::saxpy<float><<<(n + 127) / 128, 128>>>(x, y, n);
    double *a, *b, *c;
    dgemm_tile<<<dim3(64, 64), dim3(16, 16)>>>(a, b, c, 1024);
    return 0;
}
"""


def workspace(root: Path, config: str = 'gpus = ["rtx3080"]\n') -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".perflsp.toml").write_text(config)
    path = root / "kernels.cu"
    path.write_text(SOURCE)
    return path


def position(text: str, needle: str, offset: int = 0) -> lsp.Position:
    index = text.index(needle) + offset
    return lsp.Position(text[:index].count("\n"), index - (text.rfind("\n", 0, index) + 1))


async def hover(s: Session, uri: str, text: str, needle: str) -> str:
    result = await s.client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri=uri),
                                                                      position(text, needle)))
    assert result is not None
    return result.contents.value


async def test_imported_results_show_beside_the_prediction_and_go_stale_on_edit(tmp_path):
    path = workspace(tmp_path / "ws")
    uri = path.as_uri()
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        before = roofline(await s.open(path))
        assert before["ns::saxpy"].data["source"] == "static" and "measured" not in before["ns::saxpy"].message

        imported = await s.command("perflsp.importProfile", {"path": str(MIXED), "quiet": True})
        assert imported["gpu"] == "NVIDIA GeForce RTX 3080"
        assert Path(imported["storedAt"]).parent == path.parent / ".perflsp" / "profiles"
        mapped = {k["kernel"]: k["source"] for k in imported["kernels"]}
        assert mapped["ns::saxpy<float>"]["file"] == str(path) and mapped["dgemm_tile"]["line"] == 9
        assert "2 matched to sources" in imported["message"]

        after = roofline(await s.diagnostics_matching(uri, lambda p: roofline(p)["ns::saxpy"].data["source"] == "measured"))
        saxpy, dgemm = after["ns::saxpy"], after["dgemm_tile"]
        # 4.2M FP32 FLOP and 4.2M integer instructions over 12.6 MB per launch: quoted by its FP32
        # roof as the prediction is, the nearer INT32 roof in a note
        assert saxpy.message.startswith(f"`ns::saxpy` on {GPU}: measured bandwidth-bound (FP32 intensity 0.17 < "
                                        "ridge 33.0 FLOP/B · nearest roof: integer instructions, INT32 intensity 0.33 "
                                        "< ridge 16.5 op/B), predicted bandwidth-bound: FP32 intensity")
        assert "predicted bandwidth-bound" in saxpy.message and saxpy.code == "roofline/bandwidth-bound"
        assert dgemm.code == "roofline/compute-bound" and "measured compute-bound (FP64 intensity" in dgemm.message
        assert dgemm.data["measured"] == {"verdict": "compute", "gpu": "NVIDIA GeForce RTX 3080", "stale": False}

        text = path.read_text()
        shown = await hover(s, uri, text, "saxpy(const")
        assert f"**Predicted vs measured on {GPU}**" in shown and "stale" not in shown
        assert "| verdict | **bandwidth-bound** | **bandwidth-bound** |" in shown
        # measured judged at ncu's base clock (ridge 33), predicted at the boost clock (39.2)
        assert "| FP32 intensity (FLOP/B) | 0.17 (ridge 39.2) | 0.17 (ridge 33.0) |" in shown
        assert "| time |  | 41.5 µs over 2 launch(es) |" in shown
        data = await s.command("perflsp.rooflineData", {"uri": uri})
        measured = {k["name"]: k["estimates"][0]["measured"] for k in data["kernels"]}
        assert measured["ns::saxpy"]["verdict"] == "bandwidth" and measured["ns::saxpy"]["precision"] == "fp32"
        assert measured["ns::saxpy"]["intensity"] > 0 and measured["ns::saxpy"]["gflops"] > 0
        assert measured["dgemm_tile"]["precision"] == "fp64" and not measured["dgemm_tile"]["stale"]
        lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=uri)))
        assert any("measured bandwidth-bound" in lens.command.title for lens in lenses)

        # an edit to the kernel: the measurement is stale, not current
        edit = position(text, "2.0f * x[i]")
        edited = await s.edit(uri, (edit.line, edit.character), (edit.line, edit.character + 4), "3.0f")
        saxpy = roofline(edited)["ns::saxpy"]
        assert saxpy.data["source"] == "static" and saxpy.data["measured"]["stale"]
        assert "measured before the last edit (stale): bandwidth-bound" in saxpy.message
        assert roofline(edited)["dgemm_tile"].data["source"] == "measured"  # not edited: still current
        shown = await hover(s, uri, text.replace("2.0f * x[i]", "3.0f * x[i]"), "saxpy(const")
        assert "**stale**: the kernel changed since it was measured" in shown
        data = await s.command("perflsp.rooflineData", {"uri": uri})
        assert {k["name"]: k["estimates"][0]["measured"]["stale"] for k in data["kernels"]} == \
            {"ns::saxpy": True, "dgemm_tile": False}


async def test_profile_and_measure_from_the_editor(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu, nvcc = install_fake_ncu(bin_dir), install_fake_nvcc(bin_dir)
    path = workspace(tmp_path / "ws")
    uri = path.as_uri()
    profiling = {"enabled": True, "ncuPath": str(ncu), "buildCommand": [str(nvcc), "-o", "{exe}", "{file}"]}
    env = {"PERFLSP_CONFIG": str(tmp_path / "none.toml"), "FAKE_NCU_FIXTURE": str(MIXED),
           "FAKE_NCU_LOG": str(tmp_path / "ncu.jsonl"), "FAKE_NCU_MODE": "replay"}
    async with session(path.parent, init_options={"settings": {"profiling": profiling}}, env=env) as s:
        assert s.statuses[-1]["profiling"] == "ready"
        await s.open(path)
        lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=uri)))
        profile = [lens for lens in lenses if lens.command.command == "perflsp.profileKernel"]
        assert [lens.command.arguments[0]["kernel"] for lens in profile] == ["ns::saxpy", "dgemm_tile"]

        result = await s.command("perflsp.profileKernel", {"uri": uri, "kernel": "ns::saxpy", "quiet": True})
        assert result["status"] == "ok", result
        assert result["message"].startswith("ns::saxpy: measured on NVIDIA GeForce RTX 3080")
        assert (path.parent / ".perflsp" / "build" / "kernels").is_file()
        await s.diagnostics_matching(uri, lambda p: roofline(p)["ns::saxpy"].data["source"] == "measured")

    timing = {**env, "FAKE_NCU_MODE": "timing", "FAKE_NCU_TIMES": "128:2100,384:1800,768:1500"}
    async with session(path.parent, init_options={"settings": {"profiling": profiling}}, env=timing) as s:
        await s.open(path)
        text = path.read_text()
        launch = position(text, "ns::saxpy<float><<<")
        params = lsp.CodeActionParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=lsp.Range(launch, launch),
                                      context=lsp.CodeActionContext(diagnostics=[]))
        titles = [a.title for a in await s.client.text_document_code_action_async(params)]
        launch_title = "Launch `saxpy` with 768 threads per block (best occupancy on GeForce RTX 3080 (10GB))"
        assert launch_title in titles
        measure = "Measure `ns::saxpy` with 768 vs 128 threads per block (Nsight Compute, perflsp)"
        assert measure in titles
        result = await s.command("perflsp.verifyLaunchParameters",
                                 {"uri": uri, "kernel": "ns::saxpy", "current": 128, "proposed": 768})
        assert result["status"] == "ok" and result["message"] == "ns::saxpy: measured 1.40× at 768 threads per block vs 128"
        assert s.client.messages[-1].message == "perflsp: " + result["message"]
        titles = [a.title for a in await s.client.text_document_code_action_async(params)]
        assert launch_title + " — measured 1.40× faster" in titles and measure not in titles


async def test_an_untrusted_repository_cannot_switch_profiling_on(tmp_path):
    path = workspace(tmp_path / "ws", config='gpus = ["rtx3080"]\n[profiling]\nenabled = true\n'
                                             'buildCommand = ["sh", "-c", "echo pwned"]\n')
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        assert s.statuses[-1]["profiling"] == "off"
        await s.open(path)
        result = await s.command("perflsp.profileKernel", {"uri": path.as_uri(), "kernel": "ns::saxpy", "quiet": True})
        assert result["status"] == "disabled"
        assert "perflsp.profiling.enabled ignored: the workspace is not trusted" in result["message"]
        lenses = await s.client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=path.as_uri())))
        assert not [lens for lens in lenses if lens.command.command == "perflsp.profileKernel"]
        verify = await s.command("perflsp.verifyLaunchParameters",
                                 {"uri": path.as_uri(), "kernel": "ns::saxpy", "current": 128, "proposed": 256,
                                  "quiet": True})
        assert verify["status"] == "disabled" and "not trusted" in verify["message"]
        # importing a CSV runs nothing: allowed, and shown
        imported = await s.command("perflsp.importProfile", {"path": str(MIXED), "quiet": True})
        assert len(imported["kernels"]) == 4  # five launches of four kernels
        assert not (path.parent / ".perflsp" / "build").exists()


async def test_import_errors_are_clear(tmp_path):
    path = workspace(tmp_path / "ws")
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        with pytest.raises(Exception, match="no such report"):
            await s.command("perflsp.importProfile", {"path": "missing.csv", "quiet": True})
        with pytest.raises(Exception, match="`path`"):
            await s.command("perflsp.importProfile", {})
