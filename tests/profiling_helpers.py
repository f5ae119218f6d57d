"""Shared helpers for the profiling tests: stand-in programs and hand-built kernel models."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from perflsp.kernels.models import CudaFunction, FileKernels, OmpRegion, Param, Span, TemplateParam
from perflsp.source.positions import Position

TESTS = Path(__file__).parent
STAND_INS = TESTS / "stand_ins"
NCU_FIXTURES = TESTS / "fixtures" / "ncu"
MIXED = NCU_FIXTURES / "synthetic-raw-mixed.csv"


def install_script(directory: Path, name: str, source: Path | str) -> Path:
    """Write an executable script whose shebang is this interpreter."""
    body = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    path = directory / name
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def install_fake_ncu(directory: Path) -> Path:
    return install_script(directory, "ncu", STAND_INS / "fake_ncu.py")


def install_fake_ssh(directory: Path) -> Path:
    return install_script(directory, "ssh", STAND_INS / "fake_ssh.py")


FAKE_NVCC = """
import os, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
source = args[-1]
if not os.path.exists(source):
    print(f"fake-nvcc: {source}: no such file", file=sys.stderr)
    sys.exit(1)
if "#error" in open(source).read():
    print(f"{source}(1): error: synthetic compile error", file=sys.stderr)
    sys.exit(2)
with open(out, "w") as fh:
    fh.write("#!" + sys.executable + "\\nprint('synthetic app ran')\\n")
os.chmod(out, 0o755)
"""


def install_fake_nvcc(directory: Path) -> Path:
    return install_script(directory, "nvcc", FAKE_NVCC)


def _span(line: int) -> Span:
    """A span on 1-based `line` (only the line matters to the profiling layer)."""
    return Span(line * 100, line * 100 + 10, Position(line - 1, 0), Position(line - 1, 10))


def cuda_kernel(
    name: str,
    *,
    qualified: str | None = None,
    params: int = 2,
    line: int = 10,
    body_hash: str = "h-cuda",
    template_params: tuple[str, ...] = (),
    specialization_args: tuple[str, ...] | None = None,
) -> CudaFunction:
    return CudaFunction(
        space="global",
        name=name,
        qualified_name=qualified or name,
        params=tuple(Param(f"p{i}", "float *", "float", 1) for i in range(params)),
        template_params=tuple(TemplateParam("type", t) for t in template_params),
        specialization_args=specialization_args,
        launch_bounds=None,
        span=_span(line),
        name_span=_span(line),
        body_span=_span(line + 1),
        body_hash=body_hash,
    )


def omp_region(function: str | None, line: int, body_hash: str = "h-omp") -> OmpRegion:
    return OmpRegion(
        directive="target teams distribute parallel for",
        clauses=(),
        pragma_text="#pragma omp target teams distribute parallel for",
        span=_span(line),
        body_span=_span(line + 1),
        loops=(),
        function=function,
        function_span=None,
        body_hash=body_hash,
    )


def file_kernels(path: str | os.PathLike | None, kernels=(), regions=()) -> FileKernels:
    return FileKernels(path=None if path is None else str(path), kernels=list(kernels), omp_regions=list(regions))
