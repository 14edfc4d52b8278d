"""The artifact routes' entries of the route table (SPEC.md ART-*, GRANT-3, GRANT-4), in
`routes.ROUTES`, with their query parameters, declared here once (HTTP-16)."""

from __future__ import annotations

from aidememo.domain.artifacts import MAX_DIRECT_BODY_BYTES
from aidememo.domain.errors import ErrorCode
from aidememo.http import artifact_handlers as h
from aidememo.http.query import Param
from aidememo.http.schemas import ref
from aidememo.http.types import EdgeHandler, Route

E = ErrorCode
P = "/v1/projects/{project_id}"
R = f"{P}/artifact-reservations/{{reservation_id}}"
_LIVE = (E.ARTIFACT_NOT_FOUND, E.ARTIFACT_CONFLICT, E.ARTIFACT_RESERVATION_EXPIRED)

UPLOAD = Route(
    "artifact_upload",
    "PUT",
    f"{R}/body",
    h.upload,
    "Upload a reservation's exact bytes (direct, streamed, at most 64 MiB)",
    body="ArtifactBody",
    media_type="application/octet-stream",
    max_body=MAX_DIRECT_BODY_BYTES,
    streamed=True,
    answer="ArtifactUploaded",
    errors=(
        *_LIVE,
        E.LENGTH_REQUIRED,
        E.ARTIFACT_BODY_MISMATCH,
        E.ARTIFACT_UPLOAD_TOO_LARGE,
        E.ARTIFACT_STORE_UNAVAILABLE,
        E.ARTIFACT_TRANSFER_MODE_MISMATCH,
    ),
    catalog=True,  # ART-7
    edge_handler=EdgeHandler.BODY_UPLOAD,
)
DOWNLOAD = Route(
    "artifact_download",
    "POST",
    f"{P}/artifacts/{{artifact_id}}/downloads",
    h.download,
    "The exact bytes of one revision of an artifact, streamed",
    body="ArtifactDownload",
    answer="ArtifactBytes",
    answer_media="application/octet-stream",
    errors=(E.ARTIFACT_NOT_FOUND, E.ARTIFACT_STORE_UNAVAILABLE),
    console_read=True,  # a read: the console downloads with its session (CONSOLE-3)
    catalog=True,  # ART-7
    edge_handler=EdgeHandler.BODY_DOWNLOAD,
)

PUBLISH = Route(
    "artifact_publish",
    "POST",
    f"{R}/publish",
    h.publish,
    "Verify the stored bytes, recheck the path and publish atomically",
    body="ArtifactPublish",
    answer="ArtifactPublication",
    errors=(
        *_LIVE,
        E.COMMAND_CONFLICT,
        E.ARTIFACT_BODY_MISMATCH,
        E.INVALID_ARTIFACT_PATH,
        E.ARTIFACT_STORE_UNAVAILABLE,
    ),
    catalog=True,  # ART-7
    edge_handler=EdgeHandler.BODY_PUBLISH,
)

UPLOAD_GRANT = Route(
    "artifact_upload_grant",
    "POST",
    f"{R}/upload-grants",
    h.upload_grants,
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
    edge_handler=EdgeHandler.UPLOAD_GRANT,
)
DOWNLOAD_GRANT = Route(
    "artifact_download_grant",
    "POST",
    f"{P}/artifacts/{{artifact_id}}/download-grants",
    h.download_grants,
    "A presigned GET of one revision's exact body straight from the object store",
    body="ArtifactDownload",
    answer="ArtifactDownloadGrant",
    errors=(
        E.ARTIFACT_NOT_FOUND,
        E.ARTIFACT_TRANSFER_MODE_MISMATCH,
        E.ARTIFACT_STORE_UNAVAILABLE,
    ),
    catalog=True,  # ART-7
    edge_handler=EdgeHandler.DOWNLOAD_GRANT,
)
GRANT_ROUTES: tuple[Route, ...] = (UPLOAD_GRANT, DOWNLOAD_GRANT)

ARTIFACT_ROUTES: tuple[Route, ...] = (
    Route(
        "artifact_reserve",
        "POST",
        f"{P}/artifact-reservations",
        h.reserve,
        "Reserve a logical path for a new generation (idempotent by command_id)",
        body="ArtifactReserve",
        answer="ArtifactReservation",
        errors=(
            E.INVALID_ARTIFACT_PATH,
            E.COMMAND_CONFLICT,
            E.ARTIFACT_CONFLICT,
            E.ARTIFACT_UPLOAD_TOO_LARGE,
        ),
        catalog=True,  # ART-7
    ),
    UPLOAD,
    PUBLISH,
    Route(
        "artifact_abort",
        "DELETE",
        R,
        h.abort,
        "Abort a reservation; the published path is unchanged",
        answer="ArtifactAborted",
        errors=(E.ARTIFACT_NOT_FOUND, E.ARTIFACT_CONFLICT),
        catalog=True,  # ART-7
    ),
    Route(
        "artifact_resolve",
        "GET",
        f"{P}/artifacts/resolve",
        h.resolve,
        "The current publication of a logical path",
        answer="ArtifactMetadata",
        query=(
            Param(
                "path",
                ref("ArtifactPath"),
                required=True,
                doc="Logical path: sessions/<s>/canvas.md, sessions/<s>/artifacts/<name>,"
                " handoffs/<h>/request.json|result.json, branches/<actor>/<segment>.jsonl or"
                " snapshots/<seq>/manifest.json.",
                code=E.INVALID_ARTIFACT_PATH,
            ),
        ),
        errors=(E.INVALID_ARTIFACT_PATH, E.ARTIFACT_NOT_FOUND),
        catalog=True,  # ART-7
    ),
    DOWNLOAD,
    *GRANT_ROUTES,
)
