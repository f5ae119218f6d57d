"""The layers hold: what sits below the command line never imports it, and the server's features
never import the server's class (they type against `perflsp.server.context.ServerContext`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "perflsp"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, wherever the import is (lazy and TYPE_CHECKING ones too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_below_the_command_line_imports_it():
    offenders = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                 if path.parent.name != "cli" and path.name != "__main__.py"
                 and any(name == "perflsp.cli" or name.startswith("perflsp.cli.") for name in _imports(path))]
    assert offenders == []


def test_only_the_entry_points_import_the_server_class():
    # features and services type against `ServerContext`; app.py imports them, not the reverse
    server = PACKAGE / "server"
    offenders = [str(path.relative_to(PACKAGE)) for path in server.rglob("*.py") if path.name != "app.py"
                 and "perflsp.server.app" in _imports(path)]
    assert offenders == []
