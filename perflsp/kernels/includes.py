"""Constants from the headers a file includes (`#include "local.h"`).

Kernels are often declared through macros defined in a local header (`#define GLOBAL __global__`)
and sized by constants from one. A line-level scan of `#define`s and const/constexpr integers in
quoted includes (recursively, each header read once) gives extraction and folding those names
without a full preprocessor.
"""

from __future__ import annotations

import re
from pathlib import Path

from perflsp.kernels.consteval import ConstEnv

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n\\]*(?:\\.[^\n\\]*)*)", re.MULTILINE | re.DOTALL)
_CONSTANT = re.compile(
    rb"^[ \t]*(?:static[ \t]+)?(?:const|constexpr)[ \t]+(?:unsigned[ \t]+|signed[ \t]+)?"
    rb"(?:int|long|short|size_t|unsigned|char|float|double|[iu]nt(?:8|16|32|64)_t)[ \t]+"
    rb"([A-Za-z_]\w*)[ \t]*=[ \t]*([^;{}\n]+);",
    re.MULTILINE,
)
MAX_INCLUDE_DEPTH = 6
MAX_HEADER_BYTES = 4 * 1024 * 1024


def scan_definitions(data: bytes, env: ConstEnv) -> None:
    """Add the `#define`s and const/constexpr scalars of `data` (first definition wins)."""
    text = data
    for m in _DEFINE.finditer(text):
        body = re.sub(rb"\\\r?\n", b" ", m.group(2))
        body = re.sub(rb"//.*|/\*.*?\*/", b" ", body).strip()
        env.macros.setdefault(m.group(1).decode("utf-8", "replace"), body.decode("utf-8", "replace"))
    for m in _CONSTANT.finditer(data):
        env.constants.setdefault(m.group(1).decode("utf-8", "replace"), m.group(2).decode("utf-8", "replace").strip())


class IncludeResolver:
    """Resolves and scans quoted includes; caches, per header, the definitions visible through it
    (its own and those of everything it includes), so each header is read once per process."""

    def __init__(self, include_dirs: tuple[Path, ...] = ()):
        self.include_dirs = include_dirs
        self._closure: dict[Path, ConstEnv] = {}
        self._resolved: dict[tuple[Path, str], Path | None] = {}

    def env_for(self, path: Path, data: bytes) -> ConstEnv | None:
        """Definitions visible to `path` from its (transitively) included local headers."""
        names = [m.group(1).decode("utf-8", "replace") for m in _INCLUDE.finditer(data)]
        envs = [self._header_env(h, 0) for h in self._headers(path.parent, names)]
        envs = [e for e in envs if e.macros or e.constants]
        if not envs:
            return None
        if len(envs) == 1:
            return envs[0].child()
        merged = ConstEnv()
        for env in envs:
            for macro, body in env.macros.items():
                merged.macros.setdefault(macro, body)
            for constant, body in env.constants.items():
                merged.constants.setdefault(constant, body)
        return merged

    def _headers(self, directory: Path, names: list[str]) -> list[Path]:
        out = []
        for name in names:
            key = (directory, name)
            if key not in self._resolved:
                self._resolved[key] = self._resolve(directory, name)
            header = self._resolved[key]
            if header is not None:
                out.append(header)
        return out

    def _resolve(self, directory: Path, name: str) -> Path | None:
        for base in (directory, *self.include_dirs):
            candidate = base / name
            try:
                if candidate.is_file():
                    return candidate.resolve()
            except OSError:
                return None
        return None

    def _header_env(self, header: Path, depth: int) -> ConstEnv:
        cached = self._closure.get(header)
        if cached is not None:
            return cached
        env = ConstEnv()
        self._closure[header] = env  # placed first: include cycles see a partial env, not a loop
        try:
            data = header.read_bytes()[:MAX_HEADER_BYTES]
        except OSError:
            return env
        scan_definitions(data, env)
        if depth < MAX_INCLUDE_DEPTH:
            names = [m.group(1).decode("utf-8", "replace") for m in _INCLUDE.finditer(data)]
            for nested in self._headers(header.parent, names):
                inner = self._header_env(nested, depth + 1)
                for macro, body in inner.macros.items():
                    env.macros.setdefault(macro, body)
                for constant, body in inner.constants.items():
                    env.constants.setdefault(constant, body)
        return env
