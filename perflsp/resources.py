"""Locate the data folders shipped with the package (`grammars/`, `prompts/`).

In a wheel they live inside the package (`perflsp/grammars`); in a source checkout or an
editable install they sit at the repository root, next to the package.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the folder `name` (e.g. "grammars"), installed or in the checkout."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"perflsp data folder '{name}' is missing from the installation")


def read_text(folder: str, filename: str) -> str:
    return (data_dir(folder) / filename).read_text(encoding="utf-8")


USER_CONFIG_ENV = "PERFLSP_CONFIG"


def user_config_path() -> Path:
    """The user-level config file: $PERFLSP_CONFIG, else <user config dir>/perflsp/config.toml.

    Its tables (`[llm]`, `[profiling]`, ...) are the user's own settings: trusted, unlike a
    repository's `.perflsp.toml`.
    """
    import os

    override = os.environ.get(USER_CONFIG_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_config_dir("perflsp")) / "config.toml"
