"""Include directories and macro definitions from a `compile_commands.json`.

What the preprocessor sees depends on the build: `-I` directories (a benchmark's OpenMP
version including its CUDA sibling's headers) and `-D` macros (`-DFP=float`). A compilation
database recorded on another machine is re-rooted: paths that do not exist here are matched by
their trailing components under a given source root.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class CompileFlags:
    include_dirs: tuple[Path, ...] = ()
    defines: dict[str, str] = field(default_factory=dict)


class CompileDatabaseError(ValueError):
    pass


class CompileDatabase:
    def __init__(self, entries: dict[Path, CompileFlags]):
        self._by_file = entries
        self._by_dir: dict[Path, CompileFlags] = {}
        for path, flags in entries.items():
            self._by_dir.setdefault(path.parent, flags)

    @classmethod
    def load(cls, path: Path, source_root: Path | None = None) -> CompileDatabase:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CompileDatabaseError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise CompileDatabaseError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(raw, list):
            raise CompileDatabaseError(f"{path}: expected a JSON list of compile commands")
        entries: dict[Path, CompileFlags] = {}
        for entry in raw:
            if not isinstance(entry, dict) or "file" not in entry:
                continue
            directory = Path(entry.get("directory", Path(path).parent))
            try:
                args = entry.get("arguments") or shlex.split(entry.get("command", ""))
            except ValueError:
                continue
            file = _reroot(directory / entry["file"], source_root)
            if file is None:
                continue
            entries[file] = _flags(args[1:], directory, source_root)
        return cls(entries)

    def flags_for(self, source: Path) -> CompileFlags | None:
        """Flags of the entry compiling `source`, or of one in its folder (for headers)."""
        try:
            resolved = Path(source).resolve()
        except OSError:
            return None
        return self._by_file.get(resolved) or self._by_dir.get(resolved.parent)


def _reroot(path: Path, source_root: Path | None) -> Path | None:
    if path.exists():
        return path.resolve()
    if source_root is None:
        return None
    parts = path.parts
    for i in range(1, len(parts)):
        candidate = source_root.joinpath(*parts[i:])
        if candidate.exists():
            return candidate.resolve()
    return None


def _flags(args: list[str], directory: Path, source_root: Path | None) -> CompileFlags:
    includes: list[Path] = []
    defines: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        value = None
        for prefix in ("-I", "-isystem", "-D", "-U"):
            if arg == prefix and i < len(args):
                value = args[i]
                i += 1
                kind = prefix
                break
            if arg.startswith(prefix) and arg != prefix:
                value = arg[len(prefix):]
                kind = prefix
                break
        if value is None:
            continue
        if kind in ("-I", "-isystem"):
            folder = _reroot(directory / value, source_root)
            if folder is not None:
                includes.append(folder)
        elif kind == "-D":
            name, _, body = value.partition("=")
            defines[name] = body if _ else "1"
        else:
            defines.pop(value, None)
    return CompileFlags(tuple(includes), defines)
