"""Real VS Code: code-server (VS Code's workbench and extension host) with the freshly built
perflsp .vsix, driven by headless Chromium. Screenshots land in .ci/artifacts/editors/vscode/."""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.editors.tools import (
    ENABLED,
    SKIP_REASON,
    artifacts,
    clean_env,
    make_workspace,
    server_env,
    server_launcher,
)

pytestmark = pytest.mark.skipif(not ENABLED, reason=SKIP_REASON)

if ENABLED:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from tests.editors.vscode_driver import CodeServer, Workbench, browser_page


@pytest.fixture(scope="module")
def session(vsix, tmp_path_factory):
    """One code-server + browser for the whole module (the tests run in order, as a person would)."""
    base = tmp_path_factory.mktemp("vscode")
    ws = make_workspace(base)
    store_profile(ws)
    python = server_launcher(base / "bin")
    server = CodeServer(base, vsix, ws, {"perflsp.python.path": python}, clean_env())
    server.good_python = python
    url = server.start()
    try:
        with browser_page(url) as page:
            yield Workbench(page, artifacts("vscode")), server, ws
    finally:
        server.stop()


H100_SAXPY = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "synthetic-raw-h100-saxpy.csv"


def store_profile(ws: Path) -> None:
    """Nsight Compute results for saxpy on the H100 (synthetic), stored as `perflsp profile import`
    stores them: the editor shows them beside the prediction."""
    subprocess.run([sys.executable, "-m", "perflsp", "profile", "import", str(H100_SAXPY), "--workspace", str(ws),
                    "--source", str(ws / "cuda" / "saxpy.cu")], check=True, capture_output=True, text=True,
                   env={**server_env(), "PERFLSP_CONFIG": str(ws / "no-user-config.toml")})


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_status_bar_shows_the_gpu(session):
    wb, _, _ = session
    wb.open_file("cuda/saxpy.cu")
    item = wb.status_item()
    item.filter(has_text="H100").wait_for(timeout=60_000)
    wb.screenshot("01-status-bar")
    assert "H100" in item.inner_text()


def test_problems_panel_lists_the_roofline_verdict(session):
    wb, _, _ = session
    wb.page.keyboard.press("Control+Shift+M")
    panel = wb.page.locator(".markers-panel")
    panel.wait_for()
    panel.locator(".monaco-list-row", has_text="bandwidth-bound").first.wait_for(timeout=60_000)
    text = panel.inner_text()
    wb.screenshot("02-problems")
    assert "saxpy" in text and "roofline/bandwidth-bound" in text, text[:2000]


def test_hover_on_the_kernel_shows_the_verdict(session):
    wb, _, ws = session
    path = ws / "cuda" / "saxpy.cu"
    line = line_of(path, "__global__")
    column = path.read_text().splitlines()[line - 1].index("saxpy(") + 2
    wb.page.locator(".monaco-editor .view-lines").first.click()  # the editor, not the Problems panel, has focus
    wb.show_line(line, column, "__global__")
    wb.command("Show or Focus Hover")  # the keyboard's hover (Ctrl+K Ctrl+I) on the kernel's name
    # (the Problems marker shows at once; wait for the language server's hover beside it)
    hover = wb.page.locator(".monaco-hover:visible").filter(has_text="Predicted vs measured").first
    hover.wait_for(timeout=30_000)
    text = hover.inner_text()
    wb.screenshot("03-hover")
    assert "saxpy" in text and "bandwidth-bound" in text, text[:2000]
    assert "Predicted vs measured on H100 SXM5 80GB" in text, text[:2000]  # the stored profile
    wb.page.keyboard.press("Escape")


def test_explain_kernel_opens_the_analysis(session):
    wb, _, _ = session
    wb.command("perflsp: Explain Kernel")  # the cursor is still in saxpy
    frame = wb.webview_frame("h1")
    heading = frame.locator("h1", has_text="saxpy")
    heading.wait_for(timeout=30_000)
    text = frame.locator("body").inner_text()
    wb.screenshot("04-explain")
    assert "bandwidth-bound" in text and "H100" in text, text[:1500]
    wb.command("View: Close Editor")


