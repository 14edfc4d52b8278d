"""The artifact body routes at the edge: bodies stream between the client and R2 here, in
the Worker, through the `ARTIFACTS` binding (SPEC.md ART-10).

- Upload: the object checks the reservation (`upload_begin`), the request body streams into
  `ARTIFACTS.put(generation, body, onlyIf={etagDoesNotMatch: "*"})` with its known length (a
  conditional create). A retry (the object is there already: `head`) streams nothing into R2:
  its body is read through and hashed, so an exact retry replays and different bytes are
  `artifact_conflict`, as at the origin. The stored object is read back and hashed (the
  observation), and the object records it (`upload_end`).
- Publish: the object checks (`publish_begin`; a replay answers at once), the stored object
  is read back and hashed, and the object publishes on that observation (`publish_end`).
- Download: the object names the revision's generation (`download_meta`) and the answer is
  `Response(obj.body)`, streamed from R2.
Generations are random and never reused, so the catalog's rules (in the object) never depend
on what R2 lists. `BINDING_STEPS` holds each body route's step through the binding, by its
`edge_handler`; with R2's S3 secrets set the steps are `worker.grants.GRANT_STEPS` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aidememo.bodies.r2_grants import from_env
from aidememo.domain.canonical import decode_json
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.http.body import declared_length
from aidememo.http.types import EdgeHandler, Request, Route
from aidememo.service.access import Caller
from durable_objects.rpc import caller_payload
from worker.grants import (
    GRANT_STEPS,
    Answer,
    BodyCall,
    download_headers,
    json_answer,
    publish,
)
from worker.objects import Objects, call

BINDING = "ARTIFACTS"


def _bucket(env: Any) -> Any:
    bucket = getattr(env, BINDING, None)
    if bucket is None:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no ARTIFACTS bucket is bound here")
    return bucket


async def _observe(bucket: Any, key: str) -> tuple[int, str] | None:
    """`(size, sha256)` of the stored object, read back whole in chunks; None when absent."""
    obj = await bucket.get(key)
    if obj is None:
        return None
    digest = hashlib.sha256()
    size = 0
    async for chunk in obj.body:
        data = chunk.to_bytes()
        size += len(data)
        digest.update(data)
    return size, digest.hexdigest()


async def _sent_digest(body: Any, size: int, *, raced: bool = False) -> str:
    """The SHA-256 of a request body that R2 does not store (its key is taken), read through
    in chunks, so an exact retry and different bytes are told apart as at the origin. After a
    lost race the stream may be spent by the refused `put`: then it is a conflict."""
    digest = hashlib.sha256()
    seen = 0
    try:
        if body:  # None, or JS null, for an empty body
            async for chunk in body:
                data = chunk.to_bytes()
                seen += len(data)
                if seen > size:
                    break
                digest.update(data)
    except Exception as exc:
        if not raced:
            raise
        raise fail(ErrorCode.ARTIFACT_CONFLICT, "a concurrent upload stored a body") from exc
    if seen != size:
        raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "the body is not size_bytes long")
    return digest.hexdigest()


async def serve(
    route: Route,
    core: Request,
    params: dict[str, str],
    caller: Caller,
    objs: Objects,
    env: Any,
    request: Any,
) -> Answer:
    """Answer one body route: `(body, status, headers)`; the body may be an R2 stream. The
    step is the route's `edge_handler` in `GRANT_STEPS` when the edge issues grants (GRANT-5:
    R2's S3 API), else in `BINDING_STEPS`."""
    project_id = validate_id(params["project_id"], "project_id")
    stub = objs.project(caller.tenant_id, project_id)
    who = caller_payload(caller)

    async def phase(name: str, args: dict[str, Any]) -> Any:
        return await call(stub, "artifact_phase", name, {"project_id": project_id, **args}, who)

    step = route.edge_handler
    assert step is not None  # the Worker sends only its own routes here
    body_call = BodyCall(core, params, phase, env, request)
    grants = from_env(env)
    if grants is not None:
        return await GRANT_STEPS[step](body_call, grants)
    return await BINDING_STEPS[step](body_call)


async def _upload(c: BodyCall) -> Answer:
    """The request body streamed into R2 as a conditional create, then observed (ART-10)."""
    params = c.params
    length = declared_length(c.core.headers)
    r = await c.phase(
        "upload_begin", {"reservation_id": params["reservation_id"], "length": length}
    )
    bucket = _bucket(c.env)
    key, size_bytes = r["generation"], int(r["size_bytes"])
    body = c.request.body
    stored, sent_sha = None, None
    if await bucket.head(key) is not None:  # a retry: the bytes sent decide (ART-3)
        sent_sha = await _sent_digest(body, size_bytes)
    else:
        stored = await bucket.put(key, body, onlyIf={"etagDoesNotMatch": "*"})
        if stored is None:  # a concurrent upload of this reservation created it first
            sent_sha = await _sent_digest(body, size_bytes, raced=True)
    seen = await _observe(bucket, key)
    if seen is None:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "the stored body vanished")
    size, sha = seen
    if stored is not None and size != size_bytes:
        await bucket.delete(key)  # a short or long body: nothing is kept
        raise fail(ErrorCode.ARTIFACT_BODY_MISMATCH, "the body is not size_bytes long")
    answer = await c.phase(
        "upload_end",
        {"reservation": r, "size": size, "stored_sha": sha, "sent_sha": sent_sha or sha},
    )
    return json_answer(answer)


async def _publish(c: BodyCall) -> Answer:
    """Publish on the stored body read back from R2 and hashed (ART-4)."""
    body = decode_json(c.core.body.read())
    command_id = body.get("command_id") if isinstance(body, dict) else None
    if not isinstance(body, dict) or set(body) - {"command_id"}:
        raise fail(ErrorCode.INVALID_COMMAND, "the body must be {command_id}")
    observe = partial(_observe, _bucket(c.env))
    return await publish(c.params["reservation_id"], command_id, c.phase, observe)


async def _download(c: BodyCall) -> Answer:
    """The revision's body, streamed from R2."""
    body = _download_body(c.core)
    args = {"artifact_id": c.params["artifact_id"], "revision": body}
    pub = await c.phase("download_meta", args)
    obj = await _bucket(c.env).get(pub["generation"])
    if obj is None or int(obj.size) != int(pub["size_bytes"]):
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this revision's body is gone")
    return obj.body, 200, download_headers(pub)


async def _no_grants(c: BodyCall) -> Answer:
    """A grant route where the edge issues none (GRANT-5)."""
    raise fail(
        ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH,
        "this server takes and serves bodies through the direct routes, not grants",
    )


def _download_body(core: Request) -> Any:
    body = decode_json(core.body.read())
    if not isinstance(body, dict) or set(body) - {"revision"}:
        raise fail(ErrorCode.INVALID_COMMAND, "the body must be {revision}")
    return body.get("revision")


# Each body route's step through the `ARTIFACTS` binding, by the route's `edge_handler`.
BINDING_STEPS: dict[EdgeHandler, Callable[[BodyCall], Awaitable[Answer]]] = {
    EdgeHandler.BODY_UPLOAD: _upload,
    EdgeHandler.BODY_PUBLISH: _publish,
    EdgeHandler.BODY_DOWNLOAD: _download,
    EdgeHandler.UPLOAD_GRANT: _no_grants,
    EdgeHandler.DOWNLOAD_GRANT: _no_grants,
}
