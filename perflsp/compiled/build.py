"""Compiling a translation unit's device code for one architecture, with line info, and reading
its SASS: `compile_unit(request, toolchain)` -> `CompiledUnit`.

CUDA: `nvcc -cubin -O3 -lineinfo -arch=sm_XX` then `nvdisasm -c -gi`; a unit its build compiles
with clang (compile database) is compiled by clang's CUDA device pass to PTX, then `ptxas
-lineinfo`: the two compilers emit different code for the same source (LLVM's NVPTX back end
lowers bit tricks, loops and math differently), and the GPU runs what the build emits. OpenMP offload (clang):
clang's own offload driver, device side only (`--offload-device-only -c`): one optimisation
pipeline over the region and the NVPTX device runtime and libdevice it links in first, then
`ptxas -c -lineinfo`, exactly the image a `clang -fopenmp --offload-arch=sm_XX -c` build embeds
in its object (optimising again after linking unrolls loops a second time: a loop the build
unrolls by 4 came out unrolled by 16, a quarter of its integer instructions).

Only include paths, macros, forced includes and the language standard are taken from a compile
database: a cloned repository cannot smuggle other options (plug-ins, output paths) into a
command. Results are cached on disk by (tools, architecture, flags, the file's text) and checked
against the local headers they read.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflsp.compiled.cfg import build_function, looping_subroutines
from perflsp.compiled.header_copies import error_positions, header_error_lines, write_tree
from perflsp.compiled.headers import MAX_FOUND, find_header_folder, missing_header
from perflsp.compiled.host_aside import (
    device_qualifier_macros,
    host_class_names,
    host_code_aside,
    launches_kernel_templates,
    offload_host_aside,
)
from perflsp.compiled.inline_sites import place_library_code
from perflsp.compiled.model import CompiledUnit
from perflsp.compiled.sass import parse_sass
from perflsp.compiled.toolchain import Toolchain, omp_device_library
from perflsp.kernels.includes import local_headers, quoted_includes
from perflsp.source.files import TRANSIENT_COPY_PREFIX, LoadedFile, load_file

DEFAULT_TIMEOUT_S = 120.0


def _reader_version() -> str:
    """What a unit is read with: the code that turns SASS into blocks, loops and classes (cached
    units read with other code are read again from their cached disassembly)."""
    digest = hashlib.sha256()
    for name in ("sass.py", "inline_sites.py", "isa.py", "cfg.py", "model.py", "special.py", "slow_paths.py", "execution_mode.py"):
        try:
            digest.update((Path(__file__).parent / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()[:16]


READER_VERSION = _reader_version()
FORMAT_VERSION = 5  # of the compile key: what a compile depends on besides the tools and the text (5: host code set aside on failure)
# of the ways a failed compile is retried (2: headers found for the copy without host code, and
# host functions whose signatures carry macros set aside): a failure recorded by older retries
# is tried again, a compiled unit stays valid (3: a unit the build compiles with clang, through nvcc; 4: a
# launch from device code compiled as relocatable code; 5: host-only classes set aside; 6:
# a header that is a Git LFS pointer left out; 7: host declarations the compiler rejects set
# aside whole; 8: an OpenMP unit's missing headers and rejected host statements set aside;
# 9: a missing header one of the unit's headers includes answered by an empty stand-in; 10: an OpenMP
# unit's Git LFS pointer headers left out, a `.c` unit built as C++ compiled so, the C++17 retry of
# CUDA 13's headers recognised; 11: legacy warp intrinsics read as their `_sync` forms; 12: the
# unit's own headers copied with the host code the compiler rejected in them set aside, and their
# legacy warp intrinsics read as their `_sync` forms; 13: so also where ptxas rejects the `vote`
# a deprecated `__any` compiles to)
RETRY_VERSION = 13
# of the copy compiled without host code: a unit compiled from an older copy is compiled again
# (2: the kernel templates the host code launched are instantiated; 3: a CUDA unit whose host code
# instantiates kernel templates keeps the host statements that compile: only such units compiled
# from an older copy are compiled again, `_stale_copy`; 4: so does a unit launching its headers'
# kernel templates, or with template arguments its host code spells; 5: every statement on a
# rejected line set aside, not the first alone; 6: HIP's runtime header answered by a stand-in)
ASIDE_VERSION = 6
_ASIDE = "did not compile here"  # (in the compiler's name of a unit compiled from such a copy)
# the warp intrinsics CUDA 9 replaced by `_sync` forms, and the compiler's word that one is
# rejected: CUDA 13 declares the shuffles no more, and compiles `__any`/`__all`/`__ballot` (still
# declared, deprecated) to the PTX `vote` ptxas refuses for sm_70 and later
_LEGACY_WARP_CALL = re.compile(rb"\b(__shfl|__shfl_up|__shfl_down|__shfl_xor|__ballot|__any|__all)\s*\(")
_LEGACY_WARP_REJECTED = re.compile(r'identifier "(?:__shfl|__shfl_up|__shfl_down|__shfl_xor|__ballot|__any|__all)" '
                                   r"is undefined|Instruction '(?:vote|shfl)' without '\.sync'")
_MACRO_NAME = re.compile(r"[A-Za-z_]\w*(\([^()]*\))?")
_BEFORE_CXX17 = frozenset({"c++98", "c++03", "c++11", "c++14", "c++0x", "c++1y"})
_CXX17_ONLY: dict[str, bool] = {}  # nvcc -> whether its headers reject standards before C++17
# a compiler's word that the headers need C++17 (CUDA 13's libcu++: "requires at least C++ 17")
_NEEDS_CXX17 = re.compile(r"[Cc]\+\+ ?17")


class CompileFailure(RuntimeError):
    """The unit could not be compiled; the message says why in one line (`errors`: every error
    line the compiler printed, for the retries that read where it failed)."""

    def __init__(self, message: str, errors: Sequence[str] = (), compiled_from: str = "",
                 include_dirs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors)
        self.compiled_from = compiled_from  # (a copy's path, which its errors name)
        # (the include folders it ran with, those of headers found around the file among them)
        self.include_dirs = include_dirs


@dataclass(frozen=True, slots=True)
class CompileRequest:
    source: str  # absolute path of the translation unit
    language: str  # "cuda" | "omp"
    arch: str  # "sm_86"
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    forced_includes: tuple[str, ...] = ()
    std: str | None = None
    text: bytes | None = field(default=None, compare=False)  # the unit's text when it differs from the file's
    # nvcc code-generation flags that make it emit what the project's own compiler emits (a CUDA
    # project built with clang: `-prec-sqrt=false`, see `codegen_like`)
    codegen: tuple[str, ...] = ()
    # the build compiles this CUDA unit with clang: so does perflsp when the toolchain has a clang
    # and a CUDA install (headers, libdevice); nvcc with `codegen` otherwise
    clang_cuda: bool = False
    # a unit compiled for the device functions another unit of the build calls (`linking.py`):
    # relocatable code (nvcc `-rdc=true`, clang `-fgpu-rdc`, ptxas `-c`), which keeps functions
    # no kernel of the unit calls
    relocatable: bool = False

    def flags(self) -> list[str]:
        """Preprocessor flags (`-I`, `-D`, `-include`): only these come from the build."""
        out: list[str] = []
        for folder in self.include_dirs:
            out += ["-I", folder]
        for name, value in self.defines:
            if _MACRO_NAME.fullmatch(name):
                out.append(f"-D{name}={value}")
        for header in self.forced_includes:
            out += ["-include", header]
        return out


def codegen_like(compiler: str | None, language: str) -> tuple[str, ...]:
    """nvcc flags for a CUDA unit the project builds with `compiler`: clang's CUDA (through LLVM 19)
    reads `__nvvm_reflect("__CUDA_PREC_SQRT")` as 0, so libdevice's `sqrtf` is the approximate
    `sqrt.approx` (one MUFU), where nvcc's default is the IEEE sequence (a dozen instructions and
    a fix-up branch)."""
    if language == "cuda" and compiler == "clang":
        return ("-prec-sqrt=false",)
    return ()


def uses_clang_cuda(request: CompileRequest, toolchain: Toolchain) -> bool:
    """Whether `request`, a CUDA unit, is compiled with clang (see `CompileRequest.clang_cuda`)."""
    return request.language == "cuda" and request.clang_cuda and toolchain.clang_cuda_ready


def cache_key(request: CompileRequest, toolchain: Toolchain, text: bytes) -> str:
    digest = hashlib.sha256()
    tools = toolchain.identity("clang-cuda" if uses_clang_cuda(request, toolchain) else request.language)
    digest.update(json.dumps([FORMAT_VERSION, tools, request.language, request.arch,
                              request.source, request.include_dirs, request.defines, request.forced_includes,
                              request.std, *request.codegen, uses_clang_cuda(request, toolchain),
                              *(["relocatable"] if request.relocatable else []),
                              *(["c-as-c++"] if _c_as_cxx(request) else [])]).encode())
    digest.update(text)
    return digest.hexdigest()


class CompileCache:
    """Compiled units on disk and in memory. On disk each unit keeps its disassembly (gzip) beside
    the unit read from it: a unit read with other reader code is read again from its SASS, not
    compiled again. An entry whose local headers changed since it was compiled is a miss."""

    def __init__(self, directory: Path | None, memory_entries: int = 64):
        self.directory = Path(directory) if directory else None
        self.memory_entries = memory_entries
        self._memory: dict[str, CompiledUnit | CompileFailure] = {}
        # the server's compile thread and a check's result threads remember units concurrently:
        # evicting the oldest iterates over the dictionary another thread may be growing
        self._memory_lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _file(self, key: str, suffix: str) -> Path | None:
        return self.directory / key[:2] / f"{key}{suffix}" if self.directory else None

    def get(self, key: str) -> CompiledUnit | None:
        """The unit compiled under `key`; raises `CompileFailure` when compiling it failed (with
        the same tools, flags, text and headers: it would fail again)."""
        unit = self._memory.get(key)
        if unit is None:
            unit = self._load(key)
        if unit is None:
            self.misses += 1
            return None
        self.hits += 1
        self._remember(key, unit)
        if isinstance(unit, CompileFailure):
            raise unit
        return unit

    def holds(self, key: str) -> bool:
        """Whether an entry was stored under `key` (without reading it: it may still turn out
        stale when its headers changed)."""
        if key in self._memory:
            return True
        meta_path = self._file(key, ".json")
        return meta_path is not None and meta_path.is_file()

    def put_failure(self, key: str, failure: CompileFailure, headers: list[str]) -> None:
        self._remember(key, failure)
        meta_path = self._file(key, ".json")
        if meta_path is None:
            return
        try:
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = meta_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"failure": str(failure), "retries": RETRY_VERSION, "header_paths": headers,
                                       "headers": _header_digests(headers)}), encoding="utf-8")
            tmp.replace(meta_path)
        except OSError:
            pass

    def _load(self, key: str) -> CompiledUnit | CompileFailure | None:
        meta_path, sass_path = self._file(key, ".json"), self._file(key, ".sass.gz")
        if meta_path is None or sass_path is None:
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("headers") != _header_digests(meta.get("header_paths", [])):
                return None
            if "failure" in meta:
                return CompileFailure(str(meta["failure"])) if meta.get("retries") == RETRY_VERSION else None
            if _ASIDE in str(meta.get("compiler", "")) and _stale_copy(meta):
                return None
            if meta.get("reader") == READER_VERSION and meta.get("unit"):
                return CompiledUnit.from_json(meta["unit"])
            sass = gzip.decompress(sass_path.read_bytes()).decode("utf-8", errors="replace")
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            return None
        unit = read_unit(sass, meta["source"], meta["compiled_from"], meta["arch"], meta["compiler"],
                         meta["header_paths"], float(meta.get("seconds", 0.0)))
        self._write(key, unit, meta["compiled_from"], None)
        return unit

    def put(self, key: str, unit: CompiledUnit, sass: str, compiled_from: str) -> None:
        self._remember(key, unit)
        self._write(key, unit, compiled_from, sass)

    def _write(self, key: str, unit: CompiledUnit, compiled_from: str, sass: str | None) -> None:
        meta_path, sass_path = self._file(key, ".json"), self._file(key, ".sass.gz")
        if meta_path is None or sass_path is None:
            return
        try:
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            if sass is not None:
                tmp = sass_path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(gzip.compress(sass.encode("utf-8"), compresslevel=6))
                tmp.replace(sass_path)
            headers = unit.dependencies
            meta = {"reader": READER_VERSION, "aside": ASIDE_VERSION, "source": unit.source, "compiled_from": compiled_from,
                    "arch": unit.arch, "compiler": unit.compiler, "seconds": unit.seconds,
                    "header_paths": headers, "headers": _header_digests(headers), "unit": unit.to_json()}
            tmp = meta_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(meta), encoding="utf-8")
            tmp.replace(meta_path)
        except OSError:
            pass  # a read-only or full cache folder: compiling again later is the only cost

    def _remember(self, key: str, unit: CompiledUnit | CompileFailure) -> None:
        with self._memory_lock:
            self._memory.pop(key, None)
            self._memory[key] = unit
            while len(self._memory) > self.memory_entries:
                del self._memory[next(iter(self._memory))]


def _stale_copy(meta: dict[str, Any]) -> bool:
    """Whether a unit compiled from a copy (host code set aside) was compiled from a copy this
    version makes differently."""
    version = meta.get("aside")
    if version == ASIDE_VERSION:
        return False
    if version not in (2, 3):
        return True
    # (version 3 changed the copy of CUDA units whose host code launches kernel templates; 4 to
    # 6, of those launching their headers' kernel templates or with arguments the host code
    # spells, or through `hipLaunchKernelGGL`)
    try:
        text = Path(meta["source"]).read_bytes()
        headers = [Path(h).read_bytes() for h in meta.get("header_paths") or []]
    except OSError:
        return True
    if version == 3 and launches_kernel_templates(text):
        return False
    return launches_kernel_templates(text, headers)


def _header_digests(paths: Sequence[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            out.append(hashlib.sha1(Path(path).read_bytes()).hexdigest())
        except OSError:
            out.append("")
    return out


def _text_and_key(request: CompileRequest, toolchain: Toolchain) -> tuple[bytes, str]:
    """The unit's present text and its cache key (raises `CompileFailure` when it cannot be read)."""
    try:
        text = request.text if request.text is not None else Path(request.source).read_bytes()
    except OSError as exc:
        raise CompileFailure(f"cannot read {request.source}: {exc.strerror or exc}") from None
    return text, cache_key(request, toolchain, text)


