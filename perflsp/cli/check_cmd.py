"""`perflsp check PATH...`: roofline verdicts per kernel and GPU, and the lint findings.

The command's arguments, configuration and output; the run itself (reading, compiling, analysing
each file) is `perflsp.checking`'s. Text (coloured on a terminal), `--json` or `--sarif`. The exit
code reflects findings at or above `--fail-on`; unreadable inputs are named on stderr and skipped
(exit 3 when nothing failed).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape

from perflsp.checking.run import CheckRun, check_file, check_paths, check_settings, source_paths
from perflsp.cli._gpu_options import gpus_file_option
from perflsp.cli.output import EXIT_FINDINGS, EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, fail, stderr, warn

DEFAULT_GPU = "h100-sxm5-80gb"
PROGRESS_MIN_FILES = 20  # fewer files finish before a bar would be worth drawing

if TYPE_CHECKING:  # the analysis stack is imported only when the command runs
    from perflsp.hardware.models import Gpu


def parse_program_args(text: str) -> tuple[str, ...]:
    """`--args "-n 1024 input.bin"` split as a POSIX shell would (as eval splits `exe_args`)."""
    import shlex

    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        fail(f"--args {text!r}: {exc}")
        raise  # unreachable: fail exits


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--gpu", "gpu_names", multiple=True, metavar="NAME[,NAME...]",
              help=f"Target GPU(s), by id, alias or name (repeatable or comma-separated). Default: `gpus` "
                   f"of .perflsp.toml, else {DEFAULT_GPU}.")
@gpus_file_option
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Project configuration (default: .perflsp.toml in the current directory, if any).")
@click.option("--rule", "rule_overrides", multiple=True, metavar="CODE=LEVEL",
              help="Re-level or silence a rule (off|error|warning|information|hint); repeatable; "
                   "overrides [rules] of the configuration.")
@click.option("--compile-commands", "compile_commands", type=click.Path(dir_okay=False, path_type=Path),
              help="compile_commands.json supplying -I and -D flags per file.")
@click.option("--args", "program_args", metavar="'ARG...'",
              help="The program's arguments (argv[1:], shell-split), folded where main() parses argv; "
                   "default: `args` of [profiling] in .perflsp.toml.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "information", "hint", "none"]), default="error",
              show_default=True, help="Exit 1 when a finding reaches this severity.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (shape in docs/cli.md).")
@click.option("--sarif", "as_sarif", is_flag=True, help="Print SARIF 2.1.0 (for GitHub code scanning).")
@click.option("--sarif-root", type=click.Path(file_okay=False, path_type=Path),
              help="Directory SARIF file URIs are relative to (default: the current directory).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to FILE instead of stdout.")
@click.option("--no-progress", is_flag=True, help="Never draw a progress bar.")
@click.option("--no-compile", is_flag=True,
              help="Do not compile the device code: the source engine alone counts the operations.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Compiles run at once (default: one per core).")
def check(paths: tuple[Path, ...], gpu_names: tuple[str, ...], gpus_files: tuple[str, ...], config_path: Path | None,
          rule_overrides: tuple[str, ...], compile_commands: Path | None, program_args: str | None, fail_on: str,
          as_json: bool, as_sarif: bool, sarif_root: Path | None, output: Path | None, no_progress: bool,
          no_compile: bool, jobs: int | None) -> None:
    """Roofline verdicts (per kernel and GPU) and lint findings for files or folders.

    Folders are searched recursively for C, C++ and CUDA sources. Exit codes: 0 ok, 1 findings
    at or above --fail-on, 2 bad arguments or configuration, 3 some inputs unreadable (skipped).
    """
    from perflsp.analysis.report import at_or_above

    if as_json and as_sarif:
        fail("--json and --sarif are exclusive: choose one output format")
    gpus, rule_levels, compile_db, config_args, compile_enabled = _resolve_setup(
        gpu_names, gpus_files, config_path, rule_overrides, compile_commands)
    argv = parse_program_args(program_args) if program_args is not None else config_args
    settings = check_settings(rule_levels, argv, build_fixes=as_json or as_sarif)  # text shows no fixes

    files, missing = source_paths(paths)
    compiler = None
    if not no_compile and compile_enabled:
        from perflsp.compiled.service import command_line_compiler

        compiler = command_line_compiler(compile_db, jobs=jobs)
    bar = _progress(len(files), no_progress)
    with bar or nullcontext():
        task = bar.add_task("checking", total=len(files), file="") if bar else None
        run = check_paths(files, gpus, settings, compile_db,
                          progress=(lambda p: bar.update(task, advance=1, file=p.name)) if bar else None,
                          compiler=compiler)
    if compiler is not None:
        compiler.close()
    run.skipped[:0] = missing
    for path, reason in run.skipped:
        warn(f"skipped {path}: {reason}")

    failing = sum(at_or_above(f.severity, fail_on) for _, c in run.files for f in c.findings)
    with _destination(output) as fh:
        if as_sarif:
            from perflsp.cli.sarif import sarif_log

            root = sarif_root or Path.cwd()
            _write_json(fh, sarif_log(run.files, root, rule_levels, run.skipped))
        elif as_json:
            _write_json(fh, _json_report(run, gpus, fail_on, failing))
        else:
            _print_text(Console(file=fh, highlight=False, soft_wrap=True) if output else None, run)
    _print_summary(run, failing, fail_on, to_stderr=as_json or as_sarif or output is not None)
    if failing:
        raise click.exceptions.Exit(EXIT_FINDINGS)
    raise click.exceptions.Exit(EXIT_UNREADABLE if run.skipped else EXIT_OK)


def _resolve_setup(gpu_names: Sequence[str], gpus_files: Sequence[str], config_path: Path | None,
                   rule_overrides: Sequence[str], compile_commands: Path | None):
    from perflsp.analysis.rules import RuleConfigError, parse_rule_levels
    from perflsp.cli.project_config import ProjectConfigError, load_project_config
    from perflsp.hardware import GpuConfigError, UnknownGpuError, load_database

    try:
        config = load_project_config(config_path)
    except ProjectConfigError as exc:
        fail(str(exc))
    rule_levels = dict(config.rules)
    overrides: dict[str, str] = {}
    for item in rule_overrides:
        code, sep, level = item.partition("=")
        if not sep:
            fail(f"--rule {item!r}: expected CODE=LEVEL, e.g. occupancy/low=off")
        overrides[code.strip()] = level.strip()
    try:
        rule_levels.update(parse_rule_levels(overrides))
    except RuleConfigError as exc:
        fail(f"--rule: {exc}")
    try:
        db = load_database(gpus_files, config.gpu_tables, tables_origin=str(config.path or "settings"),
                           tables_text=config.text)
    except GpuConfigError as exc:
        fail("invalid GPU definition(s): " + "; ".join(exc.problems))
    given = [n.strip() for item in gpu_names for n in item.split(",") if n.strip()]
    names = given or config.gpus or [DEFAULT_GPU]
    gpus = []
    for name in names:
        try:
            gpu = db.get(name)
        except UnknownGpuError as exc:
            fail(str(exc) if given or not config.gpus else f"{config.where('gpus')}: gpus: {exc}")
        if gpu not in gpus:
            gpus.append(gpu)
    from perflsp.kernels.compile_db import CompileDatabase, CompileDatabaseError, DiscoveredDatabases

    # a named database, else the one each file's folders lead to (as clangd finds it)
    compile_db: CompileDatabase | DiscoveredDatabases = DiscoveredDatabases()
    if compile_commands is not None:
        try:
            compile_db = CompileDatabase.load(compile_commands)
        except CompileDatabaseError as exc:
            fail(str(exc))
    return gpus, rule_levels, compile_db, config.args, config.compile


def _progress(total: int, disabled: bool):
    """A transient bar on stderr, only on a terminal and only for runs long enough to need one."""
    if disabled or total < PROGRESS_MIN_FILES or not stderr.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[file]}"), console=stderr, transient=True)


class _destination:
    """stdout, or a file opened for the report."""

    def __init__(self, output: Path | None):
        self.output = output
        self.fh: IO[str] | None = None

    def __enter__(self) -> IO[str]:
        if self.output is None:
            return sys.stdout
        try:
            fh = self.output.open("w", encoding="utf-8")
        except OSError as exc:
            fail(f"{self.output}: cannot write ({exc.strerror or exc})")
            raise  # unreachable: fail exits
        self.fh = fh
        return fh

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()


JSON_INDENT_MAX_BYTES = 4 * 1024 * 1024  # larger reports are written compact (C encoder, ~10x faster)


def _write_json(fh: IO[str], data: Any) -> None:
    """Indented for reading; compact when large, since indentation forces the slow pure-Python encoder."""
    compact = json.dumps(data, ensure_ascii=False)
    fh.write(compact if len(compact) > JSON_INDENT_MAX_BYTES else json.dumps(data, indent=2, ensure_ascii=False))
    fh.write("\n")


def _json_report(run: CheckRun, gpus: Sequence[Gpu], fail_on: str, failing: int) -> dict[str, Any]:
    from perflsp import __version__
    from perflsp.analysis.engine import ENGINE_VERSION
    from perflsp.analysis.report import file_check_json, severity_counts

    findings = [f for _, c in run.files for f in c.findings]
    verdicts = Counter(v.estimate.verdict for _, c in run.files for v in c.verdicts)
    return {
        "version": __version__,
        "engine": ENGINE_VERSION,
        "gpus": [{"id": g.id, "name": g.name} for g in gpus],
        "fail_on": fail_on,
        "files": [file_check_json(check, str(path)) for path, check in run.files],
        "skipped": [{"path": str(path), "reason": reason} for path, reason in run.skipped],
        "summary": {
            "files": len(run.files),
            "skipped": len(run.skipped),
            "kernels": run.kernel_count,
            "verdicts": {k: verdicts.get(k, 0) for k in ("compute", "bandwidth", "uncertain")},
            "findings": severity_counts(findings),
            "failing": failing,
            "elapsed_s": round(run.elapsed_s, 3),
            "files_per_s": round(len(run.files) / run.elapsed_s, 1) if run.elapsed_s > 0 else None,
        },
    }


_VERDICT_STYLE = {"compute": "magenta", "bandwidth": "cyan", "uncertain": "yellow"}
_PLURAL = {"error": "errors", "warning": "warnings", "information": "information", "hint": "hints"}
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "information": "blue", "hint": "dim"}


def _print_text(console: Console | None, run: CheckRun) -> None:
    from rich.control import strip_control_codes

    from perflsp.cli.output import stdout

    out = console or stdout
    # Without colours (a pipe, a file, NO_COLOR) the lines are written as they are: rich's markup
    # rendering costs ~0.5 ms a line, 20 s for the 40,000 findings of a 15 MB file.
    plain = out.color_system is None
    lines: list[str] = []

    def emit(markup: str, text: str) -> None:
        if plain:
            lines.append(strip_control_codes(text))  # as rich's Text does
        else:
            out.print(markup)

    for path, check in run.files:
        shown = {id(v.finding) for v in check.verdicts if v.finding is not None}
        for verdict in check.verdicts:
            if verdict.finding is None:
                continue
            where = f"{path}:{verdict.kernel.kernel.line}"
            style = _VERDICT_STYLE[verdict.estimate.verdict]
            emit(f"{escape(where)} [bold]{escape(verdict.kernel.name)}[/] — [{style}]{escape(verdict.finding.message)}[/]",
                 f"{where} {verdict.kernel.name} — {verdict.finding.message}")
        for finding in check.findings:
            if id(finding) in shown:
                continue
            start = finding.span.start
            where = f"{path}:{start.line + 1}:{start.character + 1}:"
            emit(f"{escape(where)} [{_SEVERITY_STYLE[finding.severity]}]{finding.severity}[/] "
                 f"[bold]{escape(finding.code)}[/]: {escape(finding.message)}",
                 f"{where} {finding.severity} {finding.code}: {finding.message}")
        for note in check.notes:
            emit(f"[dim]{escape(str(path))}: note: {escape(note)}[/]", f"{path}: note: {note}")
    if lines:
        out.file.write("\n".join(lines) + "\n")
        out.file.flush()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _print_summary(run: CheckRun, failing: int, fail_on: str, to_stderr: bool) -> None:
    from perflsp.analysis.report import severity_counts
    from perflsp.cli.output import stdout

    counts = severity_counts([f for _, c in run.files for f in c.findings])
    verdicts = Counter(v.estimate.verdict for _, c in run.files for v in c.verdicts)
    rate = f"{len(run.files) / run.elapsed_s:.0f} files/s" if run.elapsed_s > 0 else "-"
    gpus = len({v.gpu.id for _, c in run.files for v in c.verdicts})
    # kernels and verdicts counted apart: a kernel has one verdict per GPU
    on = f" on {gpus} GPUs" if gpus > 1 else ""
    line = (f"{_count(len(run.files), 'file')}, {_count(run.kernel_count, 'kernel')}; "
            f"{_count(sum(verdicts.values()), 'verdict')}{on} ({verdicts['compute']} compute-bound, "
            f"{verdicts['bandwidth']} bandwidth-bound, {verdicts['uncertain']} uncertain); "
            + ", ".join(f"{n} {_PLURAL[s] if n != 1 else s}" for s, n in counts.items() if n) + ("; " if any(counts.values()) else "")
            + (f"{len(run.skipped)} skipped; " if run.skipped else "")
            + f"{run.elapsed_s:.2f} s ({rate})")
    if failing:
        line += f" — {failing} at or above {fail_on}"
    (stderr if to_stderr else stdout).print(escape(line), highlight=False)


__all__ = [
    "DEFAULT_GPU",
    "EXIT_USAGE",
    "CheckRun",
    "check",
    "check_file",
    "check_paths",
    "check_settings",
    "parse_program_args",
    "source_paths",
]
