"""Compiling files for the analysis: which translation unit compiles a file (itself, or for a
header the source that includes it), in which language, with which flags, cached, in parallel.

    compiler = Compiler(find_toolchain(), CompileCache(default_cache_dir()), flags=DiscoveredDatabases())
    compiler.prefetch([path], ["sm_86"])      # a pool compiles them
    source = compiler.compiled(path, ["sm_86"])  # -> CompiledSource (units or reasons)

The caller decides whether compiling is allowed (a trusted workspace, `--no-compile`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from perflsp.compiled.build import CompileCache, CompileFailure, CompileRequest, codegen_like, compile_unit, is_cached
from perflsp.compiled.linking import (
    DEVICE_CODE,
    MAX_ROUNDS,
    OMP_DECLARE_TARGET,
    defining_sources,
    external_callees,
    simple_name,
    with_linked,
)
from perflsp.compiled.model import CompiledFunction, CompiledSource, CompiledUnit
from perflsp.compiled.toolchain import Toolchain, ToolchainSettings
from perflsp.kernels.compile_db import CompileFlags, FlagsSource
from perflsp.kernels.includes import folders_above, names_file, sources_including
from perflsp.source.files import is_transient_copy

CUDA_SUFFIXES = frozenset({".cu"})
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl"})
SOURCE_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".cu", ".C"})
_OMP_TARGET = re.compile(rb"omp\s+target\b(?!\s+(?:data|enter|exit|update)\b)")
_GLOBAL = re.compile(rb"__global__")
# Device code beyond this many kernels (generated files) is not compiled: nvcc takes about a minute
# per 3,000 kernels and the analysis stops at its per-file ceiling anyway; the source engine answers.
MAX_KERNELS = 1000


def default_cache_dir() -> Path:
    env = os.environ.get("PERFLSP_CACHE_DIR")
    if env:
        return Path(env) / "compiled"
    import platformdirs

    return Path(platformdirs.user_cache_dir("perflsp", appauthor=False)) / "compiled"


def unit_language(path: Path, text: bytes, flags: CompileFlags | None) -> str | None:
    """"cuda", "omp", or None (nothing to compile) for a translation unit."""
    if flags is not None and flags.language:
        return flags.language
    if path.suffix in CUDA_SUFFIXES:
        return "cuda"
    if _OMP_TARGET.search(text):
        return "omp"
    if _GLOBAL.search(text):
        return "cuda"
    if OMP_DECLARE_TARGET.search(text):  # (OpenMP device functions only: another unit's regions call them)
        return "omp"
    return None


class Compiler:
    def __init__(self, toolchain: Toolchain, cache: CompileCache | None = None, jobs: int | None = None,
                 timeout_s: float = 120.0, flags: FlagsSource | None = None):
        """`flags`: where each file's build flags come from (a compile database)."""
        self.toolchain = toolchain
        self.flags = flags
        self.cache = cache
        self.jobs = jobs or max(1, os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str], Future[CompiledUnit | str]] = {}
        self._done: dict[tuple[str, str, str], CompiledUnit | str] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._prefetching: list[threading.Thread] = []
        self._ahead: list[tuple[Path, str]] | None = None  # what `prefetch` was given, until it starts
        self._closed = False
        self.keep = 256  # results held in memory (the oldest go first)
        self._links: dict[tuple[str, str], tuple[CompiledUnit, CompiledUnit]] = {}  # unit -> with others' functions

    # -- which unit ----------------------------------------------------------------------------

    def flags_for(self, path: Path) -> CompileFlags | None:
        return self.flags.flags_for(path) if self.flags is not None else None

    def unit_for(self, path: Path) -> Path | None:
        """The translation unit that compiles `path`'s code: itself when it is a source file the
        build compiles (or no database says otherwise and no source beside it includes it), else
        a source that includes it (None: a header nothing includes)."""
        is_unit = self.flags.is_unit if self.flags is not None else None
        if path.suffix not in HEADER_SUFFIXES:
            known = is_unit(path) if is_unit is not None else None
            if known is False:
                return includer_of(path, is_unit) or path
            if known:
                return path
            # (no database covers its folder: a unit the database compiles that includes it,
            # `main.cu` -> `tree.h` -> `kernels/tree_kernels.cu`, where its templates are
            # instantiated; else a source that another source beside it includes, `#include
            # "solver.cu"` in a unity build, is compiled through the outermost such source)
            return (_unit_including(path, is_unit) if is_unit is not None else None) \
                or _outermost_source_includer(path)
        return includer_of(path, is_unit)

    def request(self, path: Path, arch: str, text: bytes | None = None,
                relocatable: bool = False, omp_regions: bool = False, kernels: bool = False) -> CompileRequest | str:
        """`relocatable`: compiled for the device functions another unit calls (`__device__`,
        OpenMP `declare target`; it may have no kernel of its own). `omp_regions`: the analysis
        found OpenMP target regions in the file (directives a macro writes,
        `OMP_TARGET(teams distribute)` -> `_Pragma("omp target ...")`, that no `omp target` in
        its text shows); `kernels`: it found CUDA kernels (a macro may spell `__global__`:
        `#define GLOBAL __global__`)."""
        try:
            own = text if text is not None else _read(path)
        except OSError as exc:
            return f"cannot read {path}: {exc.strerror or exc}"
        if relocatable and DEVICE_CODE.search(own):
            pass
        elif not _GLOBAL.search(own) and not _OMP_TARGET.search(own) and not omp_regions and not kernels:
            return f"{path.name} has no device code to compile"
        count = len(_GLOBAL.findall(own)) + len(_OMP_TARGET.findall(own))
        if count > MAX_KERNELS:
            return f"{path.name} has {count:,} kernels (more than {MAX_KERNELS:,}): too many to compile"
        unit = self.unit_for(path)
        alone = unit is None and bool(_GLOBAL.search(own) or kernels)
        if unit is None and not alone:
            return f"{path.name} is a header no source beside it includes: nothing compiles it"
        # (a header of CUDA kernels no source includes, a file NVRTC compiles at run time or a
        # library's: compiled on its own, as NVRTC would)
        unit = unit or path
        try:
            unit_text = text if unit == path and text is not None else unit.read_bytes()
        except OSError as exc:
            return f"cannot read {unit}: {exc.strerror or exc}"
        flags = self.flags_for(unit) or self.flags_for(path)
        language = unit_language(unit, unit_text, flags) or ("omp" if omp_regions and unit == path else None)
        if language is None and (unit != path or alone):
            # a header of kernels (or regions) that a `.cpp` includes: its build compiles that
            # source for the device (`nvcc -x cu main.cpp`), or the header's code would not compile
            if _GLOBAL.search(own) or kernels:
                language = "cuda"
            elif _OMP_TARGET.search(own) or omp_regions:
                language = "omp"
        if language is None or (language == "cuda" and not _GLOBAL.search(unit_text) and unit == path
                                and not relocatable and not kernels):
            return f"{unit.name} has no device code to compile"
        missing = self.toolchain.missing(language)
        if missing:
            return missing
        return CompileRequest(
            str(unit.resolve()), language, arch,
            tuple(str(d) for d in (flags.include_dirs if flags else ())),
            tuple(sorted((flags.defines if flags else {}).items())),
            tuple(str(p) for p in (flags.forced_includes if flags else ())),
            flags.std if flags else None,
            text if unit == path else None,
            codegen_like(flags.compiler if flags else None, language),
            clang_cuda=language == "cuda" and flags is not None and flags.compiler == "clang",
            relocatable=relocatable)

    # -- compiling -----------------------------------------------------------------------------

    def compiled(self, path: Path, archs: Sequence[str], text: bytes | None = None,
                 omp_regions: bool = False, kernels: bool = False) -> CompiledSource:
        """`path` compiled for each architecture (waiting for a compile already under way);
        `text`: its unsaved text, when it differs from the file; `omp_regions`, `kernels`: the
        analysis found OpenMP target regions or CUDA kernels in it (`request`)."""
        units: dict[str, CompiledUnit] = {}
        failures: dict[str, str] = {}
        for arch in dict.fromkeys(archs):
            result = self._result(path, arch, text, omp_regions, kernels)
            if isinstance(result, str):
                failures[arch] = result
            else:
                units[arch] = self._linked(result, arch)
        return CompiledSource(units, failures)

    def _linked(self, unit: CompiledUnit, arch: str) -> CompiledUnit:
        """`unit` with the device functions of other units of its folder that its code calls
        (separate compilation), compiled as relocatable code; as it is where none is found."""
        memo = self._links.get((unit.source, arch))
        if memo is not None and memo[0] is unit:
            return memo[1]
        others: dict[str, tuple[CompiledFunction, str]] = {}
        missing = external_callees(unit.functions.values(), unit.functions)
        language = self._language(Path(unit.source)) if missing else None
        tried: set[Path] = set()
        folder = Path(unit.source).parent
        for _ in range(MAX_ROUNDS):
            if not missing:
                break
            names = {simple_name(symbol) for symbol in missing}
            sources = [p for p in defining_sources(Path(unit.source), names, self._is_unit,
                                                   _folder_sources(folder)) if p not in tried]
            tried.update(sources)
            added: list[CompiledFunction] = []
            for source in sources:
                request = self.request(source, arch, relocatable=True)
                if isinstance(request, str) or (language is not None and request.language != language):
                    continue
                result = self._compile(request)
                if isinstance(result, str):
                    continue
                for symbol, fn in result.functions.items():
                    if not fn.is_entry and symbol not in unit.functions and symbol not in others:
                        others[symbol] = (fn, result.source)
                        added.append(fn)
            have = set(unit.functions) | set(others)
            missing = external_callees(added, have)
        linked = with_linked(unit, {s: v for s, v in others.items() if s in _reached(unit, others)})
        with self._lock:
            self._links[(unit.source, arch)] = (unit, linked)
        return linked

    def _language(self, source: Path) -> str | None:
        """The language a unit compiled in (its siblings must compile in it too), None unknown."""
        try:
            return unit_language(source, source.read_bytes(), self.flags_for(source))
        except OSError:
            return None

    def _is_unit(self, path: Path) -> bool | None:
        return self.flags.is_unit(path) if self.flags is not None else None

    def prefetch(self, paths: Iterable[Path], archs: Sequence[str]) -> None:
        """Compile ahead of the caller, in the pool and in file order, every file for every
        architecture that the cache does not hold, once the caller asks for a unit the cache
        lacks. On a warm cache nothing runs ahead: loading cached units in the pool while the
        caller analysed slowed its analysis by a quarter or more (threads taking turns on the
        interpreter) for loads of ~3 ms each, which `compiled` makes when asked. The requests are made in a
        thread of their own (each reads its file and unit: ~1 ms of I/O, 8 s for a corpus of
        7,500 files). A file the caller reaches first it submits itself; the pending request
        is shared either way."""
        work = [(path, arch) for path in paths for arch in dict.fromkeys(archs)]
        with self._lock:
            self._ahead = work or None

    def _start_prefetch(self) -> None:
        with self._lock:
            work, self._ahead = self._ahead, None
            if work is None or self._closed:
                return
            thread = threading.Thread(target=self._prefetch, args=(work,), name="perflsp-prefetch", daemon=True)
            self._prefetching.append(thread)
        thread.start()

    def _prefetch(self, work: Sequence[tuple[Path, str]]) -> None:
        for path, arch in work:
            if self._closed:
                return
            request = self.request(path, arch, None)
            if isinstance(request, str) or (self.cache is not None and is_cached(request, self.toolchain, self.cache)):
                continue
            self._submit_request(request)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            pool, self._pool = self._pool, None
            prefetching, self._prefetching = self._prefetching, []
        for thread in prefetching:
            thread.join()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _key(self, request: CompileRequest) -> tuple[str, str, str]:
        return (request.source, request.arch, repr((request.include_dirs, request.defines, request.forced_includes,
                                                    request.std, request.language, request.relocatable)))

    def _submit(self, path: Path, arch: str, text: bytes | None,
                omp_regions: bool = False, kernels: bool = False) -> Future[CompiledUnit | str] | CompiledUnit | str:
        request = self.request(path, arch, text, omp_regions=omp_regions, kernels=kernels)
        if isinstance(request, str):
            return request
        return self._submit_request(request)

    def _submit_request(self, request: CompileRequest) -> Future[CompiledUnit | str] | CompiledUnit | str:
        key = self._key(request)
        with self._lock:
            if request.text is None and key in self._done:
                return self._done[key]
            if request.text is None and key in self._pending:
                return self._pending[key]
            if self._closed:
                return "the compiler was closed"
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="perflsp-compile")
            future = self._pool.submit(self._compile, request)
            if request.text is None:
                self._pending[key] = future
        return future

    def _compile(self, request: CompileRequest) -> CompiledUnit | str:
        if self._ahead is not None and (self.cache is None or not is_cached(request, self.toolchain, self.cache)):
            self._start_prefetch()  # the cache lacks units: compile the files ahead while this one compiles
        try:
            result: CompiledUnit | str = compile_unit(request, self.toolchain, self.cache, self.timeout_s)
        except CompileFailure as exc:
            result = str(exc)
        except OSError as exc:
            result = f"compiling failed: {exc.strerror or exc}"
        if request.text is None:
            key = self._key(request)
            with self._lock:
                self._done[key] = result
                self._pending.pop(key, None)
                while len(self._done) > self.keep:  # (the disk cache has the rest)
                    del self._done[next(iter(self._done))]
        return result

    def _result(self, path: Path, arch: str, text: bytes | None, omp_regions: bool = False,
                kernels: bool = False) -> CompiledUnit | str:
        submitted = self._submit(path, arch, text, omp_regions, kernels)
        if isinstance(submitted, Future):
            return submitted.result()
        return submitted