def is_cached(request: CompileRequest, toolchain: Toolchain, cache: CompileCache) -> bool:
    """Whether `cache` holds the unit's result (compiled, or failed) under its present text."""
    try:
        return cache.holds(_text_and_key(request, toolchain)[1])
    except CompileFailure:
        return False


def compile_unit(request: CompileRequest, toolchain: Toolchain, cache: CompileCache | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> CompiledUnit:
    """The unit's compiled functions (raises `CompileFailure`)."""
    missing = toolchain.missing(request.language)
    if missing:
        raise CompileFailure(missing)
    if not re.fullmatch(r"sm_\d+[af]?", request.arch):
        raise CompileFailure(f"not a GPU architecture: '{request.arch}' (expected e.g. sm_86)")
    text, key = _text_and_key(request, toolchain)
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="perflsp-compile-") as work:
        source = request.source
        if request.text is not None:
            # an unsaved buffer: compiled as a file beside the original, so that its quoted
            # #includes resolve as they would for the saved file
            source = _write_beside(request.source, text, work)
        host_aside = False
        try:
            try:
                cubin, request = _compile_finding_headers(request, toolchain, source, work, timeout_s)
            except CompileFailure as failure:
                retried = _with_host_code_aside(request, toolchain, text, work, timeout_s, failure)
                if source != request.source:
                    os.unlink(source)
                cubin, request, source, how = retried
                host_aside = True
            sass = _run([toolchain.nvdisasm or "nvdisasm", "-c", "-gi", cubin], timeout_s, "nvdisasm")
        except CompileFailure as failure:
            if cache is not None and "took longer than" not in str(failure):  # (a slow machine may do better later)
                cache.put_failure(key, failure, [str(h) for h in local_headers(Path(request.source),
                                                                                request.include_dirs)])
            raise
        finally:
            if source != request.source:
                try:
                    os.unlink(source)
                except OSError:
                    pass
    if uses_clang_cuda(request, toolchain):
        compiler = f"{Path(toolchain.clang or '?').name} (CUDA, as the build)"
    else:
        compiler = " ".join([Path((toolchain.nvcc if request.language == "cuda" else toolchain.clang) or "?").name,
                             *request.codegen])
    if host_aside:
        compiler += f" ({how})"
    headers = [str(h) for h in local_headers(Path(request.source), request.include_dirs)]
    unit = read_unit(sass, request.source, source, request.arch, compiler, headers, time.perf_counter() - started)
    if cache is not None:
        cache.put(key, unit, sass, source)
    return unit


