"""Merging settings layers, trust, validation messages that name the file and the field."""

from pathlib import Path

import pytest

from perflsp.server.config import ConfigProblem, Layer, Origin, client_values, read_config_file, resolve
from perflsp.server.workspace import WorkspaceState, compile_flag_macros


def file_layer(tmp_path: Path, text: str) -> Layer:
    (tmp_path / ".perflsp.toml").write_text(text)
    layer = read_config_file(tmp_path)
    assert layer is not None
    return layer


def test_defaults():
    config = resolve([])
    assert config.settings.enable and config.gpu_ids == ("h100-sxm5-80gb",)
    assert not config.workspace_trusted and config.ignored == ()


def test_precedence_file_over_workspace_over_init_options(tmp_path):
    layers = [
        Layer(Origin.INIT_OPTIONS, "initializationOptions", {"gpus": ["a100"], "logLevel": "debug", "rules": {"roofline/uncertain": "off"}}),
        Layer(Origin.WORKSPACE, "workspace/configuration", {"gpus": ["rtx3080"], "rules": {"occupancy/low": "hint"}}),
        file_layer(tmp_path, 'gpus = ["h100", "mi300x"]\n[rules]\n"occupancy/low" = "error"\n'),
    ]
    config = resolve(layers, root=tmp_path)
    assert config.gpu_ids == ("h100-sxm5-80gb", "mi300x")
    assert config.settings.log_level == "debug"
    assert config.settings.rules == {"roofline/uncertain": "off", "occupancy/low": "error"}  # tables merge by code
    assert config.origin_of("gpus") is Origin.FILE


def test_config_file_accepts_snake_case_sections_and_gpu_tables(tmp_path):
    layer = file_layer(tmp_path, """
enable = false
compile_flags = ["-DBLOCK=128"]
[llm]
model = "qwen"
baseUrl = "http://127.0.0.1:11434"
[[gpu]]
id = "my-card"
name = "My Card"
vendor = "nvidia"
base = "rtx-3080-10gb"
""")
    assert layer.values["user_gpus"][0]["id"] == "my-card"
    assert layer.values["llm"]["baseUrl"] == "http://127.0.0.1:11434"


def test_invalid_values_name_the_file_and_field(tmp_path):
    layer = file_layer(tmp_path, 'gpus = ["h100", "h1000"]\nlogLevel = "loud"\ndebounceMs = -3\n')
    with pytest.raises(ConfigProblem) as err:
        resolve([layer], root=tmp_path)
    text = "\n".join(err.value.problems)
    assert f"{tmp_path / '.perflsp.toml'}: logLevel:" in text
    assert "debounceMs" in text and "greater than or equal to 0" in text
    layer = file_layer(tmp_path, 'gpus = ["h100", "h1000"]\n')
    with pytest.raises(ConfigProblem) as err:
        resolve([layer], root=tmp_path)
    assert err.value.problems == [f"{tmp_path / '.perflsp.toml'}: gpus[1]: unknown GPU 'h1000'; did you mean "
                                  + err.value.problems[0].split("did you mean ")[1]]


def test_unknown_keys_and_rules_are_reported(tmp_path):
    with pytest.raises(ConfigProblem) as err:
        resolve([file_layer(tmp_path, 'gpu_list = ["h100"]\n[rules]\n"roofline/bandwith-bound" = "hint"\n')],
                root=tmp_path, known_rules={"occupancy/low"})
    text = "\n".join(err.value.problems)
    assert "unknown setting 'gpu_list'" in text
    assert "unknown rule 'roofline/bandwith-bound'; did you mean 'roofline/bandwidth-bound'?" in text


def test_toml_syntax_error_is_reported_with_the_file(tmp_path):
    (tmp_path / ".perflsp.toml").write_text("gpus = [\n")
    with pytest.raises(ConfigProblem) as err:
        read_config_file(tmp_path)
    assert err.value.problems[0].startswith(f"{tmp_path / '.perflsp.toml'}:1: invalid TOML: ")  # the file and line


def test_workspace_layers_cannot_set_trusted_settings_unless_trusted(tmp_path):
    text = ('nvccPath = "/bin/sh"\nresourceUsage = true\ntrustedWorkspace = true\n'
            '[profiling]\nenabled = true\nbuildCommand = ["make"]\nrunTimeoutS = 30\n')
    config = resolve([file_layer(tmp_path, text)], root=tmp_path)
    assert config.settings.nvcc_path is None and not config.settings.resource_usage
    assert not config.settings.profiling.enabled and config.settings.profiling.build_command == []
    assert config.settings.profiling.run_timeout_s == 30  # harmless knobs are taken
    assert not config.workspace_trusted  # the file cannot declare itself trusted
    ignored = "\n".join(config.ignored)
    assert "nvccPath ignored: the workspace is not trusted" in ignored and "trustedWorkspace ignored" in ignored
    assert "perflsp.profiling.enabled ignored" in ignored

    trusted = resolve([file_layer(tmp_path, text)], root=tmp_path, client_trusted=True)
    assert trusted.settings.nvcc_path == "/bin/sh" and trusted.settings.profiling.enabled
    user = resolve([Layer(Origin.INIT_OPTIONS, "initializationOptions", {"nvccPath": "/usr/bin/nvcc",
                                                                          "profiling": {"enabled": True}})])
    assert user.settings.nvcc_path == "/usr/bin/nvcc" and user.settings.profiling.enabled


