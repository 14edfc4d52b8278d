"""`POST /v1/projects/{project_id}/mcp`: the stateless streamable-HTTP MCP endpoint (MCP-4).

The request pipeline has already admitted it like any member route (route, method 405 for
GET, size 413, media type 415, bearer 401 with `WWW-Authenticate: Bearer`, rate limit at the
edge, the body). Here: no query string (HTTP-3), then the `Origin` header (MCP-7: a request
that carries one outside the configured allowlist is 403 `origin_not_allowed`, DNS-rebinding
protection; none is allowed by default, and a request without `Origin` passes, as
non-browser clients send none), then the JSON-RPC message (`aidememo.mcp.protocol`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.http.query import Query
from aidememo.http.types import Request, Response
from aidememo.mcp import protocol
from aidememo.mcp.dispatch import call_tool
from aidememo.mcp.tools import Tool
from aidememo.service.access import Caller

if TYPE_CHECKING:
    from aidememo.http.app import Services

_JSON = [("content-type", "application/json")]
_IDENTITY_PARAMS = frozenset({"actor_id", "tenant_id"})


def parse_origins(raw: str | Iterable[str] | None) -> frozenset[str]:
    """The allowlist from `--mcp-allowed-origins` or the `MCP_ALLOWED_ORIGINS` var: origins
    separated by commas or spaces, compared without a trailing slash, case-insensitively."""
    if raw is None:
        return frozenset()
    items = raw.replace(",", " ").split() if isinstance(raw, str) else list(raw)
    return frozenset(item.strip().rstrip("/").lower() for item in items if item.strip())


def check_origin(origin: str | None, allowed: frozenset[str]) -> None:
    """403 `origin_not_allowed` for an `Origin` header outside `allowed` (MCP-7)."""
    if origin is None:
        return
    if origin.strip().rstrip("/").lower() not in allowed:
        raise fail(
            ErrorCode.ORIGIN_NOT_ALLOWED,
            "this Origin may not call the MCP endpoint (see --mcp-allowed-origins)",
        )


def mcp(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """The MCP endpoint's handler (see the module docstring)."""
    project_id = validate_id(params["project_id"], "project_id")
    Query(request.query).finish(frozenset(), forbidden=_IDENTITY_PARAMS)
    check_origin(request.headers.get("origin"), s.mcp_allowed_origins)
    if caller is None:  # the route is a member route: the pipeline authenticated it
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    who = caller

    def tools() -> tuple[Tool, ...]:
        return protocol.visible_tools(s.queries.identity(who, project_id).role)

    def call(tool: Tool, arguments: Any) -> bytes:
        return call_tool(s, who, project_id, tool, arguments)

    answer = protocol.handle(request.body.read(), request.headers, protocol.Host(tools, call))
    headers = list(_JSON) if answer.body else []
    return Response(answer.status, headers, answer.body)