def read_unit(sass: str, source: str, compiled_from: str, arch: str, compiler: str, headers: list[str],
              seconds: float) -> CompiledUnit:
    """The unit of a disassembly; `compiled_from`: the file the compiler read (a copy of an
    unsaved buffer beside `source`), whose positions are `source`'s."""
    functions = {}
    parsed = parse_sass(sass)
    place_library_code(parsed, [source, compiled_from, *headers])
    # (a subroutine that loops is a function of its own: `cfg.looping_subroutines`)
    for fn in [*parsed, *(sub for each in parsed for sub in looping_subroutines(each).values())]:
        compiled = build_function(fn)
        if compiled_from != source:
            compiled.chains = [tuple((source if p == compiled_from else p, n) for p, n in chain)
                               for chain in compiled.chains]
        functions[fn.name] = compiled
    return CompiledUnit(source, arch, compiler, functions, headers, seconds)


def _write_beside(source: str, text: bytes, work: str) -> str:
    folder = Path(source).parent
    try:
        handle, path = tempfile.mkstemp(prefix=TRANSIENT_COPY_PREFIX, suffix=Path(source).suffix, dir=folder)
    except OSError:
        handle, path = tempfile.mkstemp(prefix="unit-", suffix=Path(source).suffix, dir=work)
    with os.fdopen(handle, "wb") as out:
        out.write(text)
    return path


