"""`perflsp serve`: the language server over stdio (default) or TCP."""

from __future__ import annotations

import click


@click.command("serve")
@click.option("--stdio", is_flag=True, help="Talk LSP over stdin/stdout (the default).")
@click.option("--tcp", "tcp", metavar="HOST:PORT", help="Listen on a TCP port instead (port 0: any free port; "
              "the bound address is printed on stderr).")
@click.option("--log-level", type=click.Choice(["error", "warning", "info", "debug"]), default="info", show_default=True,
              help="Server log level (stderr and the editor's output); perflsp.logLevel changes it later.")
def serve(stdio: bool, tcp: str | None, log_level: str) -> None:
    """Run the perflsp language server."""
    if stdio and tcp:
        raise click.UsageError("choose --stdio or --tcp, not both")
    if tcp is not None:
        _host, sep, port = tcp.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise click.BadParameter(f"expected HOST:PORT, got '{tcp}'", param_hint="--tcp")
    from perflsp.server.memory import use_system_allocator

    use_system_allocator()  # re-executes (`python -m perflsp serve` did it earlier, in __main__)
    from perflsp.server.app import run

    run(tcp=tcp, log_level=log_level)
