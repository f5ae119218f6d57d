"""A large document's first diagnostics, from the top of its text alone.

Opening a 300 KB file costs ~250 ms of parsing and extraction before its first kernel is
analysed. Its first publication comes instead from a prefix (`perflsp.kernels.prefix`): the top
of the text, cut after a file-level definition (at most 32 KiB or 48 definitions), parsed and
extracted alone (a tenth of the cost or less), and the kernels there that stand alone (their
analysis cannot depend on the text after the cut) analysed for `OPENING_ANALYSIS_S` after the
first. The worker publishes that as a partial publication, waits `OPENING_GRACE_S` (a document
closed at once then costs no parse), then analyses the whole text as for any other version: the
complete publication is unchanged.

A kernel in the first publication has the verdicts the complete one gives it; its lint findings
come with the complete publication (like any partial publication's); LLM advice is not asked for
it yet (a partial publication never carries it), stored measurements are matched as in the
complete one. Texts below `MIN_TEXT_BYTES` are fast enough whole and get no early publication.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from perflsp.analysis.models import KernelReport
from perflsp.analysis.reader import ReadContext
from perflsp.kernels.prefix import MIN_TEXT_BYTES, PREFIX_BYTES, read_prefix
from perflsp.server import engine_adapter as engine
from perflsp.server.analysis import AnalysisState
from perflsp.server.documents import Snapshot
from perflsp.server.json_types import JsonObject
from perflsp.source.files import decode_source

if TYPE_CHECKING:
    from perflsp.server.config import ResolvedConfig
    from perflsp.server.measured import SnapshotMeasured

OPENING_ANALYSIS_S = 0.04  # analysis time of the first publication after its first kernel
OPENING_GRACE_S = 0.05  # after the first publication, the pause before the whole text is parsed


@dataclass(frozen=True, slots=True)
class Opening:
    """A first publication: diagnostics of the prefix's standalone kernels, and their JSON."""

    diagnostics: list[lsp.Diagnostic]
    as_json: list[JsonObject]
    kernels: int  # kernels analysed


@dataclass(slots=True)
class _PrefixText:
    """What `engine.with_includer_launches` reads of a document (`engine_adapter.DocumentText`)."""

    path: str | None
    reading: ReadContext


def worth_trying(text: str) -> bool:
    """Whether `text` is large enough for an early publication (smaller ones are analysed as
    before, with no extra job at all)."""
    return len(text) >= MIN_TEXT_BYTES or len(text.encode("utf-8", errors="surrogatepass")) >= MIN_TEXT_BYTES


def first_diagnostics(uri: str, text: str, version: int | None, config: ResolvedConfig, path: str | None,
                      reading: ReadContext, measure: Callable[[Snapshot], SnapshotMeasured | None] | None = None,
                      stop: Callable[[], bool] = lambda: False, target: int = PREFIX_BYTES,
                      analysis_s: float = OPENING_ANALYSIS_S) -> Opening | None:
    """The first publication of a large text, or None (a small text, no clean prefix, no
    standalone kernel, or `stop()` became true). `measure`: stored measurements of a snapshot
    (the host's), so that measured verdicts show as in the complete publication."""
    from perflsp.server.features import diagnostics

    # the bytes the worker's TextState analyses (same offsets, lines and columns)
    data = decode_source(text.encode("utf-8", errors="surrogatepass"))[0]
    if len(data) < MIN_TEXT_BYTES:
        return None
    preprocessed = reading.env(Path(path) if path else None, data)
    prefix = read_prefix(data, path, preprocessed, target)
    if prefix is None:
        return None
    fk = prefix.extracted.kernels
    opts = engine.with_includer_launches(engine.options(preprocessed, (), config.argv), _PrefixText(path, reading), fk)
    analysis = engine.FileAnalysis(prefix.data, prefix.tree, fk, opts, prefix.lines)
    deadline: float | None = None  # counted from the first report (which builds the program model)
    reports: dict[int, KernelReport] = {}
    for item in prefix.candidates():
        if stop() or (deadline is not None and time.monotonic() > deadline):
            break
        if prefix.standalone(item):
            reports[id(item)] = analysis.report(item, config.gpus)
            deadline = deadline or time.monotonic() + analysis_s
    if not reports or stop():
        return None
    snap = Snapshot(uri, version, prefix.data, prefix.tree, prefix.lines, fk, AnalysisState(0, reports), config,
                    preprocessed)
    if measure is not None:
        snap.measured = measure(snap)
    cache = diagnostics.DiagnosticCache()  # its own: the worker's serves the complete analyses
    items = diagnostics.build(snap, cache)
    return Opening(items, cache.json(items), len(reports))
