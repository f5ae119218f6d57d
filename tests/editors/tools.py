"""Finding the editors that editors/ci/install-editors.sh installed, and building test workspaces.

The end-to-end tests run only with PERFLSP_EDITOR_TESTS=1 (CI sets it after installing the
editors); then a missing editor is an error, not a skip, so CI cannot pass without running them.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ENABLED = os.environ.get("PERFLSP_EDITOR_TESTS") == "1"
SKIP_REASON = ("editor end-to-end tests: set PERFLSP_EDITOR_TESTS=1 after running "
               "editors/ci/install-editors.sh (editors/ci/test-nvim.sh and test-vscode.sh do both)")
EDITORS_DIR = Path(os.environ.get("PERFLSP_EDITORS_DIR", Path.home() / ".cache" / "perflsp-editors"))
ARTIFACTS = Path(os.environ.get("PERFLSP_ARTIFACTS", ROOT / ".ci" / "artifacts" / "editors"))


def installed_env() -> dict[str, str]:
    """The variables of $PERFLSP_EDITORS_DIR/env.sh (`export K=V` lines), overridden by os.environ."""
    values: dict[str, str] = {}
    env_sh = EDITORS_DIR / "env.sh"
    if env_sh.is_file():
        for line in env_sh.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                key, value = line[len("export "):].split("=", 1)
                values[key] = value.strip().strip('"')
    values.update({k: v for k, v in os.environ.items() if k.startswith("PERFLSP_")})
    return values


def require(condition: bool, what: str) -> None:
    """Fail (CI asked for the editor tests) with a message that says what is missing."""
    if not condition:
        pytest.fail(f"{what} is not installed: run editors/ci/install-editors.sh first", pytrace=False)


def server_python() -> str:
    """The interpreter that runs `python -m perflsp serve` in the editors (this test's own)."""
    return os.environ.get("PERFLSP_SERVER_PYTHON", sys.executable)


def server_launcher(directory: Path) -> str:
    """An executable that runs this test's Python with this checkout's perflsp importable, so the
    editor itself can run without PYTHONPATH (and a Python without perflsp really lacks it)."""
    directory.mkdir(parents=True, exist_ok=True)
    launcher = directory / "python"
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{server_python()}" "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def server_env() -> dict[str, str]:
    """Environment for an editor whose server must import this checkout's perflsp."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def make_workspace(base: Path, gpus: tuple[str, ...] = ("h100",)) -> Path:
    """A workspace with examples/cuda/{saxpy,sgemm_tiled}.cu and examples/lints/launch_slips.cu."""
    ws = base / "ws"
    (ws / "cuda").mkdir(parents=True)
    (ws / "lints").mkdir()
    for name in ("saxpy.cu", "sgemm_tiled.cu", "check.cuh"):
        shutil.copy(EXAMPLES / "cuda" / name, ws / "cuda" / name)
    shutil.copy(EXAMPLES / "lints" / "launch_slips.cu", ws / "lints" / "launch_slips.cu")
    gpu_list = ", ".join(f'"{g}"' for g in gpus)
    (ws / ".perflsp.toml").write_text(f"gpus = [{gpu_list}]\n")
    return ws


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def artifacts(name: str) -> Path:
    path = ARTIFACTS / name
    path.mkdir(parents=True, exist_ok=True)
    return path
