"""The layers hold: what sits below the command line never imports it, the server's features never
import the server's class (they type against `perflsp.server.context.ServerContext`), and no import
circle (type-checking imports included) spans more than three modules."""

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
            # `from pkg import module` imports the module; the package's `__init__` only when a
            # name is not a module of it
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(named)
            if not all(_is_module(name) for name in named):
                found.add(node.module)
    return found


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != PACKAGE.name:
        return False
    path = PACKAGE.parent.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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


def _import_graph() -> dict[str, set[str]]:
    """perflsp's modules and the ones of them each imports (lazy and TYPE_CHECKING included)."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for target in _imports(path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def test_no_import_circle_spans_more_than_three_modules():
    graph = _import_graph()

    def reach(start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reachable = {name: reach(name) for name in graph}
    circles = {frozenset(m for m in reachable[name] if name in reachable[m]) for name in graph}
    assert max(len(c) for c in circles) <= 3, sorted(sorted(c) for c in circles if len(c) > 3)
