"""The MCP tools' REST twins: the routes a tool may be the twin of (the member and artifact
routes, by name), and what a twin's parameters become as tool arguments.

A twin's query parameters are declared once, on its route (`Route.query`, HTTP-16): a tool
that passes them on takes them as arguments made from those `Param`s (name, type, bounds,
enum, default, description; an `$ref` to a component is written out, so a client needs no
OpenAPI document), and its twin request puts each argument where the route declares it.
"""

from __future__ import annotations

from aidememo.http.artifact_routes import ARTIFACT_ROUTES
from aidememo.http.components import component_schemas
from aidememo.http.member_routes import MEMBER_ROUTES
from aidememo.http.query import Param
from aidememo.http.types import Route
from aidememo.mcp.tool import Args, Build, Context, Schema, Twin

TWINS: dict[str, Route] = {route.name: route for route in (*MEMBER_ROUTES, *ARTIFACT_ROUTES)}
"""The routes a tool may be the twin of, by name."""

COMPONENTS: dict[str, Schema] = component_schemas()
_REF = "#/components/schemas/"


def argument(param: Param) -> Schema:
    """The JSON Schema of a query parameter as a tool argument: its schema, a component it
    references written out, described by the parameter's description."""
    schema = dict(param.schema)
    target = schema.pop("$ref", None)
    if isinstance(target, str) and target.startswith(_REF):
        schema = {**COMPONENTS[target[len(_REF) :]], **schema}
    if param.doc:
        schema["description"] = param.doc
    return schema


def query_arguments(route: Route) -> tuple[dict[str, Schema], tuple[str, ...]]:
    """The tool arguments of `route`'s query parameters, and which of them are required."""
    properties = {param.name: argument(param) for param in route.query}
    return properties, tuple(param.name for param in route.query if param.required)


def path_names(route: Route) -> tuple[str, ...]:
    """`route`'s path parameters but the project's (which the MCP endpoint's path names)."""
    names = (segment[1:-1] for segment in route.pattern if segment.startswith("{"))
    return tuple(name for name in names if name != "project_id")


def pick(args: Args, *names: str) -> dict[str, object]:
    """The arguments among `names` that the call gives."""
    return {name: args[name] for name in names if name in args}


def passed_on(route: Route) -> Build:
    """The build of a tool whose arguments are `route`'s path and query parameters by their
    own names: each goes where the route declares it."""
    path = path_names(route)
    query = tuple(param.name for param in route.query)

    def build(ctx: Context, args: Args) -> Twin:
        return Twin(
            params={k: str(v) for k, v in pick(args, *path).items()}, query=pick(args, *query)
        )

    return build
