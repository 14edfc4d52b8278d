"""Framework-free values: a request, a response, and a route (what answers a request).

A `Route` is plain data plus its handler: method, path pattern, the callable that answers,
who may call it (`Auth`), its request body (schema name, media type, byte limit, whether it
is read as a stream), what the OpenAPI document says of it (summary, answer schema, query
parameters, domain errors) and what the edge does with it (`edge_handler`, `project_in_body`:
the edge chooses by these, never by which route it is, EDGE-7). Routes compare by identity
(`eq=False`); `name` is their stable id (the OpenAPI `operationId`, and what the edge Worker
tells a project object it resolved). The table is `aidememo.http.routes.ROUTES`; the matcher
`aidememo.http.routing.Router`.

Path parameters match any non-empty segment; their grammar is checked later, in the 400
stage, so the order of request checks stays the one SPEC.md HTTP-1 gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aidememo.domain.errors import ErrorCode
from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.http.body import EMPTY, Body
from aidememo.http.query import Param

if TYPE_CHECKING:
    from aidememo.http.services import Services
    from aidememo.service.access import Caller

# Request and Response are made for every request on the hot path: plain slotted dataclasses,
# since a frozen one costs five times as much to build (each field set through
# `object.__setattr__`); nothing changes them after they are made (none is hashable either:
# they hold a dict or a list).


@dataclass(slots=True)
class Request:
    """An HTTP request as the core sees it.

    `headers` keys are lower-case; `query` is the raw query string without `?`; `body` is a
    `Body` (`aidememo.http.body`: whole, or a bounded stream still arriving; `bytes` given
    here are wrapped as a whole body). `upgrade` is True when the front received the request
    as a WebSocket upgrade (only the live feed accepts one, LIVE-1). `match` is the route a
    front resolved already (the origin resolves each request once, to choose where it runs);
    None: the pipeline resolves it. `query_values` is the query read against the route's
    declared parameters (`Route.query`), once, by `aidememo.http.query_values.parse_query`; None
    until then. Handlers take their parameters from it (`query_of`).
    """

    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: Body = EMPTY
    request_id: str = ""
    upgrade: bool = False
    match: Match | None = None
    query_values: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        body: object = self.body
        if isinstance(body, bytes):
            self.body = Body.of(body)


@dataclass(slots=True)
class Response:
    """An HTTP response: status, headers (lower-case names) and the encoded body.

    `stream`, when set, is the body instead of `body`: chunks a front sends as they come
    (an artifact download, ART-6), with the length in the `content-length` header.
    """

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    stream: Iterator[bytes] | None = None

    @property
    def json_content(self) -> bool:
        """True when the body is JSON."""
        return any(k == "content-type" and "json" in v for k, v in self.headers)


JSON = "application/json"
NDJSON = "application/x-ndjson"

Handler = Callable[["Services", "Request", dict[str, str], "Caller | None"], "Response"]
"""`handler(services, request, path parameters, caller)`: caller None only on public routes."""


class Auth(StrEnum):
    """Who may call a route."""

    PUBLIC = "public"  # no token at all
    MEMBER = "member"  # a member's bearer token (AUTH-2); membership checked by the service
    ADMIN = "admin"  # the admin token (ADM-1); a member's token is `admin_required`


class EdgeHandler(StrEnum):
    """The edge Worker's own handler of a route it does not hand to a project object whole
    (`Route.edge_handler`): it orchestrates the route across the objects, or moves an artifact
    body between the client and R2 around the project object's catalog steps (EDGE-7)."""

    SIGN_IN = "sign_in"  # the console's cookie, minted by the Worker (no project, CONSOLE-2)
    BOOTSTRAP = "bootstrap"  # registry, token directory, project object (EDGE-5)
    MEMBERS = "members"  # registry, then project object (EDGE-5)
    REVOKE_TOKEN = "revoke_token"  # directory, registry, every project of the actor (EDGE-5)
    EXPORT = "export"  # the projects' snapshots streamed out page by page (ARC-7)
    IMPORT = "import"  # the stream staged page by page into the objects (ARC-7)
    DELETE_TENANT = "delete_tenant"  # every object of the tenant emptied (EDGE-5)
    BODY_UPLOAD = "body_upload"  # the request body streamed into R2 (ART-10)
    BODY_PUBLISH = "body_publish"  # the stored body observed in R2 (ART-4)
    BODY_DOWNLOAD = "body_download"  # the answer streamed from R2 (ART-10)
    UPLOAD_GRANT = "upload_grant"  # a presigned upload into R2 (GRANT-3)
    DOWNLOAD_GRANT = "download_grant"  # a presigned download from R2 (GRANT-4)


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
    # Its query parameters, declared here only: the pipeline parses them (`parse_query`) and
    # hands the values to the handler (`query_of`); OpenAPI and the MCP tools show them.
    query: tuple[Param, ...] = ()
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
    # The edge Worker's own handler of it (EDGE-7); None: `handler` answers it, in the project
    # object (a public route's in the Worker, over a store that holds nothing)
    edge_handler: EdgeHandler | None = None
    project_in_body: bool = False  # its project is the body's top-level `project_id` (EDGE-4)
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
