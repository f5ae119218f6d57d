"""A fresh, uncached analysis of one text, exactly as the server would publish it: what the
server's incremental results are checked against (tests, `perflsp.status` debugging)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from perflsp.analysis.reader import ReadContext
from perflsp.server.analysis import Analyzer
from perflsp.server.config import ResolvedConfig
from perflsp.server.documents import Snapshot
from perflsp.server.engine_adapter import lint_codes
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


def diagnostic_keys(diagnostics: list[lsp.Diagnostic] | list[dict[str, Any]]) -> list[DiagnosticKey]:
    """Comparable form of LSP diagnostics (objects or JSON)."""
    out: list[DiagnosticKey] = []
    for d in diagnostics:
        if isinstance(d, dict):
            r = d["range"]
            out.append((d.get("code"), r["start"]["line"], r["start"]["character"], r["end"]["line"],
                        r["end"]["character"], d.get("severity"), d.get("message")))
        else:
            out.append((d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character,
                        int(d.severity) if d.severity is not None else None, d.message))
    return sorted(out, key=repr)


__all__ = ["analyse_text", "diagnostic_keys"]
