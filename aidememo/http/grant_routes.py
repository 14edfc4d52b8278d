"""The grant routes (SPEC.md GRANT-3, GRANT-4): their handlers, components and route entries,
in `routes.ROUTES` beside the artifact routes.

The answer is a bearer capability: it is rendered for the caller and kept nowhere else (the
pipeline logs a request's route and status, never an answer's body).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidememo.domain.errors import ErrorCode
from aidememo.http.artifact_handlers import _caller, _object, _ok, _project
from aidememo.http.openapi_schemas import Schema, integer, obj
from aidememo.http.routing import Route
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from aidememo.service.artifact_grants import download_grant, upload_grant

if TYPE_CHECKING:
    from aidememo.http.app import Services

E = ErrorCode
R = "/v1/projects/{project_id}/artifact-reservations/{reservation_id}"


def upload_grants(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifact-reservations/{r}/upload-grants` (GRANT-3)."""
    project_id = _project(params)
    answer = upload_grant(services.artifacts, _caller(caller), project_id, params["reservation_id"])
    return _ok(answer)


def download_grants(
    services: Services, request: Request, params: dict[str, str], caller: Caller | None
) -> Response:
    """`POST .../artifacts/{a}/download-grants` `{revision}` (GRANT-4)."""
    project_id = _project(params)
    body = _object(request, {"revision"})
    answer = download_grant(
        services.artifacts, _caller(caller), project_id, params["artifact_id"],
        body.get("revision"),
    )  # fmt: skip
    return _ok(answer)


def grant_schemas(s: dict[str, Schema]) -> None:
    """Add the grant components to `s`."""
    s["ArtifactUploadGrant"] = obj(
        {
            "url": {"type": "string", "description": "presigned; a bearer capability"},
            "method": {"const": "PUT"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "send exactly these headers (they are signed)",
            },
            "expires_at_ms": integer(0),
        }
    )
    s["ArtifactDownloadGrant"] = obj(
        {
            "url": {"type": "string", "description": "presigned; a bearer capability"},
            "method": {"const": "GET"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "send exactly these headers (If-Match binds the generation)",
            },
            "expires_at_ms": integer(0),
            "size_bytes": integer(0),
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "content_type": {"type": "string"},
        }
    )


GRANT_ROUTES: tuple[Route, ...] = (
    Route(
        "artifact_upload_grant",
        "POST",
        f"{R}/upload-grants",
        upload_grants,
        "A presigned single PUT of the reservation's exact bytes straight into the object store",
        answer="ArtifactUploadGrant",
        errors=(
            E.ARTIFACT_NOT_FOUND,
            E.ARTIFACT_CONFLICT,
            E.ARTIFACT_RESERVATION_EXPIRED,
            E.ARTIFACT_UPLOAD_TOO_LARGE,
            E.ARTIFACT_TRANSFER_MODE_MISMATCH,
            E.ARTIFACT_STORE_UNAVAILABLE,
        ),
        catalog=True,  # ART-7
    ),
    Route(
        "artifact_download_grant",
        "POST",
        "/v1/projects/{project_id}/artifacts/{artifact_id}/download-grants",
        download_grants,
        "A presigned GET of one revision's exact body straight from the object store",
        body="ArtifactDownload",
        answer="ArtifactDownloadGrant",
        errors=(
            E.ARTIFACT_NOT_FOUND,
            E.ARTIFACT_TRANSFER_MODE_MISMATCH,
            E.ARTIFACT_STORE_UNAVAILABLE,
        ),
        catalog=True,  # ART-7
    ),
)
