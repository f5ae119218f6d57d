"""The engine's reports of a small program of our own, read as `perflsp check` reads a file: the
one reader (`analysis.reader.read_program`: local headers, the sources that include it), then the
engine on each kernel and region, which raises rather than reporting `uncertain` on an error."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions, AnalysisUnit, analyze_kernel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.hardware import load_database
from perflsp.kernels.includes import IncludeResolver

H100 = load_database().get("H100")


def reports(src: str, path: Path | None = None, options: AnalysisOptions | None = None) -> list[KernelReport]:
    """Reports of every CUDA kernel, then every OpenMP region, of `src` (the text of `path`) on H100."""
    prepared = read_program(path, src.encode(), ReadContext(IncludeResolver()), options or AnalysisOptions())
    unit = AnalysisUnit.of(prepared.model, prepared.options)
    found = prepared.kernels
    return [analyze_kernel(unit, k, [H100]) for k in [*found.kernels, *found.omp_regions]]


def unit_for(src: str, path: Path | None = None, options: AnalysisOptions | None = None) -> AnalysisUnit:
    """The analysis unit of `src` (the text of `path`), as `reports` builds it."""
    prepared = read_program(path, src.encode(), ReadContext(IncludeResolver()), options or AnalysisOptions())
    return AnalysisUnit.of(prepared.model, prepared.options)


def kernel_reports(src: str, path: Path | None = None) -> dict[str, KernelReport]:
    """The CUDA kernels' reports by kernel name."""
    from perflsp.kernels.models import CudaFunction

    return {r.kernel.name: r for r in reports(src, path) if isinstance(r.kernel, CudaFunction)}
