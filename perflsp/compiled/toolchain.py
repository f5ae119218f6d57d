"""Finding the compilers and disassemblers that turn a translation unit into SASS.

CUDA: `nvcc` (with its `ptxas`) and `nvdisasm`; a unit its build compiles with clang: that
`clang`, the CUDA install's headers and libdevice, `ptxas` and `nvdisasm`. Headers of CUDA
components a toolkit may lack (cuRAND) are also taken from NVIDIA wheels. OpenMP offload: a `clang` whose
NVPTX device runtime (`libomptarget-nvptx*.bc`) sits beside it, then `ptxas` and `nvdisasm` (and
libdevice, for the math functions). Looked up, in order, in the paths the settings name, `$CUDA_HOME` /
`$CUDA_PATH`, `PATH`, the usual install folders and the NVIDIA wheels installed in this Python
(`pip install 'perflsp[compile]'` brings nvcc, ptxas and nvdisasm).

Finding runs no program: a tool's identity (for cache keys) is its path, size and modification
time. A path from workspace settings is used only in a trusted workspace (the caller says).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_CUDA_DEFAULTS = ("/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda")
_CLANG_VERSIONS = tuple(range(22, 13, -1))  # clang-22 ... clang-14, newest first


@dataclass(frozen=True, slots=True)
class ToolchainSettings:
    """Paths a user names (settings or `.perflsp.toml`): None means look them up."""

    nvcc: str | None = None
    nvdisasm: str | None = None
    clang: str | None = None
    cuda_root: str | None = None


@dataclass(frozen=True, slots=True)
class Toolchain:
    nvcc: str | None = None
    ptxas: str | None = None
    nvdisasm: str | None = None
    clang: str | None = None
    omp_device_dir: str | None = None  # the folder of libomptarget-nvptx*.bc
    libdevice: str | None = None
    cuda_root: str | None = None
    notes: tuple[str, ...] = field(default=())
    # include folders of CUDA components the CUDA install lacks, from NVIDIA wheels (cuRAND)
    cuda_extra_includes: tuple[str, ...] = ()

    @property
    def cuda_ready(self) -> bool:
        return self.nvcc is not None and self.nvdisasm is not None

    @property
    def clang_cuda_ready(self) -> bool:
        """Whether CUDA can be compiled as a clang build does: clang, a CUDA install it can use
        (headers and libdevice), ptxas and nvdisasm."""
        return (None not in (self.clang, self.ptxas, self.nvdisasm, self.libdevice) and self.cuda_root is not None
                and (Path(self.cuda_root) / "include" / "cuda_runtime.h").is_file())

    @property
    def omp_ready(self) -> bool:
        return None not in (self.clang, self.ptxas, self.nvdisasm, self.omp_device_dir)

    @property
    def libdevice_root(self) -> str | None:
        """The CUDA install that holds libdevice (`nvvm/libdevice/libdevice.10.bc` under it)."""
        return str(Path(self.libdevice).parents[2]) if self.libdevice else None

    def missing(self, language: str) -> str | None:
        """Why `language` ("cuda" | "omp") cannot be compiled, or None when it can."""
        if language == "cuda":
            absent = [name for name, path in (("nvcc", self.nvcc), ("nvdisasm", self.nvdisasm)) if path is None]
        else:
            absent = [name for name, path in (("clang", self.clang), ("the NVPTX OpenMP device runtime", self.omp_device_dir),
                                              ("ptxas", self.ptxas), ("nvdisasm", self.nvdisasm)) if path is None]
        if not absent:
            return None
        hint = ("install the CUDA compilers (`pip install 'perflsp[compile]'`) or set perflsp.compiler.nvcc"
                if language == "cuda" else "install clang with the OpenMP offload runtime (Debian: clang-16 libomp-16-dev)")
        return f"no {', '.join(absent)} found: {hint}"

    def identity(self, language: str) -> str:
        """What the compiled code depends on, for cache keys: each tool's path, size and mtime."""
        if language == "cuda":
            tools = [self.nvcc, self.ptxas, self.nvdisasm, *self.cuda_extra_includes]
        elif language == "clang-cuda":
            tools = [self.clang, self.ptxas, self.nvdisasm, self.libdevice, *self.cuda_extra_includes]
        else:
            tools = [self.clang, self.ptxas, self.nvdisasm, self.omp_device_dir, self.libdevice]
        parts = []
        for tool in tools:
            try:
                stat = os.stat(tool) if tool else None
            except OSError:
                stat = None
            parts.append(f"{tool}:{stat.st_size if stat else 0}:{stat.st_mtime_ns if stat else 0}")
        return "|".join(parts)


