"""vscode-extension/package.json's settings are generated from the server's settings model."""

from __future__ import annotations

import importlib.util
import json

from tests.editors.tools import ROOT

SCRIPT = ROOT / "vscode-extension" / "scripts" / "sync_settings.py"


def load_sync():
    spec = importlib.util.spec_from_file_location("sync_settings", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_package_json_is_in_sync_with_the_settings_model():
    sync = load_sync()
    current = (ROOT / "vscode-extension" / "package.json").read_text()
    assert sync.render(sync.updated(json.loads(current))) == current, (
        "vscode-extension/package.json is out of date: run `python vscode-extension/scripts/sync_settings.py`")


def test_every_server_setting_is_contributed_with_its_scope():
    from perflsp.server.settings import setting_rows

    package = json.loads((ROOT / "vscode-extension" / "package.json").read_text())
    properties = package["contributes"]["configuration"]["properties"]
    for row in setting_rows():
        if row["key"] == "perflsp.trustedWorkspace":
            assert row["key"] not in properties  # the editor sets it from workspace trust
            continue
        assert properties[row["key"]]["scope"] == row["scope"], row["key"]
    assert properties["perflsp.enable"]["scope"] == "resource"
    assert properties["perflsp.python.path"]["scope"] == "machine-overridable"


def test_untrusted_workspaces_cannot_set_trusted_settings():
    from perflsp.server.settings import setting_rows

    package = json.loads((ROOT / "vscode-extension" / "package.json").read_text())
    untrusted = package["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    restricted = set(untrusted["restrictedConfigurations"])
    trusted = {row["key"] for row in setting_rows() if row["trusted"]}
    assert trusted and trusted <= restricted
    assert {"perflsp.llm.baseUrl", "perflsp.profiling.runCommand", "perflsp.nvccPath", "perflsp.python.path"} <= restricted
