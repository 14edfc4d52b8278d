"""The edge chooses by what a route declares, never by which route it is (SPEC.md EDGE-7).

A scan of `worker/` and `durable_objects/`: no import of a route entry (or a tuple of them)
from the core, no comparison of a route, a route's name or a route entry (`is`, `==`, `in`),
no `startswith`/`endswith` on a route's name and no lookup keyed by it. The scanner is run on
the forbidden shapes first, so a scan that finds nothing is known to look.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import aidememo.http
from aidememo.http.routes import ROUTES
from aidememo.http.types import Auth, Route

ROOT = Path(__file__).resolve().parents[2]
EDGE_DIRS = ("worker", "durable_objects")


def _entry_names() -> frozenset[str]:
    """Every module-level name of the core bound to a route entry or a sequence of them."""
    names: set[str] = set()
    modules = [
        importlib.import_module(f"aidememo.http.{m.name}")
        for m in pkgutil.iter_modules(aidememo.http.__path__)
        if m.name == "routes" or m.name.endswith("_routes")
    ]
    modules.append(importlib.import_module("aidememo.mcp.http"))
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, Route) or (
                isinstance(value, tuple | list)
                and value
                and all(isinstance(v, Route) for v in value)
            ):
                names.add(name)
    return frozenset(names)


ENTRIES = _entry_names()


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def _is_route(node: ast.AST) -> bool:
    """`route`, `admission.route`, `some_route`: an expression holding a route."""
    text = _text(node)
    return text == "route" or text.endswith((".route", "_route"))


def _is_route_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "name" and _is_route(node.value)


def _is_entry(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ENTRIES
    if isinstance(node, ast.Attribute):
        return node.attr in ENTRIES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_entry(e) for e in node.elts)
    return False


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def violations(source: str, where: str) -> list[str]:
    """Every place in `source` that chooses by a route's identity or name."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aidememo"):
            found += [f"{line}: imports {a.name}" for a in node.names if a.name in ENTRIES]
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if all(_is_none(o) or _is_route(o) for o in operands) and any(map(_is_none, operands)):
                continue  # `route is None`: whether there is one, not which
            if any(_is_route(o) or _is_route_name(o) or _is_entry(o) for o in operands):
                found.append(f"{line}: compares {_text(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith") and _is_route_name(node.func.value):
                found.append(f"{line}: {_text(node)}")
        elif isinstance(node, ast.Subscript) and _is_route_name(node.slice):
            found.append(f"{line}: looks up {_text(node)}")
    return found


def test_edge7_the_scan_finds_every_way_of_choosing_by_route_identity() -> None:
    forbidden = [
        "from aidememo.http.admin_routes import ADMIN_IMPORT",
        "from aidememo.http.routes import COMMAND, Route",
        "x = route is ADMIN_IMPORT",
        "x = admission.route is not COMMAND",
        "x = route == CONSOLE_SIGN_IN",
        "x = route in (UPLOAD, PUBLISH)",
        "x = route in BODY_ROUTES",
        "x = any(route is r for r in ADMIN_ROUTES)",
        "x = route.name == 'mcp'",
        "x = 'mcp' != admission.route.name",
        "x = route.name.startswith('artifact_')",
        "x = TABLE[route.name]",
    ]
    for snippet in forbidden:
        assert violations(snippet, "snippet"), snippet
    allowed = [
        "from aidememo.http.routes import route_named",
        "from aidememo.http.types import EdgeHandler, Route",
        "x = route.auth is Auth.PUBLIC",
        "x = route.edge_handler is not None",
        "x = TABLE[route.edge_handler]",
        "x = route is None",
        "x = admission.route.catalog",
        "x = route_named(data['route'])",
    ]
    for snippet in allowed:
        assert not violations(snippet, "snippet"), snippet


def test_edge7_worker_and_objects_choose_by_route_properties() -> None:
    found: list[str] = []
    for directory in EDGE_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            found += violations(path.read_text(encoding="utf-8"), rel)
    assert not found, "\n".join(found)


def test_edge7_every_route_says_who_answers_it_at_the_edge() -> None:
    """Every admin route is the Worker's own (no object serves one); a public route is
    answered by its handler, so it needs none; a member route the project object answers
    names its project in its path or, declared, in its body (EDGE-4)."""
    for route in ROUTES:
        if route.auth is Auth.ADMIN:
            assert route.edge_handler is not None, route.name
        elif route.auth is Auth.PUBLIC:
            assert route.edge_handler is None, route.name
        elif route.edge_handler is None:
            in_path = "{project_id}" in route.pattern
            assert in_path != route.project_in_body, route.name
