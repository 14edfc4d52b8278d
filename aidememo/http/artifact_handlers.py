"""The artifact routes' handlers (SPEC.md ART-*): read parameters strictly, call
`aidememo.service.artifacts.Artifacts`, render the answer.

The body upload iterates the bounded request body (`Route.streamed`), so a 64 MiB body is
never held whole; a download answers a `Response` whose `stream` yields the body in chunks,
which the front sends as they come.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.http.body import declared_length
from aidememo.http.query import Query
from aidememo.http.render import json_bytes
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller

if TYPE_CHECKING:
    from aidememo.http.app import Services

_JSON = [("content-type", "application/json")]
REPLAYED_HEADER = "aidememo-replayed"


def _caller(caller: Caller | None) -> Caller:
    if caller is None:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    return caller


def _ok(value: Any, replayed: bool = False) -> Response:
    headers = list(_JSON)
    if replayed:
        headers.append((REPLAYED_HEADER, "true"))
    return Response(200, headers, json_bytes(value))


def _object(request: Request, allowed: set[str]) -> dict[str, Any]:
    body = decode_json(request.body.read())
    if not isinstance(body, dict):
        raise fail(ErrorCode.INVALID_COMMAND, "the body must be a JSON object")
    extra = sorted(set(body) - allowed)
    if extra:
        raise fail(ErrorCode.INVALID_COMMAND, f"unknown field {extra[0]!r}")
    return body


def _project(params: dict[str, str]) -> str:
    return validate_id(params["project_id"], "project_id")


def reserve(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations` (ART-2)."""
    project_id = _project(params)
    body = _object(request, {"command_id", "payload"})
    r, replayed = services.artifacts.reserve(
        _caller(caller), project_id, body.get("command_id"), body.get("payload")
    )
    answer = r.to_json()
    base = f"/v1/projects/{project_id}/artifact-reservations/{r.reservation_id}"
    if transfer_mode(services) == "grant":  # OBJ-3: bodies go straight to the object store
        answer["transfer"] = {"mode": "grant", "method": "POST", "path": f"{base}/upload-grants"}
        return _ok(answer, replayed)
    answer["transfer"] = {
        "mode": "direct",
        "method": "PUT",
        "path": f"{base}/body",
        "content_type": "application/octet-stream",
        "content_length": r.size_bytes,
    }
    return _ok(answer, replayed)


def transfer_mode(services: Services) -> str:
    """`direct` (bodies through this service) or `grant` (presigned, OBJ-3)."""
    return str(getattr(services.artifacts.bodies, "transfer_mode", "direct"))


def upload(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`PUT .../artifact-reservations/{r}/body` (ART-3): streamed into the body store."""
    project_id = _project(params)
    if transfer_mode(services) != "direct":
        raise fail(
            ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
            "this server's bodies are uploaded through upload grants, not this route",
        )
    # ART-3 asks for a declared `Content-Length`: the size of a body the front happened to
    # receive whole (one chunk of a chunked upload) is not a declaration.
    length = declared_length(request.headers)
    answer = services.artifacts.upload(
        _caller(caller), project_id, params["reservation_id"], length, iter(request.body)
    )
    return _ok(answer)


def publish(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations/{r}/publish` (ART-4)."""
    project_id = _project(params)
    body = _object(request, {"command_id"})
    answer, replayed = services.artifacts.publish(
        _caller(caller), project_id, params["reservation_id"], body.get("command_id")
    )
    return _ok(answer, replayed)


def abort(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`DELETE .../artifact-reservations/{r}` (ART-5)."""
    project_id = _project(params)
    return _ok(services.artifacts.abort(_caller(caller), project_id, params["reservation_id"]))


def resolve(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`GET .../artifacts/resolve?path=` (ART-6)."""
    project_id = _project(params)
    query = Query(request.query)
    query.finish(frozenset({"path"}))
    path = query.text("path")
    if path is None:
        raise fail(ErrorCode.INVALID_ARTIFACT_PATH, "path is required")
    return _ok(services.artifacts.resolve(_caller(caller), project_id, path))


def download(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifacts/{a}/downloads` (ART-6): the exact revision's bytes, streamed."""
    project_id = _project(params)
    body = _object(request, {"revision"})
    pub, chunks = services.artifacts.download(
        _caller(caller), project_id, params["artifact_id"], body.get("revision")
    )
    headers = [
        ("content-type", "application/octet-stream"),
        ("x-aidememo-content-type", pub.content_type),
        ("content-length", str(pub.size_bytes)),
        ("x-aidememo-artifact-sha256", pub.sha256),
    ]
    return Response(200, headers, b"", stream=chunks)
