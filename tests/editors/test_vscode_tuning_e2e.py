"""Tuning in real VS Code (code-server + the built .vsix, driven by headless Chromium): a Kernel
Tuner cache recorded on an A100 (cut from benchmark_hub, tests/fixtures/tuning) is imported into
the workspace; the *Tune* code action replays it, showing progress per evaluation, then offers
the tuned edit, which applies, saves and re-parses cleanly. Screenshots land in
.ci/artifacts/editors/vscode/."""

from __future__ import annotations

import re
import shutil
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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tuning"


WATCH_PROGRESS = """() => {
  window.perflspProgressSeen = [];
  const look = () => {
    for (const el of document.querySelectorAll('.notification-toast, .statusbar-item, .notifications-center')) {
      const text = el.textContent || '';
      if (text.includes('tuning convolution_kernel') && !window.perflspProgressSeen.includes(text)) {
        window.perflspProgressSeen.push(text);
      }
    }
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true,
                                                     attributes: true});
}"""


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def code_action(wb, title_part: str):
    """Open the code action menu at the cursor and return the entry whose title contains `title_part`."""
    menu = wb.page.locator(".action-widget")
    option = menu.locator(".action-widget-action, .monaco-list-row", has_text=title_part).first
    for attempt in range(4):  # Ctrl+. right after the cursor moved can be swallowed while focus settles
        wb.page.keyboard.press("Control+.")
        try:
            option.wait_for(timeout=10_000)
            return option
        except PlaywrightTimeout:
            if attempt == 3:
                raise
            wb.page.keyboard.press("Escape")
    raise AssertionError("unreachable")


def test_tune_over_a_recorded_cache_then_apply_the_tuned_edit(vsix, tmp_path):
    ws = make_workspace(tmp_path, gpus=("a100-sxm4-40gb",))
    source = ws / "cuda" / "convolution.cu"
    shutil.copy(FIXTURES / "convolution.cu", source)
    subprocess.run([sys.executable, "-m", "perflsp", "tune", "import", str(FIXTURES / "convolution_A100.json"),
                    "--workspace", str(ws)], check=True, capture_output=True, text=True, env=server_env())
    python = server_launcher(tmp_path / "bin")
    server = CodeServer(tmp_path, vsix, ws, {"perflsp.python.path": python}, clean_env())
    url = server.start()
    shots = artifacts("vscode")
    try:
        with browser_page(url) as page:
            wb = Workbench(page, shots)
            for attempt in range(3):  # quick open lists a new workspace's files once its search has indexed them
                try:
                    wb.open_file("cuda/convolution.cu")
                    break
                except PlaywrightTimeout:
                    if attempt == 2:
                        wb.screenshot("failed-tune-open-file")
                        raise
                    page.keyboard.press("Escape")
            wb.status_item().filter(has_text="A100").wait_for(timeout=60_000)
            line = line_of(source, "__global__ void convolution_kernel")
            wb.page.locator(".monaco-editor .view-lines").first.click()
            wb.show_line(line, 22, "convolution_kernel")
            option = code_action(wb, "Tune `convolution_kernel` on A100-PCIE-40GB")
            wb.screenshot("20-tune-action")
            # record every progress text VS Code renders (a replay is quick: a poll could miss it)
            page.evaluate(WATCH_PROGRESS)
            option.click()
            done = wb.wait_for_toast(r"convolution_kernel: best .* after 50 evaluations")
            wb.screenshot("22-tune-done")
            assert "recorded on NVIDIA A100-PCIE-40GB" in done, done
            seen = page.evaluate("() => window.perflspProgressSeen")
            assert any(re.search(r"\d+/50: .*best", text) for text in seen), f"no per-evaluation progress: {seen!r}"
            speedup = re.search(r"(\d+\.\d+)x faster than current", done).group(1)
            # the tuned edit is offered and applies
            wb.show_line(line, 22, "convolution_kernel")
            option = code_action(wb, "Apply the A100-PCIE-40GB-tuned configuration")
            title = option.inner_text()
            assert f"{speedup}x faster than current" in title and "recorded on NVIDIA A100-PCIE-40GB" in title, title
            wb.screenshot("23-tuned-edit-offered")
            before = source.read_text()
            option.click()
            wb.page.keyboard.press("Control+S")
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and source.read_text() == before:
                time.sleep(0.1)
            after = source.read_text()
            assert after != before, "the tuned edit was not applied and saved"
            changed = {m.group(1): m.group(2) for m in re.finditer(r"#define (\w+) (\d+)", after)}
            assert any(changed.get(k) != v for k, v in re.findall(r"#define (\w+) (\d+)", before)), changed
            # it re-parses cleanly: the CLI finds the same kernels, and the editor still judges the kernel
            out = subprocess.run([sys.executable, "-m", "perflsp", "kernels", "--json", str(source)],
                                 capture_output=True, text=True, env=server_env(), check=True).stdout
            assert '"convolution_kernel"' in out
            from perflsp.source.parser import parse

            assert not parse(after.encode()).root_node.has_error
            wb.page.keyboard.press("Control+Shift+M")
            panel = wb.page.locator(".markers-panel")
            panel.locator(".monaco-list-row", has_text="convolution_kernel").first.wait_for(timeout=60_000)
            wb.screenshot("24-tuned-edit-applied")
    finally:
        server.stop()
