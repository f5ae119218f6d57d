"""Run one external program (compiler, ncu) without a shell, with a timeout and an output cap.

The program gets its own process group, so a timeout stops it *and* what it started (the
profiled application) without touching anything else. Output beyond the cap is dropped and the
run is stopped: a runaway program cannot fill memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perflsp.profiling.errors import ProfilingError

_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class ProcessResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float


class _CappedReader(threading.Thread):
    def __init__(self, stream, cap: int, on_overflow) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.cap = cap
        self.on_overflow = on_overflow
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False

    def run(self) -> None:
        try:
            while chunk := self.stream.read1(_CHUNK):
                if self.overflowed:
                    continue  # keep draining so the child never blocks on a full pipe
                room = self.cap - self.size
                self.chunks.append(chunk[:room])
                self.size += min(len(chunk), room)
                if len(chunk) > room:
                    self.overflowed = True
                    self.on_overflow()
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:
    if not hasattr(os, "killpg"):  # no process groups (Windows): stop the direct child
        if proc.returncode is None:
            proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_program(
    argv: Sequence[str],
    *,
    timeout_s: float,
    output_cap_bytes: int,
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessResult:
    """Run `argv`; return its result whatever the exit status, raise ProfilingError otherwise.

    `what` names the program in messages ("ncu", "the build command").
    """
    if not argv:
        raise ProfilingError("not-configured", f"{what}: the command is empty")
    full_env = {**os.environ, **(env or {})}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
            start_new_session=True,  # own process group: killed as a whole on timeout
        )
    except FileNotFoundError:
        raise ProfilingError("missing-program", f"{what}: program not found: {argv[0]}") from None
    except PermissionError:
        raise ProfilingError("permission", f"{what}: permission denied executing {argv[0]}") from None
    except OSError as exc:
        raise ProfilingError("missing-program", f"{what}: cannot execute {argv[0]}: {exc.strerror or exc}") from None

    overflow = threading.Event()

    def stop_for_overflow() -> None:
        overflow.set()
        _kill_group(proc)

    readers = [
        _CappedReader(proc.stdout, output_cap_bytes, stop_for_overflow),
        _CappedReader(proc.stderr, output_cap_bytes, stop_for_overflow),
    ]
    for reader in readers:
        reader.start()
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()
        for reader in readers:
            reader.join(timeout=5)
        raise ProfilingError(
            "timeout", f"{what} did not finish within {timeout_s:g} s and was stopped ({argv[0]})"
        ) from None
    finally:
        if proc.returncode is None:
            _kill_group(proc)
            proc.wait()
    # The direct child is gone; stop anything it left behind in its group, then drain the pipes.
    _kill_group(proc)
    for reader in readers:
        reader.join(timeout=5)
    if overflow.is_set():
        raise ProfilingError(
            "output-cap", f"{what} printed more than {output_cap_bytes} bytes and was stopped (raise outputCapBytes)"
        )
    return ProcessResult(tuple(argv), returncode, readers[0].text(), readers[1].text(), time.monotonic() - started)


def tail(text: str, lines: int = 8, chars: int = 2000) -> str:
    """The last lines of a program's output, for error messages."""
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join(kept)[-chars:]
