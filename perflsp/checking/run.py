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
    from perflsp.analysis.reader import ReadProgram
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
                    compiler: Compiler | None = None) -> ReadProgram:
    """A file read as `perflsp check` analyses it (`analysis.reader`): its compile flags, the
    settings' program arguments and, with `compiler`, its device code compiled for each GPU's
    architecture (the compiled counts in its options). `perflsp explain` prepares its file with
    this too, so both quote the same numbers."""
    from perflsp.analysis.reader import ReadContext, read_program

    program = read_program(path, data, ReadContext.of(path, resolver, compile_db), settings.options)
    return with_compiled(program, gpus, compiler)


def with_compiled(program: ReadProgram, gpus: Sequence[Gpu], compiler: Compiler | None) -> ReadProgram:
    """`program` with its device code compiled for each GPU's architecture (when `compiler` is
    given and the file has kernels)."""
    if compiler is None or program.path is None or not (program.kernels.kernels or program.kernels.omp_regions):
        return program
    from perflsp.analysis.compiled_facts import gpu_arch

    archs = [a for a in (gpu_arch(g) for g in gpus) if a]
    if not archs:
        return program
    compiled = compiler.compiled(program.path, archs, omp_regions=bool(program.kernels.omp_regions),
                                 kernels=bool(program.kernels.kernels))
    return program.with_options(dataclasses.replace(program.options, compiled=compiled))


def check_file(path: Path, gpus: Sequence[Gpu], settings: CheckSettings, resolver: IncludeResolver,
               compile_db: FlagsSource | None = None, compiler: Compiler | None = None) -> FileCheck | str:
    """The check result of one file, or why it was skipped. With `compiler`, the file's device
    code is compiled for each GPU's architecture and the compiled counts are used."""
    from perflsp.analysis.reader import ReadContext, read_file
    from perflsp.analysis.report import check_document
    from perflsp.source.files import SkippedFile

    try:
        read = read_file(path, ReadContext.of(path, resolver, compile_db), settings.options)
        if isinstance(read, SkippedFile):
            return read.reason
        program = with_compiled(read, gpus, compiler)
        return check_document(program.data, program.tree, program.kernels, gpus,
                              dataclasses.replace(settings, options=program.options), program.lines,
                              model=program.model if program.kernels.kernels or program.kernels.omp_regions else None)
    except RecursionError:
        return "too deeply nested to parse"
    except Exception as exc:  # noqa: BLE001 - one file perflsp trips on must not stop the run
        return f"internal error while checking: {type(exc).__name__}: {exc}"


__all__ = ["CheckRun", "check_file", "check_paths", "check_settings", "prepare_checked", "source_paths", "with_compiled"]
