"""Reading source files defensively: every failure becomes a one-line reason, never a traceback."""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from perflsp.source.parser import is_source_path

MAX_FILE_BYTES = 16 * 1024 * 1024
# the name prefix of the copies of a unit perflsp compiles from beside it (an unsaved buffer, a
# unit with its host code set aside): files that exist for seconds, no sources of the project
TRANSIENT_COPY_PREFIX = ".perflsp-"


def is_transient_copy(path: str | Path) -> bool:
    """Whether `path` names such a copy."""
    return Path(path).name.startswith(TRANSIENT_COPY_PREFIX)
_BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: Path
    reason: str


@dataclass(frozen=True, slots=True)
class LoadedFile:
    path: Path
    data: bytes  # always valid UTF-8
    lossy: bool  # True when invalid UTF-8 bytes were replaced


def decode_source(raw: bytes, latin1: bool = False) -> tuple[bytes, bool]:
    """Return valid UTF-8 bytes for `raw` and whether anything had to be replaced.

    Invalid bytes become U+FFFD, or with `latin1` (files read from disk, often Latin-1 or
    cp1252 in older code) the Latin-1 character of each byte, so that an identifier such as
    `k\xe9rnel` stays one identifier instead of breaking the parse."""
    try:
        raw.decode("utf-8")
        return raw, False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="perflsp-latin1" if latin1 else "replace").encode("utf-8"), True


def _latin1_fallback(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    return error.object[error.start:error.end].decode("latin-1"), error.end


codecs.register_error("perflsp-latin1", _latin1_fallback)


def load_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> LoadedFile | SkippedFile:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return SkippedFile(path, f"larger than {max_bytes // (1024 * 1024)} MiB ({size} bytes)")
        with path.open("rb") as fh:
            raw = fh.read()
    except PermissionError:
        return SkippedFile(path, "permission denied")
    except IsADirectoryError:
        return SkippedFile(path, "is a directory")
    except FileNotFoundError:
        return SkippedFile(path, "no such file")
    except OSError as exc:
        return SkippedFile(path, f"unreadable ({exc.strerror or exc})")
    if b"\0" in raw[:_BINARY_SNIFF_BYTES]:
        return SkippedFile(path, "binary file (NUL bytes)")
    data, lossy = decode_source(raw, latin1=True)
    return LoadedFile(path, data, lossy)


def iter_source_paths(paths: Iterable[str | Path]) -> Iterator[Path | SkippedFile]:
    """Expand files and folders (recursively, sorted) into source paths.

    A path given explicitly is yielded whatever its suffix; folders contribute only C/C++/CUDA
    sources. Missing paths are yielded as SkippedFile.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path, onerror=None):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if is_source_path(name) and not is_transient_copy(name):
                        yield Path(root) / name
        elif path.exists():
            yield path
        else:
            yield SkippedFile(path, "no such file or directory")
