"""`perflsp eval`: score the static engine against a labels CSV of roofline verdicts.

The engine is given only what the study gave its LLMs (sources, launch shape, program
arguments); the measured columns and the label are read by the scorer alone
(`perflsp.evaluation.labels`). Kernels not located or not analysed count as wrong and are
listed with their reason.

`--editor` drops `block`, `grid` and `exe_args` and takes each kernel's verdict from exactly the
pipeline `perflsp check FILE` runs (`perflsp.checking.check_file`); labels of tiny runs
(under 64 KiB of measured DRAM traffic) are then scored apart too. Every run prints a reliability
table: confidence bins vs the observed accuracy of the verdicts in them.

With `--llm`, the configured LLM (the shared LLM options, `perflsp.cli.llm_options`) is asked
about every located kernel as well (`perflsp.evaluation.llm_eval`): scores of the verdict shown
(LLM, else the static fallback), of the LLM alone and of the engine on the same rows, fallbacks
with their reasons, and tokens per kernel. `--limit N` keeps the first N labeled kernels.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from perflsp.cli.llm_options import LlmFlags, llm_options
from perflsp.cli.output import EXIT_OK, fail, print_json, stderr, stdout

if TYPE_CHECKING:
    from perflsp.evaluation.labels import Answer
    from perflsp.evaluation.run import Prediction, Reliability, Score

PREDICTED_COLUMNS = ("compute", "bandwidth", "uncertain", "not located")


@click.command("eval")
@click.option("--labels", "labels_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Labels CSV (columns target, language, kernel, file, line, label, block, grid, exe_args, ...).")
@click.option("--src", "src_root", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder the CSV's `file` column is relative to.")
@click.option("--gpu-file", "--gpus-file", "gpu_files", multiple=True, type=click.Path(dir_okay=False),
              help="TOML file with [[gpu]] definitions, e.g. the study's GPU (repeatable).")
@click.option("--gpu", "gpu_name", required=True, help="The GPU the labels were measured on (id, alias or name).")
@click.option("--compile-commands", "compile_commands", type=click.Path(dir_okay=False, path_type=Path),
              help="compile_commands.json (re-rooted under --src) supplying -I and -D flags per file.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (keys in docs/cli.md).")
@click.option("--editor", is_flag=True,
              help="Score what the editor shows: drop block, grid and exe_args and run exactly the pipeline "
                   "of `perflsp check FILE` on each kernel's file.")
@click.option("--show-misses", type=click.IntRange(min=0), default=0, metavar="N",
              help="Also list up to N misclassified kernels.")
@click.option("--predictions-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every row's prediction (no labels) as JSON to FILE, e.g. to diff engine versions.")
@click.option("--no-progress", is_flag=True, help="Never draw a progress bar.")
@click.option("--llm", "use_llm", is_flag=True,
              help="Also ask the configured LLM about each kernel and score its verdicts (tokens per kernel too).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Only the first N labeled kernels.")
@click.option("--no-compile", is_flag=True,
              help="Do not compile the sources: the source engine alone counts the operations.")
@llm_options
def eval_cmd(labels_path: Path, src_root: Path, gpu_files: tuple[str, ...], gpu_name: str,
             compile_commands: Path | None, as_json: bool, editor: bool, show_misses: int, predictions_out: Path | None,
             no_progress: bool, use_llm: bool, limit: int | None, no_compile: bool, llm: LlmFlags) -> None:
    """Run the static engine over labeled kernels and print accuracy, balanced accuracy and the
    confusion matrix, overall and per language; with --llm, the LLM path too.

    Exit codes: 0 scored, 2 bad arguments, labels file (named with its line), GPU definitions,
    labels of which no kernel is found under --src, or --llm without a usable LLM configuration.
    """
    from perflsp.cli._gpu_options import load_db_or_fail
    from perflsp.evaluation.labels import LabelsError, read_labels
    from perflsp.evaluation.run import predict_rows, reliability, score, score_by_language, tiny_runs
    from perflsp.hardware import UnknownGpuError

    try:
        pairs = read_labels(labels_path)
    except LabelsError as exc:
        fail(str(exc))
    if not pairs:
        fail(f"{labels_path}: no kernels listed")
    if limit is not None:
        pairs = pairs[:limit]
    advisor = _advisor(llm) if use_llm else None
    try:
        db = load_db_or_fail(gpu_files)
    except click.ClickException as exc:
        fail(exc.message)
    try:
        gpu = db.get(gpu_name)
    except UnknownGpuError as exc:
        fail(str(exc))
    from perflsp.kernels.compile_db import CompileDatabase, CompileDatabaseError, DiscoveredDatabases

    compile_db: CompileDatabase | DiscoveredDatabases = DiscoveredDatabases()
    if compile_commands is not None:
        try:
            compile_db = CompileDatabase.load(compile_commands, source_root=src_root)
        except CompileDatabaseError as exc:
            fail(str(exc))
    from perflsp.compiled.service import command_line_compiler

    compiler = None if no_compile else command_line_compiler(compile_db)

    rows = [row for row, _ in pairs]
    mode = "editor" if editor else "launch-given"
    started = time.perf_counter()
    bar = None if no_progress or not stderr.is_terminal else _bar()
    if bar is not None:
        with bar:
            task = bar.add_task("analysing", total=len(rows))
            predictions = predict_rows(rows, src_root, gpu, progress=lambda n: bar.update(task, completed=n),
                                       compile_db=compile_db, mode=mode, compiler=compiler)
    else:
        predictions = predict_rows(rows, src_root, gpu, compile_db=compile_db, mode=mode, compiler=compiler)
    if compiler is not None:
        compiler.close()
    elapsed_s = time.perf_counter() - started
    if not any(p.verdict is not None for p in predictions):  # nothing to judge: not a score of 0
        first = predictions[0]
        fail(f"none of the {len(predictions)} labeled kernel(s) of {labels_path} was found under {src_root} "
             f"(first: {first.row.file}:{first.row.line} {first.row.kernel}: {first.reason}); "
             "check --src and the CSV's `file` and `line` columns")

    if predictions_out is not None:
        try:
            predictions_out.write_text(json.dumps([prediction_json(p) for p in predictions], indent=1) + "\n",
                                       encoding="utf-8")
        except OSError as exc:
            fail(f"{predictions_out}: cannot write ({exc.strerror or exc})")

    scored = list(zip(predictions, [answer for _, answer in pairs]))
    overall = score(scored)
    by_language = score_by_language(scored)
    calibration = reliability(scored)
    tiny = tiny_runs(scored) if editor else None
    unanalyzed = [prediction_json(p) for p in predictions if p.verdict not in ("compute", "bandwidth")]
    misses = [_miss_json(p, a) for p, a in scored if p.verdict in ("compute", "bandwidth") and p.verdict != a.label]
    llm_result = None
    if advisor is not None:
        llm_result = _run_llm(pairs, src_root, gpu, advisor, compile_db, no_progress)
    if as_json:
        out: dict[str, Any] = {
            "labels": str(labels_path),
            "src": str(src_root),
            "gpu": {"id": gpu.id, "name": gpu.name},
            "mode": mode,
            **overall.to_json(),
            "by_language": {language: s.to_json() for language, s in by_language.items()},
            "reliability": calibration.to_json(),
            "unanalyzed": unanalyzed,
            "elapsed_s": round(elapsed_s, 3),
            "kernels_per_s": round(len(rows) / elapsed_s, 1) if elapsed_s > 0 else None,
        }
        if tiny is not None:
            out["tiny_runs"] = _tiny_json(tiny)
        if show_misses:
            out["misses"] = misses[:show_misses]
        if llm_result is not None:
            out["llm"] = llm_result.to_json(with_rows=True)
        print_json(out)
    else:
        _print_text(labels_path, gpu, mode, overall, by_language, unanalyzed, misses[:show_misses], elapsed_s,
                    len(rows), calibration, tiny)
        if llm_result is not None:
            _print_llm(llm_result)
    raise click.exceptions.Exit(EXIT_OK)


def _advisor(flags: LlmFlags):
    """The advisor `--llm` asks, or exit 2 saying why there is none and how to configure one."""
    from perflsp.cli.llm_options import choose_advisor, how_to_configure

    choice = choose_advisor(flags)
    if choice.advisor is None:
        fail(how_to_configure(choice.reason, "perflsp eval --llm") if not choice.failed else
             f"--llm: {choice.reason}")
    return choice.advisor


def _run_llm(pairs, src_root: Path, gpu, advisor, compile_db, no_progress: bool):
    from perflsp.evaluation.llm_eval import run_llm_eval

    bar = None if no_progress or not stderr.is_terminal else _bar()
    if bar is None:
        return run_llm_eval(pairs, src_root, gpu, advisor, compile_db=compile_db)
    with bar:
        task = bar.add_task("asking the LLM", total=None)
        return run_llm_eval(pairs, src_root, gpu, advisor, compile_db=compile_db,
                            progress=lambda done, total: bar.update(task, completed=done, total=total))


def _print_llm(result) -> None:
    stdout.print()
    for line in result.summary_lines():
        stdout.print(escape(line))
    asked = [row for row in result.rows if row.source is not None]
    if not asked:
        return
    table = Table(title="tokens per kernel (endpoint's count; perflsp's prompt estimate)", title_justify="left",
                  header_style="bold")
    for header in ("kernel", "label", "static", "shown", "source", "prompt", "completion", "estimate"):
        table.add_column(header, justify="right" if header in ("prompt", "completion", "estimate") else "left")
    for row in asked:
        table.add_row(escape(f"{row.row.file}:{row.row.line} {row.row.kernel}"), row.label, row.static_verdict or "-",
                      row.verdict or "-", row.source + (" (cached)" if row.from_cache else ""),
                      str(row.prompt_tokens or "-"), str(row.completion_tokens or "-"),
                      str(row.estimated_prompt_tokens or "-"))
    stdout.print(table)


def prediction_json(prediction: Prediction) -> dict[str, Any]:
    """One row's prediction (never its label or measurements): the verdict, the estimate's
    confidence and intensities, and the facts' totals for one launch."""
    row = prediction.row
    return {
        "file": row.file, "line": row.line, "kernel": row.kernel, "language": row.language,
        "verdict": prediction.verdict, "reason": prediction.reason,
        "confidence": round(prediction.confidence, 6) if prediction.confidence is not None else None,
        "intensity": {k: round(v, 6) for k, v in sorted(prediction.intensity.items())},
        "totals": prediction.totals.to_json() if prediction.totals is not None else None,
    }


