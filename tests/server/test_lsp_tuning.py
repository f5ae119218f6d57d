"""Tuning in the language server, end to end over stdio: imported Kernel Tuner caches (cut from
benchmark_hub, tests/fixtures/tuning) drive the *Tune* action, `$/progress` per evaluation, the
tuned edit per device (which applies and re-parses cleanly) and the hover's portability view;
without profiling and without a cache there is nothing to run."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from perflsp.kernels.extract import extract
from perflsp.source.parser import parse
from tests.llm.llm_fakes import Recorded, Reply, ScriptedServer
from tests.server.llm_server import API_KEY, WIRE, answer, llm_settings, prompt_of
from tests.server.lsp_session import Session, session
from tests.stand_ins.tuning_llm import propose, state_from_prompt

pytestmark = pytest.mark.asyncio
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tuning"
A100 = "NVIDIA A100-PCIE-40GB"


def workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".perflsp.toml").write_text('gpus = ["a100-sxm4-40gb"]\n')
    path = root / "convolution.cu"
    shutil.copy(FIXTURES / "convolution.cu", path)
    return path


def apply(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def offset(pos: lsp.Position) -> int:
        return offsets[pos.line] + pos.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def cache_best(path: Path, cache: str) -> dict:
    """The fastest configuration of a fixture cache that the kernel's space (A100 limits) allows."""
    from perflsp.hardware.database import load_database
    from perflsp.kernels.program import ProgramModel
    from perflsp.tuning.cache import read_cache
    from perflsp.tuning.problem import problem_for

    data = path.read_bytes()
    kernels = extract(data, parse(data))
    kernel = next(k for k in kernels.kernels if k.name == "convolution_kernel")
    space = problem_for(ProgramModel(data, parse(data), kernels), kernel, load_database().get("a100-sxm4-40gb"))
    return next(c for c, _t in read_cache(FIXTURES / cache).timed() if space.valid(c))


async def actions(s: Session, uri: str, text: str) -> list[lsp.CodeAction]:
    line = next(i for i, l in enumerate(text.split("\n")) if "__global__ void convolution_kernel" in l)
    found = await s.client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri=uri), lsp.Range(lsp.Position(line, 20), lsp.Position(line, 25)),
        lsp.CodeActionContext(diagnostics=[])))
    return list(found or [])


