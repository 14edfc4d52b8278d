"""The route table: every endpoint of the contract, one `Route` entry each.

Each route family keeps its entries, handlers and components side by side: `<family>_routes.py`
(the entries, each with its query parameters declared once, HTTP-16), `<family>_handlers.py`
(one handler per entry) and `<family>_schemas.py` (its bodies and answers). The families are
public, member, artifact (grants included), admin and console; the MCP endpoint's entry and
handler are `aidememo.mcp.http`'s. This module gathers them in one table, plus the one route
that needs the table itself: `GET /openapi.json`. The pipeline (`aidememo.http.pipeline`),
every front and the OpenAPI document read everything else from the entries.

The edge chooses by what an entry declares (`auth`, `edge_handler`, `project_in_body`,
`upgrade`, ...), never by which entry it is (EDGE-7); a route crosses the Worker-to-object RPC
by its `name` (`route_named`).
"""

from __future__ import annotations

import functools

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.admin_routes import ADMIN_ROUTES
from aidememo.http.artifact_routes import ARTIFACT_ROUTES
from aidememo.http.console_routes import CONSOLE_ROUTES
from aidememo.http.handling import ok_bytes
from aidememo.http.member_routes import CHANGES_LIVE, COMMAND, MEMBER_ROUTES
from aidememo.http.openapi import document
from aidememo.http.public_routes import PUBLIC_ROUTES
from aidememo.http.render import json_bytes
from aidememo.http.routing import Router
from aidememo.http.services import Services
from aidememo.http.types import NDJSON, Auth, EdgeHandler, Match, Request, Response, Route
from aidememo.mcp.http import MCP
from aidememo.service.access import Caller

__all__ = [
    "CHANGES_LIVE",
    "COMMAND",
    "NDJSON",
    "OPENAPI",
    "ROUTES",
    "Auth",
    "EdgeHandler",
    "Match",
    "Route",
    "resolve",
    "route_named",
]


def openapi(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """The OpenAPI 3.1 document of this table."""
    return ok_bytes(_document_bytes())


OPENAPI = Route("openapi", "GET", "/openapi.json", openapi, "This OpenAPI document", Auth.PUBLIC)

ROUTES: tuple[Route, ...] = (
    *PUBLIC_ROUTES,
    OPENAPI,
    *MEMBER_ROUTES,
    MCP,
    *ARTIFACT_ROUTES,
    *ADMIN_ROUTES,
    *CONSOLE_ROUTES,
)


@functools.cache
def _document_bytes() -> bytes:
    return json_bytes(document(ROUTES))


_ROUTER = Router(ROUTES)
resolve = _ROUTER.resolve


def route_named(name: str) -> Route:
    """The route whose `name` is `name`: a front that routed a request hands the object behind
    it the name instead of the path to route again."""
    route = _ROUTER.named(name)
    if route is None:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, f"no route named {name}")
    return route
