"""The route table: every endpoint of the contract, one `Route` entry each.

An entry holds its handler (a function of `aidememo.http.handlers` or `aidememo.http.admin`),
who may call it, its body, limits and media type, and what `aidememo.http.openapi` publishes
of it (summary, answer schema, query parameters, domain errors). Adding a route is one entry
here plus its handler; the pipeline (`aidememo.http.pipeline`), both fronts and the OpenAPI
document read everything else from the entry.

Fronts that treat one route specially (the live feed's upgrade, the streamed import, the
edge's own admin orchestration) compare against the named entries below (`COMMAND`,
`CHANGES_LIVE`, `ADMIN_*`) by identity, and a route crosses the Worker-to-object RPC by its
`name` (`route_named`).
"""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    MAILBOX_LIMIT_DEFAULT,
    MAILBOX_LIMIT_MAX,
    MAX_ARCHIVE_BYTES,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_BYTES,
    SESSION_FACTS_LIMIT_DEFAULT,
    SESSION_FACTS_LIMIT_MAX,
    SESSIONS_LIMIT_DEFAULT,
    SESSIONS_LIMIT_MAX,
    SNAPSHOT_LIMIT_DEFAULT,
    SNAPSHOT_LIMIT_MAX,
)
from aidememo.http import admin, handlers
from aidememo.http.artifact_routes import ARTIFACT_ROUTES
from aidememo.http.console_routes import CONSOLE_ROUTES
from aidememo.http.grant_routes import GRANT_ROUTES
from aidememo.http.openapi_schemas import integer, query_param, ref, text
from aidememo.http.routing import NDJSON, Auth, Match, Route, Router

__all__ = ["NDJSON", "ROUTES", "Auth", "Match", "Route", "resolve", "route_named"]

E = ErrorCode
P = "/v1/projects/{project_id}"
_CURSOR = (E.INVALID_CHANGE_BATCH, E.CURSOR_EPOCH_MISMATCH, E.CURSOR_OUT_OF_RANGE)
_CREATE = (E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS)
_TRANSITION = (
    E.HANDOFF_ACTOR_MISMATCH,
    E.RESOURCE_NOT_FOUND,
    E.COMMAND_CONFLICT,
    E.STALE_REVISION,
    E.HANDOFF_CONFLICT,
)
_CHANGES_QUERY = (
    query_param("project_epoch", ref("Id"), required=True),
    query_param("after_seq", integer(0), required=True, doc="Exclusive; at most the project head."),
    query_param(
        "limit",
        integer(1, CHANGES_LIMIT_MAX, default=CHANGES_LIMIT_DEFAULT),
        doc="Entries scanned (out of range: 400 invalid_change_batch).",
    ),
)
_MAILBOX_QUERY = (
    query_param("box", {"type": "string", "enum": ["inbox", "outbox"]}, required=True),
    query_param("source_id", ref("Id")),
    query_param(
        "include_completed",
        {"type": "boolean"},
        doc="`true` or `false`; defaults to false for the inbox and true for the outbox.",
    ),
    query_param("before_seq", integer(1), doc="Exclusive; `next_before_seq` of the last page."),
    query_param("limit", integer(1, MAILBOX_LIMIT_MAX, default=MAILBOX_LIMIT_DEFAULT)),
)
_SESSIONS_QUERY = (
    query_param("source_id", ref("Id")),
    query_param("before_seq", integer(1), doc="Exclusive; `next_before_seq` of the last page."),
    query_param("limit", integer(1, SESSIONS_LIMIT_MAX, default=SESSIONS_LIMIT_DEFAULT)),
)
_SESSION_FACTS_QUERY = (
    query_param("after_seq", integer(0), doc="Exclusive; `next_after_seq` of the last page."),
    query_param("limit", integer(1, SESSION_FACTS_LIMIT_MAX, default=SESSION_FACTS_LIMIT_DEFAULT)),
)
_SNAPSHOT_QUERY = (
    query_param(
        "limit",
        integer(1, SNAPSHOT_LIMIT_MAX, default=SNAPSHOT_LIMIT_DEFAULT),
        doc="Resources scanned (hidden ones count); a page also ends once its bodies reach 4 MiB.",
    ),
    query_param(
        "page_token",
        {"type": "string"},
        doc="The previous page's `next_page_token` (opaque; bound to the caller and project, "
        "valid 10 minutes): the next page of the same `at_seq`.",
    ),
)
_SEARCH_QUERY = (
    query_param(
        "q",
        text(SEARCH_QUERY_MAX_BYTES, SEARCH_QUERY_MAX_BYTES, what="Plain text, no syntax"),
        required=True,
    ),
    query_param("source_id", ref("Id")),
    query_param("limit", integer(1, SEARCH_LIMIT_MAX, default=SEARCH_LIMIT_DEFAULT)),
    query_param(
        "at_least_seq",
        integer(0),
        doc="Beyond the head: 409 cursor_out_of_range (the lexical index is the head). Beyond "
        "the semantic index: waits a bounded time, then semantic answers 409 index_not_ready "
        "and hybrid/auto answer lexically with a fallback_reason (SEM-5).",
    ),
    query_param(
        "mode",
        {"type": "string", "enum": ["lexical", "semantic", "hybrid", "auto"], "default": "auto"},
        doc="auto: hybrid where the project's semantic index is built, else lexical (SEM-3).",
    ),
)

