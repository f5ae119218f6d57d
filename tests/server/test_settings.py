"""The settings model is the one source of the VS Code schema and docs/settings.md."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from perflsp.server.settings import Settings, setting_rows, settings_markdown, trusted_fields, vscode_configuration

ROOT = Path(__file__).resolve().parents[2]


def test_docs_page_is_generated_from_the_model():
    assert (ROOT / "docs" / "settings.md").read_text(encoding="utf-8") == settings_markdown(), \
        "docs/settings.md is stale: run `python -m perflsp.server.settings --docs > docs/settings.md`"


def test_every_setting_is_documented_with_scope():
    rows = setting_rows()
    keys = {r["key"] for r in rows}
    for name in Settings.model_fields:
        if name not in ("llm", "profiling"):
            assert any(k == "perflsp." + Settings.model_fields[name].alias for k in keys), name
    for row in rows:
        assert row["description"], f"{row['key']} has no description"
        assert row["scope"] in ("application", "machine", "machine-overridable", "window", "resource")
        assert row["key"].startswith("perflsp.") and "_" not in row["key"], row["key"]


def test_vscode_schema_is_valid_json_schema_and_defaults_validate():
    config = vscode_configuration()
    assert config["title"] == "perflsp"
    for key, prop in config["properties"].items():
        jsonschema.Draft7Validator.check_schema(prop)
        jsonschema.validate(prop["default"], {k: v for k, v in prop.items() if k not in ("scope", "markdownDescription")})
    assert config["properties"]["perflsp.gpus"]["default"] == ["h100"]
    assert config["properties"]["perflsp.llm.baseUrl"]["scope"] == "resource"
    assert "Trusted" in config["properties"]["perflsp.nvccPath"]["markdownDescription"]


def test_trusted_fields_cover_code_leaving_the_machine_and_programs():
    trusted = trusted_fields()
    assert {"nvcc_path", "resource_usage", "llm.enabled", "llm.base_url", "llm.api_key_env",
            "profiling.enabled", "profiling.build_command", "profiling.run_command", "profiling.launcher",
            "profiling.ncu_path"} <= trusted
    assert "gpus" not in trusted and "rules" not in trusted and "profiling.run_timeout_s" not in trusted


def test_cli_prints_schema_and_docs():
    out = subprocess.run([sys.executable, "-m", "perflsp.server.settings", "--vscode-schema"], capture_output=True,
                         text=True, cwd=ROOT, check=True).stdout
    assert "perflsp.enable" in json.loads(out)["properties"]
    bad = subprocess.run([sys.executable, "-m", "perflsp.server.settings", "--nope"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "usage" in bad.stderr


@pytest.mark.parametrize("value", [[], ["  "]])
def test_gpus_cannot_be_empty(value):
    with pytest.raises(ValueError, match="at least one GPU"):
        Settings(gpus=value)


def test_rule_levels_accept_aliases():
    assert Settings(rules={"roofline/uncertain": "Info", "x/y": "none"}).rules == {"roofline/uncertain": "information", "x/y": "off"}
