"""The artifact body routes at the edge when it issues grants (SPEC.md GRANT-5, GRANT-6).

With the R2 S3 secrets and vars set (`aidememo.bodies.r2_grants.from_env`) the edge's bodies
go through R2's S3 API exactly as the origin's S3 bodies go through boto3:

- an upload grant is signed by the project object (`upload_grant`, GRANT-3);
- the direct upload route answers 409 `artifact_transfer_mode_mismatch` before reading the
  body (OBJ-3): writers upload with an upload grant, which the project object signs;
- publish observes the stored object with a signed `HEAD` (its checksum, else its bytes read
  back and re-hashed) and the object publishes on that observation (ART-4);
- a download grant: the object fixes the revision and the grant's lifetime
  (`download_window`, GRANT-4), the Worker HEADs the object for its size and ETag and signs the
  `GET` bound to that ETag;
- the download route streams a signed `GET` of the generation.
`GRANT_STEPS` holds each body route's step, by its `edge_handler`. Without the configuration
`worker.artifacts` serves bodies through the `ARTIFACTS` binding (the grant routes are then
409, as at an origin with local bodies).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from aidememo.bodies.r2_grants import R2Grants
from aidememo.domain.artifacts import Publication
from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.render import json_bytes
from aidememo.http.types import EdgeHandler, Request
from aidememo.service.artifact_grants import download_answer
from durable_objects import r2_s3

Phase = Callable[[str, dict[str, Any]], Awaitable[Any]]
Answer = tuple[Any, int, dict[str, str]]  # (body, status, headers); the body may be a stream


@dataclass(frozen=True, slots=True)
class BodyCall:
    """One request of an artifact body route at the edge: what each of its steps reads."""

    core: Request
    params: dict[str, str]
    phase: Phase  # one catalog step in the project object (`artifact_phase`)
    env: Any
    request: Any  # the SDK request, whose body an upload streams into R2


def json_answer(value: Any, replayed: bool = False) -> tuple[bytes, int, dict[str, str]]:
    """A JSON answer of a body route (`aidememo-replayed` on a replay)."""
    headers = {"content-type": "application/json"}
    if replayed:
        headers["aidememo-replayed"] = "true"
    return json_bytes(value), 200, headers


def _fields(core: Request, allowed: set[str]) -> dict[str, Any]:
    body = decode_json(core.body.read())
    if not isinstance(body, dict) or set(body) - allowed:
        raise fail(ErrorCode.INVALID_COMMAND, f"the body must be {{{', '.join(sorted(allowed))}}}")
    return body


async def _upload_grant(call: BodyCall, grants: R2Grants) -> Answer:
    """An upload grant, signed by the object, which checks the reservation (GRANT-3)."""
    return json_answer(
        await call.phase("upload_grant", {"reservation_id": call.params["reservation_id"]})
    )


async def _direct_upload(call: BodyCall, grants: R2Grants) -> Answer:
    """The direct upload route, refused before its body is read (OBJ-3)."""
    raise fail(
        ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
        "this server's bodies are uploaded through upload grants, not this route",
    )


async def _publish(call: BodyCall, grants: R2Grants) -> Answer:
    """Publish on a signed `HEAD` of the stored body (ART-4)."""
    command_id = _fields(call.core, {"command_id"}).get("command_id")
    observe = partial(r2_s3.observe, grants)
    return await publish(call.params["reservation_id"], command_id, call.phase, observe)


async def _download_grant(call: BodyCall, grants: R2Grants) -> Answer:
    """A signed `GET` bound to the stored object's ETag, for the object's window (GRANT-4)."""
    body = _fields(call.core, {"revision"})
    args = {"artifact_id": call.params["artifact_id"], "revision": body.get("revision")}
    window = await call.phase("download_window", args)
    pub = Publication(**window["publication"])
    info = await r2_s3.stat(grants, pub.generation)
    answer = download_answer(grants, pub, info, int(window["expires_s"]), int(window["now_ms"]))
    return json_answer(answer)


async def _download(call: BodyCall, grants: R2Grants) -> Answer:
    """The body streamed from a signed `GET` of the revision's generation."""
    body = _fields(call.core, {"revision"})
    args = {"artifact_id": call.params["artifact_id"], "revision": body.get("revision")}
    meta = await call.phase("download_meta", args)
    got = await r2_s3.open_body(grants, str(meta["generation"]))
    if got is None or int(got.headers.get("content-length") or -1) != int(meta["size_bytes"]):
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this revision's body is gone")
    return got.body, 200, download_headers(meta)


GrantStep = Callable[[BodyCall, R2Grants], Awaitable[Answer]]

# Each body route's step through R2's S3 API, by the route's `edge_handler`.
GRANT_STEPS: dict[EdgeHandler, GrantStep] = {
    EdgeHandler.BODY_UPLOAD: _direct_upload,
    EdgeHandler.BODY_PUBLISH: _publish,
    EdgeHandler.BODY_DOWNLOAD: _download,
    EdgeHandler.UPLOAD_GRANT: _upload_grant,
    EdgeHandler.DOWNLOAD_GRANT: _download_grant,
}


def download_headers(meta: dict[str, Any]) -> dict[str, str]:
    """The headers of a body download: its length, and the artifact's type and SHA-256."""
    return {
        "content-type": "application/octet-stream",
        "content-length": str(meta["size_bytes"]),
        "x-aidememo-content-type": str(meta["content_type"]),
        "x-aidememo-artifact-sha256": str(meta["sha256"]),
    }


async def publish(
    reservation_id: str,
    command_id: Any,
    phase: Phase,
    observe: Callable[[str], Awaitable[tuple[int, str] | None]],
) -> tuple[Any, int, dict[str, str]]:
    """`POST .../publish` around the object's catalog steps, whichever way the Worker reaches
    R2 (`observe(generation)`: the stored body's size and SHA-256, None when absent)."""
    begun = await phase(
        "publish_begin", {"reservation_id": reservation_id, "command_id": command_id}
    )
    if "answer" in begun:
        return json_answer(begun["answer"], bool(begun["replayed"]))
    r = begun["reservation"]
    seen = await observe(str(r["generation"]))
    if seen is None:
        await phase("body_missing", {"reservation": r})
        raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "no body has been uploaded yet")
    done = await phase(
        "publish_end",
        {"reservation": r, "command_id": command_id, "size": seen[0], "sha": seen[1]},
    )
    return json_answer(done["answer"], bool(done["replayed"]))
