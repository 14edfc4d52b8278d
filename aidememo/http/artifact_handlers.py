"""The artifact routes' handlers (SPEC.md ART-*, GRANT-3, GRANT-4): read parameters strictly,
call `aidememo.service.artifacts.Artifacts` (or its grants), render the answer.

The body upload iterates the bounded request body (`Route.streamed`), so a 64 MiB body is
never held whole; a download answers a `Response` whose `stream` yields the body in chunks,
which the front sends as they come.
"""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.body import declared_length
from aidememo.http.handling import json_object, member, ok_json, project_of
from aidememo.http.query_values import query_of
from aidememo.http.services import Services
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from aidememo.service.artifact_grants import download_grant, upload_grant


def reserve(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations` (ART-2)."""
    project_id = project_of(params)
    body = json_object(request, {"command_id", "payload"})
    r, replayed = services.artifacts.reserve(
        member(caller), project_id, body.get("command_id"), body.get("payload")
    )
    answer = r.to_json()
    base = f"/v1/projects/{project_id}/artifact-reservations/{r.reservation_id}"
    if transfer_mode(services) == "grant":  # OBJ-3: bodies go straight to the object store
        answer["transfer"] = {"mode": "grant", "method": "POST", "path": f"{base}/upload-grants"}
        return ok_json(answer, replayed=replayed)
    answer["transfer"] = {
        "mode": "direct",
        "method": "PUT",
        "path": f"{base}/body",
        "content_type": "application/octet-stream",
        "content_length": r.size_bytes,
    }
    return ok_json(answer, replayed=replayed)


def transfer_mode(services: Services) -> str:
    """`direct` (bodies through this service) or `grant` (presigned, OBJ-3)."""
    return str(getattr(services.artifacts.bodies, "transfer_mode", "direct"))


def upload(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`PUT .../artifact-reservations/{r}/body` (ART-3): streamed into the body store."""
    project_id = project_of(params)
    if transfer_mode(services) != "direct":
        raise fail(
            ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
            "this server's bodies are uploaded through upload grants, not this route",
        )
    # ART-3 asks for a declared `Content-Length`: the size of a body the front happened to
    # receive whole (one chunk of a chunked upload) is not a declaration.
    length = declared_length(request.headers)
    answer = services.artifacts.upload(
        member(caller), project_id, params["reservation_id"], length, iter(request.body)
    )
    return ok_json(answer)


def publish(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations/{r}/publish` (ART-4)."""
    project_id = project_of(params)
    body = json_object(request, {"command_id"})
    answer, replayed = services.artifacts.publish(
        member(caller), project_id, params["reservation_id"], body.get("command_id")
    )
    return ok_json(answer, replayed=replayed)


def abort(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`DELETE .../artifact-reservations/{r}` (ART-5)."""
    project_id = project_of(params)
    return ok_json(services.artifacts.abort(member(caller), project_id, params["reservation_id"]))


def resolve(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`GET .../artifacts/resolve?path=` (ART-6)."""
    project_id = project_of(params)
    path = query_of(request)["path"]
    return ok_json(services.artifacts.resolve(member(caller), project_id, path))


def download(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifacts/{a}/downloads` (ART-6): the exact revision's bytes, streamed."""
    project_id = project_of(params)
    body = json_object(request, {"revision"})
    pub, chunks = services.artifacts.download(
        member(caller), project_id, params["artifact_id"], body.get("revision")
    )
    headers = [
        ("content-type", "application/octet-stream"),
        ("x-aidememo-content-type", pub.content_type),
        ("content-length", str(pub.size_bytes)),
        ("x-aidememo-artifact-sha256", pub.sha256),
    ]
    return Response(200, headers, b"", stream=chunks)


def upload_grants(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations/{r}/upload-grants` (GRANT-3). The answer is a bearer
    capability: rendered for the caller and kept nowhere else (the pipeline logs a request's
    route and status, never an answer's body)."""
    project_id = project_of(params)
    answer = upload_grant(services.artifacts, member(caller), project_id, params["reservation_id"])
    return ok_json(answer)


def download_grants(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifacts/{a}/download-grants` `{revision}` (GRANT-4)."""
    project_id = project_of(params)
    body = json_object(request, {"revision"})
    answer = download_grant(
        services.artifacts, member(caller), project_id, params["artifact_id"],
        body.get("revision"),
    )  # fmt: skip
    return ok_json(answer)
