"""Command templates: per-argument substitution, no injection, ssh quoting."""

from __future__ import annotations

import json
import sys

import pytest
from profiling_helpers import install_fake_ssh

from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.process import run_program
from perflsp.profiling.templates import check_template, expand, with_launcher

NASTY_FILE = "/work/src/a b; rm -rf ~ $(touch pwned) `id` --help.cu"


def test_values_stay_inside_their_argument():
    argv = expand(["nvcc", "-o", "{exe}", "-DSRC={file}", "{file}"], {"file": NASTY_FILE, "exe": "/tmp/out dir/app"})
    assert argv == ["nvcc", "-o", "/tmp/out dir/app", f"-DSRC={NASTY_FILE}", NASTY_FILE]


def test_args_expand_to_a_list_only_as_a_whole_argument():
    assert expand(["{exe}", "{args}", "--tail"], {"exe": "/bin/app"}, args=["-n", "1 2"]) == [
        "/bin/app",
        "-n",
        "1 2",
        "--tail",
    ]
    assert expand(["{exe}", "{args}"], {"exe": "/bin/app"}) == ["/bin/app"]
    with pytest.raises(ProfilingError, match="stand alone"):
        expand(["{exe}", "--n={args}"], {"exe": "/bin/app"}, args=["1"])


def test_literal_braces_and_unknown_placeholders():
    assert expand(["echo", "{{exe}}", "{{{exe}}}"], {"exe": "/x"}) == ["echo", "{exe}", "{/x}"]
    with pytest.raises(ProfilingError) as info:
        expand(["{compiler}", "{file}"], {"file": "/a.cu"})
    assert info.value.code == "bad-template" and "{compiler}" in info.value.message
    with pytest.raises(ProfilingError, match="unmatched"):
        expand(["{exe"], {"exe": "/x"})
    with pytest.raises(ProfilingError, match="unmatched"):
        expand(["exe}"], {"exe": "/x"})
    with pytest.raises(ProfilingError, match=r"\{kernel\} has no value"):
        expand(["{exe}", "{kernel}"], {"exe": "/bin/app"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("file", "relative/path.cu"),  # could start with '-' and read as an option
        ("file", "-rf"),
        ("exe", "--output=/etc/passwd"),
        ("kernel", "k; rm -rf ~"),
        ("kernel", "--kernel-name=x"),
        ("block", "128 --evil"),
        ("file", "/tmp/a\0b.cu"),
    ],
)
def test_unsafe_values_are_refused(name, value):
    with pytest.raises(ProfilingError) as info:
        expand(["prog", "{" + name + "}"], {name: value})
    assert info.value.code == "bad-template"


def test_nul_in_program_arguments_is_refused():
    with pytest.raises(ProfilingError, match="NUL"):
        expand(["{exe}", "{args}"], {"exe": "/bin/app"}, args=["a\0b"])


def test_shell_strings_with_placeholders_are_refused():
    with pytest.raises(ValueError, match="shell"):
        check_template(["/bin/sh", "-c", "make {file}"])
    check_template(["/bin/sh", "build.sh"])  # a script without placeholders is the user's own choice


def test_launcher_prefix_is_an_argv_list():
    assert with_launcher(["srun", "-p", "gpu", "--gres=gpu:1"], ["ncu", "/a b/app"]) == [
        "srun",
        "-p",
        "gpu",
        "--gres=gpu:1",
        "ncu",
        "/a b/app",
    ]


def test_values_reach_the_program_as_single_arguments(tmp_path):
    """A real subprocess receives exactly one argument per template element."""
    printer = tmp_path / "printer.py"
    printer.write_text("import json, sys; print(json.dumps(sys.argv[1:]))", encoding="utf-8")
    argv = expand([sys.executable, str(printer), "{file}", "{args}"], {"file": NASTY_FILE}, args=["x y", "$HOME"])
    result = run_program(argv, timeout_s=30, output_cap_bytes=65536, what="printer", cwd=tmp_path)
    assert json.loads(result.stdout) == [NASTY_FILE, "x y", "$HOME"]
    assert not (tmp_path / "pwned").exists()


def test_ssh_launcher_quotes_for_the_remote_shell(tmp_path):
    """ssh re-parses its command with a shell: each argument is quoted so it stays one argument."""
    ssh = install_fake_ssh(tmp_path)
    printer = tmp_path / "printer.py"
    printer.write_text("import json, sys; print(json.dumps(sys.argv[1:]))", encoding="utf-8")
    values = {"file": str(tmp_path / "a b; touch pwned; $(touch pwned2).cu")}
    argv = with_launcher(
        [str(ssh), "gpu01"], expand([sys.executable, str(printer), "{file}", "{args}"], values, args=["*", "'q'"])
    )
    result = run_program(argv, timeout_s=30, output_cap_bytes=65536, what="ssh", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [values["file"], "*", "'q'"]
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
