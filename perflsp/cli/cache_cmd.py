"""`perflsp cache stats|clear`: inspect or empty the LLM answer cache."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import click

from perflsp.llm.cache import CACHE_DIR_ENV, CACHE_FILE_NAME, CacheError, VerdictCache


def _cache(cache_dir: str | None) -> VerdictCache:
    return VerdictCache(Path(cache_dir) / CACHE_FILE_NAME if cache_dir else None)


def _fail(message: str) -> None:
    click.echo(f"perflsp cache: {message}", err=True)
    sys.exit(1)


@click.group("cache")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar=CACHE_DIR_ENV,
    help=f"Folder of the cache (default: the user cache dir; env {CACHE_DIR_ENV}).",
)
@click.pass_context
def cache(ctx: click.Context, cache_dir: str | None) -> None:
    """Inspect or empty the cache of LLM answers."""
    ctx.obj = _cache(cache_dir)


@cache.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.pass_obj
def stats(store: VerdictCache, as_json: bool) -> None:
    """Entries, sizes and hits of the LLM cache."""
    try:
        figures = store.stats()
    except CacheError as exc:
        _fail(str(exc))
        return
    if as_json:
        click.echo(json.dumps(figures.to_json(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    def when(ts: float | None) -> str:
        return datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds") if ts else "-"

    table = Table(title="perflsp LLM cache", show_header=False)
    table.add_row("path", figures.path)
    table.add_row("entries", str(figures.entries))
    table.add_row("answers size", f"{figures.payload_bytes / 1024:.1f} KiB")
    table.add_row("file size", f"{figures.file_bytes / 1024:.1f} KiB")
    table.add_row("size cap", f"{figures.max_bytes / 2**20:.0f} MiB")
    table.add_row("hits", str(figures.hits))
    table.add_row("oldest", when(figures.oldest))
    table.add_row("newest", when(figures.newest))
    for model, count in sorted(figures.by_model.items()):
        table.add_row(f"model {model}", str(count))
    for task, count in sorted(figures.by_task.items()):
        table.add_row(f"task {task}", str(count))
    Console().print(table)


@cache.command("clear")
@click.pass_obj
def clear(store: VerdictCache) -> None:
    """Delete every cached LLM answer."""
    if not store.path.exists():
        click.echo(f"nothing to clear: no cache at {store.path}")
        return
    try:
        count = store.clear()
    except CacheError as exc:
        _fail(str(exc))
        return
    click.echo(f"removed {count} cached answer(s) from {store.path}")
