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
Without the configuration `serve_granted` answers None and `worker.artifacts` serves bodies
through the `ARTIFACTS` binding (the download-grants route is then 409, as at an origin with
local bodies).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aidememo.bodies.r2_grants import R2Grants, from_env
from aidememo.domain.artifacts import Publication
from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.http.artifact_routes import (
    DOWNLOAD,
    DOWNLOAD_GRANT,
    PUBLISH,
    UPLOAD,
    UPLOAD_GRANT,
)
from aidememo.http.render import json_bytes
from aidememo.http.routing import Route
from aidememo.http.types import Request
from aidememo.service.artifact_grants import download_answer
from durable_objects import r2_s3

Phase = Callable[[str, dict[str, Any]], Awaitable[Any]]


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


async def serve_granted(
    route: Route, core: Request, params: dict[str, str], phase: Phase, env: Any
) -> tuple[Any, int, dict[str, str]] | None:
    """Answer a body route through R2's S3 API, or None when the edge has no grants."""
    grants = from_env(env)
    if grants is None:
        if route is UPLOAD_GRANT or route is DOWNLOAD_GRANT:
            raise fail(
                ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
                "this server takes and serves bodies through the direct routes, not grants",
            )
        return None
    if route is UPLOAD_GRANT:  # signed by the object, which checks the reservation
        return json_answer(
            await phase("upload_grant", {"reservation_id": params["reservation_id"]})
        )
    if route is UPLOAD:
        raise fail(
            ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
            "this server's bodies are uploaded through upload grants, not this route",
        )
    if route is PUBLISH:
        return await _publish(grants, core, params, phase)
    body = _fields(core, {"revision"})
    if route is DOWNLOAD_GRANT:
        args = {"artifact_id": params["artifact_id"], "revision": body.get("revision")}
        window = await phase("download_window", args)
        pub = Publication(**window["publication"])
        info = await r2_s3.stat(grants, pub.generation)
        answer = download_answer(grants, pub, info, int(window["expires_s"]), int(window["now_ms"]))
        return json_answer(answer)
    if route is not DOWNLOAD:
        raise fail(ErrorCode.INVALID_COMMAND, f"no body route {route.name!r}")
    args = {"artifact_id": params["artifact_id"], "revision": body.get("revision")}
    meta = await phase("download_meta", args)
    got = await r2_s3.open_body(grants, str(meta["generation"]))
    if got is None or int(got.headers.get("content-length") or -1) != int(meta["size_bytes"]):
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this revision's body is gone")
    return got.body, 200, download_headers(meta)


def download_headers(meta: dict[str, Any]) -> dict[str, str]:
    """The headers of a body download: its length, and the artifact's type and SHA-256."""
    return {
        "content-type": "application/octet-stream",
        "content-length": str(meta["size_bytes"]),
        "x-aidememo-content-type": str(meta["content_type"]),
        "x-aidememo-artifact-sha256": str(meta["sha256"]),
    }


async def _publish(
    grants: R2Grants, core: Request, params: dict[str, str], phase: Phase
) -> tuple[Any, int, dict[str, str]]:
    command_id = _fields(core, {"command_id"}).get("command_id")
    observe = partial(r2_s3.observe, grants)
    return await publish(params["reservation_id"], command_id, phase, observe)


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
