"""Artifact calls of the synchronous client (SPEC.md ART-2..ART-6): `Client.artifacts`.

    ref = client.artifacts.put("sessions/s1/artifacts/out.json", b"...", content_type=...)
    data = client.artifacts.get("sessions/s1/artifacts/out.json")
    meta = client.artifacts.resolve(path); client.artifacts.abort(reservation_id)

The steps are the plans of `aidememo.client.artifact_plans`, shared with `AsyncClient`'s
`artifacts`: `put` reserves (with the current publication's mutation token when the path is
published, and the body's SHA-256), uploads and publishes; each step is sent again,
identically, after a retryable transport failure (CLIENT-1), with its command id fixed for the
whole call so a retry is an exact replay. When the server offers grants the body goes straight
to and from the object store (`aidememo.client.grant_transfer`). A file body is streamed from
the file (it must be seekable, to be hashed first and resent on a retry); bodies are at most
64 MiB (5 GiB through grants). Answers are the routes' JSON objects as dicts; a refusal is
`AidememoClientError` with the server's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx

from aidememo.client import artifact_plans as ap
from aidememo.client import grant_transfer
from aidememo.client.artifact_plans import Body
from aidememo.client.errors import AidememoClientError
from aidememo.client.transport import unreachable

if TYPE_CHECKING:
    from aidememo.client.sync import Client


class ArtifactCalls:
    """The artifact routes of one client's project."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._project = client.project_id
        self._base = ap.base(self._project)

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
            content = raw if isinstance(raw, bytes) else ap.chunks(raw)
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
                        method, wire.url(target), headers=headers, content=ap.chunks(raw),
                        extensions=wire.extensions,
                    )  # fmt: skip
        if response.status_code >= 300:
            raise ap.refusal(response.status_code, response.content)
        return response

    def _json(self, method: str, target: str, **kw: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self._exchange(method, target, **kw).json()
        return answer

    def _drive(self, plan: ap.ArtifactPlan, body: Body | None = None) -> dict[str, Any]:
        """Run a plan: each exchange sent (an upload with `body`), its answer sent back."""
        try:
            step = next(plan)
            while True:
                try:
                    if step.upload:  # how this server moves bodies, for downloads (GRANT-8)
                        self._client.__dict__["_artifact_grants"] = step.grant is not None
                        if body is not None and not isinstance(body, bytes):
                            body.seek(0)
                    if step.grant is not None:  # straight to the object store
                        assert body is not None
                        retries = self._client._ctx.retries
                        grant_transfer.upload(step.grant, body, retries, self._store_timeout())
                        answer: Any = {}
                    else:
                        answer = self._exchange(
                            step.method, step.target, json_body=step.json_body,
                            raw=body if step.upload else None, size=step.size_bytes,
                        ).json()  # fmt: skip
                except AidememoClientError as exc:
                    step = plan.throw(exc)
                else:
                    step = plan.send(answer)
        except StopIteration as stop:
            result: dict[str, Any] = stop.value
            return result

    # -- calls ----------------------------------------------------------------------------

    def resolve(self, path: str) -> dict[str, Any]:
        """The current publication of `path` (`GET .../artifacts/resolve`)."""
        return self._drive(ap.resolve(self._project, path))

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
        size, sha = ap.measure(body)
        plan = ap.put(
            self._project, path, size, sha,
            content_type=content_type, replace=replace, ttl_ms=ttl_ms,
        )  # fmt: skip
        return self._drive(plan, body)

    def abort(self, reservation_id: str) -> dict[str, Any]:
        """Abort a reservation (`DELETE .../artifact-reservations/{r}`)."""
        return self._drive(ap.abort(self._project, reservation_id))

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
            ap.download_target(self._project, artifact_id),
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