def _with_host_code_aside(request: CompileRequest, toolchain: Toolchain, text: bytes, work: str, timeout_s: float,
                          failure: CompileFailure) -> tuple[str, CompileRequest, str, str]:
    """A unit that failed to compile, compiled again from a copy (host_aside.py): (binary,
    request, the file compiled, written beside the source, what the copy changed, for the
    compiler's name). A CUDA unit calling the warp intrinsics CUDA 9 replaced (`__shfl_xor`,
    `__ballot`), which CUDA 13 no longer declares, is read with their `_sync` forms over the
    whole warp, what the old forms did; then, where it still fails, an OpenMP unit, and a CUDA unit
    whose host code instantiates kernel templates by launching them (`scale<<<g, b>>>(x)` in
    `template <class T> void run(T *x)`, `run<float>` called from `main`), keeps its host code
    but the statements the compiler rejects (`_statements_aside`); any other CUDA unit, or one
    that does not compile so, keeps its device code alone, through nvcc. Raises `failure` where
    that does not compile either, or does not apply (a compile that ran out of time)."""
    if "took longer than" in str(failure):
        raise failure
    statements = "host statements that did not compile here set aside"
    headers = local_headers(Path(request.source), request.include_dirs)
    if request.language != "cuda":
        return (*_statements_aside(request, toolchain, text, headers, work, timeout_s, failure), statements)
    if _LEGACY_WARP_REJECTED.search(str(failure)):
        text = _sync_forms(text)
        try:
            return (*_compile_copy(request, toolchain, text, work, timeout_s),
                    "legacy warp intrinsics read as their _sync forms: they did not compile here")
        except CompileFailure as again:
            failure = again  # (the copies below start from the modern forms)
    if launches_kernel_templates(text, _header_texts(headers)):
        try:
            return (*_statements_aside(request, toolchain, text, headers, work, timeout_s, failure), statements)
        except CompileFailure:
            pass  # (the device code alone, below)
    return _device_code_alone(request, toolchain, text, headers, work, timeout_s, failure)


def _header_aside(text: bytes, lines: frozenset[int], device_macros: frozenset[str] | None,
                  host_classes: bool) -> bytes | None:
    """A header's text with its host code set aside as the unit's is (no instantiations)."""
    return host_code_aside(text, frozenset(), device_macros, host_classes, False, lines)


def _header_texts(headers: Sequence[Path]) -> list[bytes]:
    """The texts of the unit's local headers (those that can be read)."""
    return [loaded.data for header in headers if isinstance(loaded := load_file(header), LoadedFile)]


def _sync_forms(text: bytes) -> bytes:
    """`text` calling the `_sync` forms of the warp intrinsics CUDA 9 replaced, over the whole
    warp (what the old forms did; newlines kept)."""
    return _LEGACY_WARP_CALL.sub(lambda m: m.group(1) + b"_sync(0xffffffff, ", text)


def _edited_headers(headers: Sequence[Path], header_lines: dict[Path, frozenset[int]], legacy: bool,
                    aside: Callable[[bytes, frozenset[int]], bytes | None]) -> dict[Path, bytes]:
    """The new text of each of the unit's headers that a copy changes: the lines the compiler
    rejected set aside (`aside`), and with `legacy`, the old warp intrinsics read as their
    `_sync` forms."""
    edited: dict[Path, bytes] = {}
    for header in dict.fromkeys([*header_lines, *(headers if legacy else [])]):
        try:
            original = header.read_bytes()
        except OSError:
            continue
        text = _sync_forms(original) if legacy else original
        if header in header_lines:
            text = aside(text, header_lines[header]) or text
        if text != original:
            edited[header] = text
    return edited