async def test_recorded_caches_drive_tune_progress_and_the_tuned_edit(tmp_path):
    path = workspace(tmp_path / "ws")
    uri, text = path.as_uri(), path.read_text()
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        await s.open(path)
        # nothing imported, profiling off: no Tune action, no tuned edit
        titles = [a.title for a in await actions(s, uri, text)]
        assert not [t for t in titles if t.startswith(("Tune", "Apply the"))], titles
        refused = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel", "quiet": True})
        assert refused["status"] == "disabled" and "no Kernel Tuner cache was imported" in refused["message"]

        for device in ("A100", "W7800"):
            imported = await s.command("perflsp.importTuningCache",
                                       {"path": str(FIXTURES / f"convolution_{device}.json"), "quiet": True})
            assert imported["configurations"] == 416
            assert Path(imported["storedAt"]).parent == path.parent / ".perflsp" / "tuning" / "convolution_kernel"

        found = await actions(s, uri, text)
        titles = [a.title for a in found]
        assert "Tune `convolution_kernel` on A100-PCIE-40GB (Kernel Tuner, replaying the recorded cache)" in titles
        assert not any("(Kernel Tuner, measured)" in t for t in titles), "profiling is off: nothing is measured"
        offers = {a.title: a for a in found if a.title.startswith("Apply the")}
        a100 = next(t for t in offers if t.startswith("Apply the A100-PCIE-40GB-tuned configuration"))
        # the cache's best against the code's current configuration (16x16, tile 1x1), both recorded
        assert a100 == ("Apply the A100-PCIE-40GB-tuned configuration: 1.71x faster than current, "
                        "recorded on NVIDIA A100-PCIE-40GB")
        assert any(t.startswith("Apply the W7800-tuned configuration") for t in offers)

        # hover: top configurations per device and the portability view
        line = next(i for i, l in enumerate(text.split("\n")) if "__global__ void convolution_kernel" in l)
        hover = await s.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri=uri), lsp.Position(line, 20)))
        markdown = hover.contents.value
        assert "**Tuned configurations**" in markdown and "A100-PCIE-40GB (recorded)" in markdown
        assert "**Portability**" in markdown and "12.02x" in markdown  # the A100's best is 12x slow on the W7800

        # the search replays the A100 cache with progress per evaluation, then offers what it found
        before = set(s.client.progress_reports)
        result = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel", "device": A100,
                                                        "maxFevals": 12, "strategy": "prior", "quiet": True})
        assert result["status"] == "ok", result
        assert result["evaluations"] == 12 and result["recorded"] and result["device"] == A100
        assert result["bestMs"] <= result["currentMs"]
        tokens = set(s.client.progress_reports) - before
        reports = [v for t in tokens for v in s.client.progress_reports[t]]
        begin = next(v for v in reports if isinstance(v, lsp.WorkDoneProgressBegin))
        assert begin.cancellable and "tuning convolution_kernel on A100-PCIE-40GB" in begin.title
        messages = [v.message for v in reports if isinstance(v, lsp.WorkDoneProgressReport)]
        assert messages[0].startswith("1/12: ") and messages[-1].startswith("12/12: ") and "best" in messages[-1]
        assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)

        # the offer is the better of the cache's best and the search's (12 evaluations found less)
        searched = result["currentMs"] / result["bestMs"]
        assert f"{searched:.2f}x" in result["message"] and searched < 1.71
        found = await actions(s, uri, text)
        tuned = next(a for a in found if a.title.startswith("Apply the A100-PCIE-40GB-tuned configuration"))
        assert tuned.title == a100, (tuned.title, a100)
        best = cache_best(path, "convolution_A100.json")
        assert best != result["best"]
        expected = "1.71x faster than current"
        edits = tuned.edit.document_changes[0].edits
        new_text = apply(text, edits)
        for name, value in best.items():
            if name in ("filter_height", "filter_width", "use_cmem"):
                continue
            assert f"#define {name} {value}" in new_text, name
        tree = parse(new_text.encode())
        assert not tree.root_node.has_error
        names_before = [k.name for k in extract(text.encode(), parse(text.encode())).kernels]
        assert [k.name for k in extract(new_text.encode(), tree).kernels] == names_before

        # the edited text is a new version: the offer for its configuration disappears
        waiter = s.expect_diagnostics(uri, 2)
        s.change(uri, [lsp.TextDocumentContentChangeWholeDocument(text=new_text)])
        await asyncio.wait_for(waiter, 30)
        after = [a.title for a in await actions(s, uri, new_text)]
        assert not any(t.startswith("Apply the A100-PCIE-40GB-tuned") and expected in t for t in after)


async def test_tune_refuses_a_cache_of_another_space_and_unknown_devices(tmp_path):
    path = workspace(tmp_path / "ws")
    uri = path.as_uri()
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        await s.open(path)
        missing = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel",
                                                         "device": "NVIDIA H100", "quiet": True})
        assert missing["status"] == "failed" and "no Kernel Tuner cache" in missing["message"]



def llm_endpoint(delay_s: float) -> ScriptedServer:
    """A loopback OpenAI-compatible endpoint: tuning rounds get the stand-in's proposals (outside
    the space first) after `delay_s`; the advisor's verdict questions get a verdict."""

    def reply(record: Recorded) -> Reply:
        text = prompt_of(record)
        if "Tuning state (JSON)" in text:
            time.sleep(delay_s)
            configs = propose(state_from_prompt(text), out_of_space=True)
            return WIRE.reply(json.dumps({"configs": configs, "reason": "neighbours of the best"}),
                              stream=bool(record.json.get("stream")))
        return WIRE.reply(answer("bandwidth"))

    return ScriptedServer(reply)


async def test_llm_strategy_and_cancelling_the_progress(tmp_path):
    """With the LLM on, *Tune* asks it round by round (its out-of-space proposals rejected, never run);
    the user cancels the progress notification (`window/workDoneProgress/cancel`): the search stops
    after the evaluation in flight and says so."""
    path = workspace(tmp_path / "ws")
    uri = path.as_uri()
    with llm_endpoint(0.3) as llm:
        init = {"settings": {"llm": llm_settings(llm.url)}}
        env = {"PERFLSP_CONFIG": str(tmp_path / "none.toml"), "PERFLSP_CACHE_DIR": str(tmp_path / "cache"),
               "OPENAI_API_KEY": API_KEY}
        async with session(path.parent, init_options=init, env=env) as s:
            await s.open(path)
            await s.command("perflsp.importTuningCache", {"path": str(FIXTURES / "convolution_A100.json"),
                                                          "quiet": True})
            done = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel", "device": A100,
                                                          "maxFevals": 6, "quiet": True})
            assert done["status"] == "ok" and done["strategy"] == "llm" and done["evaluations"] == 6, done
            assert any("no_such_parameter is not a tuning parameter" in n for n in done["notes"]), done["notes"]
            tuning = [r for r in llm.requests if "Tuning state (JSON)" in prompt_of(r)]
            assert tuning and all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in tuning)

            before = set(s.client.progress_reports)
            run = asyncio.ensure_future(s.command("perflsp.tuneKernel", {
                "uri": uri, "kernel": "convolution_kernel", "device": A100, "maxFevals": 200, "quiet": True}))
            token = None
            for _ in range(1000):
                token = next((t for t in set(s.client.progress_reports) - before
                              if any(isinstance(v, lsp.WorkDoneProgressReport) for v in s.client.progress_reports[t])),
                             None)
                if token is not None or run.done():
                    break
                await asyncio.sleep(0.02)
            assert token is not None, "no progress report before the search ended"
            s.client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
            result = await run
            assert result["status"] == "cancelled", result
            assert 1 <= result["evaluations"] < 200 and "cancelled" in result["message"]
            again = await s.command("perflsp.cancelTuning", {})
            assert again == {"cancelled": False, "message": "no tuning run is under way"}


