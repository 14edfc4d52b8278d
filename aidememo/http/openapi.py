"""The OpenAPI 3.1 document of the HTTP contract, built as Python data.

It lives in code, not in a data file, so the edge bundle (which carries only `.py` modules)
serves the same document as the origin. `openapi.json` at the repository root is a copy kept
in sync by a test (`scripts/gen_openapi.py` writes it).

The document is exact: every route of `routes.ROUTES`, every path and query parameter with
its grammar and range, every request body with `additionalProperties: false`, the 200 shape
of every answer, and each error status a route can answer with the error codes it can carry.
Byte limits (content, topic, focus, `q`) are given as `maxLength` in characters with the byte
limit in the description: JSON Schema cannot count UTF-8 bytes, so the server is the judge.
"""

from __future__ import annotations

import functools
from typing import Any

from aidememo import __version__
from aidememo.domain.errors import HTTP_STATUS, STORAGE_RETRY_AFTER_S, ErrorCode
from aidememo.domain.limits import (
    CHANGES_LIMIT_DEFAULT,
    CHANGES_LIMIT_MAX,
    MAILBOX_LIMIT_DEFAULT,
    MAILBOX_LIMIT_MAX,
    MAX_REQUEST_BODY_BYTES,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_BYTES,
)
from aidememo.http.openapi_schemas import (
    JSON,
    Schema,
    component_schemas,
    integer,
    ref,
    text,
)
from aidememo.http.render import json_bytes
from aidememo.http.routes import ROUTES, Route

# -- parameters -----------------------------------------------------------------------------


def _path(name: str, schema: Schema) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _query(name: str, schema: Schema, *, required: bool = False, doc: str = "") -> Schema:
    param: Schema = {"name": name, "in": "query", "required": required, "schema": schema}
    if doc:
        param["description"] = doc
    return param


_PATH_PARAMS: dict[str, Schema] = {
    "project_id": _path("project_id", ref("Id")),
    "kind": _path("kind", ref("Name")),
    "resource_id": _path("resource_id", ref("Id")),
    "handoff_id": _path("handoff_id", ref("Id")),
    "tenant_id": _path("tenant_id", ref("Id")),
}

_CHANGES_QUERY = [
    _query("project_epoch", ref("Id"), required=True),
    _query("after_seq", integer(0), required=True, doc="Exclusive; at most the project head."),
    _query(
        "limit",
        integer(1, CHANGES_LIMIT_MAX, default=CHANGES_LIMIT_DEFAULT),
        doc="Entries scanned (out of range: 400 invalid_change_batch).",
    ),
]

_QUERY: dict[str, list[Schema]] = {
    "changes": _CHANGES_QUERY,
    "changes_materialized": _CHANGES_QUERY,
    "changes_live": _CHANGES_QUERY,
    "mailbox": [
        _query("box", {"type": "string", "enum": ["inbox", "outbox"]}, required=True),
        _query("source_id", ref("Id")),
        _query(
            "include_completed",
            {"type": "boolean"},
            doc="`true` or `false`; defaults to false for the inbox and true for the outbox.",
        ),
        _query("before_seq", integer(1), doc="Exclusive; `next_before_seq` of the last page."),
        _query("limit", integer(1, MAILBOX_LIMIT_MAX, default=MAILBOX_LIMIT_DEFAULT)),
    ],
    "search": [
        _query(
            "q",
            text(SEARCH_QUERY_MAX_BYTES, SEARCH_QUERY_MAX_BYTES, what="Plain text, no syntax"),
            required=True,
        ),
        _query("source_id", ref("Id")),
        _query("limit", integer(1, SEARCH_LIMIT_MAX, default=SEARCH_LIMIT_DEFAULT)),
        _query(
            "at_least_seq",
            integer(0),
            doc="Beyond the head: 409 cursor_out_of_range (the lexical index is the head).",
        ),
        _query("mode", {"type": "string", "enum": ["lexical"], "default": "lexical"}),
    ],
    "admin_export": [
        _query("project_id", ref("Id"), doc="Export one project instead of the whole tenant."),
        _query("include_token_digests", {"type": "boolean", "default": False}),
    ],
    "admin_delete_tenant": [
        _query("confirm", {"type": "string"}, doc="Must repeat the tenant id."),
    ],
}