def _device_code_alone(request: CompileRequest, toolchain: Toolchain, text: bytes, headers: list[Path], work: str,
                       timeout_s: float, failure: CompileFailure) -> tuple[str, CompileRequest, str, str]:
    """A CUDA unit compiled by nvcc from a copy with its host function bodies blanked (and, step
    by step, what else keeps it from compiling: headers, host classes, rejected declarations, in
    the unit and, through copies of them, in its own headers: `_compile_in_tree`; the warp
    intrinsics CUDA 9 replaced, where the compiler says they are gone): (binary, request, the
    copy's path, what the copy changed, for the compiler's name)."""
    if uses_clang_cuda(request, toolchain):
        if toolchain.nvcc is None:
            raise failure
        # (a unit the build compiles with clang that does not compile here whole, for a library
        # header this machine lacks: its device code alone, through nvcc, named in the evidence)
        request = dataclasses.replace(request, clang_cuda=False)
    missing = _lfs_pointer_includes(text, headers)
    device_macros: frozenset[str] | None = None  # (first: every macro may be a device qualifier)
    host_classes = False  # (last: host-only classes set aside too)
    instantiate = True  # (the kernel templates the host code launched, named at the end)
    rejected: frozenset[int] = frozenset()  # (lines of host declarations the compiler rejected)
    rejected_rounds = 0
    stand_ins: set[str] = set()  # (missing headers answered by a stand-in: `_with_stand_in`)
    header_lines: dict[Path, frozenset[int]] = {}  # (lines of the unit's headers the compiler rejected)
    legacy = False  # (the warp intrinsics CUDA 9 replaced read as their `_sync` forms, unit and headers)
    # (copies compiled: the same one fails again; the unit as it is failed already)
    tried: set[tuple[Any, ...]] = {(text, frozenset(), frozenset(), False)}
    last = failure
    for _ in range(2 * MAX_FOUND + 5 + MAX_REJECTED_ROUNDS):
        edited = _edited_headers(headers, header_lines, legacy,
                                 functools.partial(_header_aside, device_macros=device_macros, host_classes=host_classes))
        # (the members the unit defines of the host classes its headers' copies set aside go too)
        elsewhere = frozenset().union(*(host_class_names(h.read_bytes(), device_macros) for h in header_lines
                                        if h.is_file())) if host_classes else frozenset()
        # (a unit with no host code to blank, a header of kernels, is compiled as it is: its
        # missing headers' stand-ins and its headers' copies may still make it compile)
        aside = host_code_aside(_sync_forms(text) if legacy else text, missing, device_macros, host_classes,
                                instantiate, rejected, elsewhere) or (_sync_forms(text) if legacy else text)
        # (a stand-in or a header's lines change the copy compiled as much as its own text)
        key = (aside, frozenset(stand_ins), frozenset(header_lines.items()), legacy)
        if key not in tried:  # (else its failure stands: the next step)
            tried.add(key)
            how = "device code alone: the host code did not compile here" + \
                  ("; legacy warp intrinsics read as their _sync forms" if legacy else "")
            try:
                if not edited:
                    return (*_compile_copy(request, toolchain, aside, work, timeout_s), how)
                return (*_compile_in_tree(request, toolchain, aside, headers, edited, work, timeout_s), how)
            except CompileFailure as again:
                last = again
                request, headers = _with_found_folders(request, again, headers)
        if not legacy and _LEGACY_WARP_REJECTED.search("\n".join((str(last), *last.errors))):
            legacy = True
            continue
        name = missing_header(str(last))
        if name is None and instantiate and b"perflsp_instantiated_kernels" in aside:
            instantiate = False  # (an instantiation the file's scope cannot spell)
            continue
        if name is None and device_macros is None:
            device_macros = device_qualifier_macros([text, *_header_texts(headers)])
            continue
        if name is None and not host_classes:
            host_classes = True
            continue
        if name is None and rejected_rounds < MAX_REJECTED_ROUNDS:
            lines = _error_lines(last) - rejected
            more = _more_header_lines(header_lines, last, headers)
            if lines or more is not None:
                rejected |= lines
                header_lines = more or header_lines
                rejected_rounds += 1
                continue
        if name is None or name in stand_ins:
            raise failure
        if name in missing or not _spells_include(text, name) or _stand_in_text(name):
            # included by one of the unit's headers, whose text stays (or a CUDA library's,
            # whose types device code may use): a stand-in
            request = _with_stand_in(request, work, name)
            stand_ins.add(name)
            if _stand_in_text(name):
                continue  # (the #include stays: the stand-in answers it)
        missing |= {name}
    raise failure


def _spells_include(text: bytes, name: str) -> bool:
    return re.search(rb"^[ \t]*#[ \t]*include[ \t]*[<\"]" + re.escape(name.encode()) + rb"[>\"]", text,
                     re.MULTILINE) is not None


# the headers of CUDA's libraries (cuBLAS, cuFFT, cuSPARSE, cuSOLVER, cuRAND's host API, cuDNN,
# NCCL, cuTENSOR), which bring the toolkit's half, bfloat16 and data-type headers with them: a
# project's `typedef __nv_bfloat16 floatX` compiles only with those
_CUDA_LIBRARY_HEADER = re.compile(r"(?:cublas|cufft|cusparse|cusolver|curand|cudnn|nccl|cutensor)\w*\.h")
_CUDA_LIBRARY_STAND_IN = b"""/* perflsp: a stand-in for a CUDA library header this machine lacks: what it includes */
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <library_types.h>
#endif
"""


# HIP's runtime header, answered as HIP's NVIDIA platform answers it: CUDA's runtime with HIP's
# names for its built-ins and launch (`hipBlockIdx_x`, `hipLaunchKernelGGL`); HIP's host API
# calls it does not name are set aside as any host statement the compiler rejects
_HIP_RUNTIME = re.compile(r"hip/hip_runtime(?:_api)?\.h")
_HIP_STAND_IN = _CUDA_LIBRARY_STAND_IN + b"""#define __HIP_PLATFORM_NVIDIA__ 1
#define __HIP_PLATFORM_NVCC__ 1
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(symbol) symbol
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define hipLaunchKernelGGL(kernel, blocks, threads, shared, stream, ...) \\
  kernel<<<blocks, threads, shared, stream>>>(__VA_ARGS__)
#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipStream_t cudaStream_t
#define hipEvent_t cudaEvent_t
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetLastError cudaGetLastError
#define hipGetErrorString cudaGetErrorString
"""


