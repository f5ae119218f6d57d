"""`perflsp explain FILE[:LINE] --gpu NAME`: why a kernel is compute- or bandwidth-bound.

The static engine's answer (verdict, evidence, assumptions, occupancy, what would cross the
ridge) always; with an LLM endpoint configured, the model's explanation streamed after it
(`--json`: the model's validated verdict beside the static estimate).

LLM settings (see `perflsp.cli.llm_options`): the `[llm]` table of the user config file, then
that of WORKSPACE/.perflsp.toml (a loopback endpoint only, unless --trust-workspace), then the
flags; --model, --provider or --base-url turn the advisor on. The API key is read from the
environment variable named by --api-key-env / `api_key_env`, never from a file or a flag.

Exit codes: 0 an explanation was printed (the LLM's, or the static one when no LLM is configured
or allowed); 2 bad arguments or settings (unknown GPU, no kernel in the file, LINE past the end);
3 the file cannot be read; 4 an LLM is configured but gave no answer for some kernel (unreachable,
timeout, 429, invalid answers): the static explanation was printed instead, and one line on stderr
says why.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click

from perflsp.analysis.instantiations import estimates_on
from perflsp.analysis.notes import records, texts
from perflsp.cli._gpu_options import gpus_file_option, load_db_or_fail
from perflsp.cli.llm_options import (
    LlmChoice,
    LlmFlags,
    choose_advisor,
    how_to_configure,
    llm_options,
)
from perflsp.cli.output import EXIT_OK, EXIT_UNREADABLE, fail, print_json, warn

EXIT_LLM_FAILED = 4
_TARGET = re.compile(r"^(?P<path>.+?):(?P<line>[-+]?\d+)$")


@dataclass(slots=True)
class Selected:
    """The file, its analysis and the kernels to explain."""

    path: Path
    data: bytes
    tree: Any
    kernels: Any  # FileKernels
    reports: list  # KernelReport, in file order
    model: Any = None  # the ProgramModel the reports were analysed over (the LLM question queries it)
    note: str | None = None  # how LINE was matched, when not exactly


@click.command("explain")
@click.argument("target", metavar="FILE[:LINE]")
@click.option("--gpu", "gpu_name", required=True, metavar="NAME", help="GPU name or alias (see `perflsp gpus`).")
@gpus_file_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the static estimate and the LLM's verdict.")
@click.option("--static", "static_only", is_flag=True, help="Never ask an LLM; print the static explanation.")
@click.option("--no-compile", is_flag=True,
              help="Do not compile the device code: the source engine alone counts the operations "
                   "(as `perflsp check --no-compile`).")
@llm_options
def explain(target: str, gpu_name: str, gpus_files: tuple[str, ...], as_json: bool, static_only: bool,
            no_compile: bool, llm: LlmFlags) -> None:
    """Explain why the kernels of FILE (or the one at LINE) are compute- or bandwidth-bound on a GPU.

    Prints the static engine's evidence and assumptions; with an LLM configured (user config
    `[llm]`, the workspace's .perflsp.toml, or --model/--provider/--base-url), the model's
    explanation too. Exit codes: 0 explained, 2 bad arguments or settings, 3 unreadable file,
    4 the configured LLM gave no answer (the static explanation is printed instead).
    """
    # advisor warnings are summarised on one line here; without a handler Python would print each
    root = logging.getLogger("perflsp")
    if not root.handlers:
        root.addHandler(logging.NullHandler())
    path, line = _parse_target(target)
    gpu = _gpu(gpu_name, gpus_files)
    selected = _select(path, line, gpu, compile_device_code=not no_compile)
    choice = LlmChoice(None, "--static was given") if static_only else choose_advisor(llm)
    if selected.note:
        warn(selected.note)
    if choice.advisor is None:
        _print_static(selected, gpu, as_json, choice.reason)
        if choice.failed:
            warn(f"no LLM explanation: {choice.reason}")
            raise click.exceptions.Exit(EXIT_LLM_FAILED)
        if not static_only:
            warn(how_to_configure(choice.reason))
        raise click.exceptions.Exit(EXIT_OK)
    failures = asyncio.run(_with_llm(selected, gpu, choice.advisor, as_json))
    raise click.exceptions.Exit(EXIT_LLM_FAILED if failures else EXIT_OK)


# ---------------------------------------------------------------------------------------------
# inputs


def _parse_target(target: str) -> tuple[Path, int | None]:
    """FILE or FILE:LINE; a file whose name really ends in ":<digits>" is taken as a file."""
    if Path(target).exists():
        return Path(target), None
    match = _TARGET.match(target)
    if match:
        line = int(match.group("line"))
        if line < 1:  # FILE:0 or FILE:-5 is a bad line, not a file name
            fail(f"{target}: bad line {match.group('line')}: LINE counts from 1")
        return Path(match.group("path")), line
    return Path(target), None


def _gpu(name: str, gpus_files: Sequence[str]):
    from perflsp.hardware import UnknownGpuError

    db = load_db_or_fail(gpus_files)
    try:
        return db.get(name)
    except UnknownGpuError as exc:
        fail(str(exc))


def _select(path: Path, line: int | None, gpu, compile_device_code: bool = True) -> Selected:
    from perflsp.analysis.pipeline import FileAnalysis
    from perflsp.analysis.reader import ReadContext, read_file
    from perflsp.checking.run import check_settings, with_compiled
    from perflsp.cli.project_config import ProjectConfigError, load_project_config
    from perflsp.kernels.compile_db import DiscoveredDatabases
    from perflsp.kernels.includes import IncludeResolver
    from perflsp.source.files import SkippedFile

    try:
        config = load_project_config(None)
    except ProjectConfigError as exc:
        fail(str(exc))
    # read, compiled and analysed exactly as `perflsp check` does (its compile flags, the
    # program's arguments, the compiled code's counts, includer context, outside launch sites),
    # so that both quote the same numbers
    compile_db = DiscoveredDatabases()
    compiler = None
    if compile_device_code and config.compile:
        from perflsp.compiled.service import command_line_compiler

        compiler = command_line_compiler(compile_db)
    try:
        read = read_file(path, ReadContext.of(path, IncludeResolver(), compile_db),
                         check_settings(config.rules, config.args).options)
        if isinstance(read, SkippedFile):
            fail(f"cannot read {path}: {read.reason}", EXIT_UNREADABLE)
        prepared = with_compiled(read, [gpu], compiler)
    finally:
        if compiler is not None:
            compiler.close()
    data, tree, kernels = prepared.data, prepared.tree, prepared.kernels
    analysis = FileAnalysis.of(prepared)
    reports = sorted(analysis.reports([gpu]), key=lambda r: r.kernel.span.start_byte)
    if not reports:
        fail(f"{path}: no CUDA kernel or OpenMP target region found")
    selected = Selected(path, data, tree, kernels, reports, analysis.model_if_built())
    if line is None:
        return selected
    total_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if line > total_lines:
        fail(f"{path} has {total_lines} lines: no line {line}")
    containing = [r for r in reports if _first_line(r) <= line <= _last_line(r)]
    if containing:
        selected.reports = [min(containing, key=lambda r: _last_line(r) - _first_line(r))]  # innermost
        return selected
    nearest = min(reports, key=lambda r: min(abs(line - _first_line(r)), abs(line - _last_line(r))))
    selected.reports = [nearest]
    selected.note = (f"no kernel spans line {line} of {path}: explaining the nearest, {nearest.name} "
                     f"(lines {_first_line(nearest)}-{_last_line(nearest)})")
    return selected


def _first_line(report) -> int:
    return report.kernel.span.line


def _last_line(report) -> int:
    kernel = report.kernel
    span = getattr(kernel, "body_span", None) if kernel.kind == "omp" else kernel.span
    span = span or kernel.span
    return span.end.line + 1


# ---------------------------------------------------------------------------------------------
# the advisor


async def _with_llm(selected: Selected, gpu, advisor, as_json: bool) -> int:
    """Ask about every selected kernel; returns how many got no LLM answer."""
    from perflsp.llm.advisor import AdvisorUnavailable
    from perflsp.llm.questions import question_for
    from perflsp.llm.sanitize import InertMarkdown

    task: Literal["verdict", "explain"] = "verdict" if as_json else "explain"
    questions = [question_for(r, r.estimates[0], gpu, selected.data, selected.kernels, task, tree=selected.tree,
                              model=selected.model)
                 for r in selected.reports]
    failures = 0
    try:
        if as_json:
            results = await asyncio.gather(*(advisor.ask(q) for q in questions))
            failed = [r for r in results if r.source != "llm"]
            if failed:
                warn(f"the LLM gave no answer for {len(failed)} of {len(results)} kernel(s): "
                     f"{failed[0].fallback_reason}")
            print_json(_json(selected, gpu, advisor, list(results)))
            return len(failed)
        told = False
        for report, question in zip(selected.reports, questions):
            click.echo(_header(selected, report))
            click.echo(f"{_static_head(report.estimates[0])}\n")
            click.echo(f"{advisor.provider.label} (line numbers count from the kernel's first line, "
                       f"{selected.path}:{question.first_line}):")
            wrote = False
            inert = InertMarkdown()  # the model's Markdown, line by line: no image, HTML or link
            try:
                async for chunk in advisor.explain_stream(question):
                    sys.stdout.write(inert.feed(chunk))
                    sys.stdout.flush()
                    wrote = True
                sys.stdout.write(inert.flush())
                click.echo("\n" if wrote else "")
            except AdvisorUnavailable as exc:
                failures += 1
                sys.stdout.write(inert.flush())
                if wrote:
                    click.echo("")
                if not told:
                    warn(f"no LLM explanation: {exc}")
                    told = True
                click.echo("(no LLM explanation: the static one follows)\n")
                click.echo(_static_body(selected, report))
        return failures
    finally:
        await advisor.aclose()


# ---------------------------------------------------------------------------------------------
# output


def _print_static(selected: Selected, gpu, as_json: bool, reason: str | None) -> None:
    if as_json:
        print_json(_json(selected, gpu, None, [None] * len(selected.reports), reason))
        return
    for report in selected.reports:
        click.echo(_header(selected, report))
        click.echo(_static_body(selected, report))


def _header(selected: Selected, report) -> str:
    estimate = report.estimates[0]
    kind = "CUDA kernel" if report.kernel.kind == "cuda" else "OpenMP target region"
    return f"## {kind} {report.name} ({selected.path}:{_first_line(report)}) on {estimate.gpu}"


def _static_head(estimate) -> str:
    if estimate.verdict == "uncertain":
        return f"Static estimate: uncertain ({'; '.join(texts(estimate.evidence))})"
    return f"Static estimate: {estimate.headline()} (confidence {estimate.confidence:.2f})"


def _static_body(selected: Selected, report) -> str:
    """The engine's answer in readable Markdown-like text."""
    estimate = report.estimates[0]
    facts = report.facts
    lines = [_static_head(estimate)]
    if estimate.verdict != "uncertain":
        lines.append("")
        lines.append("Evidence:")
        lines += [f"- {item}" for item in texts(estimate.evidence)]
        lines += [f"- {item}" for item in texts(facts.evidence)]
        if facts.work_items_note and facts.work_items_note != "unknown":
            lines.append(f"- work: {facts.work_items_note}")
        for loop in facts.loops[:8]:
            var = f" over {loop.variable}" if loop.variable else ""
            lines.append(f"- loop at line {loop.line}{var}: {loop.trip_count:.4g} iterations "
                         f"({loop.origin}: {loop.note})")
    judged = estimates_on(report, estimate)
    if judged:
        lines.append("")
        lines.append("Per instantiation (each judged on its own; the verdict above is the first launch's or call's):")
        lines += [f"- {inst.label}: {e.headline()}" if e.verdict != "uncertain" else f"- {inst.label}: uncertain"
                  for inst, e in judged]
    if facts.assumptions:
        lines.append("")
        lines.append("Assumptions (check them against the code):")
        lines += [f"- {item}" for item in texts(facts.assumptions)]
    if estimate.occupancy_note:
        lines.append("")
        lines.append(f"Occupancy: {estimate.occupancy_note}")
    for site in report.launches[:4]:
        text = " ".join(selected.data[site.span.start_byte:site.span.end_byte].decode("utf-8", "replace").split())
        lines.append(f"Launch at line {site.line}: {text[:160]}")
    if estimate.verdict != "uncertain" and estimate.to_cross:
        lines.append("")
        lines.append(f"To change the verdict: {estimate.to_cross}.")
    return "\n".join(lines) + "\n"


