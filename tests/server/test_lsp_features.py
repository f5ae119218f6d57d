"""End to end through a real LSP client and the real server (stdio subprocess, real engine):
diagnostics, hover, code lens, inlay hints, code actions, commands, progress."""

import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from perflsp.source.parser import parse
from tests.server.lsp_session import EXAMPLES, apply_text_edits, session

pytestmark = pytest.mark.asyncio(loop_scope="module")
GPUS = ["H100 SXM5 80GB", "GeForce RTX 3080 (10GB)"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    for folder in ("cuda", "lints", "openmp"):
        shutil.copytree(EXAMPLES / folder, root / folder)
    (root / ".perflsp.toml").write_text('gpus = ["h100", "rtx3080"]\n')
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def s(workspace):
    async with session(workspace) as lsp_session:
        yield lsp_session


def doc(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=uri)


def find(text: str, needle: str, offset: int = 0) -> lsp.Position:
    index = text.index(needle) + offset
    before = text[:index]
    return lsp.Position(before.count("\n"), index - (before.rfind("\n") + 1))


async def test_capabilities(s):
    caps = s.initialize_result.capabilities
    assert caps.position_encoding == lsp.PositionEncodingKind.Utf16
    assert caps.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert caps.hover_provider and caps.inlay_hint_provider and caps.code_lens_provider and caps.diagnostic_provider
    assert lsp.CodeActionKind.QuickFix in caps.code_action_provider.code_action_kinds
    assert {"perflsp.explainKernel", "perflsp.profileKernel", "perflsp.rooflineData", "perflsp.listGpus"} <= set(
        caps.execute_command_provider.commands)
    assert s.statuses[-1]["gpus"] == [{"id": "h100-sxm5-80gb", "name": GPUS[0]}, {"id": "rtx-3080-10gb", "name": GPUS[1]}]


async def test_roofline_diagnostics_per_kernel_and_gpu(s, workspace):
    path = workspace / "cuda" / "saxpy.cu"
    published = await s.open(path)
    assert published.version == 1
    roofline = [d for d in published.diagnostics if d.code.startswith("roofline/")]
    assert len(roofline) == 2  # one kernel x two GPUs
    text = path.read_text()
    name = find(text, "saxpy(int n")
    for d, gpu in zip(roofline, GPUS):
        assert d.source == "perflsp" and d.severity == lsp.DiagnosticSeverity.Information
        assert d.code in ("roofline/bandwidth-bound", "roofline/compute-bound")
        assert d.range.start == name and gpu in d.message and "ridge" in d.message and "intensity" in d.message
        assert d.code_description.href.endswith("roofline.md")
        launch = find(text, "saxpy<<<")
        assert d.related_information[0].location.range.start == launch
        assert "launched here" in d.related_information[0].message


async def test_lint_diagnostics(s, workspace):
    published = await s.open(workspace / "lints" / "launch_slips.cu")
    codes = {d.code: d for d in published.diagnostics}
    assert "launch/block-size-not-warp-multiple" in codes
    lint = codes["launch/block-size-not-warp-multiple"]
    assert lint.severity == lsp.DiagnosticSeverity.Warning
    assert lint.code_description.href.endswith("launch-block-size-not-warp-multiple.md")
    assert "launch/missing-launch-bounds" in codes


async def test_hover_on_kernel_launch_pragma_and_intrinsic(s, workspace):
    path = workspace / "cuda" / "saxpy.cu"
    uri, text = path.as_uri(), path.read_text()
    hover = await s.client.text_document_hover_async(lsp.HoverParams(doc(uri), find(text, "saxpy(int n", 2)))
    md = hover.contents.value
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    for expected in ("### `saxpy`", "| GPU | verdict", GPUS[0], GPUS[1], "DRAM bytes", "ridge", "occupancy",
                     "limited by", "to cross the ridge", "Static estimate"):
        assert expected in md, expected
    launch = await s.client.text_document_hover_async(lsp.HoverParams(doc(uri), find(text, "saxpy<<<", 1)))
    assert "Launch of `saxpy`" in launch.contents.value and "block:" in launch.contents.value

    omp = workspace / "openmp" / "saxpy_omp.cpp"
    await s.open(omp)
    pragma = await s.client.text_document_hover_async(
        lsp.HoverParams(doc(omp.as_uri()), find(omp.read_text(), "#pragma omp target", 9)))
    assert "OpenMP target region" in pragma.contents.value and "per iteration" in pragma.contents.value

    reduction = workspace / "cuda" / "reduction.cu"
    await s.open(reduction)
    note = await s.client.text_document_hover_async(
        lsp.HoverParams(doc(reduction.as_uri()), find(reduction.read_text(), "__syncthreads();", 3)))
    assert "performance note" in note.contents.value and "barrier" in note.contents.value
    nothing = await s.client.text_document_hover_async(lsp.HoverParams(doc(uri), lsp.Position(0, 0)))
    assert nothing is None


async def test_code_lens_and_inlay_hints(s, workspace):
    path = workspace / "cuda" / "saxpy.cu"
    uri, text = path.as_uri(), path.read_text()
    await s.open(path) if uri not in s.versions else None
    lenses = await s.client.text_document_code_lens_async(lsp.CodeLensParams(doc(uri)))
    assert len(lenses) == 1
    title = lenses[0].command.title
    assert f"-bound on {GPUS[0]}" in title and "occupancy" in title and " | " in title
    # (saxpy's 12 MB fit in the H100's L2: three quarters of what it writes stay there)
    assert "FP32 intensity 0.22 < ridge 20.0 FLOP/B" in title
    assert lenses[0].command.command == "perflsp.explainKernel"
    assert list(lenses[0].command.arguments) == [{"uri": uri, "kernel": "saxpy"}]
    hints = await s.client.text_document_inlay_hint_async(lsp.InlayHintParams(
        doc(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(len(text.splitlines()), 0))))
    assert len(hints) == 1
    assert hints[0].position == find(text, ">>>(n, a", 3)
    assert "occ" in hints[0].label and "bound" in hints[0].label


async def _actions(s, uri: str, position: lsp.Position, diagnostics=()):
    """Code actions with edits; command-only actions decode as `Command` in the test client."""
    found = await s.client.text_document_code_action_async(lsp.CodeActionParams(
        doc(uri), lsp.Range(position, position), lsp.CodeActionContext(diagnostics=list(diagnostics))))
    s.last_titles = [a.title for a in found]
    return [a for a in found if isinstance(a, lsp.CodeAction)]


def _edits(action: lsp.CodeAction) -> list[lsp.TextEdit]:
    return [e for change in action.edit.document_changes for e in change.edits]


async def test_code_actions_edit_and_reparse_cleanly(s, workspace):
    path = workspace / "lints" / "launch_slips.cu"
    uri, text = path.as_uri(), path.read_text()
    if uri not in s.versions:
        await s.open(path)
    diagnostics = s.client.diagnostics[uri]
    odd = next(d for d in diagnostics if d.code == "launch/block-size-not-warp-multiple")
    actions = await _actions(s, uri, odd.range.start, [odd])
    quick = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and a.edit]
    assert quick, [a.title for a in actions]
    assert any(a.diagnostics for a in quick)
    titles = s.last_titles
    assert any(t.startswith("Explain `scale`") for t in titles)
    assert not any(t.startswith("Profile `scale`") for t in titles)  # profiling is off: nothing to offer
    for action in [a for a in actions if a.edit]:
        edited = apply_text_edits(text, _edits(action))
        assert edited != text
        assert not parse(edited.encode()).root_node.has_error, action.title

    negate = next(d for d in diagnostics if d.code == "launch/missing-launch-bounds")
    actions = await _actions(s, uri, negate.range.start, [negate])
    bounds = [a for a in actions if "__launch_bounds__(256)" in a.title]
    assert bounds, [a.title for a in actions]
    edited = apply_text_edits(text, _edits(bounds[0]))
    assert "__launch_bounds__(256) negate(" in edited and not parse(edited.encode()).root_node.has_error