def _stand_in_text(name: str) -> bytes | None:
    """The text of the stand-in for a missing header whose `#include` stays (a CUDA library's,
    HIP's runtime), None for any other (an empty stand-in, or its `#include` blanked)."""
    if _HIP_RUNTIME.fullmatch(name):
        return _HIP_STAND_IN
    return _CUDA_LIBRARY_STAND_IN if _CUDA_LIBRARY_HEADER.fullmatch(Path(name).name) else None


def _with_stand_in(request: CompileRequest, work: str, name: str) -> CompileRequest:
    """`request` with an include folder holding a stand-in for the header `name` (a library
    header this machine lacks that one of the unit's own headers includes: its device code may
    not need it; where the host code does, the compile fails as before): empty, or, for a CUDA
    library's header, the toolkit headers it includes (for HIP's runtime, its NVIDIA platform)."""
    folder = Path(work) / "missing-headers"
    target = folder / name
    if ".." in Path(name).parts or not target.resolve().is_relative_to(folder.resolve()):
        return request
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(_stand_in_text(name) or b"")
    if str(folder) in request.include_dirs:
        return request
    return dataclasses.replace(request, include_dirs=(*request.include_dirs, str(folder)))


MAX_REJECTED_ROUNDS = 3  # compiles spent setting aside the host declarations the compiler rejects


def _statements_aside(request: CompileRequest, toolchain: Toolchain, text: bytes, headers: list[Path], work: str,
                      timeout_s: float, failure: CompileFailure) -> tuple[str, CompileRequest, str]:
    """A unit that failed to compile, compiled again from a copy whose missing headers'
    `#include`s and rejected host statements (its own, and through copies of them its headers':
    `_compile_in_tree`) are blanked (`offload_host_aside`), a few rounds at most: the host code
    that still compiles stays, with the instantiations it makes. Raises `failure` where that does
    not compile either."""
    missing = _lfs_pointer_includes(text, headers)
    stand_ins: set[str] = set()  # (missing headers answered by a stand-in, `#include`s kept)
    rejected: frozenset[int] = frozenset()
    rejected_rounds = 0
    header_lines: dict[Path, frozenset[int]] = {}  # (lines of the unit's headers the compiler rejected)
    tried: set[tuple[Any, ...]] = set()  # (copies compiled: the same one fails again)
    last = failure
    for _ in range(2 * MAX_FOUND + MAX_REJECTED_ROUNDS + 2):
        aside = offload_host_aside(text, missing, rejected)  # (None before anything is set aside)
        key = (aside, frozenset(stand_ins), frozenset(header_lines.items()))
        # (the unit's own text, where only a stand-in is new)
        if (aside is not None or header_lines or stand_ins) and key not in tried:
            tried.add(key)
            edited = _edited_headers(headers, header_lines, False,
                                     lambda header, lines: offload_host_aside(header, frozenset(), lines))
            try:
                if not edited:
                    return _compile_copy(request, toolchain, aside or text, work, timeout_s)
                return _compile_in_tree(request, toolchain, aside or text, headers, edited, work, timeout_s)
            except CompileFailure as again:
                last = again
                request, headers = _with_found_folders(request, again, headers)
        name = missing_header(str(last))
        lines = _error_lines(last, request.source) - rejected
        more = _more_header_lines(header_lines, last, headers)
        if name is not None and name not in missing and name not in stand_ins:
            if not _spells_include(text, name) or _stand_in_text(name):
                # (one of the unit's headers includes it, or a CUDA library's: its #include stays)
                request = _with_stand_in(request, work, name)
                stand_ins.add(name)
            else:
                missing |= {name}
        elif name is None and (lines or more is not None) and rejected_rounds < MAX_REJECTED_ROUNDS:
            rejected |= lines
            header_lines = more or header_lines
            rejected_rounds += 1
        else:
            raise failure
    raise failure


def _with_found_folders(request: CompileRequest, failure: CompileFailure,
                        headers: list[Path]) -> tuple[CompileRequest, list[Path]]:
    """`request` with the folders of the headers that `failure`'s compile found around the file
    (the next copy starts with them), and the unit's local headers read through them."""
    if not failure.include_dirs or failure.include_dirs == request.include_dirs:
        return request, headers
    request = dataclasses.replace(request, include_dirs=failure.include_dirs)
    return request, local_headers(Path(request.source), request.include_dirs)


def _more_header_lines(known: dict[Path, frozenset[int]], failure: CompileFailure,
                       headers: Sequence[Path]) -> dict[Path, frozenset[int]] | None:
    """`known` with the lines of the unit's `headers` that `failure`'s errors point at, or None
    when it names none that `known` lacks."""
    found = header_error_lines((*failure.errors, str(failure)), headers)
    if all(lines <= known.get(path, frozenset()) for path, lines in found.items()):
        return None
    return {path: known.get(path, frozenset()) | found.get(path, frozenset()) for path in {*known, *found}}