def _reached(unit: CompiledUnit, others: dict[str, tuple[CompiledFunction, str]]) -> set[str]:
    """The symbols of `others` that `unit`'s functions call, directly or through each other."""
    seen: set[str] = set()
    frontier = external_callees(unit.functions.values(), unit.functions)
    while frontier:
        seen |= {s for s in frontier if s in others}
        frontier = {name for s in frontier if s in others for b in others[s][0].blocks for name in b.calls} - seen
    return seen


_INCLUDE_NAME = re.compile(rb'#\s*include\s*"([^"]+)"')


def includer_of(header: Path, is_unit: Callable[[Path], bool | None] | None = None) -> Path | None:
    """A source file that #includes `header` by name, directly or through other headers, found
    beside it or up to two folders above it: one the build compiles where the database says which
    (through sources it does not compile: `main.cu` -> `work.cu` -> `kernels.cu`), else the
    nearest."""
    if is_unit is not None:
        compiled = next(iter(sources_including(header, _includers, is_unit=is_unit)), None)
        if compiled is not None:
            return compiled
    return next(iter(sources_including(header, _includers)), None)


def _unit_including(source: Path, is_unit: Callable[[Path], bool | None]) -> Path | None:
    """A source the compile database compiles that includes `source`, directly or through
    headers and sources it does not compile (None: none found)."""
    return next((c for c in sources_including(source, _includers, is_unit=is_unit) if is_unit(c)), None)