def test_trust_flag_from_client_settings(tmp_path):
    config = resolve([Layer(Origin.WORKSPACE, "workspace/configuration", {"trustedWorkspace": True, "nvccPath": "/x"})])
    assert config.workspace_trusted and config.settings.nvcc_path == "/x"


def test_llm_origins_are_recorded_for_the_endpoint_policy(tmp_path):
    from perflsp.server.advice import decision_for

    layer = file_layer(tmp_path, '[llm]\nenabled = true\nmodel = "m"\nbaseUrl = "https://llm.example.com/v1"\n')
    decision = decision_for(resolve([layer], root=tmp_path))
    assert not decision.allowed and "untrusted" in decision.reason
    trusted = decision_for(resolve([layer], root=tmp_path, client_trusted=True))
    assert trusted.allowed and not trusted.loopback
    loopback = file_layer(tmp_path, '[llm]\nenabled = true\nmodel = "m"\nbaseUrl = "http://127.0.0.1:8000/v1"\n')
    decision = decision_for(resolve([loopback], root=tmp_path))
    assert decision.allowed and decision.loopback


def test_user_gpus_and_gpus_file(tmp_path):
    (tmp_path / "cards.toml").write_text((Path(__file__).parents[2] / "examples" / "gpus" / "rtx3080-study.toml").read_text())
    config = resolve([file_layer(tmp_path, 'gpusFile = "cards.toml"\n')], root=tmp_path)
    assert len(config.database) >= 27
    with pytest.raises(ConfigProblem) as err:
        resolve([file_layer(tmp_path, 'gpusFile = "missing.toml"\n')], root=tmp_path)
    assert "gpusFile: no such file" in err.value.problems[0]
    with pytest.raises(ConfigProblem) as err:
        resolve([file_layer(tmp_path, '[[gpu]]\nid = "broken"\n')], root=tmp_path)
    assert "broken" in "\n".join(err.value.problems)


def test_client_values_shapes():
    assert client_values({"perflsp": {"gpus": ["a100"]}}) == {"gpus": ["a100"]}
    assert client_values({"perflsp.gpus": ["a100"], "perflsp.llm.model": "m"}) == {"gpus": ["a100"], "llm": {"model": "m"}}
    assert client_values(None) == {}


def test_last_good_configuration_is_kept_and_problems_shown_once(tmp_path):
    state = WorkspaceState([(tmp_path.as_uri(), tmp_path)], {"workspaceTrusted": False, "gpus": ["a100"]})
    folder = state.folders[0]
    changed, problems = state.refresh(folder, None)
    assert changed and problems == [] and folder.config.gpu_ids == ("a100-sxm4-40gb",)
    (tmp_path / ".perflsp.toml").write_text('gpus = ["nope"]\n')
    changed, problems = state.refresh(folder, None)
    assert not changed and len(problems) == 1 and "gpus[0]: unknown GPU 'nope'" in problems[0]
    assert folder.config.gpu_ids == ("a100-sxm4-40gb",)
    assert state.refresh(folder, None) == (False, [])  # shown once
    (tmp_path / ".perflsp.toml").write_text('gpus = ["rtx3080"]\n')
    changed, problems = state.refresh(folder, None)
    assert changed and folder.config.gpu_ids == ("rtx-3080-10gb",)


def test_include_exclude(tmp_path):
    state = WorkspaceState([(tmp_path.as_uri(), tmp_path)], {"include": ["src/**"], "exclude": ["src/gen/**"]})
    config = state.config_for(tmp_path.as_uri())
    assert state.document_enabled((tmp_path / "src" / "a.cu").as_uri(), config)
    assert not state.document_enabled((tmp_path / "src" / "gen" / "b.cu").as_uri(), config)
    assert not state.document_enabled((tmp_path / "other" / "c.cu").as_uri(), config)
    assert state.document_enabled("untitled:Untitled-1", config)


def test_compile_flags():
    defines, dirs = compile_flag_macros(["-DBLOCK=128", "-D", "FAST", "-Iinc", "-I", "/abs", "-O3", "-UFAST"], Path("/w"))
    assert defines == {"BLOCK": "128"} and dirs == [Path("/w/inc"), Path("/abs")]


def test_config_file_compile_table_as_perflsp_check_reads_it(tmp_path):
    """One `.perflsp.toml` turns compiling off for `perflsp check` and for the editor alike."""
    off = resolve([file_layer(tmp_path, "[compile]\nenabled = false\n")], root=tmp_path, client_trusted=True)
    assert off.settings.compile is False and off.ignored == ()
    on = resolve([file_layer(tmp_path, "compile = true\n")], root=tmp_path, client_trusted=True)
    assert on.settings.compile is True