async def test_block_size_refactor_adjusts_the_grid(s, workspace):
    path = workspace / "lints" / "launch_slips.cu"
    uri, text = path.as_uri(), path.read_text()
    if uri not in s.versions:
        await s.open(path)
    actions = await _actions(s, uri, find(text, "negate<<<", 2))
    launch = [a for a in actions if a.title.startswith("Launch `negate` with") and a.kind == lsp.CodeActionKind.RefactorRewrite]
    assert launch, s.last_titles
    for action in launch:
        block = int(action.title.split(" with ")[1].split()[0])
        assert block % 32 == 0 and block != 256
        edited = apply_text_edits(text, _edits(action))
        line = next(l for l in edited.splitlines() if "negate<<<" in l)
        assert line.strip() == f"negate<<<(n + {block - 1}) / {block}, {block}>>>(n, da);"
        assert not parse(edited.encode()).root_node.has_error

    occupancy = next(d for d in s.client.diagnostics[uri] if d.code == "occupancy/low")
    actions = await _actions(s, uri, occupancy.range.start, [occupancy])
    fix = next(a for a in actions if a.kind == lsp.CodeActionKind.QuickFix)
    assert fix.diagnostics and fix.diagnostics[0].code == "occupancy/low"
    edited = apply_text_edits(text, _edits(fix))
    assert not parse(edited.encode()).root_node.has_error and "add_one<<<(n + 31) / 32, 32>>>" not in edited


async def test_openmp_clause_refactor(s, workspace):
    path = workspace / "openmp" / "jacobi_omp.cpp"
    await s.open(path)
    text = path.read_text()
    actions = await _actions(s, path.as_uri(), find(text, "#pragma omp target teams", 3))
    omp = [a for a in actions if a.edit and a.title.startswith("Set thread_limit(")]
    assert omp, s.last_titles
    limit = omp[0].title.split("thread_limit(")[1].split(")")[0]
    edited = apply_text_edits(text, _edits(omp[0]))
    pragma = next(l for l in edited.splitlines() if l.startswith("#pragma omp target teams"))
    assert f"thread_limit({limit})" in pragma and "num_teams(" in pragma
    assert not parse(edited.encode()).root_node.has_error


