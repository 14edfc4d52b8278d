"""The upload-grant route (SPEC.md GRANT-3): its handler, components and route entry, in
`routes.ROUTES` beside the artifact routes.

The answer is a bearer capability: it is rendered for the caller and kept nowhere else (the
pipeline logs a request's route and status, never an answer's body).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidememo.domain.errors import ErrorCode
from aidememo.http.artifact_handlers import _caller, _ok, _project
from aidememo.http.openapi_schemas import Schema, integer, obj
from aidememo.http.routing import Route
from aidememo.http.types import Request, Response
from aidememo.service.access import Caller
from aidememo.service.artifact_grants import upload_grant

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
    ),
)