async def test_a_cache_naming_no_device_is_named_after_its_file(tmp_path):
    """A Kernel Tuner cache with an empty `device_name`: stored and labelled by its file's name
    (never `unnamed.json`, never "recorded on "), and the prior, finding no such GPU in the
    database, says whose figures it ranked with."""
    path = workspace(tmp_path / "ws")
    uri, text = path.as_uri(), path.read_text()
    data = json.loads((FIXTURES / "convolution_A100.json").read_text())
    data["device_name"] = ""
    cache = tmp_path / "lab-machine.json"
    cache.write_text(json.dumps(data))
    async with session(path.parent, env={"PERFLSP_CONFIG": str(tmp_path / "none.toml")}) as s:
        await s.open(path)
        imported = await s.command("perflsp.importTuningCache", {"path": str(cache), "quiet": True})
        assert imported["device"] == "lab-machine" and Path(imported["storedAt"]).name == "lab-machine.json"
        assert "recorded on lab-machine" in imported["message"]
        titles = [a.title for a in await actions(s, uri, text)]
        assert "Tune `convolution_kernel` on lab-machine (Kernel Tuner, replaying the recorded cache)" in titles
        offer = next(t for t in titles if t.startswith("Apply the"))
        assert offer.endswith("recorded on lab-machine"), offer
        result = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel",
                                                        "maxFevals": 4, "strategy": "prior", "quiet": True})
        assert result["status"] == "ok" and result["device"] == "lab-machine", result
        assert "recorded on lab-machine" in result["message"]
        assert "note: the prior ranked configurations with the figures of" in result["message"], result["message"]
        assert "lab-machine is not in the GPU database" in result["message"]
        assert not (path.parent / ".perflsp" / "tuning" / "convolution_kernel" / "unnamed.json").exists()


async def test_measuring_refuses_a_build_command_without_the_file_and_stops_when_ncu_is_missing(tmp_path):
    """Tune on the GPU: a `buildCommand` without `{file}` is refused with the reason before anything
    is built; with ncu missing the run stops at once, stores no failed configuration and never says
    "measured on"."""
    from tests.profiling_helpers import install_fake_nvcc

    path = workspace(tmp_path / "ws")
    uri = path.as_uri()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = install_fake_nvcc(bin_dir)
    env = {"PERFLSP_CONFIG": str(tmp_path / "none.toml")}
    no_file = {"enabled": True, "ncuPath": str(bin_dir / "ncu"), "buildCommand": [str(nvcc), "-o", "{exe}", "main.cu"]}
    async with session(path.parent, init_options={"settings": {"profiling": no_file}}, env=env) as s:
        await s.open(path)
        refused = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel", "quiet": True})
        assert refused["status"] == "failed" and "buildCommand has no {file}" in refused["message"], refused
    no_ncu = {**no_file, "buildCommand": [str(nvcc), "-o", "{exe}", "{file}"]}
    async with session(path.parent, init_options={"settings": {"profiling": no_ncu}}, env=env) as s:
        await s.open(path)
        failed = await s.command("perflsp.tuneKernel", {"uri": uri, "kernel": "convolution_kernel",
                                                        "maxFevals": 20, "quiet": True})
        assert failed["status"] == "failed", failed
        assert "program not found" in failed["message"] and "measured on" not in failed["message"]
        stored = list((path.parent / ".perflsp" / "tuning").rglob("*.json"))
        assert all(not json.loads(p.read_text())["cache"] for p in stored), "no failed configuration is stored"