def _outermost_source_includer(source: Path, depth: int = 4) -> Path:
    """The source beside `source` that includes it by name, and the one including that, ...:
    the outermost (`source` itself when none does)."""
    seen = {source}
    current = source
    for _ in range(depth):
        including = next((c for c in _folder_sources(current.parent) if c not in seen and c.suffix in SOURCE_SUFFIXES
                          and any(names_file(c, written, current) for written in _included_names(c))), None)
        if including is None:
            break
        seen.add(including)
        current = including
    return current


def _includers(header: Path) -> list[Path]:
    """Files beside `header` or up to two folders above that include it by name."""
    return [candidate for folder in folders_above(header) for candidate in _folder_sources(folder)
            if candidate != header and any(names_file(candidate, written, header) for written in _included_names(candidate))]


def _folder_sources(folder: Path) -> list[Path]:
    """The C, C++ and CUDA files of a folder, per state of the folder."""
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        return []
    cached = _FOLDERS.get(folder)
    if cached is None or cached[0] != stamp:
        try:
            # (a copy another compile wrote beside its unit is no includer: gone in a moment)
            files = sorted(p for p in folder.iterdir() if p.suffix in _CANDIDATE_SUFFIXES and p.is_file()
                           and not is_transient_copy(p))
        except OSError:
            files = []
        if len(_FOLDERS) > 4096:
            _FOLDERS.clear()
        cached = _FOLDERS[folder] = (stamp, files)
    return cached[1]


