"""The route table and a matcher that tells "no such route" from "wrong method" (HTTP-1).

Path parameters match any non-empty segment here; their grammar is checked later, in the
400 stage, so the order of request checks stays the one SPEC.md gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import MAX_ARCHIVE_BYTES, MAX_REQUEST_BODY_BYTES

NDJSON = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: its method, its path pattern and the handler's name."""

    method: str
    pattern: tuple[str, ...]  # literal segments, or "{name}" for a parameter
    handler: str
    authenticated: bool = True
    has_body: bool = False
    admin: bool = False  # guarded by the admin token, not a member's (ADM-1)
    max_body: int = MAX_REQUEST_BODY_BYTES
    media_type: str = "application/json"


def _route(method: str, path: str, handler: str, **flags: Any) -> Route:
    return Route(method, tuple(path.strip("/").split("/")), handler, **flags)


P = "/v1/projects/{project_id}"
ROUTES: tuple[Route, ...] = (
    _route("GET", "/health", "health", authenticated=False),
    _route("GET", "/ready", "ready", authenticated=False),
    _route("GET", "/openapi.json", "openapi", authenticated=False),
    _route("POST", "/v1/commands", "command", has_body=True),
    _route("GET", f"{P}/identity", "identity"),
    _route("GET", f"{P}/resources/{{kind}}/{{resource_id}}", "resource"),
    _route("GET", f"{P}/changes", "changes"),
    _route("GET", f"{P}/changes/materialized", "changes_materialized"),
    _route("GET", f"{P}/changes/live", "changes_live"),
    _route("GET", f"{P}/snapshot", "snapshot"),
    _route("POST", f"{P}/sessions", "create_session", has_body=True),
    _route("POST", f"{P}/facts", "create_fact", has_body=True),
    _route("POST", f"{P}/handoff-contexts", "create_context", has_body=True),
    _route("POST", f"{P}/handoffs", "send_handoff", has_body=True),
    _route("GET", f"{P}/handoffs", "mailbox"),
    _route("GET", f"{P}/handoffs/{{handoff_id}}", "handoff_status"),
    _route("POST", f"{P}/handoffs/{{handoff_id}}/accept", "accept", has_body=True),
    _route("POST", f"{P}/handoffs/{{handoff_id}}/heartbeat", "heartbeat", has_body=True),
    _route("POST", f"{P}/handoffs/{{handoff_id}}/return", "return_", has_body=True),
    _route("GET", f"{P}/search", "search"),
    _route("POST", "/v1/admin/bootstrap", "admin_bootstrap", has_body=True, admin=True),
    _route("POST", "/v1/admin/members", "admin_members", has_body=True, admin=True),
    _route("POST", "/v1/admin/tokens/revoke", "admin_revoke_token", has_body=True, admin=True),
    _route("GET", "/v1/admin/tenants/{tenant_id}/export", "admin_export", admin=True),
    _route(
        "POST",
        "/v1/admin/import",
        "admin_import",
        has_body=True,
        admin=True,
        max_body=MAX_ARCHIVE_BYTES,
        media_type=NDJSON,
    ),
    _route("DELETE", "/v1/admin/tenants/{tenant_id}", "admin_delete_tenant", admin=True),
)


def _match(pattern: tuple[str, ...], segments: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, segments, strict=True):
        if want.startswith("{"):
            if not got:
                return None
            params[want[1:-1]] = got
        elif want != got:
            return None
    return params


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of routing: a route with its parameters, or the allowed methods."""

    route: Route | None
    params: dict[str, str]
    allowed: tuple[str, ...]


def _by_length(routes: tuple[Route, ...]) -> dict[int, tuple[Route, ...]]:
    index: dict[int, list[Route]] = {}
    for route in routes:
        index.setdefault(len(route.pattern), []).append(route)
    return {length: tuple(group) for length, group in index.items()}


# Only routes with as many segments as the path can match it; the table order is kept.
_ROUTES_BY_LENGTH = _by_length(ROUTES)


_ROUTES_BY_HANDLER = {route.handler: route for route in ROUTES}


def route_named(handler: str) -> Route:
    """The route whose handler is `handler` (names are unique in the table); a front that
    routed a request hands the object behind it the name instead of the path to route again."""
    try:
        return _ROUTES_BY_HANDLER[handler]
    except KeyError:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, f"no route named {handler}") from None


def resolve(method: str, path: str, routes: tuple[Route, ...] = ROUTES) -> Match:
    """Find the route for `method` and `path`; `allowed` is empty when no path matches."""
    segments = path.strip("/").split("/") if path not in ("", "/") else [""]
    allowed: list[str] = []
    if routes is ROUTES:
        routes = _ROUTES_BY_LENGTH.get(len(segments), ())
    for route in routes:
        params = _match(route.pattern, segments)
        if params is None:
            continue
        if route.method == method:
            return Match(route, params, ())
        allowed.append(route.method)
    return Match(None, {}, tuple(allowed))