def _compile_in_tree(request: CompileRequest, toolchain: Toolchain, copy: bytes, headers: Sequence[Path],
                     edited: dict[Path, bytes], work: str, timeout_s: float) -> tuple[str, CompileRequest, str]:
    """`copy` of the unit compiled in a copy of its folder tree whose `edited` headers have
    their new text (header_copies.py): (binary, request, the copy's path), as `_compile_copy`."""
    tree = Path(tempfile.mkdtemp(prefix="tree-", dir=work))
    placed = write_tree(Path(request.source), copy, headers, edited, request.include_dirs, tree)
    if placed is None:
        raise CompileFailure("the unit's headers could not be copied beside it")
    path, include_dirs = placed
    try:
        binary, compiled = _compile_finding_headers(dataclasses.replace(request, include_dirs=include_dirs),
                                                    toolchain, str(path), work, timeout_s)
    except CompileFailure as failed:
        found = tuple(d for d in failed.include_dirs if d not in include_dirs)
        raise CompileFailure(str(failed), failed.errors, str(path), (*request.include_dirs, *found)) from None
    # (the request as the unit's own, with any folder the compile found: its headers are the originals)
    found = tuple(d for d in compiled.include_dirs if d not in include_dirs)
    return binary, dataclasses.replace(compiled, include_dirs=(*request.include_dirs, *found)), str(path)


def _lfs_pointer_includes(text: bytes, headers: Sequence[Path]) -> frozenset[str]:
    """The unit's `#include`s of local headers that are Git LFS pointers (data never fetched):
    no headers, left out of every copy."""
    return frozenset(_spelled_includes(text, [h for h in headers if _is_lfs_pointer(h)]))


def _compile_copy(request: CompileRequest, toolchain: Toolchain, copy: bytes, work: str,
                  timeout_s: float) -> tuple[str, CompileRequest, str]:
    """`copy` of the unit compiled from beside its source (the headers found around the file for
    the whole unit are found again for it): (binary, request, the copy's path). Its failure names
    the copy (`CompileFailure.compiled_from`); the copy is then removed."""
    path = _write_beside(request.source, copy, work)
    try:
        binary, compiled = _compile_finding_headers(request, toolchain, path, work, timeout_s)
    except CompileFailure as failed:
        os.unlink(path)
        raise CompileFailure(str(failed), failed.errors, path, failed.include_dirs) from None
    return binary, compiled, path


def _error_lines(failure: CompileFailure, source: str = "") -> frozenset[int]:
    """The lines of the file compiled (the copy the failure names, else `source`) that the
    compiler's errors point at (nvcc's `file(12): error`, clang's `file:12:5: error`)."""
    name = Path(failure.compiled_from or source).name
    return frozenset(line for path, line in error_positions((*failure.errors, str(failure)))
                     if Path(path).name == name)


_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def _is_lfs_pointer(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_LFS_POINTER)) == _LFS_POINTER
    except OSError:
        return False


def _spelled_includes(text: bytes, headers: Sequence[Path]) -> set[str]:
    """How `text` spells its quoted #includes of `headers` (by file name)."""
    names = {h.name for h in headers}
    return {spelled for spelled in quoted_includes(text) if Path(spelled).name in names}


def _compile_finding_headers(request: CompileRequest, toolchain: Toolchain, source: str, work: str,
                             timeout_s: float) -> tuple[str, CompileRequest]:
    """The unit compiled (its binary, and the request that compiled it): a header the compiler
    misses is looked for around the file and the compile tried again with its folder (headers.py)."""
    for _ in range(MAX_FOUND + 1):
        try:
            if uses_clang_cuda(request, toolchain):
                try:
                    return _clang_cuda(request, toolchain, source, work, timeout_s), request
                except CompileFailure as failure:
                    name = missing_header(str(failure))
                    found = find_header_folder(name, Path(request.source).parent) if name else None
                    if (found is not None and str(found) not in request.include_dirs) or toolchain.nvcc is None:
                        raise  # found around the file: compiled again with its folder (below)
                    # what this clang cannot compile (a header or language feature of another
                    # version), nvcc may: computing as clang does, named in the evidence
                    request = dataclasses.replace(request, clang_cuda=False)
            if request.language == "cuda":
                return _nvcc(request, toolchain, source, work, timeout_s), request
            return _clang_offload(request, toolchain, source, work, timeout_s), request
        except CompileFailure as failure:
            name = missing_header(str(failure))
            folder = find_header_folder(name, Path(request.source).parent) if name else None
            if folder is None or str(folder) in request.include_dirs:
                failure.include_dirs = request.include_dirs
                raise
            request = dataclasses.replace(request, include_dirs=(*request.include_dirs, str(folder)))
    raise CompileFailure(f"more than {MAX_FOUND} headers missing: give the build's -I folders (compile_commands.json)")


def _nvcc(request: CompileRequest, toolchain: Toolchain, source: str, work: str, timeout_s: float) -> str:
    assert toolchain.nvcc is not None
    cubin = str(Path(work) / "unit.cubin")
    base = [toolchain.nvcc, "-cubin", "-O3", "-lineinfo", f"-arch={request.arch}", "-w",
            *(["-rdc=true"] if request.relocatable else []),
            "--extended-lambda", "--expt-relaxed-constexpr", *request.codegen, *request.flags(),
            # (after the toolkit's own `-I` include folder: a component's headers never shadow it)
            *[arg for folder in toolchain.cuda_extra_includes for arg in ("-isystem", folder)]]
    if not source.endswith(".cu"):
        base += ["-x", "cu"]
    std = request.std
    older = bool(std) and std in _BEFORE_CXX17
    if older and _CXX17_ONLY.get(toolchain.nvcc):
        std = "c++17"  # this nvcc's own headers (CCCL 3) need C++17: the older standard fails
    attempts = [std, "c++17"] if older and std != "c++17" else [std]
    failure = CompileFailure("nvcc failed")
    for attempt in attempts:
        command = [*base, *([f"-std={attempt}"] if attempt else []), source, "-o", cubin]
        try:
            try:
                _run(command, timeout_s, "nvcc")
            except CompileFailure as exc:
                if "Unresolved extern function" not in str(exc) and "separate compilation mode" not in str(exc):
                    raise
                # device functions of another translation unit (a `-rdc` build): relocatable
                # code, their calls left unresolved; a launch from device code (dynamic
                # parallelism) compiles only so
                _run([*command[:1], "-rdc=true", *command[1:]], timeout_s, "nvcc")
            if attempt == "c++17" and older:
                _CXX17_ONLY[toolchain.nvcc] = True
            return cubin
        except CompileFailure as exc:
            failure = exc  # (with every error line: the retries read where it failed)
            if not _NEEDS_CXX17.search(str(failure)):
                break
    raise failure


