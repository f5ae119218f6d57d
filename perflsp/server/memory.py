"""Giving memory back after documents close.

A closed document's worker drops its text, trees, extraction, analysis caches and snapshots
(`DocumentWorker.close`); shortly after the last close (a burst of closes costs one pass)
`give_back` collects cycles and asks the C library to return free heap pages (`malloc_trim`,
where it has it). The server runs with the C allocator (`PYTHONMALLOC=malloc`,
`use_system_allocator` re-executes `perflsp serve` with it once, before reading anything):
CPython's own small-object arenas stay mapped while any object in them lives, so after 300 files
opened and closed the process kept ~80-100 MiB more than after `initialize`, against ~20 MiB with
malloc (`benchmarks/lsp_memory.py`). Each keystroke's work costs up to ~30% more with it and
stays within the typing targets (`benchmarks/lsp_probe.py`); a `PYTHONMALLOC` already set (to
`pymalloc`, say) is respected.

The cyclic garbage collector is kept off the typing path (`CycleCollector`): a full collection
walks every object the server holds (about 100 ms with a 10,000-line file analysed), and CPython
starts one whenever enough objects have survived since the last, that is in the middle of some
keystroke's analysis. After each publication what exists is frozen (`gc.freeze`, constant time:
later collections skip it; plain reference counting still frees it), and a full collection runs
once the server has been idle for `IDLE_COLLECT_S`, when the frozen heap has grown by a quarter
since the last (as CPython's own rule).

What the analysis of an open document reads of *other* files is kept process-wide while it is
in use: the parsed headers and sibling sources and their definitions (`perflsp.kernels.program`,
at most 256 files each), the launch sites found in the sources that include a file
(`perflsp.analysis.includers`, 64), macro bodies as tokens (`perflsp.kernels.preprocess`), and
per folder the include resolver's directives of every header read, where each `#include`
resolved and each folder's includers (`IncludeResolver`). These are dropped when documents close
(`drop_file_caches`, with the trim below): nothing stays for a closed document, and the
documents still open read again what they need on their next analysis.

Shared caches that stay while the server runs (they do not grow with the documents opened):
the GPU database and occupancy tables (`perflsp.hardware`), compiled tree-sitter queries
(`perflsp.source.parser`), the rule registry, the engine's table of number literals (bounded),
per folder the resolved configuration and the stored profiles read so far
(`MeasuredService`), and the launch-parameter measurements of this session.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import re
import sys
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

TRIM_DELAY_S = 1.0  # after the last close


def _malloc_trim() -> Callable[[int], int] | None:  # pragma: no cover - depends on the C library
    """glibc's `malloc_trim`, looked up among the symbols the process has loaded already (the
    interpreter links the C library): `ctypes.util.find_library("c")` would run `ldconfig -p`
    (a program started by the server) only to name the library that is loaded anyway."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # (not glibc: musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()

# the modules whose `functools` caches hold what was read of other files (see above)
FILE_CACHE_MODULES = ("perflsp.kernels.program", "perflsp.analysis.includers", "perflsp.kernels.preprocess")


class _CacheInfo(Protocol):
    @property
    def currsize(self) -> int: ...


class _FunctionCache(Protocol):
    def cache_clear(self) -> None: ...

    def cache_info(self) -> _CacheInfo: ...


def file_caches() -> list[_FunctionCache]:
    """The `functools` caches of `FILE_CACHE_MODULES` (of those imported: the others hold nothing)."""
    found: list[_FunctionCache] = []
    for name in FILE_CACHE_MODULES:
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            if callable(getattr(value, "cache_clear", None)) and callable(getattr(value, "cache_info", None)) \
                    and getattr(value, "__module__", None) == name:
                found.append(value)
    return found


def file_cache_entries() -> int:
    """How many entries the file caches hold (0 once documents closed: tests, logs)."""
    return sum(cache.cache_info().currsize for cache in file_caches())


def drop_file_caches() -> int:
    """Empty the file caches (and the regular expressions compiled per name); entries dropped."""
    dropped = file_cache_entries()
    for cache in file_caches():
        cache.cache_clear()
    re.purge()
    return dropped


IDLE_COLLECT_S = 2.0  # idle time after the last publication before a full collection
COLLECT_GROWTH = 0.25  # ... when the frozen heap grew by this much since the last one


def full_collect() -> int:
    """A full collection of everything, the frozen objects included (they stay frozen after)."""
    gc.unfreeze()
    collected = gc.collect()
    gc.freeze()
    return collected


class CycleCollector:
    """Freezes the heap after each publication and collects in full when the server is idle."""

    def __init__(self, idle_s: float = IDLE_COLLECT_S) -> None:
        self.idle_s = idle_s
        self._timer: asyncio.TimerHandle | None = None
        self._collected_at = gc.get_freeze_count()  # frozen objects after the last full collection
        self.collections = 0
        self.last_published = 0.0  # monotonic time of the last publication

    def published(self, busy: Callable[[], bool]) -> None:
        """A publication is out: freeze what exists, and (re)start the idle timer."""
        gc.freeze()
        self.last_published = time.monotonic()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.idle_s, self._when_idle, busy)

    def _when_idle(self, busy: Callable[[], bool]) -> None:
        self._timer = None
        if busy():  # an analysis runs: the publication that ends it starts the timer again
            return
        if gc.get_freeze_count() <= self._collected_at * (1 + COLLECT_GROWTH):
            return
        collected = full_collect()
        self._collected_at = gc.get_freeze_count()
        self.collections += 1
        log.debug("memory: idle collection, %d objects collected, %d kept", collected, self._collected_at)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def give_back() -> None:
    """Collect garbage and return free heap pages to the system."""
    collected = full_collect()
    if _TRIM is not None:
        _TRIM(0)
    log.debug("memory: %d objects collected, free pages returned", collected)


def use_system_allocator() -> None:
    """Re-execute this same command with `PYTHONMALLOC=malloc`, once, before anything was read
    from stdin (POSIX only; a `PYTHONMALLOC` already set, to anything, is respected)."""
    import os

    if os.name != "posix" or "PYTHONMALLOC" in os.environ or not getattr(sys, "orig_argv", None):
        return
    env = dict(os.environ, PYTHONMALLOC="malloc")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, list(sys.orig_argv), env)
    except OSError:  # cannot re-execute: run with CPython's allocator
        return


def rss_bytes() -> int | None:
    """This process's resident set size (Linux), for logs and benchmarks."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")
