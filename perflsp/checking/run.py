"""A run of `perflsp check` over files: the files a path names, the settings it analyses with, and
each file's check (read, compiled when a compiler is given, analysed by the one pipeline).
Unreadable files, and any the extractor fails on, are skipped with the reason."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the analysis stack is imported only when a check runs
    from perflsp.analysis.pipeline import PreparedFile
    from perflsp.analysis.report import CheckSettings, FileCheck
    from perflsp.compiled.service import Compiler
    from perflsp.hardware.models import Gpu
    from perflsp.kernels.compile_db import FlagsSource
    from perflsp.kernels.includes import IncludeResolver


@dataclass(slots=True)
class CheckRun:
    files: list[tuple[Path, FileCheck]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def kernel_count(self) -> int:
        return sum(len(check.kernels) for _, check in self.files)


def source_paths(paths: Sequence[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Files to check (folders expanded recursively) and the inputs that do not exist."""
    from perflsp.source.files import SkippedFile, iter_source_paths

    found: list[Path] = []
    missing: list[tuple[Path, str]] = []
    for item in iter_source_paths(paths):
        if isinstance(item, SkippedFile):
            missing.append((item.path, item.reason))
        else:
            found.append(item)
    return found, missing


def check_settings(rule_levels: dict[str, str] | None = None, argv: Sequence[str] | None = None, *,
                   build_fixes: bool = False) -> CheckSettings:
    """The settings `perflsp check` analyses with: `[rules]` levels and the program's arguments
    (`--args` / `[profiling] args`, folded as `argv[1:]`; None: unknown). `perflsp eval --editor`
    uses the same, so it scores exactly what `check` shows. `build_fixes`: for output that shows
    the fixes (JSON, SARIF); building them costs an edited re-parse each."""
    from perflsp.analysis.options import AnalysisOptions
    from perflsp.analysis.report import CheckSettings

    return CheckSettings(rule_levels=dict(rule_levels or {}),
                         options=AnalysisOptions(argv=tuple(argv) if argv is not None else None),
                         build_fixes=build_fixes)


def check_paths(files: Sequence[Path], gpus: Sequence[Gpu], settings: CheckSettings,
                compile_db: FlagsSource | None = None,
                progress: Callable[[Path], None] | None = None, compiler: Compiler | None = None) -> CheckRun:
    """Check every file; unreadable ones (and any the extractor fails on) land in `skipped`.
    With `compiler`, the files are compiled in its pool first (each for every GPU's architecture)."""
    from perflsp.kernels.includes import IncludeResolver

    resolver = IncludeResolver()
    run = CheckRun()
    started = time.perf_counter()
    if compiler is not None:
        from perflsp.analysis.compiled_facts import gpu_arch

        archs = [a for a in (gpu_arch(g) for g in gpus) if a]
        compiler.prefetch(files, archs)
    with _results_kept_out_of_collections():
        for number, path in enumerate(files, 1):
            with _one_collection_per_file():
                result = check_file(path, gpus, settings, resolver, compile_db, compiler)
            if isinstance(result, str):
                run.skipped.append((path, result))
            else:
                run.files.append((path, result))
            if progress is not None:
                progress(path)
            if number % _FREEZE_EVERY == 0:
                gc.collect()  # (what the files so far left as cyclic garbage: only what is not frozen yet)
                gc.freeze()
    run.elapsed_s = time.perf_counter() - started
    return run


_FREEZE_EVERY = 256  # files between two freezes of the heap in `check_paths`


@contextlib.contextmanager
def _results_kept_out_of_collections() -> Iterator[None]:
    """The results of a run stay alive until it ends; a full garbage collection walked all of
    them again and again (8% of a corpus check). They are frozen every `_FREEZE_EVERY` files,
    after a collection, so later collections skip them; unfrozen at the end."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _one_collection_per_file() -> Iterator[None]:
    """No automatic garbage collection while a file is checked, one of the young generation
    after it. A large file's extraction makes millions of objects that live until its check
    ends, and CPython's collector walked them again each time enough had been made since its
    last pass (a 15 MB file: ~1.5 s of ~8). The file's cyclic garbage waits for its end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect(0)
        if enabled:
            gc.enable()


def prepare_checked(path: Path, data: bytes, gpus: Sequence[Gpu], settings: CheckSettings,
                    resolver: IncludeResolver, compile_db: FlagsSource | None = None,
                    compiler: Compiler | None = None) -> PreparedFile:
    """A file read as `perflsp check` analyses it: its compile flags, the settings' program
    arguments and, with `compiler`, its device code compiled for each GPU's architecture (the
    compiled counts in its options). `perflsp explain` prepares its file with this too, so both
    quote the same numbers."""
    from perflsp.analysis.pipeline import prepare_file

    flags = compile_db.flags_for(path) if compile_db is not None else None
    prepared = prepare_file(path, data, resolver, settings.options,
                            flags.defines if flags is not None else None,
                            flags.include_dirs if flags is not None else ())
    if compiler is not None and (prepared.kernels.kernels or prepared.kernels.omp_regions):
        from perflsp.analysis.compiled_facts import gpu_arch

        archs = [a for a in (gpu_arch(g) for g in gpus) if a]
        if archs:
            prepared = dataclasses.replace(prepared, options=dataclasses.replace(
                prepared.options, compiled=compiler.compiled(path, archs)))
    return prepared


def check_file(path: Path, gpus: Sequence[Gpu], settings: CheckSettings, resolver: IncludeResolver,
               compile_db: FlagsSource | None = None, compiler: Compiler | None = None) -> FileCheck | str:
    """The check result of one file, or why it was skipped. With `compiler`, the file's device
    code is compiled for each GPU's architecture and the compiled counts are used."""
    from perflsp.analysis.report import check_document
    from perflsp.source.files import SkippedFile, load_file

    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return loaded.reason
    try:
        prepared = prepare_checked(path, loaded.data, gpus, settings, resolver, compile_db, compiler)
        options = prepared.options
        check = check_document(prepared.data, prepared.tree, prepared.kernels, gpus,
                               dataclasses.replace(settings, options=options), prepared.lines)
    except RecursionError:
        return "too deeply nested to parse"
    except Exception as exc:  # noqa: BLE001 - one file perflsp trips on must not stop the run
        return f"internal error while checking: {type(exc).__name__}: {exc}"
    if loaded.lossy:
        check.notes.append("file is not valid UTF-8: invalid bytes were replaced")
    return check


__all__ = ["CheckRun", "check_file", "check_paths", "check_settings", "prepare_checked", "source_paths"]