async def test_lint_quick_fix_on_precision_slips(s, workspace):
    path = workspace / "lints" / "precision_slips.cu"
    published = await s.open(path)
    text = path.read_text()
    promotion = next(d for d in published.diagnostics if d.code == "precision/double-promotion")
    actions = await _actions(s, path.as_uri(), promotion.range.start, [promotion])
    fix = next(a for a in actions if a.kind == lsp.CodeActionKind.QuickFix)
    edited = apply_text_edits(text, _edits(fix))
    assert not parse(edited.encode()).root_node.has_error
    # the fix removes the finding: send the edited text and look
    waiter = s.expect_diagnostics(path.as_uri(), s.versions[path.as_uri()] + 1)
    s.change(path.as_uri(), [lsp.TextDocumentContentChangeWholeDocument(text=edited)])
    after = await waiter
    still = [d for d in after.diagnostics if d.code == promotion.code and d.range.start == promotion.range.start]
    assert not still


async def test_commands(s, workspace):
    uri = (workspace / "cuda" / "saxpy.cu").as_uri()
    if uri not in s.versions:
        await s.open(workspace / "cuda" / "saxpy.cu")
    explained = await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "saxpy", "quiet": True})
    assert explained["llm"] == "off" and "perflsp.llm.enabled" in explained["llmMessage"]
    assert "### `saxpy`" in explained["markdown"] and "LLM advisor: off" in explained["markdown"]
    assert explained["source"] == "static" and GPUS[0] in explained["headline"]

    shown = len(s.client.messages)
    profiled = await s.command("perflsp.profileKernel", {"uri": uri, "kernel": "saxpy"})
    assert profiled["status"] == "disabled" and "perflsp.profiling.enabled" in profiled["message"]
    assert len(s.client.messages) == shown + 1 and "profiling is off" in s.client.messages[-1].message

    asked = await s.command("perflsp.askLaunchParameters", {"uri": uri, "kernel": "saxpy"})
    assert [g["gpu"] for g in asked["suggestions"]] == ["h100-sxm5-80gb", "rtx-3080-10gb"]
    assert all(g["blockSize"] % 32 == 0 for g in asked["suggestions"]) and asked["launches"][0]["block"] == "BLOCK"

    gpus = await s.command("perflsp.listGpus", {})
    assert gpus["selected"] == ["h100-sxm5-80gb", "rtx-3080-10gb"] and len(gpus["gpus"]) >= 27
    assert {"id", "name", "peaks_tflops", "ridge_ops_per_byte", "selected"} <= set(gpus["gpus"][0])

    status = await s.command("perflsp.status", {})
    assert status["ready"] and status["llm"] == "off" and status["lints"] is True

    with pytest.raises(Exception, match="no kernel `nope`"):
        await s.command("perflsp.explainKernel", {"uri": uri, "kernel": "nope"})
    with pytest.raises(Exception, match="uri"):
        await s.command("perflsp.explainKernel", {"kernel": "x"})


async def test_roofline_data_open_and_workspace_with_progress(s, workspace):
    opened = await s.command("perflsp.rooflineData", {"scope": "open"})
    names = {k["name"] for k in opened["kernels"]}
    assert "saxpy" in names and [g["id"] for g in opened["gpus"]] == ["h100-sxm5-80gb", "rtx-3080-10gb"]
    kernel = next(k for k in opened["kernels"] if k["name"] == "saxpy")
    estimate = kernel["estimates"][0]
    assert {"gpu", "verdict", "intensity", "ridge", "deciding", "occupancy", "confidence", "source", "measured"} <= set(estimate)
    assert estimate["source"] == "static" and estimate["measured"] is None and kernel["range"]["start"]["line"] >= 0
    # the roofline view's tooltip: what the verdict rests on (saxpy's sizes come from its launch;
    # its data fit in the H100's L2, which keeps a share of its writes)
    assert [a.split(":")[0] for a in kernel["assumptions"]] == ["H100 SXM5 80GB"]
    assert "L2 writes back" in kernel["assumptions"][0] and estimate["decidingAssumption"] is None
    assert estimate["judgedBy"] in estimate["intensity"]

    # a workspace scan long enough (>0.5 s) to show progress: add generated files
    from benchmarks.lsp_latency import generate_big_file

    big = workspace / "generated"
    big.mkdir(exist_ok=True)
    for i in range(8):  # ~1-2 s of analysis on this machine: well past the 0.5 s threshold
        (big / f"big{i}.cu").write_text(generate_big_file(4000))
    before = set(s.client.progress_reports)
    scanned = await s.command("perflsp.rooflineData", {"scope": "workspace"}, timeout=120)
    files = {k["uri"].rsplit("/", 1)[-1] for k in scanned["kernels"]}
    assert {"sgemm_tiled.cu", "big0.cu", "jacobi_omp.cpp"} <= files  # not open: analysed from disk
    tokens = set(s.client.progress_reports) - before
    assert tokens, "a scan over 0.5 s reports progress"
    kinds = [type(v).__name__ for t in tokens for v in s.client.progress_reports[t]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    shutil.rmtree(big)
