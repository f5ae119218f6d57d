"""Write the settings of vscode-extension/package.json from the server's settings model.

    python vscode-extension/scripts/sync_settings.py          # rewrite package.json
    python vscode-extension/scripts/sync_settings.py --check  # exit 1 when it is out of date

The server's model (`perflsp.server.settings`) is the single source of truth for `perflsp.*`
settings; this adds the few settings only the extension reads (which interpreter starts the
server, protocol tracing) and derives the list of settings VS Code ignores from an untrusted
workspace (`capabilities.untrustedWorkspaces.restrictedConfigurations`) from the trusted flag.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_JSON = ROOT / "vscode-extension" / "package.json"
sys.path.insert(0, str(ROOT))

from perflsp.server.settings import setting_rows, vscode_configuration

# Set by the editor itself (from VS Code's workspace trust), never by a user: not contributed.
EDITOR_SUPPLIED = {"perflsp.trustedWorkspace"}

CLIENT_SETTINGS: dict[str, Any] = {
    "perflsp.python.path": {
        "type": "string",
        "default": "",
        "markdownDescription": "The Python interpreter that runs the server (`python -m perflsp serve`); it "
                               "needs perflsp installed. Empty: the Python extension's active environment "
                               "when that extension is installed, else `python3` on `PATH`. `~`, "
                               "`${userHome}` and `${workspaceFolder}` are expanded. Runs a program: "
                               "honoured only from user settings or a trusted workspace.",
        "scope": "machine-overridable",
    },
    "perflsp.trace.server": {
        "type": "string",
        "enum": ["off", "messages", "verbose"],
        "default": "off",
        "markdownDescription": "Log the protocol messages between VS Code and the server to the "
                               "`perflsp` output channel.",
        "scope": "window",
    },
}
CLIENT_RESTRICTED = ["perflsp.python.path"]


def contributed() -> tuple[dict[str, Any], list[str]]:
    configuration = vscode_configuration()
    properties = {k: v for k, v in configuration["properties"].items() if k not in EDITOR_SUPPLIED}
    for i, key in enumerate(properties):
        properties[key] = {**properties[key], "order": i}
    for key, prop in CLIENT_SETTINGS.items():
        properties[key] = {**prop, "order": len(properties)}
    restricted = sorted({row["key"] for row in setting_rows() if row["trusted"]} | set(CLIENT_RESTRICTED))
    return {"title": configuration.get("title", "perflsp"), "properties": properties}, restricted


def updated(package: dict[str, Any]) -> dict[str, Any]:
    configuration, restricted = contributed()
    out = json.loads(json.dumps(package))
    out["contributes"]["configuration"] = configuration
    out["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"] = restricted
    return out


def render(package: dict[str, Any]) -> str:
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    current_text = PACKAGE_JSON.read_text(encoding="utf-8")
    wanted = render(updated(json.loads(current_text)))
    if argv == ["--check"]:
        if wanted != current_text:
            sys.stderr.write(f"{PACKAGE_JSON} is out of date with perflsp/server/settings.py: "
                             "run `python vscode-extension/scripts/sync_settings.py`\n")
            return 1
        return 0
    if argv:
        sys.stderr.write("usage: sync_settings.py [--check]\n")
        return 2
    PACKAGE_JSON.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
