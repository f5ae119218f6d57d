"""VS Code workspace trust, for real: code-server with trust on opens the folder in Restricted Mode;
perflsp runs limited, the server hears the trust state, and hears again when the user grants it."""

from __future__ import annotations

import json

import pytest

from tests.editors.tools import (
    ENABLED,
    SKIP_REASON,
    artifacts,
    clean_env,
    make_workspace,
    server_launcher,
)

pytestmark = pytest.mark.skipif(not ENABLED, reason=SKIP_REASON)

if ENABLED:
    from tests.editors.vscode_driver import CodeServer, Workbench, browser_page


def llm_line(tooltip: str) -> str:
    return next(line for line in tooltip.splitlines() if line.startswith("LLM advisor"))


def test_trust_state_reaches_the_server_and_follows_a_grant(vsix, tmp_path):
    """Workspace trust on: the folder opens in Restricted Mode, perflsp runs limited (the server says so),
    then trust is granted from the Manage Workspace Trust editor and the server hears of it."""
    ws = make_workspace(tmp_path)
    # the workspace asks for the LLM advisor: a trusted-only setting, so VS Code and the server
    # ignore it until the user trusts the folder
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text(json.dumps({"perflsp.llm.enabled": True}))
    python = server_launcher(tmp_path / "bin")
    server = CodeServer(tmp_path, vsix, ws, {"perflsp.python.path": python}, clean_env(), workspace_trust=True)
    url = server.start()
    try:
        with browser_page(url) as page:
            wb = Workbench(page, artifacts("vscode"))
            # code-server opens a folder it has not been told to trust in Restricted Mode
            page.locator(".statusbar-item", has_text="Restricted Mode").first.wait_for(timeout=30_000)
            wb.open_file("cuda/saxpy.cu")
            wb.status_item().filter(has_text="H100").wait_for(timeout=60_000)
            restricted = wb.status_tooltip("Workspace: restricted")
            wb.screenshot("13-restricted-mode")
            assert "(perflsp.llm.enabled)" in llm_line(restricted), restricted  # the workspace's wish is not honoured
            # only what the workspace set reaches the server as workspace settings: no warnings about defaults
            assert "ignored" not in wb.toasts(), wb.toasts()
            wb.command("Workspaces: Manage Workspace Trust")
            page.locator(".workspace-trust-editor .monaco-button", has_text="Trust").first.click(timeout=30_000)
            trusted = wb.status_tooltip("Workspace: trusted")
            assert "(perflsp.llm.enabled)" not in llm_line(trusted), trusted  # now it is
            wb.command("View: Close Editor")  # the trust editor opens as a modal
            page.locator(".statusbar-item", has_text="Restricted Mode").first.wait_for(state="hidden")
            wb.screenshot("14-trust-granted")
    finally:
        server.stop()
