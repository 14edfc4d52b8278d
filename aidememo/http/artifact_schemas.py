"""The artifact routes' component schemas (SPEC.md ART-*, GRANT-3, GRANT-4), gathered by
`aidememo.http.components`."""

from __future__ import annotations

from aidememo.domain.artifacts import (
    PATH_MAX_BYTES,
    RESERVATION_TTL_MS_DEFAULT,
    RESERVATION_TTL_MS_MAX,
)
from aidememo.http.schemas import Schema, integer, nullable, obj, ref
from aidememo.service.artifact_grants import GRANT_MAX_BODY_BYTES

_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_STATES = ["reserved", "uploaded", "published", "aborted", "expired", "failed"]


def artifact_schemas(s: dict[str, Schema]) -> None:
    """Add the artifact components to `s`."""
    s["ArtifactPath"] = {
        "type": "string",
        "maxLength": PATH_MAX_BYTES,
        "description": "A logical path of the namespace (ART-1): sessions/<s>/canvas.md, "
        "sessions/<s>/artifacts/<name>, handoffs/<h>/request.json|result.json, "
        "branches/<actor>/<segment>.jsonl, snapshots/<seq>/manifest.json. Never a file path.",
    }
    s["ArtifactReserve"] = obj(
        {
            "command_id": ref("Id"),
            "payload": obj(
                {
                    "path": ref("ArtifactPath"),
                    "size_bytes": integer(0, GRANT_MAX_BODY_BYTES),
                },  # GRANT-3
                {
                    "content_type": {"type": "string", "default": "application/octet-stream"},
                    "sha256": _SHA,
                    "mutation_token": ref("Id"),
                    "ttl_ms": integer(
                        1, RESERVATION_TTL_MS_MAX, default=RESERVATION_TTL_MS_DEFAULT
                    ),
                },
            ),
        }
    )
    reservation = {
        "reservation_id": ref("Id"),
        "path": ref("ArtifactPath"),
        "artifact_id": ref("Id"),
        "generation": ref("Id"),
        "size_bytes": integer(0),
        "content_type": {"type": "string"},
        "sha256": nullable(_SHA),
        "state": {"type": "string", "enum": _STATES},
        "expires_at_ms": integer(0),
    }
    s["ArtifactReservation"] = obj(
        {
            **reservation,
            "transfer": {
                "oneOf": [
                    obj(
                        {
                            "mode": {"const": "direct"},
                            "method": {"const": "PUT"},
                            "path": {"type": "string"},
                            "content_type": {"type": "string"},
                            "content_length": integer(0),
                        }
                    ),
                    # OBJ-3: S3 bodies are uploaded through presigned grants.
                    obj(
                        {
                            "mode": {"const": "grant"},
                            "method": {"const": "POST"},
                            "path": {"type": "string"},
                        }
                    ),
                ]
            },
        }
    )
    s["ArtifactBody"] = {
        "type": "string",
        "format": "binary",
        "description": "The reserved bytes, exactly size_bytes of them, with Content-Length.",
    }
    s["ArtifactUploaded"] = obj(
        {"reservation_id": ref("Id"), "size_bytes": integer(0), "sha256": _SHA}
    )
    s["ArtifactPublish"] = obj({"command_id": ref("Id")})
    reference = {
        "artifact_id": ref("Id"),
        "revision": integer(1),
        "path": ref("ArtifactPath"),
        "size_bytes": integer(0),
        "content_type": {"type": "string"},
        "sha256": _SHA,
        "generation": ref("Id"),
        "mutation_token": ref("Id"),
        "reservation_id": ref("Id"),
    }
    s["ArtifactPublication"] = obj({**reference, "project_seq": integer(1)})
    s["ArtifactMetadata"] = obj(reference)
    s["ArtifactAborted"] = obj(
        {"reservation_id": ref("Id"), "state": {"type": "string", "enum": _STATES}}
    )
    s["ArtifactDownload"] = obj({"revision": integer(1)})
    s["ArtifactBytes"] = {
        "type": "string",
        "format": "binary",
        "description": "The revision's exact bytes, in its content type; the SHA-256 in "
        "x-aidememo-artifact-sha256.",
    }
    s["ArtifactUploadGrant"] = _grant("PUT", "they are signed", {})
    s["ArtifactDownloadGrant"] = _grant(
        "GET",
        "If-Match binds the generation",
        {"size_bytes": integer(0), "sha256": _SHA, "content_type": {"type": "string"}},
    )


def _grant(method: str, signed: str, more: dict[str, Schema]) -> Schema:
    """A presigned request's answer: what to send, until when, and `more` of the body."""
    headers = {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": f"send exactly these headers ({signed})",
    }
    return obj(
        {
            "url": {"type": "string", "description": "presigned; a bearer capability"},
            "method": {"const": method},
            "headers": headers,
            "expires_at_ms": integer(0),
            **more,
        }
    )