# -- operations -----------------------------------------------------------------------------

E = ErrorCode
_BODIES: dict[str, str] = {
    "command": "RawCommand",
    "create_session": "SessionCreate",
    "create_fact": "FactCreate",
    "create_context": "HandoffContextCreate",
    "send_handoff": "HandoffSend",
    "accept": "ClaimTransition",
    "heartbeat": "ClaimTransition",
    "return_": "ReturnTransition",
    "admin_bootstrap": "AdminBootstrap",
    "admin_members": "AdminMember",
    "admin_revoke_token": "AdminRevoke",
    "admin_import": "Archive",
}
_OK: dict[str, str] = {
    "health": "Health",
    "ready": "Ready",
    "identity": "Identity",
    "resource": "Resource",
    "changes": "ChangeBatch",
    "changes_materialized": "MaterializedBatch",
    "snapshot": "Snapshot",
    "mailbox": "Mailbox",
    "handoff_status": "HandoffStatus",
    "search": "Search",
    **dict.fromkeys(_BODIES, "Receipt"),
    "admin_bootstrap": "Identity",
    "admin_members": "AdminMembership",
    "admin_revoke_token": "AdminRevoked",
    "admin_export": "Archive",
    "admin_import": "AdminImported",
    "admin_delete_tenant": "AdminDeleted",
}
_TRANSITION_ERRORS = (
    E.HANDOFF_ACTOR_MISMATCH,
    E.RESOURCE_NOT_FOUND,
    E.COMMAND_CONFLICT,
    E.STALE_REVISION,
    E.HANDOFF_CONFLICT,
)
# Errors of the domain rules, beyond the request checks every route shares.
_DOMAIN_ERRORS: dict[str, tuple[ErrorCode, ...]] = {
    "health": (),
    "ready": (),
    "openapi": (),
    "identity": (),
    "command": (E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.STALE_REVISION, E.SECRET_REJECTED),
    "resource": (E.RESOURCE_NOT_FOUND,),
    "changes": (E.INVALID_CHANGE_BATCH, E.CURSOR_EPOCH_MISMATCH, E.CURSOR_OUT_OF_RANGE),
    "changes_materialized": (
        E.INVALID_CHANGE_BATCH,
        E.CURSOR_EPOCH_MISMATCH,
        E.CURSOR_OUT_OF_RANGE,
    ),
    "changes_live": (
        E.INVALID_CHANGE_BATCH,
        E.CURSOR_EPOCH_MISMATCH,
        E.CURSOR_OUT_OF_RANGE,
        E.UPGRADE_REQUIRED,
    ),
    "snapshot": (E.SNAPSHOT_TOO_LARGE,),
    "create_session": (E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS, E.SECRET_REJECTED),
    "create_fact": (
        E.RESOURCE_NOT_FOUND,
        E.COMMAND_CONFLICT,
        E.RESOURCE_ALREADY_EXISTS,
        E.SECRET_REJECTED,
    ),
    "create_context": (
        E.RESOURCE_NOT_FOUND,
        E.COMMAND_CONFLICT,
        E.RESOURCE_ALREADY_EXISTS,
        E.SECRET_REJECTED,
    ),
    "send_handoff": (
        E.RESOURCE_NOT_FOUND,
        E.COMMAND_CONFLICT,
        E.RESOURCE_ALREADY_EXISTS,
        E.HANDOFF_CONFLICT,
        E.SECRET_REJECTED,
    ),
    "mailbox": (),
    "handoff_status": (E.HANDOFF_ACTOR_MISMATCH, E.RESOURCE_NOT_FOUND),
    "accept": _TRANSITION_ERRORS,
    "heartbeat": _TRANSITION_ERRORS,
    "return_": _TRANSITION_ERRORS,
    "search": (E.CURSOR_OUT_OF_RANGE,),
    "admin_bootstrap": (E.IDENTITY_MISMATCH,),
    "admin_members": (E.RESOURCE_NOT_FOUND,),
    "admin_revoke_token": (E.RESOURCE_NOT_FOUND,),
    "admin_export": (E.RESOURCE_NOT_FOUND,),
    "admin_import": (E.IDENTITY_MISMATCH, E.RESOURCE_ALREADY_EXISTS),
    "admin_delete_tenant": (E.RESOURCE_NOT_FOUND,),
}
_SUMMARIES: dict[str, str] = {
    "health": "Liveness, serving mode, the canonical store's schema version and state",
    "ready": "Readiness: 200 while the canonical store takes writes, else 503 and why",
    "openapi": "This OpenAPI document",
    "command": "Raw resource.put / resource.delete of a custom.* resource",
    "identity": "The caller's identity and role in the project",
    "resource": "The exact current body or tombstone of one resource",
    "changes": "Metadata-only change entries after a cursor",
    "changes_materialized": "Change entries with the exact body at each revision",
    "changes_live": "Live change feed over a WebSocket: catch-up pages, then every commit",
    "snapshot": "The atomic current state and the head it represents",
    "create_session": "session.create",
    "create_fact": "fact.create (source and actor inherited server-side)",
    "create_context": "handoff_context.create: an immutable packet for one handoff route",
    "send_handoff": "handoff.send to another active writer",
    "mailbox": "The caller's inbox or outbox, newest first",
    "handoff_status": "{revision, record} of a handoff, for its sender and receiver",
    "accept": "handoff.accept: claim the handoff with a lease",
    "heartbeat": "handoff.heartbeat: renew the live claim's lease",
    "return_": "handoff.return: complete (succeeded) or release (failed) the claim",
    "search": "Lexical search over facts",
    "admin_bootstrap": "Admin: idempotent bootstrap of tenant, project, actor and token",
    "admin_members": "Admin: change a member's role or status",
    "admin_revoke_token": "Admin: revoke a token by its digest",
    "admin_export": "Admin: export a tenant (or one project) as JSON Lines",
    "admin_import": "Admin: import an export into scopes that do not exist yet",
    "admin_delete_tenant": "Admin: delete every row of a tenant",
}


