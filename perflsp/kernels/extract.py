"""Extraction entry points: one parsed file in, `FileKernels` out."""

from __future__ import annotations

from pathlib import Path

from tree_sitter import Tree

from perflsp.kernels.consteval import ConstEnv
from perflsp.kernels.context import ExtractionContext, has_launch_syntax
from perflsp.kernels.cuda import extract_functions
from perflsp.kernels.includes import IncludeResolver
from perflsp.kernels.launches import extract_launches
from perflsp.kernels.models import FileKernels
from perflsp.kernels.omp import extract_regions
from perflsp.kernels.symbols import file_env
from perflsp.source.files import LoadedFile, SkippedFile, load_file
from perflsp.source.parser import has_syntax_errors, parse
from perflsp.source.positions import LineIndex

_DEFAULT_RESOLVER = IncludeResolver()


def extract(data: bytes, tree: Tree | None = None, path: str | None = None, lines: LineIndex | None = None,
            env: ConstEnv | None = None) -> FileKernels:
    """Find kernels, `__device__` functions, OpenMP target regions and launch sites.

    `env` is the preprocessor's view of the file (its macros and those of its local headers,
    from `IncludeResolver.env_for`); without it, the file's own macros are used.
    """
    return extract_with_constants(data, tree, path, lines, env)[0]


def extract_with_constants(data: bytes, tree: Tree | None = None, path: str | None = None,
                           lines: LineIndex | None = None, env: ConstEnv | None = None) -> tuple[FileKernels, ConstEnv]:
    """`extract`, and the file's constants it folded with (`symbols.file_env` over `env`): the
    program model of the text starts from them instead of collecting them again."""
    tree = tree if tree is not None else parse(data)
    ctx = ExtractionContext(data=data, tree=tree, lines=lines or LineIndex(data), path=path)
    constants = file_env(ctx, env if env is not None else _DEFAULT_RESOLVER.env_for(None, data))
    kernels, device_functions = extract_functions(ctx, constants)
    result = FileKernels(
        path=path,
        kernels=kernels,
        device_functions=device_functions,
        omp_regions=extract_regions(ctx, constants) if b"omp" in data else [],
        launches=extract_launches(ctx, constants, kernels) if has_launch_syntax(data) else [],
        has_errors=has_syntax_errors(tree),
        notes=ctx.notes,
    )
    if any(k.recovered for k in kernels):
        result.notes.append("some kernels were recovered from tokens: the tree has syntax errors around them")
    return result, constants


def extract_path(path: Path, resolver: IncludeResolver | None = None) -> FileKernels | SkippedFile:
    """The kernels of a file read alone (its own folder's headers, no build flags, not in an
    includer's context). The commands read files through `perflsp.analysis.reader` instead."""
    loaded = load_file(path)
    if isinstance(loaded, SkippedFile):
        return loaded
    return extract_loaded(loaded, resolver)


def extract_loaded(loaded: LoadedFile, resolver: IncludeResolver | None = None) -> FileKernels:
    resolver = resolver or _DEFAULT_RESOLVER
    included = resolver.env_for(loaded.path, loaded.data)
    result = extract(loaded.data, path=str(loaded.path), env=included)
    if loaded.lossy:
        result.notes.append("file is not valid UTF-8: invalid bytes were replaced")
    return result