# -- public -----------------------------------------------------------------------------------

HEALTH = Route(
    "health",
    "GET",
    "/health",
    handlers.health,
    "Liveness, serving mode, the canonical store's schema version and state",
    Auth.PUBLIC,
    answer="Health",
)
READY = Route(
    "ready",
    "GET",
    "/ready",
    handlers.ready,
    "Readiness: 200 while the canonical store takes writes, else 503 and why",
    Auth.PUBLIC,
    answer="Ready",
    unready="Ready",
)
OPENAPI = Route(
    "openapi", "GET", "/openapi.json", handlers.openapi, "This OpenAPI document", Auth.PUBLIC
)

# -- member routes ----------------------------------------------------------------------------

COMMAND = Route(
    "command",
    "POST",
    "/v1/commands",
    handlers.command,
    "Raw resource.put / resource.delete of a custom.* resource",
    body="RawCommand",
    answer="Receipt",
    errors=(E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.STALE_REVISION, E.SECRET_REJECTED),
    batch=True,
)
CHANGES_LIVE = Route(
    "changes_live",
    "GET",
    f"{P}/changes/live",
    handlers.changes_live,
    "Live change feed over a WebSocket: catch-up pages, then every commit",
    upgrade=True,
    query=_CHANGES_QUERY,
    errors=(*_CURSOR, E.UPGRADE_REQUIRED),
)

