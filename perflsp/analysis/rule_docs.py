"""docs/rules/*.md, generated from the rules' declarations (`RuleInfo`).

    python -m perflsp.analysis.rules --write-docs docs/rules   # rewrite the pages
    python -m perflsp.analysis.rules --check-docs docs/rules   # exit 1 when a page is stale

A page documents one code, or several that share it (the roofline verdicts): a title, a header
line (default severity, fix, what it applies to), the rule's own sections, its example and how to
configure it. index.md lists every code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from perflsp.analysis.ruledef import RuleInfo

GENERATED = ("<!-- Generated from the rule declarations by "
             "`python -m perflsp.analysis.rules --write-docs docs/rules`; do not edit by hand. -->")


def render_pages(rules: Iterable[RuleInfo]) -> dict[str, str]:
    """Page file name -> Markdown, for every page of `rules` and index.md."""
    by_page: dict[str, list[RuleInfo]] = {}
    for rule in rules:
        by_page.setdefault(rule.doc_file, []).append(rule)
    pages = {page: _page(group) for page, group in by_page.items()}
    pages["index.md"] = _index([rule for group in by_page.values() for rule in group])
    return pages


def write_pages(rules: Iterable[RuleInfo], directory: Path) -> list[Path]:
    """Write the pages that differ; returns the paths written."""
    written = []
    for name, text in render_pages(rules).items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def stale_pages(rules: Iterable[RuleInfo], directory: Path) -> list[str]:
    """Names of the pages whose checked-in text differs from the generated one (or is missing),
    and of pages in `directory` no rule generates."""
    pages = render_pages(rules)
    stale = [name for name, text in pages.items()
             if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
    stale += sorted(p.name for p in directory.glob("*.md") if p.name not in pages)
    return stale


def _page(group: list[RuleInfo]) -> str:
    first = group[0]
    lines = [f"# {', '.join(rule.code for rule in group)}", "", GENERATED, "", _header(group), ""]
    if first.doc:
        lines += [first.doc.strip("\n"), ""]
    if first.example is not None:
        example = first.example
        lines += ["## Example", "", "Reported:", "", f"```{example.fence}", example.bad.strip("\n"), "```", "",
                  "Written as the rule asks:", "", f"```{example.fence}", example.good.strip("\n"), "```", ""]
    lines += ["## Configuration", "", "In `.perflsp.toml` (or the editor's `perflsp.rules` setting):", "",
              "```toml", "[rules]"]
    lines += [f'"{rule.code}" = "off"' + ("        # or \"error\", \"warning\", \"information\", \"hint\""
                                          if i == 0 else "") for i, rule in enumerate(group)]
    lines += ["```", ""]
    return "\n".join(lines)


def _header(group: list[RuleInfo]) -> str:
    severities: dict[str, list[str]] = {}
    for rule in group:
        severities.setdefault(rule.default_severity, []).append(rule.name)
    if len(severities) == 1:
        severity = next(iter(severities))
    else:
        severity = ", ".join(f"{level} ({', '.join(f'`{n}`' for n in names)})" for level, names in severities.items())
    first = group[0]
    fix = "yes" if first.has_fix else "no"
    if first.fix_note:
        fix += f" ({first.fix_note})"
    parts = [f"**Default severity:** {severity}", f"**Fix:** {fix}"]
    if first.applies_to:
        parts.append(f"**Applies to:** {first.applies_to}")
    return " · ".join(parts)


_INDEX_INTRO = """\
# Diagnostic codes

{generated}

Every diagnostic perflsp publishes has `source = "perflsp"`, one of the codes below and a link to
its page. Each code is declared once, with its documentation and example: a lint rule in its
module of `perflsp/analysis/lints/`, the roofline verdicts in `perflsp/analysis/roofline_rules.py`.
The registry (`perflsp/analysis/rules.py`), these pages and the editor's settings schema are derived
from those declarations.

| code | default severity | fix | what |
| --- | --- | --- | --- |
"""

_INDEX_OUTRO = """
Severities: warnings are slips that cost performance on every GPU; information marks a
launch-shape or tuning opportunity whose size depends on the GPU.

## Silencing and re-levelling

Per workspace, in `.perflsp.toml`:

```toml
[rules]
"precision/double-promotion" = "error"     # "off" | "error" | "warning" | "information" | "hint"
"occupancy/low" = "off"
```

An unknown code or level is reported with a suggestion (``unknown rule `occupancy/lo` (did you
mean `occupancy/low`?)``) instead of being ignored.

## Fixes

A lint reports its fix as a request (what to change, where, to what); the edit is built when it
is asked for: by an editor's code action, or by `perflsp check --json`/`--sarif`, which print the
edits. The builders live in the core (`perflsp/analysis/fixes/`, one module per kind of fix) and
work on byte offsets, so the editor's quick fixes, `perflsp check` and the LLM advisor's proposals use the same code. Every
edit is validated before it is offered: values in range (block sizes 1–1024 and warp multiples,
`__launch_bounds__` ≥ 1, `num_teams` ≥ 1), and the edited file must re-parse with no new syntax
errors and fold to the requested value.
"""


def _index(rules: list[RuleInfo]) -> str:
    rows = [f"| [`{r.code}`]({r.doc_file}) | {r.default_severity} | {'yes' if r.has_fix else 'no'} | "
            f"{_cell(r.summary)} |" for r in rules]
    return _INDEX_INTRO.format(generated=GENERATED) + "\n".join(rows) + "\n" + _INDEX_OUTRO


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main(rules: Mapping[str, RuleInfo], argv: list[str]) -> int:
    """`--write-docs DIR` or `--check-docs DIR`."""
    if len(argv) == 2 and argv[0] in ("--write-docs", "--check-docs"):
        directory = Path(argv[1])
        if argv[0] == "--write-docs":
            directory.mkdir(parents=True, exist_ok=True)
            for path in write_pages(rules.values(), directory):
                print(f"wrote {path}")
            return 0
        stale = stale_pages(rules.values(), directory)
        for name in stale:
            print(f"{directory / name} is stale: run `python -m perflsp.analysis.rules --write-docs {directory}`")
        return 1 if stale else 0
    print("usage: python -m perflsp.analysis.rules --write-docs DIR | --check-docs DIR")
    return 2
