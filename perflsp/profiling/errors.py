"""One error type for everything the profiling layer can refuse or fail at.

`code` is stable (the server maps it to a notification, the CLI to an exit message); `message` is
one line a user can act on, never a traceback.
"""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal[
    "not-enabled",  # profiling.enabled is false (or was refused by the trust check)
    "not-configured",  # a needed command template is missing
    "bad-settings",  # a setting failed validation
    "bad-template",  # a placeholder is unknown, misplaced or its value is unsafe
    "missing-program",  # ncu / the compiler / the launcher does not exist
    "permission",  # cannot execute a program, or ERR_NVGPUCTRPERM
    "timeout",
    "output-cap",  # a program printed more than the configured cap
    "exit-status",  # a program exited non-zero
    "parse",  # ncu output or a report is malformed
    "no-kernels",  # nothing was profiled / the report is empty
    "unknown-gpu",
    "io",  # reading or writing a file failed
    "missing-extra",  # an optional package is not installed
]


class ProfilingError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message

    def __str__(self) -> str:
        return self.message