def _included_names(path: Path) -> frozenset[str]:
    """The paths a file #includes with quotes, as written, per version of the file."""
    try:
        stat = path.stat()
    except OSError:
        return frozenset()
    key = (path, stat.st_mtime_ns, stat.st_size)
    found = _INCLUDES.get(key)
    if found is None:
        try:
            text = path.read_bytes()
        except OSError:
            text = b""
        found = frozenset(m.decode(errors="replace") for m in _INCLUDE_NAME.findall(text))
        if len(_INCLUDES) > 65536:
            _INCLUDES.clear()
        _INCLUDES[key] = found
    return found


def _read(path: Path) -> bytes:
    return path.read_bytes()


_CANDIDATE_SUFFIXES = SOURCE_SUFFIXES | HEADER_SUFFIXES
_FOLDERS: dict[Path, tuple[int, list[Path]]] = {}
_INCLUDES: dict[tuple[Path, int, int], frozenset[str]] = {}


def command_line_compiler(flags: FlagsSource | None = None, settings: ToolchainSettings | None = None,
                          jobs: int | None = None) -> Compiler:
    """The compiler `check` and `eval` use: this machine's toolchain (the user's settings), the
    user's cache folder, one job per core, each file's flags from `flags`."""
    from perflsp.compiled.toolchain import find_toolchain

    return Compiler(find_toolchain(settings), CompileCache(default_cache_dir()), jobs, flags=flags)
