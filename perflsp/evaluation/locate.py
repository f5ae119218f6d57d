"""Find the kernel a labels row points at: CUDA by name at the line of its name, OpenMP by the
line of its `#pragma omp target`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perflsp.evaluation.labels import KernelRow
from perflsp.kernels.extract import extract_path
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion
from perflsp.source.files import SkippedFile


@dataclass(frozen=True, slots=True)
class Located:
    row: KernelRow
    file: FileKernels | None
    kernel: CudaFunction | OmpRegion | None
    reason: str | None = None  # why it was not located


class Locator:
    """Locates rows under a source root, extracting each file once."""

    def __init__(self, src_root: Path):
        self.src_root = src_root
        self._files: dict[str, FileKernels | SkippedFile] = {}
        self._resolver = IncludeResolver()

    def file(self, relative: str) -> FileKernels | SkippedFile:
        if relative not in self._files:
            self._files[relative] = extract_path(self.src_root / relative, self._resolver)
        return self._files[relative]

    def locate(self, row: KernelRow) -> Located:
        result = self.file(row.file)
        if isinstance(result, SkippedFile):
            return Located(row, None, None, f"{row.file}: {result.reason}")
        if row.language == "omp":
            found = next((r for r in result.omp_regions if r.line == row.line), None)
            if found is None:
                return Located(row, result, None, f"no kernel-creating `#pragma omp target` at {row.file}:{row.line}")
            return Located(row, result, found)
        name = row.kernel.split("<", 1)[0].split("::")[-1]
        found_k = next((k for k in result.kernels if k.line == row.line and k.name == name), None)
        if found_k is None:
            at_line = [k.name for k in result.kernels if k.line == row.line]
            detail = f"(a kernel named {at_line[0]} is there)" if at_line else "(no __global__ definition there)"
            return Located(row, result, None, f"`{name}` not found at {row.file}:{row.line} {detail}")
        return Located(row, result, found_k)
