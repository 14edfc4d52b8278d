"""CLI-8: the command line reaches origin/ through one module, `origin.serve_command` (the
`serve` command and the S3 body flags), imported inside the functions that need it, so no
other command loads origin/ and origin's internals can change without touching the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "aidememo" / "cli"
ENTRY = "origin.serve_command"


def _origin_imports(tree: ast.Module) -> list[tuple[str, int, bool]]:
    """(module, line, inside a function) of every import of origin or a module under it."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                if name == "origin" or name.startswith("origin."):
                    found.append((name, getattr(child, "lineno", 0), in_function))
            visit(child, inner)

    visit(tree, False)
    return found


def test_cli8_the_cli_imports_origin_only_through_serve_command_and_lazily() -> None:
    wrong: list[str] = []
    entries = 0
    for path in sorted(CLI.rglob("*.py")):
        for module, line, lazy in _origin_imports(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(CLI.parent.parent)}:{line}"
            if module != ENTRY:
                wrong.append(f"{where} imports {module}, not {ENTRY}")
            elif not lazy:
                wrong.append(f"{where} imports {ENTRY} at module level")
            entries += 1
    assert wrong == []
    assert entries >= 1  # `serve` is added through it
