"""Artifact calls of the synchronous client (SPEC.md ART-2..ART-6): `Client.artifacts`.

    ref = client.artifacts.put("sessions/s1/artifacts/out.json", b"...", content_type=...)
    data = client.artifacts.get("sessions/s1/artifacts/out.json")
    meta = client.artifacts.resolve(path); client.artifacts.abort(reservation_id)

`put` reserves (with the current publication's mutation token when the path is published,
and the body's SHA-256), uploads and publishes; each step is sent again, identically, after a
retryable transport failure (CLIENT-1), with its command id fixed for the whole call so a
retry is an exact replay. When the server offers grants the body goes straight to and from
the object store (`aidememo.client.grant_transfer`). A file body is streamed from the file
(it must be seekable, to be hashed first and resent on a retry); bodies are at most 64 MiB
(5 GiB through grants). Answers are the routes' JSON objects as dicts; a refusal is
`AidememoClientError` with the server's code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from aidememo.client import grant_transfer
from aidememo.client.errors import AidememoClientError, AidememoUnreachable
from aidememo.client.transport import unreachable
from aidememo.client.ulid import new_ulid

if TYPE_CHECKING:
    from aidememo.client.sync import Client

CHUNK = 64 << 10
Body = bytes | IO[bytes]


class ArtifactCalls:
    """The artifact routes of one client's project."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._base = f"/v1/projects/{client.project_id}"

    # -- exchanges ------------------------------------------------------------------------

    def _exchange(
        self, method: str, target: str, *, json_body: Any = None, raw: Body | None = None,
        size: int = 0, stream: bool = False,
    ) -> httpx.Response:  # fmt: skip
        wire = self._client._wire
        headers = httpx.Headers(wire.headers)
        content: Any = None
        if json_body is not None:
            content = json.dumps(json_body, separators=(",", ":")).encode()
            headers["content-type"] = "application/json"
        elif raw is not None:
            headers["content-type"] = "application/octet-stream"
            headers["content-length"] = str(size)
            content = raw if isinstance(raw, bytes) else _chunks(raw)
        request = httpx.Request(
            method, wire.url(target), headers=headers, content=content,
            extensions=wire.extensions,
        )  # fmt: skip
        attempts = self._client._ctx.retries
        while True:
            try:
                response = self._client._transport.handle_request(request)
                if not stream or response.status_code >= 300:
                    response.read()
                    response.close()
                break
            except httpx.TransportError as exc:
                error = unreachable(exc)
                if not error.retryable or attempts <= 0:
                    raise error from exc
                attempts -= 1
                if raw is not None and not isinstance(raw, bytes):
                    raw.seek(0)
                    request = httpx.Request(
                        method, wire.url(target), headers=headers, content=_chunks(raw),
                        extensions=wire.extensions,
                    )  # fmt: skip
        if response.status_code >= 300:
            raise _refusal(response)
        return response

    def _json(self, method: str, target: str, **kw: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._exchange(method, target, **kw).json()
        return answer

    # -- calls ----------------------------------------------------------------------------

    def resolve(self, path: str) -> dict[str, Any]:
        """The current publication of `path` (`GET .../artifacts/resolve`)."""
        return self._json("GET", f"{self._base}/artifacts/resolve?path={_quote(path)}")

    def put(
        self,
        path: str,
        body: Body,
        *,
        content_type: str = "application/octet-stream",
        replace: bool = True,
        ttl_ms: int | None = None,
    ) -> dict[str, Any]:
        """Reserve, upload and publish `body` at `path`; the publication's reference. With
        `replace`, a published path is replaced (its current mutation token is looked up)."""
        size, sha = _measure(body)
        payload: dict[str, Any] = {
            "path": path, "size_bytes": size, "content_type": content_type, "sha256": sha,
        }  # fmt: skip
        if ttl_ms is not None:
            payload["ttl_ms"] = ttl_ms
        if replace:
            try:
                payload["mutation_token"] = self.resolve(path)["mutation_token"]
            except AidememoClientError as exc:
                if exc.code != "artifact_not_found":
                    raise
        reservation = self._json(
            "POST",
            f"{self._base}/artifact-reservations",
            json_body={"command_id": new_ulid(), "payload": payload},
        )
        rid = reservation["reservation_id"]
        if not isinstance(body, bytes):
            body.seek(0)
        grants = (reservation.get("transfer") or {}).get("mode") == "grant"
        self._client.__dict__["_artifact_grants"] = grants  # how this server moves bodies
        try:
            if grants:  # straight to the object store (GRANT-8)
                g = self._json("POST", f"{self._base}/artifact-reservations/{rid}/upload-grants")
                grant_transfer.upload(g, body, self._client._ctx.retries, self._store_timeout())
            else:
                raw = f"{self._base}/artifact-reservations/{rid}/body"
                self._json("PUT", raw, raw=body, size=size)
            return self._json(
                "POST",
                f"{self._base}/artifact-reservations/{rid}/publish",
                json_body={"command_id": new_ulid()},
            )
        except AidememoClientError as exc:
            if not isinstance(exc, AidememoUnreachable):
                self._quietly_abort(rid)
            raise

    def _quietly_abort(self, reservation_id: str) -> None:
        try:
            self.abort(reservation_id)
        except AidememoClientError:
            pass  # the reservation expires by itself (ART-7)

    def abort(self, reservation_id: str) -> dict[str, Any]:
        """Abort a reservation (`DELETE .../artifact-reservations/{r}`)."""
        return self._json("DELETE", f"{self._base}/artifact-reservations/{reservation_id}")

    def _store_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(**self._client._wire.extensions["timeout"])

    def download(self, artifact_id: str, revision: int) -> Iterator[bytes]:
        """The exact revision's bytes, streamed in chunks: through a download grant when the
        server issues them (GRANT-8), else from the download route."""
        if self._client.__dict__.get("_artifact_grants") is not False:
            try:
                g = self._json("POST", f"{self._base}/artifacts/{artifact_id}/download-grants",
                               json_body={"revision": revision})  # fmt: skip
            except AidememoClientError as exc:
                if exc.code != "artifact_transfer_mode_mismatch":
                    raise
                self._client.__dict__["_artifact_grants"] = False
            else:
                self._client.__dict__["_artifact_grants"] = True
                yield from grant_transfer.download(g, self._store_timeout())
                return
        response = self._exchange(
            "POST",
            f"{self._base}/artifacts/{artifact_id}/downloads",
            json_body={"revision": revision},
            stream=True,
        )
        try:
            yield from response.iter_bytes()
        finally:
            response.close()

    def get(self, path: str, revision: int | None = None) -> bytes:
        """The bytes published at `path` (its current revision, or `revision`)."""
        meta = self.resolve(path)
        return b"".join(self.download(meta["artifact_id"], revision or meta["revision"]))


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


def _measure(body: Body) -> tuple[int, str]:
    """Size and SHA-256 of the body (a file is read once, then rewound)."""
    if isinstance(body, bytes):
        return len(body), hashlib.sha256(body).hexdigest()
    body.seek(0)
    digest = hashlib.sha256()
    size = 0
    for chunk in _chunks(body):
        size += len(chunk)
        digest.update(chunk)
    body.seek(0)
    return size, digest.hexdigest()


def _quote(path: str) -> str:
    return quote(path, safe="/")


def _refusal(response: httpx.Response) -> AidememoClientError:
    try:
        error = response.json()["error"]
        return AidememoClientError(error["code"], error["message"], response.status_code)
    except (ValueError, KeyError, TypeError):
        return AidememoClientError(
            "invalid_response", f"HTTP {response.status_code}", response.status_code
        )