_MEMBER = (
    COMMAND,
    Route(
        "identity",
        "GET",
        f"{P}/identity",
        handlers.identity,
        "The caller's identity and role in the project",
        answer="Identity",
        store_read=True,
    ),
    Route(
        "resource",
        "GET",
        f"{P}/resources/{{kind}}/{{resource_id}}",
        handlers.resource,
        "The exact current body or tombstone of one resource",
        answer="Resource",
        errors=(E.RESOURCE_NOT_FOUND,),
        store_read=True,
    ),
    Route(
        "changes",
        "GET",
        f"{P}/changes",
        handlers.changes,
        "Metadata-only change entries after a cursor",
        answer="ChangeBatch",
        query=_CHANGES_QUERY,
        errors=_CURSOR,
        store_read=True,
    ),
    Route(
        "changes_materialized",
        "GET",
        f"{P}/changes/materialized",
        handlers.changes_materialized,
        "Change entries with the exact body at each revision",
        answer="MaterializedBatch",
        query=_CHANGES_QUERY,
        errors=_CURSOR,
        store_read=True,
    ),
    CHANGES_LIVE,
    Route(
        "snapshot",
        "GET",
        f"{P}/snapshot",
        handlers.snapshot,
        "A page of the state at one sequence; `next_page_token` pages on at that sequence",
        answer="Snapshot",
        query=_SNAPSHOT_QUERY,
        errors=(E.SNAPSHOT_EXPIRED,),
        store_read=True,
    ),
    Route(
        "create_session",
        "POST",
        f"{P}/sessions",
        handlers.create_session,
        "session.create",
        body="SessionCreate",
        answer="Receipt",
        errors=(*_CREATE, E.SECRET_REJECTED),
        batch=True,
    ),
    Route(
        "sessions",
        "GET",
        f"{P}/sessions",
        handlers.sessions,
        "The project's sessions, newest first",
        answer="Sessions",
        query=_SESSIONS_QUERY,
        store_read=True,
    ),
    Route(
        "session_facts",
        "GET",
        f"{P}/sessions/{{session_id}}/facts",
        handlers.session_facts,
        "A session's facts in commit order",
        answer="SessionFacts",
        query=_SESSION_FACTS_QUERY,
        errors=(E.RESOURCE_NOT_FOUND,),
        store_read=True,
    ),
    Route(
        "create_fact",
        "POST",
        f"{P}/facts",
        handlers.create_fact,
        "fact.create (source and actor inherited server-side)",
        body="FactCreate",
        answer="Receipt",
        errors=(E.RESOURCE_NOT_FOUND, *_CREATE, E.SECRET_REJECTED),
        batch=True,
    ),
    Route(
        "create_context",
        "POST",
        f"{P}/handoff-contexts",
        handlers.create_context,
        "handoff_context.create: an immutable packet for one handoff route",
        body="HandoffContextCreate",
        answer="Receipt",
        errors=(E.RESOURCE_NOT_FOUND, *_CREATE, E.SECRET_REJECTED),
        batch=True,
    ),
    Route(
        "send_handoff",
        "POST",
        f"{P}/handoffs",
        handlers.send_handoff,
        "handoff.send to another active writer",
        body="HandoffSend",
        answer="Receipt",
        errors=(E.RESOURCE_NOT_FOUND, *_CREATE, E.HANDOFF_CONFLICT, E.SECRET_REJECTED),
        batch=True,
    ),
    Route(
        "mailbox",
        "GET",
        f"{P}/handoffs",
        handlers.mailbox,
        "The caller's inbox or outbox, newest first",
        answer="Mailbox",
        query=_MAILBOX_QUERY,
        store_read=True,
    ),
    Route(
        "handoff_status",
        "GET",
        f"{P}/handoffs/{{handoff_id}}",
        handlers.handoff_status,
        "{revision, record} of a handoff, for its sender and receiver",
        answer="HandoffStatus",
        errors=(E.HANDOFF_ACTOR_MISMATCH, E.RESOURCE_NOT_FOUND),
        store_read=True,
    ),
    Route(
        "accept",
        "POST",
        f"{P}/handoffs/{{handoff_id}}/accept",
        handlers.accept,
        "handoff.accept: claim the handoff with a lease",
        body="ClaimTransition",
        answer="Receipt",
        errors=_TRANSITION,
        batch=True,
    ),
    Route(
        "heartbeat",
        "POST",
        f"{P}/handoffs/{{handoff_id}}/heartbeat",
        handlers.heartbeat,
        "handoff.heartbeat: renew the live claim's lease",
        body="ClaimTransition",
        answer="Receipt",
        errors=_TRANSITION,
        batch=True,
    ),
    Route(
        "return",
        "POST",
        f"{P}/handoffs/{{handoff_id}}/return",
        handlers.return_,
        "handoff.return: complete (succeeded) or release (failed) the claim",
        body="ReturnTransition",
        answer="Receipt",
        errors=(*_TRANSITION, E.ARTIFACT_NOT_FOUND),
        batch=True,
    ),
    Route(
        "members",
        "GET",
        f"{P}/members",
        handlers.members,
        "Every member of the project: actor id, kind, role and status",
        answer="Members",
        store_read=True,
    ),
    Route(
        "search",
        "GET",
        f"{P}/search",
        handlers.search,
        "Search over facts by words, meaning or both (SRCH-*, SEM-*)",
        answer="Search",
        query=_SEARCH_QUERY,
        errors=(E.CURSOR_OUT_OF_RANGE, E.INDEX_NOT_READY, E.SEMANTIC_UNAVAILABLE),
        store_read=True,
        costly=True,
        semantic=True,
    ),
    Route(
        "mcp",
        "POST",
        f"{P}/mcp",
        handlers.mcp,
        "MCP over stateless streamable HTTP: one JSON-RPC message per POST (SPEC.md MCP-*)",
        body="JsonRpcMessage",
        answer="JsonRpcAnswer",
        accepted="A JSON-RPC notification or a client's response: accepted, no body",
        errors=(E.ORIGIN_NOT_ALLOWED,),
        inline_bodies=True,
        forwarded_headers=frozenset({"origin", "mcp-protocol-version", "mcp-method", "mcp-name"}),
    ),
)

