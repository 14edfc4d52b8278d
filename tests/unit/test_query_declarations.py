"""HTTP-16: every query parameter is declared once, on its route (`Route.query`).

Handlers and MCP tools never declare one of their own: a handler takes the values the pipeline
read (`query_of`), and a tool's query arguments are made from its twin route's `Param`s. The
checks read the handlers' source (what names they take from `query_of`, following the calls
they make into their own module) and build every tool's twin request.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import textwrap
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aidememo.domain.clock import FixedClock, RandomIds
from aidememo.http.app import HttpApp
from aidememo.http.body import StreamBody
from aidememo.http.query_values import parse_query, query_of
from aidememo.http.routes import ROUTES
from aidememo.http.types import Request, Route
from aidememo.mcp.tool import Context
from aidememo.mcp.tools import TOOLS
from aidememo.mcp.twins import TWINS, argument, path_names
from aidememo.service.identity import IdentityService
from aidememo.stores.in_memory import InMemoryStore

ROOT = Path(__file__).resolve().parents[2]
ALL = "*"  # a handler that spreads the values (`**query_of(request)`) takes every one

# Where query parameters could be declared or read raw a second time.
DERIVED = sorted(
    [
        *(ROOT / "aidememo" / "http").glob("*_handlers.py"),
        ROOT / "aidememo" / "http" / "routes.py",
        *(ROOT / "aidememo" / "mcp").glob("*.py"),
        ROOT / "worker" / "transfer.py",
    ]
)
DECLARERS = {"Param", "read_params", "Query"}


def _is_query_of(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "query_of"
    )


def _key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _names_read(fn: ast.AST, module: dict[str, ast.FunctionDef], seen: set[str]) -> set[str]:
    """The query parameter names `fn` takes from `query_of`, with those of the functions of
    its own module that it calls."""
    bound = {
        target.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and _is_query_of(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def values(node: ast.AST) -> bool:
        return _is_query_of(node) or (isinstance(node, ast.Name) and node.id in bound)

    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and values(node.value):
            key = _key(node.slice)
            names.add(key if key is not None else ALL)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and values(func.value):
                key = _key(node.args[0]) if node.args else None
                names.add(key if key is not None else ALL)
            if any(kw.arg is None and values(kw.value) for kw in node.keywords):
                names.add(ALL)
            if isinstance(func, ast.Name) and func.id in module and func.id not in seen:
                seen.add(func.id)
                names |= _names_read(module[func.id], module, seen)
    return names


def _functions(mod: ModuleType) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(inspect.getsource(mod))
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _handler_reads(route: Route) -> set[str]:
    handler = route.handler
    tree = ast.parse(textwrap.dedent(inspect.getsource(handler)))
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    module = _functions(importlib.import_module(handler.__module__))
    return _names_read(fn, module, {fn.name})


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: route.name)
def test_http16_a_handler_reads_exactly_what_its_route_declares(route: Route) -> None:
    declared = {param.name for param in route.query}
    read = _handler_reads(route)
    if ALL in read:
        read = (read - {ALL}) | declared
    assert read == declared, f"{route.name}: handler reads {sorted(read)}"
    assert len(declared) == len(route.query), f"{route.name} declares a parameter twice"
    assert not declared & set(path_names(route)), f"{route.name}: path and query share a name"


def _calls(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in DECLARERS:
                yield name, node.lineno
        if isinstance(node, ast.Attribute) and node.attr == "query":
            base = node.value
            if isinstance(base, ast.Name) and base.id in {"request", "core"}:
                yield "request.query", node.lineno


@pytest.mark.parametrize("path", DERIVED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_http16_handlers_tools_and_the_edge_transfer_declare_no_parameter(path: Path) -> None:
    found = list(_calls(path))
    assert not found, f"{path.relative_to(ROOT)} declares or reads a query itself: {found}"


def _sample(name: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        return 1 + sum(map(ord, name))  # distinct per argument
    if kind == "boolean":
        return True
    return schema.get("enum", [f"v-{name}"])[-1]


READ_TOOLS = [tool for tool in TOOLS if tool.run is None]


@pytest.mark.parametrize("tool", READ_TOOLS, ids=lambda tool: tool.name)
def test_http16_a_tool_passes_on_exactly_its_twins_declared_query(tool: Any) -> None:
    route = TWINS[tool.route]
    declared = {param.name: param for param in route.query}
    for name, param in declared.items():
        assert tool.properties.get(name) == argument(param), f"{tool.name}.{name}"
        assert (name in tool.required) == param.required, f"{tool.name}.{name} required"
    args = {name: _sample(name, schema) for name, schema in tool.properties.items()}
    twin = tool.build(Context("p1", "a1"), args)
    assert set(twin.query) == set(declared), f"{tool.name} query {sorted(twin.query)}"
    assert all(twin.query[name] == args[name] for name in twin.query)
    if route.body is None:  # a read: every argument is a path or query parameter
        passed = {*map(str, twin.params.values()), *map(str, twin.query.values())}
        assert {str(value) for value in args.values()} <= passed, tool.name


def test_http16_the_pipeline_reads_the_query_once_from_the_route() -> None:
    route = next(route for route in ROUTES if route.name == "sessions")
    request = Request("GET", "/v1/projects/p1/sessions", "limit=7&source_id=s1")
    values = parse_query(route, request)
    assert values == {"source_id": "s1", "before_seq": None, "limit": 7}
    request.query = "limit=not-a-number"  # read once: a second reading answers the first
    assert parse_query(route, request) is values is query_of(request)


def test_http16_http1_the_query_is_read_after_the_body_and_before_the_handler() -> None:
    store = InMemoryStore()
    IdentityService(store, FixedClock(1_000), RandomIds()).bootstrap(
        tenant_id="t1", project_id="p1", actor_id="a1", token_sha256=sha256(b"tok").digest()
    )
    app = HttpApp(store, clock=FixedClock(2_000))
    bearer = {"authorization": "Bearer tok", "content-type": "application/json"}

    def answer(path: str, query: str, headers: dict[str, str], body: Any = b"") -> tuple[int, str]:
        response = app.dispatch(Request("POST", path, query, headers, body))
        error = json.loads(response.body)["error"]
        return response.status, f"{error['code']}: {error['message']}"

    big = StreamBody(iter([b" " * (512 * 1024)] * 3), None)
    assert answer("/v1/projects/p1/facts", "x=1", bearer, big)[0] == 413  # the body first
    assert answer("/v1/projects/p1/facts", "x=1", {})[0] == 401  # then who calls
    status, error = answer("/v1/projects/bad%id/facts", "x=1", bearer, b"{")
    assert (status, error) == (400, "invalid_command: unknown query parameter(s) ['x']")
    status, error = answer("/v1/projects/p1/facts", "actor_id=a2", bearer, b"{}")
    assert (status, error) == (
        400,
        "invalid_command: actor_id is taken from the token, not the query",
    )
    reserve = "/v1/projects/p1/artifact-reservations"  # declares none: none is accepted
    assert answer(reserve, "ttl=5", bearer, b"{}")[0] == 400


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_http16_mcp1_tool_argument_schemas_are_json_schema(tool: Any) -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")  # schemathesis brings it
    schema = tool.listing()["inputSchema"]
    jsonschema_rs.meta.validate(schema)
    validator = jsonschema_rs.Draft202012Validator(schema)
    for prop in schema["properties"].values():
        if "default" in prop:  # a declared default is a value the argument may take
            jsonschema_rs.Draft202012Validator(prop).validate(prop["default"])
    validator.validate(
        {name: _sample(name, schema["properties"][name]) for name in schema["required"]}
    )
