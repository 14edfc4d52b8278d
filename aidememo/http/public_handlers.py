"""The public routes' handlers (no token): liveness and readiness (READY-*)."""

from __future__ import annotations

from aidememo.domain.errors import STORE_OK
from aidememo.http.handling import JSON_HEADERS, ok_json
from aidememo.http.render import json_bytes
from aidememo.http.services import Services
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller


def health(
    s: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """Liveness: 200 while the process serves, `{status, mode, schema_version, state}` with
    the store's state (READY-2); `schema_version` is null while the store cannot be read."""
    state = s.readiness.state()
    body = {
        "status": "ok",
        "mode": s.store.mode,
        "schema_version": s.readiness.schema_version,
        "state": state,
    }
    return ok_json(body)


def ready(s: Services, request: Request, params: dict[str, str], caller: Caller | None) -> Response:
    """Readiness: 200 `{ready: true, ...}` while the store takes writes, else 503 with the
    state that stops it (READY-1); never Retry-After, this is a status, not an error."""
    status = s.semantic_status
    return ready_response(s.store.mode, s.readiness.state(), None if status is None else status())


def ready_response(mode: str, state: str, semantic: dict[str, object] | None = None) -> Response:
    """The `/ready` answer for a store `state` (the edge Worker answers with it too); with an
    indexer in the process, its model and lag under `semantic` (SEM-7)."""
    body: dict[str, object] = {"ready": state == STORE_OK, "mode": mode, "state": state}
    if semantic is not None:
        body["semantic"] = semantic
    return Response(200 if state == STORE_OK else 503, list(JSON_HEADERS), json_bytes(body))
