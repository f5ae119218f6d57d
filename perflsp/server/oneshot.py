"""A fresh, uncached analysis of one text, exactly as the server would publish it: what the
server's incremental results are checked against (tests, `perflsp.status` debugging)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lsprotocol import types as lsp

from perflsp.analysis.reader import ReadContext
from perflsp.server.analysis import Analyzer
from perflsp.server.config import ResolvedConfig
from perflsp.server.documents import Snapshot
from perflsp.server.engine_adapter import lint_codes
from perflsp.server.json_types import lsp_converter
from perflsp.server.text import TextState


def analyse_text(text: str, uri: str, config: ResolvedConfig, path: str | None = None,
                 reading: ReadContext | None = None) -> Snapshot:
    state = TextState(text, None, path, reading)
    analyzer = Analyzer()
    codes = lint_codes()
    levels = config.settings.rules
    enabled = {c for c in codes if levels.get(c) != "off"} if codes else None
    analyzer.start(state, state.extracted, config.gpus, enabled, (config.generation,), state.lines, argv=config.argv)
    analysis = analyzer.step(None)
    snap = Snapshot(uri, None, state.data, state.tree, state.lines, state.extracted.kernels, analysis, config,
                    state.preprocessed, True, document=state.model(config.argv))
    from perflsp.server.features import diagnostics

    snap.diagnostics = diagnostics.build(snap)
    return snap


DiagnosticKey = tuple[object, int, int, int, int, int | None, str | None]  # code, range, severity, message


def diagnostic_keys(diagnostics: Sequence[lsp.Diagnostic] | Sequence[Mapping[str, object]]) -> list[DiagnosticKey]:
    """Comparable form of LSP diagnostics (objects, or their JSON as the client received it)."""
    out: list[DiagnosticKey] = []
    converter = lsp_converter()
    for item in diagnostics:
        d = item if isinstance(item, lsp.Diagnostic) else converter.structure(item, lsp.Diagnostic)
        out.append((d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character,
                    int(d.severity) if d.severity is not None else None, d.message))
    return sorted(out, key=repr)


__all__ = ["analyse_text", "diagnostic_keys"]
