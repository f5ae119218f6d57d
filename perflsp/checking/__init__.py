"""Checking files as `perflsp check` does, below every front end: which files a path names, the
settings a check analyses with, and a run over many files (read, compiled in a pool when a
compiler is given, analysed through `perflsp.analysis.pipeline`). `perflsp check` prints what a run
returns; `perflsp eval --editor` scores it, so what is scored is exactly what `check` shows.

This package reads files and drives the compiler pool (the analysis layer does neither); it has
no output and no argument handling (those are the command line's).
"""

from perflsp.checking.run import CheckRun, check_file, check_paths, check_settings, source_paths

__all__ = ["CheckRun", "check_file", "check_paths", "check_settings", "source_paths"]
