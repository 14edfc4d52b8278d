"""Artifact calls of the asynchronous client (SPEC.md ART-2..ART-6): `AsyncClient.artifacts`,
the twin of `Client.artifacts` (`aidememo.client.artifacts`).

    ref = await client.artifacts.put("sessions/s1/artifacts/out.json", b"...")
    data = await client.artifacts.get("sessions/s1/artifacts/out.json")
    async for chunk in client.artifacts.download(artifact_id, revision): ...

The steps are the plans of `aidememo.client.artifact_plans`, shared with the synchronous
client: the same reserve, upload (or upload grant, GRANT-8) and publish, the same identical
resend of an exchange that got no answer (CLIENT-1), the same abort of a refused upload. A
file body is read in chunks as it is sent (it must be seekable, to be hashed first and resent
on a retry).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx

from aidememo.client import artifact_plans as ap
from aidememo.client import grant_transfer
from aidememo.client.artifact_plans import Body
from aidememo.client.errors import AidememoClientError
from aidememo.client.transport import unreachable

if TYPE_CHECKING:
    from aidememo.client.async_client import AsyncClient


async def _file_chunks(handle: Any) -> AsyncIterator[bytes]:
    for chunk in ap.chunks(handle):
        yield chunk


class AsyncArtifactCalls:
    """The artifact routes of one async client's project."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._project = client.project_id

    def _request(
        self, method: str, target: str, json_body: Any, raw: Body | None, size: int
    ) -> httpx.Request:
        wire = self._client._wire
        headers = httpx.Headers(wire.headers)
        content: Any = None
        if json_body is not None:
            content = json.dumps(json_body, separators=(",", ":")).encode()
            headers["content-type"] = "application/json"
        elif raw is not None:
            headers["content-type"] = "application/octet-stream"
            headers["content-length"] = str(size)
            if isinstance(raw, bytes):
                content = raw
            else:
                raw.seek(0)
                content = _file_chunks(raw)
        return httpx.Request(
            method, wire.url(target), headers=headers, content=content,
            extensions=wire.extensions,
        )  # fmt: skip

    async def _exchange(
        self, method: str, target: str, *, json_body: Any = None, raw: Body | None = None,
        size: int = 0, stream: bool = False,
    ) -> httpx.Response:  # fmt: skip
        attempts = self._client._ctx.retries
        while True:
            request = self._request(method, target, json_body, raw, size)
            try:
                response = await self._client._transport.handle_async_request(request)
                if not stream or response.status_code >= 300:
                    await response.aread()
                    await response.aclose()
                break
            except httpx.TransportError as exc:
                error = unreachable(exc)
                if not error.retryable or attempts <= 0:
                    raise error from exc
                attempts -= 1
        if response.status_code >= 300:
            raise ap.refusal(response.status_code, response.content)
        return response

    async def _drive(self, plan: ap.ArtifactPlan, body: Body | None = None) -> dict[str, Any]:
        """Run a plan: each exchange awaited (an upload with `body`), its answer sent back."""
        try:
            step = next(plan)
            while True:
                try:
                    if step.upload:  # how this server moves bodies, for downloads (GRANT-8)
                        self._client.__dict__["_artifact_grants"] = step.grant is not None
                    if step.grant is not None:  # straight to the object store
                        assert body is not None
                        if not isinstance(body, bytes):
                            body.seek(0)
                        retries = self._client._ctx.retries
                        timeout = self._store_timeout()
                        await grant_transfer.upload_async(step.grant, body, retries, timeout)
                        answer: Any = {}
                    else:
                        response = await self._exchange(
                            step.method, step.target, json_body=step.json_body,
                            raw=body if step.upload else None, size=step.size_bytes,
                        )  # fmt: skip
                        answer = response.json()
                except AidememoClientError as exc:
                    step = plan.throw(exc)
                else:
                    step = plan.send(answer)
        except StopIteration as stop:
            result: dict[str, Any] = stop.value
            return result

    # -- calls ----------------------------------------------------------------------------

    async def resolve(self, path: str) -> dict[str, Any]:
        """The current publication of `path` (`GET .../artifacts/resolve`)."""
        return await self._drive(ap.resolve(self._project, path))

    async def put(
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
        return await self._drive(plan, body)

    async def abort(self, reservation_id: str) -> dict[str, Any]:
        """Abort a reservation (`DELETE .../artifact-reservations/{r}`)."""
        return await self._drive(ap.abort(self._project, reservation_id))

    def _store_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(**self._client._wire.extensions["timeout"])

    async def download(self, artifact_id: str, revision: int) -> AsyncIterator[bytes]:
        """The exact revision's bytes, streamed in chunks: through a download grant when the
        server issues them (GRANT-8), else from the download route."""
        if self._client.__dict__.get("_artifact_grants") is not False:
            target = f"{ap.base(self._project)}/artifacts/{artifact_id}/download-grants"
            try:
                grant = await self._exchange("POST", target, json_body={"revision": revision})
            except AidememoClientError as exc:
                if exc.code != "artifact_transfer_mode_mismatch":
                    raise
                self._client.__dict__["_artifact_grants"] = False
            else:
                self._client.__dict__["_artifact_grants"] = True
                async for chunk in grant_transfer.download_async(
                    grant.json(), self._store_timeout()
                ):
                    yield chunk
                return
        response = await self._exchange(
            "POST",
            ap.download_target(self._project, artifact_id),
            json_body={"revision": revision},
            stream=True,
        )
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        finally:
            await response.aclose()

    async def get(self, path: str, revision: int | None = None) -> bytes:
        """The bytes published at `path` (its current revision, or `revision`)."""
        meta = await self.resolve(path)
        parts = [c async for c in self.download(meta["artifact_id"], revision or meta["revision"])]
        return b"".join(parts)
