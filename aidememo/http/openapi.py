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
    CONTENT_MAX_BYTES,
    FOCUS_MAX_BYTES,
    ID_MAX_BYTES,
    INT64_MAX,
    MAILBOX_LIMIT_DEFAULT,
    MAILBOX_LIMIT_MAX,
    MAX_REQUEST_BODY_BYTES,
    NAME_MAX_BYTES,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_BYTES,
    TOPIC_MAX_BYTES,
)
from aidememo.http.render import json_bytes
from aidememo.http.routes import ROUTES, Route

Schema = dict[str, Any]

JSON = "application/json"
_REF = "#/components/schemas/"


def ref(name: str) -> Schema:
    """A reference to a component schema."""
    return {"$ref": _REF + name}


def nullable(schema: Schema) -> Schema:
    """`schema` or null."""
    return {"anyOf": [schema, {"type": "null"}]}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """A closed object: exactly these properties, the first group required."""
    properties = {**required, **(optional or {})}
    schema: Schema = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    return schema


def integer(minimum: int = 0, maximum: int = INT64_MAX, **extra: Any) -> Schema:
    """A signed 64-bit integer in `[minimum, maximum]`."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum, **extra}


def text(max_chars: int, max_bytes: int, *, min_length: int = 1, what: str = "") -> Schema:
    """A string limited in UTF-8 bytes (given in characters as the nearest JSON Schema can)."""
    note = f"{min_length}-{max_bytes} bytes of UTF-8"
    return {
        "type": "string",
        "minLength": min_length,
        "maxLength": max_chars,
        "description": f"{what} ({note})." if what else f"{note}.",
    }


# -- component schemas ----------------------------------------------------------------------

_NO_CONTROL = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$"


def _schemas() -> dict[str, Schema]:
    s: dict[str, Schema] = {}
    s["ErrorCode"] = {
        "type": "string",
        "enum": [code.value for code in ErrorCode],
        "description": "Stable snake_case error code; clients switch on it, never on message.",
    }
    s["Error"] = obj(
        {
            "error": obj(
                {"code": ref("ErrorCode"), "message": {"type": "string"}},
            )
        }
    )
    s["Id"] = {
        "type": "string",
        "pattern": f"^[A-Za-z0-9\\-_.:@]{{1,{ID_MAX_BYTES}}}$",
        "minLength": 1,
        "maxLength": ID_MAX_BYTES,
        "description": f"Identifier: 1-{ID_MAX_BYTES} bytes of [A-Za-z0-9-_.:@].",
    }
    s["Name"] = {
        "type": "string",
        "pattern": f"^[a-z0-9._\\-]{{1,{NAME_MAX_BYTES}}}$",
        "minLength": 1,
        "maxLength": NAME_MAX_BYTES,
        "description": f"Kind or operation name: 1-{NAME_MAX_BYTES} bytes of [a-z0-9._-].",
    }
    s["CustomKind"] = {
        "type": "string",
        "pattern": f"^custom\\.[a-z0-9._\\-]{{0,{NAME_MAX_BYTES - 7}}}$",
        "maxLength": NAME_MAX_BYTES,
        "description": "A resource kind writable through POST /v1/commands: custom.*.",
    }
    s["Seq"] = integer(1, description="A project sequence number (1 is the first change).")
    s["Revision"] = integer(1, description="A resource revision (1 is the first write).")
    s["TimestampMs"] = integer(0, description="Milliseconds since the Unix epoch.")
    s["Scope"] = obj({"tenant_id": ref("Id"), "project_id": ref("Id")})
    s["ResourceRef"] = obj({"kind": ref("Name"), "id": ref("Id")})
    s["Receipt"] = obj(
        {
            "command_id": ref("Id"),
            "fingerprint": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "SHA-256 hex of the canonical command material.",
            },
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "project_seq": ref("Seq"),
            "resource": ref("ResourceRef"),
            "revision": ref("Revision"),
            "committed_at_ms": ref("TimestampMs"),
        }
    )
    s["Health"] = obj(
        {
            "status": {"const": "ok"},
            "mode": {"type": "string", "enum": ["single_node", "postgres", "edge"]},
            "schema_version": integer(1, description="The canonical store's schema version."),
        }
    )
    s["Identity"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "project_epoch": ref("Id"),
            "actor_id": ref("Id"),
            "role": {"type": "string", "enum": ["owner", "admin", "writer", "reader"]},
        }
    )
    s["State"] = {
        "oneOf": [
            obj({"state": {"const": "present"}, "body": {"description": "The exact JSON body."}}),
            obj({"state": {"const": "deleted"}}),
        ]
    }
    s["Resource"] = obj(
        {
            "scope": ref("Scope"),
            "resource": ref("ResourceRef"),
            "revision": ref("Revision"),
            "state": ref("State"),
        }
    )
    s["Cursor"] = obj({"project_epoch": ref("Id"), "after_seq": integer(0)})
    s["ChangeEntry"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "project_epoch": ref("Id"),
            "seq": ref("Seq"),
            "resource": ref("ResourceRef"),
            "operation": {"type": "string", "enum": ["upsert", "delete"]},
            "revision": ref("Revision"),
            "actor_id": ref("Id"),
            "committed_at_ms": ref("TimestampMs"),
        }
    )
    s["MaterializedEntry"] = obj({"change": ref("ChangeEntry"), "resource": ref("Resource")})
    batch_doc = (
        "`limit` counts scanned entries: entries the caller may not see are left out but still "
        "advance `next_cursor`, so a page may be empty with `has_more: true`."
    )
    for name, entry in (("ChangeBatch", "ChangeEntry"), ("MaterializedBatch", "MaterializedEntry")):
        s[name] = {
            **obj(
                {
                    "scope": ref("Scope"),
                    "cursor": ref("Cursor"),
                    "entries": {"type": "array", "items": ref(entry)},
                    "next_cursor": ref("Cursor"),
                    "has_more": {"type": "boolean"},
                }
            ),
            "description": batch_doc,
        }
    s["Snapshot"] = obj(
        {
            "scope": ref("Scope"),
            "project_epoch": ref("Id"),
            "at_seq": integer(0),
            "resources": {"type": "array", "items": ref("Resource")},
        }
    )
    s["HandoffRecord"] = obj(
        {
            "handoff_id": ref("Id"),
            "session_id": ref("Id"),
            "source_id": ref("Id"),
            "from_actor": ref("Id"),
            "to_actor": ref("Id"),
            "focus": nullable({"type": "string", "maxLength": FOCUS_MAX_BYTES}),
            "done_when": nullable({"type": "string", "maxLength": FOCUS_MAX_BYTES}),
            "context_id": nullable(ref("Id")),
            "status": {"type": "string", "enum": ["pending", "accepted", "completed"]},
            "claim_id": nullable(ref("Id")),
            "claim_heartbeat_at_ms": nullable(ref("TimestampMs")),
            "claim_expires_at_ms": nullable(ref("TimestampMs")),
            "attempt_count": integer(0),
            "result_fact_id": nullable(ref("Id")),
            "outcome": nullable({"type": "string", "enum": ["succeeded", "failed"]}),
        }
    )
    s["HandoffStatus"] = obj({"revision": ref("Revision"), "record": ref("HandoffRecord")})
    s["Mailbox"] = obj(
        {
            "assignments": {
                "type": "array",
                "maxItems": MAILBOX_LIMIT_MAX,
                "items": obj(
                    {
                        "project_seq": ref("Seq"),
                        "revision": ref("Revision"),
                        "record": ref("HandoffRecord"),
                    }
                ),
            },
            "next_before_seq": nullable(ref("Seq")),
        }
    )
    s["SearchResult"] = obj(
        {
            "fact_id": ref("Id"),
            "session_id": ref("Id"),
            "source_id": ref("Id"),
            "actor_id": ref("Id"),
            "content": {"type": "string"},
            "score": {"type": "number", "description": "BM25; higher is better."},
        }
    )
    s["Search"] = obj(
        {
            "project_epoch": ref("Id"),
            "index_seq": integer(0),
            "mode": {"const": "lexical"},
            "semantic_model": {"type": "null"},
            "results": {
                "type": "array",
                "maxItems": SEARCH_LIMIT_MAX,
                "items": ref("SearchResult"),
            },
        }
    )
    # -- request bodies --
    s["JsonObject"] = {
        "type": "object",
        "description": "Any JSON object (nesting at most 64 deep, integers within int64).",
    }
    raw_common = {
        "command_id": ref("Id"),
        "project_id": ref("Id"),
        "resource": obj({"kind": ref("CustomKind"), "id": ref("Id")}),
    }
    revision = nullable(integer(1))
    s["RawCommand"] = {
        "description": "A raw put or delete of a custom.* resource; `expected_revision` null or "
        "absent is an unconditional write.",
        "oneOf": [
            obj(
                {
                    **raw_common,
                    "operation": {"const": "resource.put"},
                    "change": {"const": "upsert"},
                    "payload": ref("JsonObject"),
                },
                {"expected_revision": revision},
            ),
            obj(
                {
                    **raw_common,
                    "operation": {"const": "resource.delete"},
                    "change": {"const": "delete"},
                },
                {"expected_revision": revision, "payload": {"type": "null"}},
            ),
        ],
    }
    topic = {
        **text(TOPIC_MAX_BYTES, TOPIC_MAX_BYTES, what="Not blank, no control characters"),
        "allOf": [{"pattern": _NO_CONTROL}, {"pattern": "[^\\s\\u0085]"}],
    }
    content = text(CONTENT_MAX_BYTES, CONTENT_MAX_BYTES)
    focus = nullable(text(FOCUS_MAX_BYTES, FOCUS_MAX_BYTES, min_length=0))
    payloads = {
        "SessionPayload": obj(
            {"session_id": ref("Id"), "topic": topic},
            {"source_id": nullable(ref("Id"))},
        ),
        "FactPayload": obj({"fact_id": ref("Id"), "session_id": ref("Id"), "content": content}),
        "HandoffContextPayload": obj(
            {
                "context_id": ref("Id"),
                "handoff_id": ref("Id"),
                "session_id": ref("Id"),
                "to_actor": ref("Id"),
                "content": content,
            }
        ),
        "HandoffPayload": obj(
            {"handoff_id": ref("Id"), "session_id": ref("Id"), "to_actor": ref("Id")},
            {"focus": focus, "done_when": focus, "context_id": nullable(ref("Id"))},
        ),
        "ClaimPayload": obj({"claim_id": ref("Id")}),
        "ReturnPayload": obj(
            {
                "claim_id": ref("Id"),
                "result_fact_id": ref("Id"),
                "outcome": {"type": "string", "enum": ["succeeded", "failed"]},
            }
        ),
    }
    s.update(payloads)
    for name, payload in (
        ("SessionCreate", "SessionPayload"),
        ("FactCreate", "FactPayload"),
        ("HandoffContextCreate", "HandoffContextPayload"),
        ("HandoffSend", "HandoffPayload"),
    ):
        s[name] = obj({"command_id": ref("Id"), "payload": ref(payload)})
    for name, payload in (
        ("ClaimTransition", "ClaimPayload"),
        ("ReturnTransition", "ReturnPayload"),
    ):
        s[name] = obj(
            {
                "command_id": ref("Id"),
                "expected_revision": integer(1),
                "payload": ref(payload),
            }
        )
    # -- administration (admin token) --
    digest = {
        "type": "string",
        "pattern": "^[0-9a-f]{64}$",
        "description": "SHA-256 of the token text, 64 lowercase hex characters.",
    }
    role = {"type": "string", "enum": ["owner", "admin", "writer", "reader"]}
    status = {"type": "string", "enum": ["active", "suspended"]}
    s["AdminBootstrap"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "token_sha256": digest,
        },
        {
            "actor_kind": nullable({"type": "string", "enum": ["agent", "human", "service"]}),
            "role": nullable(role),
            "project_epoch": nullable(ref("Id")),
        },
    )
    s["AdminMember"] = obj(
        {"tenant_id": ref("Id"), "project_id": ref("Id"), "actor_id": ref("Id")},
        {"role": nullable(role), "status": nullable(status)},
    )
    s["AdminMembership"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_id": ref("Id"),
            "actor_id": ref("Id"),
            "role": role,
            "status": status,
        }
    )
    s["AdminRevoke"] = obj({"token_sha256": digest})
    s["AdminRevoked"] = obj({"revoked": {"const": True}})
    counts = {"type": "object", "additionalProperties": integer(0)}
    s["AdminImported"] = obj(
        {
            "tenant_id": ref("Id"),
            "project_epochs": {"type": "object", "additionalProperties": ref("Id")},
            "counts": counts,
        }
    )
    s["AdminDeleted"] = obj({"tenant_id": ref("Id"), "removed": counts})
    s["Archive"] = {
        "type": "string",
        "description": "JSON Lines: one record per line, the manifest last.",
    }
    s["LeaseExpired"] = obj(
        {"type": {"const": "lease_expired"}, "handoff_id": ref("Id"), "claim_id": ref("Id")}
    )
    s["LiveMessage"] = {
        "description": "One text message of the live change feed (LIVE-2..LIVE-7): a change "
        "batch in the shape of /changes/materialized, a lease notice, or an error just before "
        "the close.",
        "oneOf": [ref("MaterializedBatch"), ref("LeaseExpired"), ref("Error")],
    }
    return s


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
    "openapi": (),
    "identity": (),
    "command": (E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.STALE_REVISION),
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
    "create_session": (E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS),
    "create_fact": (E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS),
    "create_context": (E.RESOURCE_NOT_FOUND, E.COMMAND_CONFLICT, E.RESOURCE_ALREADY_EXISTS),
    "send_handoff": (
        E.RESOURCE_NOT_FOUND,
        E.COMMAND_CONFLICT,
        E.RESOURCE_ALREADY_EXISTS,
        E.HANDOFF_CONFLICT,
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
    "health": "Liveness, serving mode and the canonical store's schema version",
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
    426: "Upgrade required: connect with a WebSocket (every other check passed)",
    503: "Storage temporarily unavailable; retry the identical request",
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
    "`feed_overflow` (origin: the client read too slowly; reconnect from the last "
    "`next_cursor`), 4503 `storage_failure`. Messages the client "
    "sends are ignored.",
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
            "schemas": _schemas(),
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