def _error_response(description: str, codes: list[ErrorCode]) -> Schema:
    schema: Schema = {
        "allOf": [
            ref("Error"),
            {"properties": {"error": {"properties": {"code": {"enum": [c.value for c in codes]}}}}},
        ]
    }
    response: Schema = {
        "description": f"{description}: {', '.join(c.value for c in codes)}",
        "content": {JSON: {"schema": schema}},
    }
    if HTTP_STATUS[codes[0]] == 503:
        response["headers"] = {
            "Retry-After": {
                "description": f"Seconds to wait before retrying (always {STORAGE_RETRY_AFTER_S}).",
                "schema": {"type": "integer", "minimum": 0},
            }
        }
    return response


def route_errors(route: Route) -> list[ErrorCode]:
    """Every error code `route` can answer with, in the order of the request checks."""
    codes: list[ErrorCode] = []
    if any(seg.startswith("{") for seg in route.pattern):
        # A path parameter that decodes to contain "/" (or is empty) names another path.
        codes.append(E.ROUTE_NOT_FOUND)
    codes.append(E.PAYLOAD_TOO_LARGE)
    if route.has_body:
        codes.append(E.UNSUPPORTED_MEDIA_TYPE)
    if route.authenticated:
        codes.append(E.AUTHENTICATION_FAILED)
    codes.append(E.INVALID_COMMAND)
    if route.authenticated:
        codes.append(E.INVALID_IDENTIFIER)
        codes.append(E.ADMIN_REQUIRED if _is_admin(route) else E.PROJECT_UNAUTHORIZED)
        codes += _DOMAIN_ERRORS[route.handler]
        codes.append(E.STORAGE_FAILURE)
        if route.method != "GET":
            codes.append(E.STORAGE_FULL)  # a write the store had no room for (ERR-4)
    return codes


def _is_admin(route: Route) -> bool:
    return bool(getattr(route, "admin", False))


def _media_type(route: Route) -> str:
    return str(getattr(route, "media_type", JSON))


def _max_body(route: Route) -> int:
    return int(getattr(route, "max_body", MAX_REQUEST_BODY_BYTES))


_STATUS_TEXT = {
    400: "Bad request",
    401: "Authentication failed",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    415: "Unsupported media type",
    422: "A written text holds what looks like a secret (SPEC.md SEC-*)",
    426: "Upgrade required: connect with a WebSocket (every other check passed)",
    503: "Storage temporarily unavailable; retry the identical request",
    507: "Storage full: nothing was written; retry once space is freed (no Retry-After)",
}


