"""What each artifact call does, written once for `Client.artifacts` and `AsyncClient.artifacts`
(SPEC.md ART-2..ART-6), as `aidememo.client.plans` does for the other methods.

A plan is a generator that yields `Exchange`s (one HTTP exchange each) and receives their JSON
answers, or has the exchange's `AidememoClientError` thrown into it. The driver
(`aidememo.client.async_artifacts`, and `aidememo.client.artifacts` generated from it)
resends an exchange that got no answer identically (CLIENT-1) and supplies the body of an
upload, so both clients run the same steps:

- `put`: resolve the path for its current mutation token (with `replace`), reserve with the
  body's size and SHA-256, upload (through an upload grant when the reservation offers one,
  GRANT-8), publish; a refused upload or publish aborts the
  reservation (best effort: it expires by itself otherwise, ART-7). Command ids are fixed
  for the whole call, so a retry is an exact replay.
- `resolve`, `abort`: one exchange each. A download streams, so each driver sends it itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterator
from typing import IO, Any, NamedTuple
from urllib.parse import quote

from aidememo.client.errors import AidememoClientError, AidememoUnreachable
from aidememo.client.plans import refusal
from aidememo.client.transport import Request, Wire
from aidememo.client.ulid import new_ulid

__all__ = ["refusal"]  # a non-2xx answer as the server's error, as for every other call

CHUNK = 64 << 10
Body = bytes | IO[bytes]


class Exchange(NamedTuple):
    """One artifact exchange: `json_body` is sent as JSON; `upload` sends the call's body
    (`size_bytes` long) as `application/octet-stream`, or, with `grant`, to the object store
    through that upload grant (`aidememo.client.grant_transfer`)."""

    method: str
    target: str
    json_body: Any = None
    upload: bool = False
    size_bytes: int = 0
    grant: dict[str, Any] | None = None  # with `upload`: PUT to the object store (GRANT-8)


ArtifactPlan = Generator[Exchange, Any, dict[str, Any]]


def base(project_id: str) -> str:
    return f"/v1/projects/{project_id}"


def resolve_target(project_id: str, path: str) -> str:
    return f"{base(project_id)}/artifacts/resolve?path={quote(path, safe='/')}"


def resolve(project_id: str, path: str) -> ArtifactPlan:
    """The current publication of `path` (`GET .../artifacts/resolve`)."""
    answer: dict[str, Any] = yield Exchange("GET", resolve_target(project_id, path))
    return answer


def abort(project_id: str, reservation_id: str) -> ArtifactPlan:
    """Abort a reservation (`DELETE .../artifact-reservations/{r}`)."""
    target = f"{base(project_id)}/artifact-reservations/{reservation_id}"
    answer: dict[str, Any] = yield Exchange("DELETE", target)
    return answer


def put(
    project_id: str,
    path: str,
    size: int,
    sha256: str,
    *,
    content_type: str,
    replace: bool,
    ttl_ms: int | None,
) -> ArtifactPlan:
    """Reserve, upload and publish a body of `size` bytes with this SHA-256 at `path`."""
    payload: dict[str, Any] = {
        "path": path, "size_bytes": size, "content_type": content_type, "sha256": sha256,
    }  # fmt: skip
    if ttl_ms is not None:
        payload["ttl_ms"] = ttl_ms
    if replace:
        try:
            current = yield from resolve(project_id, path)
            payload["mutation_token"] = current["mutation_token"]
        except AidememoClientError as exc:
            if exc.code != "artifact_not_found":
                raise
    reservations = f"{base(project_id)}/artifact-reservations"
    reservation = yield Exchange(
        "POST", reservations, json_body={"command_id": new_ulid(), "payload": payload}
    )
    rid = reservation["reservation_id"]
    grants = (reservation.get("transfer") or {}).get("mode") == "grant"
    try:
        if grants:  # straight to the object store (GRANT-8)
            grant = yield Exchange("POST", f"{reservations}/{rid}/upload-grants")
            yield Exchange("PUT", grant["url"], upload=True, size_bytes=size, grant=grant)
        else:
            yield Exchange("PUT", f"{reservations}/{rid}/body", upload=True, size_bytes=size)
        published: dict[str, Any] = yield Exchange(
            "POST", f"{reservations}/{rid}/publish", json_body={"command_id": new_ulid()}
        )
        return published
    except AidememoClientError as exc:
        if not isinstance(exc, AidememoUnreachable):
            try:
                yield from abort(project_id, rid)
            except AidememoClientError:
                pass  # the reservation expires by itself (ART-7)
        raise


def download_target(project_id: str, artifact_id: str) -> str:
    return f"{base(project_id)}/artifacts/{artifact_id}/downloads"


def chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


def measure(body: Body) -> tuple[int, str]:
    """Size and SHA-256 of the body (a file is read once, then rewound)."""
    if isinstance(body, bytes):
        return len(body), hashlib.sha256(body).hexdigest()
    body.seek(0)
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks(body):
        size += len(chunk)
        digest.update(chunk)
    body.seek(0)
    return size, digest.hexdigest()


def content(body: Body) -> bytes | Iterator[bytes]:
    """What a request sends of `body`: the bytes, or a file's chunks from its start."""
    if isinstance(body, bytes):
        return body
    body.seek(0)
    return chunks(body)


def request(
    wire: Wire, method: str, target: str, json_body: Any, raw: Body | None, size: int
) -> Request:
    """One exchange's request: `json_body` as JSON, or `raw` (`size` bytes) as an octet
    stream, or no body."""
    if json_body is not None:
        data = json.dumps(json_body, separators=(",", ":")).encode()
        return wire.request(method, target, data, "application/json")
    if raw is None:
        return wire.request(method, target)
    built = wire.request(method, target, content(raw), "application/octet-stream")
    built.headers["content-length"] = str(size)
    return built