# -- admin routes (ADM-*) ---------------------------------------------------------------------

ADMIN_BOOTSTRAP = Route(
    "admin_bootstrap",
    "POST",
    "/v1/admin/bootstrap",
    admin.admin_bootstrap,
    "Admin: idempotent bootstrap of tenant, project, actor and token",
    Auth.ADMIN,
    body="AdminBootstrap",
    answer="Identity",
    errors=(E.IDENTITY_MISMATCH,),
)
ADMIN_MEMBERS = Route(
    "admin_members",
    "POST",
    "/v1/admin/members",
    admin.admin_members,
    "Admin: change a member's role or status",
    Auth.ADMIN,
    body="AdminMember",
    answer="AdminMembership",
    errors=(E.RESOURCE_NOT_FOUND,),
)
ADMIN_REVOKE_TOKEN = Route(
    "admin_revoke_token",
    "POST",
    "/v1/admin/tokens/revoke",
    admin.admin_revoke_token,
    "Admin: revoke a token by its digest",
    Auth.ADMIN,
    body="AdminRevoke",
    answer="AdminRevoked",
    errors=(E.RESOURCE_NOT_FOUND,),
)
ADMIN_EXPORT = Route(
    "admin_export",
    "GET",
    "/v1/admin/tenants/{tenant_id}/export",
    admin.admin_export,
    "Admin: export a tenant (or one project) as JSON Lines",
    Auth.ADMIN,
    answer="Archive",
    answer_media=NDJSON,
    query=(
        query_param("project_id", ref("Id"), doc="Export one project instead of the whole tenant."),
        query_param("include_token_digests", {"type": "boolean", "default": False}),
        query_param(
            "include_bodies",
            {"type": "boolean", "default": False},
            doc="Carry the current publications' artifact bodies as chunked lines (ART-12).",
        ),
    ),
    errors=(E.RESOURCE_NOT_FOUND, E.ARTIFACT_NOT_FOUND, E.ARTIFACT_STORE_UNAVAILABLE),
)
ADMIN_IMPORT = Route(
    "admin_import",
    "POST",
    "/v1/admin/import",
    admin.admin_import,
    "Admin: import an export into scopes that do not exist yet",
    Auth.ADMIN,
    body="Archive",
    media_type=NDJSON,
    max_body=MAX_ARCHIVE_BYTES,
    streamed=True,
    answer="AdminImported",
    errors=(E.IDENTITY_MISMATCH, E.RESOURCE_ALREADY_EXISTS),
)
ADMIN_DELETE_TENANT = Route(
    "admin_delete_tenant",
    "DELETE",
    "/v1/admin/tenants/{tenant_id}",
    admin.admin_delete_tenant,
    "Admin: delete every row of a tenant",
    Auth.ADMIN,
    answer="AdminDeleted",
    query=(query_param("confirm", {"type": "string"}, doc="Must repeat the tenant id."),),
    errors=(E.RESOURCE_NOT_FOUND,),
)

ROUTES: tuple[Route, ...] = (
    HEALTH,
    READY,
    OPENAPI,
    *_MEMBER,
    *ARTIFACT_ROUTES,
    *GRANT_ROUTES,
    ADMIN_BOOTSTRAP,
    ADMIN_MEMBERS,
    ADMIN_REVOKE_TOKEN,
    ADMIN_EXPORT,
    ADMIN_IMPORT,
    ADMIN_DELETE_TENANT,
    *CONSOLE_ROUTES,
)

_ROUTER = Router(ROUTES)
resolve = _ROUTER.resolve


def route_named(name: str) -> Route:
    """The route whose `name` is `name`: a front that routed a request hands the object behind
    it the name instead of the path to route again."""
    route = _ROUTER.named(name)
    if route is None:
        raise fail(ErrorCode.ROUTE_NOT_FOUND, f"no route named {name}")
    return route