def _estimate_json(report) -> dict[str, Any]:
    estimate = report.estimates[0]
    facts = report.facts
    return {
        "verdict": estimate.verdict,
        "confidence": estimate.confidence,
        "deciding_precision": estimate.deciding.value if estimate.deciding else None,
        "roof": roof.value if (roof := estimate.main_precision()) is not None else None,
        "intensity": {p.value: v for p, v in estimate.intensity.items()},
        "ridge": {p.value: v for p, v in estimate.ridge.items()},
        "headline": estimate.headline(),
        "evidence": texts([*estimate.evidence, *facts.evidence]),
        "assumptions": texts(facts.assumptions),
        "evidence_records": records([*estimate.evidence, *facts.evidence]),
        "assumption_records": records(facts.assumptions),
        "work": facts.work_items_note,
        "dram_bytes": facts.dram_bytes,
        "occupancy": estimate.occupancy_note,
        "to_cross": estimate.to_cross,
    }


def _json(selected: Selected, gpu, advisor, results: list, reason: str | None = None) -> dict[str, Any]:
    provider = advisor.provider if advisor is not None else None
    return {
        "file": str(selected.path),
        "gpu": gpu.name,
        "llm": {
            "used": provider is not None,
            "reason": reason,
            "model": provider.model if provider else None,
            "endpoint": provider.endpoint if provider else None,
        },
        "kernels": [
            {
                "name": report.name,
                "kind": report.kernel.kind,
                "line": _first_line(report),
                "static": _estimate_json(report),
                "llm": result.model_dump(mode="json") if result is not None else None,
            }
            for report, result in zip(selected.reports, results)
        ],
    }


__all__ = ["EXIT_LLM_FAILED", "explain"]
