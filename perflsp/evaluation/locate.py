"""Find the kernel a labels row points at: CUDA by name at the line of its name, OpenMP by the
line of its `#pragma omp target`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Tree

from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.reader import ReadContext, ReadProgram, read_file
from perflsp.evaluation.labels import KernelRow
from perflsp.kernels.compile_db import FlagsSource
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion
from perflsp.source.files import LoadedFile, SkippedFile
from perflsp.source.parser import parse


@dataclass(frozen=True, slots=True)
class Located:
    row: KernelRow
    file: FileKernels | None
    kernel: CudaFunction | OmpRegion | None
    reason: str | None = None  # why it was not located


class Locator:
    """Locates rows under a source root, reading each file once per set of program arguments
    as `perflsp check` reads it (`analysis.reader`: its local headers, its compile-database
    flags, an includer's context, the arguments its model folds with; None: not known)."""

    def __init__(self, src_root: Path, compile_db: FlagsSource | None = None):
        self.src_root = src_root
        self.compile_db = compile_db
        self._files: dict[tuple[str, tuple[str, ...] | None], ReadProgram | SkippedFile] = {}
        self._resolver = IncludeResolver()

    def program(self, relative: str, argv: tuple[str, ...] | None = None) -> ReadProgram | SkippedFile:
        """The file read (its text, tree, kernels, preprocessor view and program model)."""
        cached = self._files.get((relative, argv))
        if cached is None:
            path = self.src_root / relative
            # (launch sites in other files are the scorer's to look for: `run._LaunchIndex`)
            cached = read_file(path, ReadContext.of(path, self._resolver, self.compile_db), AnalysisOptions(argv=argv),
                               includer_launch_sites=False)
            self._files[(relative, argv)] = cached
        return cached

    def read(self, relative: str, argv: tuple[str, ...] | None = None) -> ReadProgram:
        """The file read, for one a row located (so it was readable)."""
        program = self.program(relative, argv)
        if isinstance(program, SkippedFile):
            raise ValueError(f"{relative}: {program.reason}")
        return program

    def file(self, relative: str, argv: tuple[str, ...] | None = None) -> FileKernels | SkippedFile:
        loaded = self.program(relative, argv)
        return loaded if isinstance(loaded, SkippedFile) else loaded.kernels

    def source(self, relative: str) -> bytes:
        loaded = self.program(relative)
        return b"" if isinstance(loaded, SkippedFile) else loaded.data

    def tree(self, relative: str) -> Tree:
        loaded = self.program(relative)
        return parse(b"") if isinstance(loaded, SkippedFile) else loaded.tree

    def locate(self, row: KernelRow, argv: tuple[str, ...] | None = None) -> Located:
        """The row's kernel in its file read with the program's arguments `argv`."""
        result = self.file(row.file, argv)
        if isinstance(result, SkippedFile):
            return Located(row, None, None, f"{row.file}: {result.reason}")
        kernel, reason = match_kernel(row, result.kernels, result.omp_regions)
        return Located(row, result, kernel, reason)


def match_kernel(row: KernelRow, kernels: Sequence[CudaFunction],
                 omp_regions: Sequence[OmpRegion]) -> tuple[CudaFunction | OmpRegion | None, str | None]:
    """The kernel a row names among a file's kernels (CUDA: the name at the row's line; OpenMP: the
    `#pragma omp target` at that line), or None and why not. `perflsp eval` locates with it in both
    modes, on the Locator's extraction and on the one `perflsp check` makes (`--editor`)."""
    if row.language == "omp":
        found = next((r for r in omp_regions if r.line == row.line), None)
        if found is None:
            return None, f"no kernel-creating `#pragma omp target` at {row.file}:{row.line}"
        return found, None
    name = row.kernel.split("<", 1)[0].split("::")[-1]
    found_k = next((k for k in kernels if k.line == row.line and k.name == name), None)
    if found_k is None:
        at_line = [k.name for k in kernels if k.line == row.line]
        detail = f"(a kernel named {at_line[0]} is there)" if at_line else "(no __global__ definition there)"
        return None, f"`{name}` not found at {row.file}:{row.line} {detail}"
    return found_k, None

__all__ = ["LoadedFile", "Located", "Locator", "match_kernel"]
