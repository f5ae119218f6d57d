"""`pip install .` from a clean checkout ships the query files and prompt templates."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_contains_grammars_and_prompts(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is needed to make a clean copy of the tracked files")
    # build from the tracked files only, as a clean clone would
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    src = tmp_path / "src"
    for name in files:
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
                          capture_output=True, text=True)
    if proc.returncode != 0 and "No matching distribution found for hatchling" in proc.stderr:
        pytest.skip("the build backend (hatchling) cannot be downloaded here")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").glob("perflsp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for query in (ROOT / "grammars").glob("*.scm"):
        assert f"perflsp/grammars/{query.name}" in names
    assert any(n.startswith("perflsp/prompts/") for n in names)
    assert "perflsp/hardware/gpus.toml" in names
    assert "perflsp/compiled/clang_cuda_shims/texture_fetch_functions.h" in names  # clang's CUDA stand-ins
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "perflsp = perflsp.cli:main" in entry_points
