import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# compiled units and LLM answers go to a cache of this test run, never to the user's (the
# server subprocesses the tests start inherit it); a test may still point it elsewhere
if "PERFLSP_CACHE_DIR" not in os.environ:
    _RUN_CACHE = tempfile.TemporaryDirectory(prefix="perflsp-test-cache-")  # removed when the run ends
    os.environ["PERFLSP_CACHE_DIR"] = _RUN_CACHE.name


def eval_paths() -> tuple[Path, Path] | None:
    """(labels CSV, benchmark src/ folder) when the labeled sources are available here."""
    labels = Path(os.environ.get("PERFLSP_EVAL_LABELS", ROOT.parent / "shared" / "eval" / "rtx3080-roofline-dev.csv"))
    src = Path(os.environ.get("PERFLSP_EVAL_SRC", "/work/data/src"))
    if labels.is_file() and src.is_dir():
        return labels, src
    return None


@pytest.fixture
def eval_data() -> tuple[Path, Path]:
    paths = eval_paths()
    if paths is None:
        pytest.skip("labeled sources not available: set PERFLSP_EVAL_SRC to the benchmark src/ folder "
                    "and PERFLSP_EVAL_LABELS to the labels CSV")
    return paths
