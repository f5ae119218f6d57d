"""Runs code-server (the real VS Code workbench and extension host) with the freshly built perflsp
.vsix, and drives it with headless Debian Chromium through playwright (no browser download)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError

from tests.editors.tools import ROOT, artifacts, free_port, installed_env, require

EXTENSION_DIR = ROOT / "vscode-extension"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def build_vsix() -> Path:
    """PERFLSP_VSIX when given, else `npm ci` (when needed) and `npm run package` in vscode-extension/."""
    given = os.environ.get("PERFLSP_VSIX")
    if given:
        require(Path(given).is_file(), f"the .vsix {given}")
        return Path(given)
    if not (EXTENSION_DIR / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=EXTENSION_DIR, check=True,
                       stdin=subprocess.DEVNULL)
    subprocess.run(["npm", "run", "-s", "package"], cwd=EXTENSION_DIR, check=True, stdin=subprocess.DEVNULL)
    return EXTENSION_DIR / "perflsp.vsix"


class CodeServer:
    def __init__(self, base: Path, vsix: Path, workspace: Path, user_settings: dict, env: dict[str, str],
                 workspace_trust: bool = False):
        self.workspace_trust = workspace_trust  # False: --disable-workspace-trust (every folder trusted)
        tools = installed_env()
        self.binary = tools.get("PERFLSP_CODE_SERVER", "")
        self.node_dir = tools.get("PERFLSP_NODE24_DIR", "")
        require(bool(self.binary) and os.access(self.binary, os.X_OK), "code-server")
        require(bool(self.node_dir) and os.access(Path(self.node_dir) / "bin" / "node", os.X_OK), "Node 24")
        self.base, self.vsix, self.workspace = base, vsix, workspace
        self.user_data = base / "user-data"
        self.extensions = base / "extensions"
        (self.user_data / "User").mkdir(parents=True, exist_ok=True)
        self.write_settings(user_settings)
        self.env = {**env, "PATH": f"{self.node_dir}/bin:{env.get('PATH', os.defpath)}",
                    "XDG_CONFIG_HOME": str(base / "xdg-config"), "XDG_DATA_HOME": str(base / "xdg-data"),
                    "XDG_CACHE_HOME": str(base / "xdg-cache")}
        self.port = free_port()
        self.log = artifacts("vscode") / "code-server.log"
        self.proc: subprocess.Popen | None = None

    def write_settings(self, settings: dict) -> None:
        base = {"workbench.startupEditor": "none", "workbench.tips.enabled": False,
                "extensions.ignoreRecommendations": True, "telemetry.telemetryLevel": "off",
                "workbench.colorTheme": "Default Dark Modern", "editor.hover.delay": 200,
                "window.commandCenter": False, "workbench.layoutControl.enabled": False,
                "chat.disableAIFeatures": True, "editor.minimap.enabled": False, "files.autoSave": "off",
                "workbench.secondarySideBar.defaultVisibility": "hidden", "workbench.welcomePage.walkthroughs.openOnInstall": False}
        (self.user_data / "User" / "settings.json").write_text(json.dumps({**base, **settings}, indent=2))
        # code-server is a remote window: machine-scoped settings (the interpreter) are read from here
        (self.user_data / "Machine").mkdir(exist_ok=True)
        (self.user_data / "Machine" / "settings.json").write_text(json.dumps(settings, indent=2))

    def _args(self) -> list[str]:
        return [self.binary, "--user-data-dir", str(self.user_data), "--extensions-dir", str(self.extensions)]

    def start(self) -> str:
        subprocess.run([*self._args(), "--install-extension", str(self.vsix), "--force"], env=self.env,
                       check=True, capture_output=True, text=True, timeout=120)
        log = self.log.open("a")
        # its own process group: a file-watcher child outlives the main process otherwise
        self.proc = subprocess.Popen(
            [*self._args(), "--bind-addr", f"127.0.0.1:{self.port}", "--auth", "none", "--disable-telemetry",
             "--disable-update-check", "--disable-getting-started-override",
             *([] if self.workspace_trust else ["--disable-workspace-trust"]), str(self.workspace)],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=self.base)  # not the checkout: nothing may import perflsp from the current directory
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"code-server exited ({self.proc.returncode}); see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2):
                    return f"http://127.0.0.1:{self.port}/?folder={self.workspace}"
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"code-server did not answer on port {self.port} within 60 s; see {self.log}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@contextmanager
def browser_page(url: str) -> Iterator:
    from playwright.sync_api import sync_playwright

    chromium = installed_env().get("PERFLSP_CHROMIUM", "/usr/bin/chromium")
    require(os.access(chromium, os.X_OK), f"Chromium ({chromium})")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.console_messages = []  # type: ignore[attr-defined]
        page.on("console", lambda m: page.console_messages.append(f"{m.type}: {m.text}"))  # type: ignore[attr-defined]
        page.goto(url)
        page.locator(".monaco-workbench").wait_for(timeout=60_000)
        try:
            yield page
        finally:
            (artifacts("vscode") / "browser-console.log").write_text("\n".join(page.console_messages))  # type: ignore[attr-defined]
            context.close()
            browser.close()


class Workbench:
    """What a person does in VS Code, in playwright terms."""

    def __init__(self, page, shots: Path):
        self.page = page
        self.shots = shots

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def command(self, title: str) -> None:
        widget = self.page.locator(".quick-input-widget")
        widget.wait_for(state="hidden")  # F1 while the last one still closes would toggle it away
        self.page.keyboard.press("F1")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible")
        box.fill(">" + title)
        self.page.locator(".quick-input-list .monaco-list-row", has_text=title).first.wait_for(timeout=10_000)
        self.page.keyboard.press("Enter")
        widget.wait_for(state="hidden")

    def open_file(self, relative: str) -> None:
        self.page.keyboard.press("Control+P")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible")
        box.fill(relative)
        self.page.locator(".quick-input-list .monaco-list-row", has_text=Path(relative).name).first.wait_for(timeout=15_000)
        self.page.keyboard.press("Enter")
        self.page.locator(f".tab[data-resource-name='{Path(relative).name}'], .tab:has-text('{Path(relative).name}')").first.wait_for(timeout=15_000)
        self.page.locator(".monaco-editor .view-lines").first.wait_for()

    def show_line(self, line: int, column: int, text: str) -> None:
        """Put the cursor at line:column and wait until the editor renders that line."""
        self.go_to_line(line, column)
        self.page.locator(".view-line", has_text=text).first.wait_for(timeout=15_000)

    def go_to_line(self, line: int, column: int = 1) -> None:
        self.page.keyboard.press("Control+G")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible")
        box.fill(f":{line}:{column}")
        self.page.keyboard.press("Enter")
        self.page.locator(".quick-input-widget").wait_for(state="hidden")

    def toasts(self) -> str:
        return " | ".join(self.page.locator(".notifications-toasts .notification-toast").all_inner_texts())

    def wait_for_toast(self, pattern: str, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.toasts()
            if re.search(pattern, text):
                return text
            self.page.wait_for_timeout(250)
        raise AssertionError(f"no notification matching {pattern!r} within {timeout_s} s; shown: {self.toasts()!r}")

    def webview_frame(self, selector: str, timeout_s: float = 60):
        """The (nested) webview frame that contains `selector`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for frame in self.page.frames:
                try:
                    if frame.locator(selector).count() > 0:
                        return frame
                except PlaywrightError:  # a frame detached while we looked
                    continue
            self.page.wait_for_timeout(250)
        raise AssertionError(f"no webview shows {selector!r} within {timeout_s} s")

    def status_tooltip(self, text: str, timeout_s: float = 30) -> str:
        """The perflsp status item's tooltip (VS Code also gives it as the item's aria-label), once it
        contains `text`."""
        deadline = time.monotonic() + timeout_s
        shown = ""
        while time.monotonic() < deadline:
            shown = self.status_item().get_attribute("aria-label") or ""
            if text in shown:
                return shown
            self.page.wait_for_timeout(250)
        raise AssertionError(f"the status tooltip never said {text!r}; last: {shown!r}")

    def status_item(self):
        return self.page.locator(".statusbar-item[id$='perflsp.status']")
