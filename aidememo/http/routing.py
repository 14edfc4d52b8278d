"""What a route is, and the matcher that tells "no such route" from "wrong method" (HTTP-1).

A `Route` is plain data plus its handler: method, path pattern, the callable that answers,
who may call it (`Auth`), its request body (schema name, media type, byte limit, whether it
is read as a stream) and what the OpenAPI document says of it (summary, answer schema, query
parameters, domain errors). The table itself is `aidememo.http.routes.ROUTES`.

Path parameters match any non-empty segment here; their grammar is checked later, in the
400 stage, so the order of request checks stays the one SPEC.md HTTP-1 gives. Routes compare
by identity (`eq=False`); `name` is their stable id (the OpenAPI `operationId`, and what the
edge Worker tells a project object it resolved).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aidememo.domain.errors import ErrorCode
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES

if TYPE_CHECKING:
    from aidememo.http.app import Services
    from aidememo.http.types import Request, Response
    from aidememo.service.access import Caller

JSON = "application/json"
NDJSON = "application/x-ndjson"

Handler = Callable[["Services", "Request", dict[str, str], "Caller | None"], "Response"]


class Auth(StrEnum):
    """Who may call a route."""

    PUBLIC = "public"  # no token at all
    MEMBER = "member"  # a member's bearer token (AUTH-2); membership checked by the service
    ADMIN = "admin"  # the admin token (ADM-1); a member's token is `admin_required`


@dataclass(frozen=True, slots=True, eq=False)
class Route:
    """One endpoint and everything the pipeline and the OpenAPI document need of it."""

    name: str
    method: str
    path: str
    handler: Handler
    summary: str
    auth: Auth = Auth.MEMBER
    body: str | None = None  # the request body's component schema; None: no body
    media_type: str = JSON  # the body's media type (HTTP-1, 415)
    max_body: int = MAX_REQUEST_BODY_BYTES
    streamed: bool = False  # the handler iterates the body instead of reading it whole
    answer: str | None = None  # the 200 answer's component schema; None: any object
    answer_media: str = JSON
    unready: str | None = None  # a status route's 503 answer schema (READY-1); None: no such
    upgrade: bool = False  # a WebSocket route: succeeds with 101 (LIVE-1)
    accepted: str | None = None  # what a 202 without a body means; None: no such answer
    query: tuple[dict[str, Any], ...] = ()  # OpenAPI query parameters
    errors: tuple[ErrorCode, ...] = ()  # domain errors beyond the shared request checks
    batch: bool = False  # one command, no I/O but the store's: may share a write batch (HTTP-10)
    store_read: bool = False  # a read, no I/O but the store's: the store's pool (HTTP-12)
    costly: bool = False  # a read whose own work can take long: never on the event loop (SRCH-7)
    console_read: bool = False  # a read by POST a console session may make too (CONSOLE-3)
    # What a front that serves the route in several steps (the edge) needs to know of it:
    catalog: bool = False  # changes the artifact catalog, so a GC deadline may move (ART-7)
    inline_bodies: bool = False  # its handler reads and writes artifact bodies inline (ART-11)
    forwarded_headers: frozenset[str] = frozenset()  # headers its handler reads (MCP-4, MCP-7)
    semantic: bool = False  # may read the semantic index; takes `at_least_seq` (SEM-3, SEM-5)
    pattern: tuple[str, ...] = field(init=False)  # literal segments, or "{name}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", tuple(self.path.strip("/").split("/")))

    @property
    def has_body(self) -> bool:
        """True when the route takes a request body."""
        return self.body is not None

    @property
    def authenticated(self) -> bool:
        """True when a bearer token is required (member or admin)."""
        return self.auth is not Auth.PUBLIC

    @property
    def admin(self) -> bool:
        """True when only the admin token passes (ADM-1)."""
        return self.auth is Auth.ADMIN


@dataclass(slots=True)  # made per request: not frozen, which costs five times as much
class Match:
    """The outcome of routing: a route with its parameters, or the allowed methods."""

    route: Route | None
    params: dict[str, str]
    allowed: tuple[str, ...]


_Compiled = tuple[Route, tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]
"""A route with its literal segments and its parameters, each with its position."""


def _compile(route: Route) -> _Compiled:
    literals: list[tuple[int, str]] = []
    params: list[tuple[int, str]] = []
    for at, want in enumerate(route.pattern):
        if want.startswith("{"):
            params.append((at, want[1:-1]))
        else:
            literals.append((at, want))
    return route, tuple(literals), tuple(params)


def _match(
    segments: list[str],
    literals: tuple[tuple[int, str], ...],
    names: tuple[tuple[int, str], ...],
) -> dict[str, str] | None:
    """The parameters of a path whose length is the route's, or None when it does not match
    (a literal segment differs, or a parameter's segment is empty)."""
    for at, want in literals:
        if segments[at] != want:
            return None
    params: dict[str, str] = {}
    for at, name in names:
        got = segments[at]
        if not got:
            return None
        params[name] = got
    return params


class Router:
    """Finds the route of a method and path in a fixed table.

    Only routes with as many segments as the path can match it, and of those only the ones
    whose last segment is the path's or a parameter: each (length, last segment) has its list
    of candidates made once, in table order, so a request compares its path with a few
    routes, not with every route of its length. The first candidate that matches with the
    request's method wins; the methods of the others that match make a 405's `allowed`."""

    def __init__(self, routes: tuple[Route, ...]) -> None:
        self.routes = routes
        by_last: dict[tuple[int, str], list[int]] = {}
        open_last: dict[int, list[int]] = {}  # routes whose last segment is a parameter
        for at, route in enumerate(routes):
            last, length = route.pattern[-1], len(route.pattern)
            if last.startswith("{"):
                open_last.setdefault(length, []).append(at)
            else:
                by_last.setdefault((length, last), []).append(at)
        compiled = [_compile(route) for route in routes]
        self._by_last = {
            (length, last): tuple(compiled[at] for at in sorted(ats + open_last.get(length, [])))
            for (length, last), ats in by_last.items()
        }
        self._open_last = {
            length: tuple(compiled[at] for at in ats) for length, ats in open_last.items()
        }
        self._by_name = {route.name: route for route in routes}
        if len(self._by_name) != len(routes):
            raise ValueError("route names must be unique")

    def resolve(self, method: str, path: str) -> Match:
        """The route for `method` and `path`; `allowed` is empty when no path matches."""
        segments = path.strip("/").split("/") if path not in ("", "/") else [""]
        length = len(segments)
        candidates = self._by_last.get((length, segments[-1]))
        if candidates is None:
            candidates = self._open_last.get(length, ())
        allowed: list[str] = []
        for route, literals, names in candidates:
            params = _match(segments, literals, names)
            if params is None:
                continue
            if route.method == method:
                return Match(route, params, ())
            allowed.append(route.method)
        return Match(None, {}, tuple(allowed))

    def named(self, name: str) -> Route | None:
        """The route whose `name` is `name`, or None."""
        return self._by_name.get(name)