_LIVE_UPGRADE: Schema = {
    "description": "Switching Protocols: a WebSocket (SPEC.md LIVE-*), on the origin and on "
    "the edge alike (there the project's Durable Object holds the socket through the "
    "WebSocket Hibernation API and sends lease notices from its alarm). Every check of "
    "/changes runs before the upgrade and a refusal is the HTTP error below. After the "
    "upgrade the server sends JSON text messages (`x-websocket-messages`): first the "
    "materialized pages after the cursor (`limit` entries each, the first one always, empty "
    "when already at the head), then one batch per commit from `seq - 1` to `seq`, filtered "
    "for the caller; a commit it may not see is an empty batch that still advances "
    "`next_cursor`. Participants of a handoff also receive `lease_expired` when its claim's "
    "lease runs out (nothing is written). An error after the upgrade is one "
    '`{"error": ...}` message followed by a close with code 4000 + its HTTP status: 4401 '
    "`authentication_failed` (origin: the token was revoked; the edge does not re-check the "
    "token after the upgrade), 4403 `project_unauthorized` (suspended within 5 s, or "
    "removed), 4409 `cursor_epoch_mismatch` (the project was re-imported), 4429 "
    "`feed_overflow` (origin: more than 1,024 batches or 8 MiB were pending for a client "
    "that read too slowly; reconnect from the last `next_cursor`), 4503 `storage_failure`. "
    "Messages the client sends are ignored; at the origin a frame over 64 KiB closes the "
    "socket with 1009.",
    "x-websocket-messages": ref("LiveMessage"),
}


def _operation(route: Route) -> Schema:
    handler = route.handler
    op: Schema = {
        "operationId": handler.rstrip("_"),
        "summary": _SUMMARIES[handler],
    }
    params = [_PATH_PARAMS[seg[1:-1]] for seg in route.pattern if seg.startswith("{")]
    params += _QUERY.get(handler, [])
    if params:
        op["parameters"] = params
    if route.has_body:
        media = _media_type(route)
        what = "JSON; unknown fields are rejected" if media == JSON else media
        op["requestBody"] = {
            "required": True,
            "description": f"{what}; at most {_max_body(route)} bytes.",
            "content": {media: {"schema": ref(_BODIES[handler])}},
        }
    ok: Schema = {"description": "OK"}
    if handler == "changes_live":
        ok = _LIVE_UPGRADE
    elif handler == "openapi":
        ok["content"] = {JSON: {"schema": {"type": "object"}}}
    elif handler == "admin_export":
        ok["content"] = {"application/x-ndjson": {"schema": ref(_OK[handler])}}
    else:
        ok["content"] = {JSON: {"schema": ref(_OK[handler])}}
    responses: dict[str, Schema] = {"101" if handler == "changes_live" else "200": ok}
    by_status: dict[int, list[ErrorCode]] = {}
    for code in route_errors(route):
        by_status.setdefault(HTTP_STATUS[code], []).append(code)
    for status in sorted(by_status):
        responses[str(status)] = _error_response(_STATUS_TEXT[status], by_status[status])
    if handler == "ready":
        responses["503"] = {
            "description": "Not ready: the store is read_only, full or unavailable",
            "content": {JSON: {"schema": ref("Ready")}},
        }
    op["responses"] = responses
    if _is_admin(route):
        op["security"] = [{"admin": []}]
    else:
        op["security"] = [{"bearer": []}] if route.authenticated else []
    return op


def document() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        path = "/" + "/".join(route.pattern)
        paths.setdefault(path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "aidememo",
            "version": __version__,
            "description": "Memory and coordination service for AI agent teams: the "
            "authenticated single-source-of-truth API. Request checks run in this order: "
            "route (404), method (405), body size (413), content type (415), bearer (401), "
            "body and parameters (400), authorization (403), then the domain rules.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A member's opaque token; the server stores only its SHA-256.",
                },
                "admin": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The admin token whose SHA-256 the server is configured with.",
                },
            },
            "schemas": component_schemas(),
        },
    }


@functools.cache
def document_bytes() -> bytes:
    """The document as compact JSON, built once."""
    return json_bytes(document())


def document_text() -> str:
    """The document as indented JSON with a final newline: the committed `openapi.json`."""
    import json

    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