def find_toolchain(settings: ToolchainSettings | None = None, *, environ: Mapping[str, str] | None = None,
                   search_wheels: bool = True, default_roots: Iterable[str] = _CUDA_DEFAULTS) -> Toolchain:
    """The compilers of this machine (see the module's docstring); nothing found is None, with a note."""
    settings = settings or ToolchainSettings()
    env = os.environ if environ is None else environ
    path_env = env.get("PATH", "")
    notes: list[str] = []
    roots = [r for r in (settings.cuda_root, env.get("CUDA_HOME"), env.get("CUDA_PATH")) if r]
    bin_dirs = [str(Path(r) / "bin") for r in roots]
    wheel_dirs = _wheel_bins() if search_wheels else []
    default_bins = [str(Path(r) / "bin") for r in default_roots]

    def find(name: str, explicit: str | None = None, sibling_of: str | None = None) -> str | None:
        if explicit:
            found = _executable(explicit)
            if found:
                return found
            notes.append(f"{name} '{explicit}' from the settings is not an executable file")
        if sibling_of:
            found = _executable(str(Path(sibling_of).parent / name))
            if found:
                return found
        for folder in bin_dirs:
            found = _executable(str(Path(folder) / name))
            if found:
                return found
        found = shutil.which(name, path=path_env)
        if found:
            return found
        for folder in [*default_bins, *wheel_dirs]:
            found = _executable(str(Path(folder) / name))
            if found:
                return found
        return None

    nvcc = find("nvcc", settings.nvcc)
    ptxas = find("ptxas", sibling_of=_real(nvcc))
    nvdisasm = find("nvdisasm", settings.nvdisasm, sibling_of=_real(nvcc))
    cuda_root = libdevice = None
    for root in [*roots, str(Path(_real(nvcc)).parent.parent) if nvcc else "", *default_roots]:
        candidate = Path(root) / "nvvm" / "libdevice" / "libdevice.10.bc" if root else None
        if candidate is not None and candidate.is_file():
            cuda_root, libdevice = root, str(candidate)
            break
    clang = _find_clang(settings.clang, notes, path_env)
    omp_dir = _omp_device_dir(Path(_real(clang)).parent.parent) if clang is not None else None
    extra = _wheel_includes(cuda_root, ("curand.h",)) if search_wheels else ()
    return Toolchain(nvcc, ptxas, nvdisasm, clang, omp_dir, libdevice, cuda_root, tuple(notes),
                     extra)


def _executable(path: str) -> str | None:
    p = Path(path).expanduser()
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


def _real(path: str | None) -> str:
    return os.path.realpath(path) if path else ""


def _wheel_bins() -> list[str]:
    """`bin` folders of the NVIDIA compiler wheels installed in this Python's site-packages."""
    found = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        for sub in ("cu13", "cu12", "cuda_nvcc", "cuda_nvdisasm", "cuda_cuobjdump"):
            folder = base / sub / "bin"
            if folder.is_dir():
                found.append(str(folder))
    return found


def _wheel_includes(cuda_root: str | None, headers: Sequence[str]) -> tuple[str, ...]:
    """Include folders of NVIDIA wheels in this Python that hold one of `headers` the CUDA install
    at `cuda_root` lacks (cuRAND ships apart from the compiler)."""
    found: list[str] = []
    for header in headers:
        if cuda_root and (Path(cuda_root) / "include" / header).is_file():
            continue
        for entry in sys.path:
            base = Path(entry) / "nvidia"
            for sub in ("cu13", "cu12", "curand"):
                folder = base / sub / "include"
                if (folder / header).is_file() and str(folder) not in found:
                    found.append(str(folder))
    return tuple(found)


def _find_clang(explicit: str | None, notes: list[str], path_env: str) -> str | None:
    if explicit:
        found = _executable(explicit)
        if found:
            return found
        notes.append(f"clang '{explicit}' from the settings is not an executable file")
    for version in _CLANG_VERSIONS:
        found = shutil.which(f"clang-{version}", path=path_env)
        if found and _omp_device_dir(Path(_real(found)).parent.parent):
            return found
    found = shutil.which("clang", path=path_env)
    if found and _omp_device_dir(Path(_real(found)).parent.parent):
        return found
    return None


def _omp_device_dir(llvm_root: Path) -> str | None:
    """The folder of the NVPTX OpenMP device runtime bitcode of an LLVM install."""
    for folder in (llvm_root / "lib", llvm_root / "lib" / "nvptx64-nvidia-cuda"):
        try:
            if any(p.name.startswith("libomptarget-nvptx") and p.suffix == ".bc" for p in folder.iterdir()):
                return str(folder)
        except OSError:
            continue
    return None


def omp_device_library(folder: str, arch: str) -> str | None:
    """The device runtime for `arch` ("sm_86"): its own file, else the nearest older one, else
    the architecture-independent one of newer LLVMs."""
    base = Path(folder)
    wanted = int(arch.removeprefix("sm_").rstrip("af") or 0)
    best: tuple[int, Path] | None = None
    for p in base.glob("libomptarget-nvptx-sm_*.bc"):
        try:
            version = int(p.stem.rsplit("sm_", 1)[1])
        except ValueError:
            continue
        if version <= wanted and (best is None or version > best[0]):
            best = (version, p)
    if best is not None:
        return str(best[1])
    generic = base / "libomptarget-nvptx.bc"
    return str(generic) if generic.is_file() else None
