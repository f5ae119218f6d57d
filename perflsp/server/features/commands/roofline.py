"""perflsp.rooflineData {scope?: open|workspace, uri?} -> {gpus, kernels, skipped}: the kernels of the
open documents, or of the whole workspace (files not open analysed as `perflsp check` reads them)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from perflsp.server.features.commands.common import CommandError, progress_token, text_argument
from perflsp.server.features.commands.serialize import gpu_json, report_json
from perflsp.server.json_types import CommandArgument, JsonObject
from perflsp.server.measured import evidence_for_reports
from perflsp.server.progress import progress
from perflsp.server.text import path_of

if TYPE_CHECKING:
    from perflsp.hardware.models import Gpu
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.context import ServerContext


async def roofline_data(ls: ServerContext, arg: CommandArgument) -> JsonObject:
    scope = arg.get("scope", "open")
    if scope not in ("open", "workspace"):
        raise CommandError("`scope` must be \"open\" or \"workspace\"")
    only = text_argument(arg, "uri")
    state = ls.initialized_workspace
    config = ls.config_for(only or state.folders[0].uri)
    gpus = {g.name: g for g in config.gpus}
    kernels: list[JsonObject] = []
    skipped: list[dict[str, str]] = []
    open_uris = [u for u in ls.workers if only is None or u == only]
    skipped += [{"path": str(path_of(u) or u), "reason": r} for u, r in ls.refused.items()
                if only is None or u == only]
    for uri in open_uris:
        snap = await ls.snapshot(uri)
        if snap is None:
            continue
        kernels += [report_json(uri, r, gpus, snap.measured) for r in snap.reports()]
    if scope == "workspace":
        files = []
        for folder in state.folders:
            folder_config = ls.config_for(folder.uri) if folder.uri else config
            files += [(p, folder_config) for p in await asyncio.to_thread(state.source_files, folder, folder_config)]
        files = [(p, c) for p, c in files if p.as_uri() not in ls.workers]
        async with progress(ls, "perflsp: scanning the workspace", progress_token(arg)) as bar:
            for index, (path, folder_config) in enumerate(files):
                bar.report(path.name, int(100 * index / max(1, len(files))))
                try:
                    found = await asyncio.to_thread(_analyse_file, ls, path, folder_config, gpus)
                except OSError as exc:
                    skipped.append({"path": str(path), "reason": str(exc)})
                    continue
                if isinstance(found, str):
                    skipped.append({"path": str(path), "reason": found})
                    continue
                kernels += found
    return {"gpus": [gpu_json(g) for g in config.gpus], "kernels": kernels, "skipped": skipped}


def _analyse_file(ls: ServerContext, path: Path, config: ResolvedConfig, gpus: dict[str, Gpu]) -> list[JsonObject] | str:
    """Extract and analyse a file that is not open (cached by mtime, size and configuration),
    exactly as `perflsp check` reads it and the editor would show it (`perflsp.analysis.reader`:
    the folder's include resolver, the file's compile-database flags, the program's arguments)."""
    from perflsp.analysis.options import AnalysisOptions
    from perflsp.analysis.pipeline import FileAnalysis
    from perflsp.analysis.reader import read_file
    from perflsp.source.files import SkippedFile

    stat = os.stat(path)
    store = ls.measured.store(config.root) if config.root is not None else None
    try:
        profiles = os.stat(store.directory).st_mtime_ns if store is not None else None
    except OSError:
        profiles = None
    key = (str(path), stat.st_mtime_ns, stat.st_size, config.generation, profiles)
    cached = ls.scan_cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    uri = path.as_uri()
    program = read_file(path, ls.reading_for(uri), AnalysisOptions(argv=config.argv))
    if isinstance(program, SkippedFile):
        return program.reason
    reports = FileAnalysis.of(program).reports(config.gpus)
    measured = evidence_for_reports(store, config, str(path), reports) if store is not None else None
    found = [report_json(uri, r, gpus, measured) for r in reports]
    ls.scan_cache[str(path)] = (key, found)  # (one entry per file: a changed file's old reports go)
    return found



__all__ = ["roofline_data"]