def _tiny_json(tiny: dict[str, Any]) -> dict[str, Any]:
    return {"threshold_bytes": tiny["threshold_bytes"], "tiny": tiny["tiny"], "with": tiny["with"].to_json(),
            "without": tiny["without"].to_json(),
            "without_by_language": {k: v.to_json() for k, v in tiny["without_by_language"].items()},
            "only": tiny["only"].to_json()}


def _miss_json(prediction: Prediction, answer: Answer) -> dict[str, Any]:
    return {**prediction_json(prediction), "label": answer.label}


def _bar():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=stderr, transient=True)


def _confusion_table(title: str, confusion: dict[str, dict[str, int]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("truth \\ predicted")
    columns = [c for c in PREDICTED_COLUMNS if c in ("compute", "bandwidth") or any(c in row for row in confusion.values())]
    for column in columns:
        table.add_column(column, justify="right")
    for truth, row in confusion.items():
        table.add_row(truth, *(str(row.get(column, 0)) for column in columns))
    return table


def _reliability_table(calibration: Reliability) -> Table:
    table = Table(title=f"reliability ({calibration.analyzed} analysed verdicts; confidence vs observed accuracy)",
                  title_justify="left", header_style="bold")
    for header in ("confidence", "kernels", "mean confidence", "accuracy", "gap"):
        table.add_column(header, justify="left" if header == "confidence" else "right")
    for b in calibration.bins:
        closing = "]" if b.high >= 1.0 else ")"
        table.add_row(f"[{b.low:.1f}, {b.high:.1f}{closing}", str(b.count),
                      "-" if b.mean_confidence is None else f"{b.mean_confidence:.3f}",
                      "-" if b.accuracy is None else f"{b.accuracy:.3f}",
                      "-" if b.gap is None else f"{b.gap:+.3f}")
    return table


def _print_text(labels_path: Path, gpu, mode: str, overall: Score, by_language: dict[str, Score],
                unanalyzed: list[dict], misses: list[dict], elapsed_s: float, rows: int, calibration: Reliability,
                tiny: dict[str, Any] | None) -> None:
    stdout.print(f"[bold]{escape(str(labels_path))}[/] on {escape(gpu.name)} ({escape(gpu.id)})")
    stdout.print("mode: editor (block, grid and exe_args dropped; the pipeline of `perflsp check FILE`)" if mode == "editor"
                 else "mode: launch-given (block, grid and exe_args handed to the engine)")
    figures = Table(header_style="bold")
    for header in ("", "listed", "located", "analysed", "accuracy", "balanced accuracy"):
        figures.add_column(header, justify="left" if not header else "right")
    for name, s in [("all", overall), *by_language.items()]:
        figures.add_row(name, str(s.listed), str(s.located), str(s.analyzed), f"{s.accuracy:.3f}",
                        f"{s.balanced_accuracy:.3f}")
    stdout.print(figures)
    stdout.print(_confusion_table("confusion (all)", overall.confusion))
    for language, s in by_language.items():
        stdout.print(_confusion_table(f"confusion ({language})", s.confusion))
    stdout.print(_reliability_table(calibration))
    ece = calibration.expected_calibration_error

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    stdout.print(f"expected calibration error {fmt(ece)}; median confidence right {fmt(calibration.median_confidence_right)}, "
                 f"wrong {fmt(calibration.median_confidence_wrong)}")
    if tiny is not None:
        kb = tiny["threshold_bytes"] // 1024
        split = Table(title=f"tiny runs (under {kb} KiB of measured DRAM traffic: {tiny['tiny']} labels) scored apart",
                      title_justify="left", header_style="bold")
        for header in ("", "listed", "analysed", "accuracy", "balanced accuracy"):
            split.add_column(header, justify="left" if not header else "right")
        named = [("with tiny runs", tiny["with"]), ("without tiny runs", tiny["without"]),
                 *((f"  without, {k}", v) for k, v in tiny["without_by_language"].items()),
                 ("tiny runs only", tiny["only"])]
        for name, s in named:
            split.add_row(name, str(s.listed), str(s.analyzed), f"{s.accuracy:.3f}", f"{s.balanced_accuracy:.3f}")
        stdout.print(split)
    if unanalyzed:
        stdout.print(f"[bold]not located or not analysed ({len(unanalyzed)}, counted as wrong):[/]")
        for item in unanalyzed:
            state = "not located" if item["verdict"] is None else item["verdict"]
            stdout.print(f"  {escape(item['file'])}:{item['line']} {escape(item['kernel'])} — {state}: "
                         f"{escape(item['reason'] or '')}")
    if misses:
        stdout.print(f"[bold]misclassified (first {len(misses)}):[/]")
        for item in misses:
            stdout.print(f"  {escape(item['file'])}:{item['line']} {escape(item['kernel'])} — predicted "
                         f"{item['verdict']}, labeled {item['label']}")
    rate = f"{rows / elapsed_s:.0f} kernels/s" if elapsed_s > 0 else "-"
    stdout.print(f"{rows} kernels in {elapsed_s:.1f} s ({rate})")


__all__ = ["eval_cmd", "prediction_json"]