def test_quick_fix_edits_the_launch(session):
    wb, _, ws = session
    wb.open_file("lints/launch_slips.cu")
    path = ws / "lints" / "launch_slips.cu"
    line = line_of(path, "scale<<<")
    # the server's diagnostics for this file first, so the lightbulb has something to offer
    wb.page.locator(".markers-panel .monaco-list-row", has_text="block-size-not-warp-multiple").first.wait_for(timeout=60_000)
    wb.show_line(line, 5, "scale<<<")
    menu = wb.page.locator(".action-widget")
    option = menu.locator(".action-widget-action, .monaco-list-row", has_text="threads per block").first
    for attempt in range(3):  # Ctrl+. right after the cursor moved can be swallowed while focus settles
        wb.page.keyboard.press("Control+.")
        try:
            option.wait_for(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            wb.page.keyboard.press("Escape")
    wb.screenshot("05-quick-fix-menu")
    title = option.inner_text()
    option.click()
    block = re.search(r"with (\d+) threads", title).group(1)
    before = path.read_text()
    wb.page.keyboard.press("Control+S")
    # the fix rewrites the launch's block size, or the macro the launch uses for it
    changed = wait_for_saved_change(path, before, lambda line: block in line and ("ODD_BLOCK" in line or "scale<<<" in line))
    assert changed
    wb.show_line(line_of(path, "ODD_BLOCK " + block), 1, "ODD_BLOCK " + block)
    wb.screenshot("06-quick-fix-applied")


def wait_for_saved_change(path: Path, before: str, wanted, timeout_s: float = 15) -> list[str]:
    """The added lines once the saved file has one that `wanted` accepts (a save may be read mid-write)."""
    deadline = time.monotonic() + timeout_s
    changed: list[str] = []
    while time.monotonic() < deadline:
        after = path.read_text()
        changed = [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
                   if line.startswith("+") and not line.startswith("+++")]
        if any(wanted(line) for line in changed):
            return changed
        time.sleep(0.1)
    raise AssertionError(f"{path} was not changed as the quick fix says within {timeout_s} s; added lines: {changed}")


def test_roofline_view_has_one_point_per_kernel(session):
    wb, _, ws = session
    expected = kernel_count(ws)
    wb.command("perflsp: Show Roofline")
    frame = wb.webview_frame("#chart")
    body = frame.locator("body[data-point-count]")
    body.wait_for(timeout=60_000)
    frame.locator(f"#kernels tr >> nth={expected - 1}").wait_for(timeout=60_000)
    rows = frame.locator("#kernels tr").all_inner_texts()
    # room for the picture: no panel, the roofline's editor group maximised
    wb.command("View: Hide Panel")
    wb.command("View: Toggle Maximize Editor Group")
    frame.locator("#chart").wait_for()
    wb.page.wait_for_timeout(500)  # the chart redraws at its new size (animation is off)
    wb.screenshot("07-roofline")
    point = first_point_position(frame)
    frame.locator("#chart").hover(position={"x": point["x"], "y": point["y"]})
    wb.page.wait_for_timeout(300)  # the tooltip is drawn on the canvas: only the picture shows it
    wb.screenshot("08-roofline-tooltip")
    # each point is judged against its own precision's roof: the axis, legend and note say so; the
    # hovered point's roof is highlighted and its tooltip names what decides it
    info = frame.evaluate("() => window.perflspChartInfo()")
    unit = "op/B" if point["precision"].startswith("int") else "FLOP/B"
    name = point["precision"].upper().replace("_TENSOR", " tensor")
    assert f"{name} {unit}" in info["x"] and "deciding precision" in info["x"], info["x"]
    assert "FLOP / DRAM byte" not in info["x"]
    assert any(label.startswith(f"{name} roof") and "judges" in label for label in info["legend"]), info["legend"]
    assert info["highlighted"] == point["precision"] and info["roofWidths"][point["precision"]] == 5, info
    assert any(line.startswith(f"Judged against the {name} roof") for line in info["tooltip"]), info["tooltip"]
    assert any(line.startswith("Decided by") for line in info["tooltip"]), info["tooltip"]
    note = frame.locator("#judged").inner_text()
    assert "judged against the roof of its own deciding precision" in note, note
    # clicking a point opens its kernel
    frame.locator("#chart").click(position={"x": point["x"], "y": point["y"]})
    file_name = point["uri"].rsplit("/", 1)[-1]
    wb.page.locator(".tab.active", has_text=file_name).wait_for(timeout=15_000)
    wb.page.locator(".statusbar-item", has_text=f"Ln {point['line'] + 1},").wait_for(timeout=15_000)
    violations = [m for m in wb.page.console_messages if "Content Security Policy" in m]
    assert not violations, violations  # the chart runs under the webview's strict policy
    predicted = [r for r in rows if "predicted" in r]
    assert len(predicted) == expected, f"{expected} kernels, rows: {rows}"
    measured = [r for r in rows if "measured" in r]  # the stored profile of saxpy (store_profile)
    assert len(measured) == 1 and "saxpy" in measured[0] and "bandwidth" in measured[0], rows
    assert int(frame.locator("body").get_attribute("data-point-count")) == len(rows)


def first_point_position(frame) -> dict:
    """Where the chart drew its first kernel point (canvas coordinates)."""
    return frame.evaluate("() => window.perflspPointPosition(0)")


def kernel_count(ws: Path) -> int:
    """Kernels in the workspace, counted by the CLI (`perflsp kernels --json`), not the editor."""
    out = subprocess.run([sys.executable, "-m", "perflsp", "kernels", "--json", str(ws)],
                         capture_output=True, text=True, env=server_env(), check=True).stdout
    return sum(1 for entry in json.loads(out) if entry["entry"] == "kernel")


def test_status_bar_click_picks_gpus_from_the_database(session):
    wb, _, _ = session
    wb.status_item().click()
    rows = wb.page.locator(".quick-input-list .monaco-list-row")
    rows.filter(has_text="TFLOP/s").first.wait_for(timeout=30_000)
    assert rows.filter(has_text="GB/s").count() > 3, "the picker shows the database with specs"
    box = wb.page.locator(".quick-input-widget input")
    box.fill("3080")
    row = rows.filter(has_text="RTX 3080").first
    row.wait_for()
    row.locator(".monaco-checkbox, input[type=checkbox], .quick-input-list-checkbox").first.click()
    wb.screenshot("11-gpu-picker")
    wb.page.locator(".quick-input-widget .monaco-button", has_text="OK").click()
    wb.status_item().filter(has_text="rtx-3080").wait_for(timeout=30_000)
    text = wb.status_item().inner_text()
    wb.screenshot("12-two-gpus")
    assert "h100" in text and "rtx-3080" in text, text


def test_walkthrough_opens_and_writes_the_project_config(session):
    """The first-run walkthrough: its steps (GPUs, .perflsp.toml, LLM, profiling, trust) show, and
    its "Write .perflsp.toml" button writes the GPUs just picked (h100 + rtx-3080) into the file."""
    wb, _, ws = session
    wb.command("perflsp: Get Started")
    page = wb.page
    container = page.locator(".gettingStartedContainer")
    container.get_by_text("Get started with perflsp").first.wait_for(timeout=30_000)
    for title in ("Pick the GPUs you target", "Write .perflsp.toml for the team", "Optional: an LLM advisor",
                  "Optional: measure with Nsight Compute", "Who may switch these on: workspace trust"):
        container.get_by_text(title).first.wait_for(timeout=10_000)
    # the first step is open, its Markdown (rendered beside it) explains the verdict per GPU
    wb.webview_frame("text=Which GPUs?", timeout_s=30)
    wb.screenshot("15-walkthrough")
    container.get_by_text("Optional: an LLM advisor").first.click()
    llm_media = wb.webview_frame("text=What it sends", timeout_s=30)
    assert "honoured only from your" in llm_media.locator("body").inner_text()
    container.get_by_text("Write .perflsp.toml for the team").first.click()
    container.locator(".monaco-button", has_text=re.compile(r"^Write \.perflsp\.toml$")).first.click()
    config = ws / ".perflsp.toml"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "rtx-3080-10gb" not in config.read_text():
        time.sleep(0.2)
    text = config.read_text()
    assert re.search(r'^gpus = \["h100-sxm5-80gb", "rtx-3080-10gb"\]$', text, re.M), text
    wb.page.locator(".tab.active", has_text=".perflsp.toml").wait_for(timeout=15_000)
    wb.screenshot("15b-walkthrough-wrote-config")
    wb.command("View: Close All Editors")


def test_wrong_interpreter_gives_a_clear_message(session, tmp_path):
    wb, server, _ = session
    bad = str(tmp_path / "no" / "such" / "python")
    server.write_settings({"perflsp.python.path": bad})
    text = wb.wait_for_toast(re.escape(bad))
    wb.screenshot("09-wrong-interpreter")
    assert "cannot be run" in text and "perflsp.python.path" in text, text
    assert "perflsp" in wb.status_item().inner_text()


def test_missing_perflsp_gives_the_install_command(session, tmp_path):
    wb, server, _ = session
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    server.write_settings({"perflsp.python.path": python})
    text = wb.wait_for_toast(re.escape(f"perflsp is not installed in {python}"))
    wb.screenshot("10-missing-perflsp")
    # perflsp is not on PyPI: the command installs the wheel the .vsix carries
    assert re.search(re.escape(f"{python} -m pip install ") + r"\S*/python/perflsp-[^ ]+\.whl", text), text
    server.write_settings({"perflsp.python.path": server.good_python})