# headers clang's CUDA wrapper includes that a CUDA install may lack: `texture_fetch_functions.h`
# (texture references, removed in CUDA 13; clang 21 stops including it) and `curand_mtgp32_kernel.h`
# (cuRAND, a separate component). Empty stand-ins, searched last (`-idirafter`): real ones win.
_CLANG_CUDA_SHIMS = Path(__file__).parent / "clang_cuda_shims"


def _clang_cuda(request: CompileRequest, toolchain: Toolchain, source: str, work: str, timeout_s: float) -> str:
    assert toolchain.clang and toolchain.cuda_root and toolchain.ptxas
    ptx = str(Path(work) / "unit.ptx")
    command = [toolchain.clang, "-x", "cuda", f"--cuda-path={toolchain.cuda_root}", f"--cuda-gpu-arch={request.arch}",
               "--cuda-device-only", "-S", "-O3", "-gline-tables-only", "-w", "-Wno-unknown-cuda-version",
               *request.flags(), *[arg for folder in toolchain.cuda_extra_includes for arg in ("-idirafter", folder)],
               "-idirafter", str(_CLANG_CUDA_SHIMS), *(["-fgpu-rdc"] if request.relocatable else [])]
    cccl = Path(toolchain.cuda_root) / "include" / "cccl"
    if cccl.is_dir():
        command += ["-isystem", str(cccl)]  # CUDA 13 keeps thrust, cub and libcu++ there; nvcc adds it itself
    try:
        _run([*command, *([f"-std={request.std}"] if request.std else []), source, "-o", ptx], timeout_s, "clang")
    except CompileFailure as failure:
        if not (request.std in _BEFORE_CXX17 and _NEEDS_CXX17.search(str(failure))):
            raise
        # the CUDA install's headers (CCCL 3) need C++17: the build's older standard fails with them
        _run([*command, "-std=c++17", source, "-o", ptx], timeout_s, "clang")
    return _assemble(toolchain.ptxas, request.arch, ptx, str(Path(work) / "unit.cubin"), timeout_s,
                     request.relocatable)


def _assemble(ptxas: str, arch: str, ptx: str, cubin: str, timeout_s: float, relocatable: bool = False) -> str:
    """`ptx` assembled with line info into `cubin`; relocatable when it calls into another unit
    (or is asked to be)."""
    assemble = [ptxas, "-O3", "-lineinfo", f"-arch={arch}", *(["-c"] if relocatable else []), ptx, "-o", cubin]
    try:
        _run(assemble, timeout_s, "ptxas")
    except CompileFailure as exc:
        if "Unresolved extern function" not in str(exc):
            raise
        _run([*assemble[:1], "-c", *assemble[1:]], timeout_s, "ptxas")
    return cubin


def _clang_offload(request: CompileRequest, toolchain: Toolchain, source: str, work: str, timeout_s: float) -> str:
    assert toolchain.clang and toolchain.ptxas and toolchain.omp_device_dir
    runtime = omp_device_library(toolchain.omp_device_dir, request.arch)
    if runtime is None:
        raise CompileFailure(f"no OpenMP device runtime for {request.arch} in {toolchain.omp_device_dir}")
    cubin = str(Path(work) / "unit.cubin")
    device = [toolchain.clang, "-O3", "-fopenmp", "-fopenmp-targets=nvptx64-nvidia-cuda", f"--offload-arch={request.arch}",
              "--offload-device-only", "-c", "-gline-tables-only", "-w", f"--libomptarget-nvptx-bc-path={runtime}",
              f"--ptxas-path={toolchain.ptxas}", *request.flags()]
    # libdevice comes from the CUDA install that holds it (a toolkit or the nvcc wheel); without
    # one the math functions stay calls of their own, counted as nothing
    device += [f"--cuda-path={toolchain.libdevice_root}"] if toolchain.libdevice_root else ["-nocudalib"]
    if Path(source).suffix == ".c" and not _c_as_cxx(request):
        device += ["-x", "c"]  # (a C++ standard is refused for C)
    else:
        device += [*(["-x", "c++"] if _c_as_cxx(request) else []), *([f"-std={request.std}"] if request.std else [])]
    _run([*device, source, "-o", cubin], timeout_s, "clang")
    return cubin


def _c_as_cxx(request: CompileRequest) -> bool:
    """A `.c` unit its build compiles as C++ (`-x c++ -std=gnu++14`: a C++ standard says so)."""
    return Path(request.source).suffix == ".c" and (request.std or "").startswith("c++")


def _run(command: Sequence[str], timeout_s: float, tool: str) -> str:
    try:
        done = subprocess.run(list(command), capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CompileFailure(f"{tool} took longer than {timeout_s:g} s") from None
    except OSError as exc:
        raise CompileFailure(f"cannot run {tool}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).decode("utf-8", errors="replace")
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
        detail = "; ".join((errors or lines)[:3]) or f"exit status {done.returncode}"
        raise CompileFailure(f"{tool} failed: {detail[:600]}", errors)
    return done.stdout.decode("utf-8", errors="replace")
