"""The OpenAPI 3.1 document of the HTTP contract, built as Python data.

It lives in code, not in a data file, so the edge bundle (which carries only `.py` modules)
serves the same document as the origin. `openapi.json` at the repository root is a copy kept
in sync by a test (`scripts/gen_openapi.py` writes it).

Everything route-specific (summary, parameters, body and answer schemas, limits, who may
call it, its domain errors) is read from the route table it is given (`routes.ROUTES`); this
module only assembles it. The document is exact: every route, every path and query parameter with
its grammar and range, every request body with `additionalProperties: false`, the 200 shape
of every answer, and each error status a route can answer with the error codes it can carry.
Byte limits (content, topic, focus, `q`) are given as `maxLength` in characters with the byte
limit in the description: JSON Schema cannot count UTF-8 bytes, so the server is the judge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aidememo import __version__
from aidememo.domain.errors import HTTP_STATUS, STORAGE_RETRY_AFTER_S, ErrorCode
from aidememo.http.components import component_schemas
from aidememo.http.schemas import JSON, Schema, ref
from aidememo.http.types import Route

# -- parameters -----------------------------------------------------------------------------


def _path(name: str, schema: Schema) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": schema}


# Path parameters by name: the same grammar wherever a parameter appears.
_PATH_PARAMS: dict[str, Schema] = {
    "project_id": _path("project_id", ref("Id")),
    "kind": _path("kind", ref("Name")),
    "resource_id": _path("resource_id", ref("Id")),
    "handoff_id": _path("handoff_id", ref("Id")),
    "session_id": _path("session_id", ref("Id")),
    "tenant_id": _path("tenant_id", ref("Id")),
    "reservation_id": _path("reservation_id", ref("Id")),
    "artifact_id": _path("artifact_id", ref("Id")),
    "asset": _path("asset", {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]*$"}),
}

# -- operations -----------------------------------------------------------------------------

E = ErrorCode


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
        if route.admin:
            codes += (E.ADMIN_DISABLED, E.ADMIN_REQUIRED)
        else:
            codes.append(E.PROJECT_UNAUTHORIZED)
        codes += route.errors
        codes.append(E.STORAGE_FAILURE)
        if route.method != "GET":
            codes.append(E.STORAGE_FULL)  # a write the store had no room for (ERR-4)
    else:
        codes += route.errors  # a public route's own refusals (the console's, CONSOLE-4)
    return codes


_STATUS_TEXT = {
    400: "Bad request",
    401: "Authentication failed",
    403: "Forbidden",
    404: "Not found",
    409: "Conflict",
    411: "Length required: send Content-Length",
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
    op: Schema = {"operationId": route.name, "summary": route.summary}
    params = [_PATH_PARAMS[seg[1:-1]] for seg in route.pattern if seg.startswith("{")]
    params += [param.openapi() for param in route.query]
    if params:
        op["parameters"] = params
    if route.body is not None:
        media = route.media_type
        what = "JSON; unknown fields are rejected" if media == JSON else media
        op["requestBody"] = {
            "required": True,
            "description": f"{what}; at most {route.max_body} bytes.",
            "content": {media: {"schema": ref(route.body)}},
        }
    ok: Schema = {"description": "OK"}
    if route.upgrade:
        ok = _LIVE_UPGRADE
    elif route.answer is None:
        ok["content"] = {JSON: {"schema": {"type": "object"}}}
    else:
        ok["content"] = {route.answer_media: {"schema": ref(route.answer)}}
    responses: dict[str, Schema] = {"101" if route.upgrade else "200": ok}
    if route.accepted is not None:
        responses["202"] = {"description": route.accepted}
    by_status: dict[int, list[ErrorCode]] = {}
    for code in route_errors(route):
        by_status.setdefault(HTTP_STATUS[code], []).append(code)
    for status in sorted(by_status):
        responses[str(status)] = _error_response(_STATUS_TEXT[status], by_status[status])
    if route.unready is not None:
        responses["503"] = {
            "description": "Not ready: the store is read_only, full or unavailable",
            "content": {JSON: {"schema": ref(route.unready)}},
        }
    op["responses"] = responses
    if route.admin:
        op["security"] = [{"admin": []}]
    else:
        op["security"] = [{"bearer": []}] if route.authenticated else []
    return op


def document(routes: Sequence[Route]) -> dict[str, Any]:
    """The OpenAPI document of a route table, as a dict."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
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


def document_text(routes: Sequence[Route]) -> str:
    """The document as indented JSON with a final newline: the committed `openapi.json`."""
    return json.dumps(document(routes), indent=2, ensure_ascii=False) + "\n"
