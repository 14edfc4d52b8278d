"""`POST /v1/projects/{project_id}/mcp`: the stateless streamable-HTTP MCP endpoint (MCP-4):
its route entry (`MCP`, in `aidememo.http.routes.ROUTES`) and its handler.

The request pipeline has already admitted it like any member route (route, method 405 for
GET, size 413, media type 415, bearer 401 with `WWW-Authenticate: Bearer`, rate limit at the
edge, the body) and its query string, which must be empty (the route declares no parameters,
HTTP-3). Here: the `Origin` header (MCP-7: a request
that carries one outside the configured allowlist is 403 `origin_not_allowed`, DNS-rebinding
protection; none is allowed by default, and a request without `Origin` passes, as
non-browser clients send none), then the JSON-RPC message (`aidememo.mcp.protocol`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.handling import JSON_HEADERS, member, project_of
from aidememo.http.services import Services
from aidememo.http.types import Request, Response, Route
from aidememo.mcp import protocol
from aidememo.mcp.dispatch import call_tool
from aidememo.mcp.tools import Tool
from aidememo.service.access import Caller


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
    project_id = project_of(params)
    check_origin(request.headers.get("origin"), s.mcp_allowed_origins)
    who = member(caller)  # the route is a member route: the pipeline authenticated it

    def tools() -> tuple[Tool, ...]:
        return protocol.visible_tools(s.ledger_reads.identity(who, project_id).role)

    def call(tool: Tool, arguments: Any) -> bytes:
        return call_tool(s, who, project_id, tool, arguments)

    answer = protocol.handle(request.body.read(), request.headers, protocol.Host(tools, call))
    headers = list(JSON_HEADERS) if answer.body else []
    return Response(answer.status, headers, answer.body)


MCP = Route(
    "mcp",
    "POST",
    "/v1/projects/{project_id}/mcp",
    mcp,
    "MCP over stateless streamable HTTP: one JSON-RPC message per POST (SPEC.md MCP-*)",
    body="JsonRpcMessage",
    answer="JsonRpcAnswer",
    accepted="A JSON-RPC notification or a client's response: accepted, no body",
    errors=(ErrorCode.ORIGIN_NOT_ALLOWED,),
    inline_bodies=True,
    forwarded_headers=frozenset({"origin", "mcp-protocol-version", "mcp-method", "mcp-name"}),
)
