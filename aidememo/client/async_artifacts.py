"""Artifact calls of the asynchronous client (SPEC.md ART-2..ART-6): `AsyncClient.artifacts`.

    ref = await client.artifacts.put("sessions/s1/artifacts/out.json", b"...")
    data = await client.artifacts.get("sessions/s1/artifacts/out.json")
    async for chunk in client.artifacts.download(artifact_id, revision): ...

The steps are the plans of `aidememo.client.artifact_plans`: `put` reserves (with the current
publication's mutation token when the path is published, and the body's SHA-256), uploads and
publishes; each step is sent again, identically, after a retryable transport failure
(CLIENT-1), with its command id fixed for the whole call so a retry is an exact replay. When
the server offers grants the body goes straight to and from the object store
(`aidememo.client.grant_transfer`) on a transport of its own, never the service's (which tests
and proxies may replace), without the bearer token. A file body is streamed from the file (it
must be seekable, to be hashed first and resent on a retry); bodies are at most 64 MiB (5 GiB
through grants). Answers are the routes' JSON objects as dicts; a refusal is
`AidememoClientError` with the server's code. `Client.artifacts` (`aidememo.client.artifacts`)
is generated from this file by scripts/gen_sync_client.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from aidememo.client import artifact_plans as ap
from aidememo.client import grant_transfer as gt
from aidememo.client.artifact_plans import Body
from aidememo.client.errors import AidememoClientError, AidememoUnreachable
from aidememo.client.httpx_transport import default_async_transport
from aidememo.client.plans import Context, Run
from aidememo.client.transport import AsyncAnswer, AsyncTransport, Request, Timeouts, Wire


class AsyncArtifactHost(Protocol):
    """What the artifact calls use of their client (`AsyncClient`): its project, retry
    context, request wire and transport, and what it learned of how the server moves
    bodies."""

    _ctx: Context
    _wire: Wire
    _transport: AsyncTransport
    _artifact_grants: bool | None

    @property
    def project_id(self) -> str: ...


class AsyncArtifactCalls:
    """The artifact routes of one client's project."""

    def __init__(self, client: AsyncArtifactHost) -> None:
        self._client = client
        self._project = client.project_id
        self._base = ap.base(self._project)

    async def _exchange(
        self, method: str, target: str, *, json_body: Any = None, raw: Body | None = None,
        size: int = 0, stream: bool = False,
    ) -> AsyncAnswer:  # fmt: skip
        """One exchange, sent again identically (a file body rewound) after a retryable
        failure; a refusal raised as the server's error."""
        attempts = self._client._ctx.retries
        while True:
            request = ap.request(self._client._wire, method, target, json_body, raw, size)
            try:
                answer = await self._client._transport.exchange(request, stream=stream)
                break
            except AidememoUnreachable as exc:
                if not exc.retryable or attempts <= 0:
                    raise
                attempts -= 1
        if answer.status >= 300:
            raise ap.refusal(answer.status, answer.content)
        return answer

    async def _json(self, method: str, target: str, **kw: Any) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads((await self._exchange(method, target, **kw)).content)
        return answer

    async def _drive(self, plan: ap.ArtifactPlan, body: Body | None = None) -> dict[str, Any]:
        """Run a plan: each exchange sent (an upload with `body`), its answer sent back."""
        run = Run(plan)
        while (step := run.step) is not None:
            try:
                if step.upload:  # how this server moves bodies, for downloads (GRANT-8)
                    self._client._artifact_grants = step.grant is not None
                if step.grant is not None:  # straight to the object store
                    assert body is not None
                    timeouts = self._client._wire.timeouts
                    retries = self._client._ctx.retries
                    await _upload(step.grant, body, step.size_bytes, retries, timeouts)
                    answer: Any = {}
                else:
                    answer = await self._json(
                        step.method, step.target, json_body=step.json_body,
                        raw=body if step.upload else None, size=step.size_bytes,
                    )  # fmt: skip
            except AidememoClientError as exc:
                run.refuse(exc)
            else:
                run.answer(answer)
        return run.result

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

    async def download(self, artifact_id: str, revision: int) -> AsyncIterator[bytes]:
        """The exact revision's bytes, streamed in chunks: through a download grant when the
        server issues them (GRANT-8), else from the download route."""
        if self._client._artifact_grants is not False:
            target = f"{self._base}/artifacts/{artifact_id}/download-grants"
            try:
                grant = await self._json("POST", target, json_body={"revision": revision})
            except AidememoClientError as exc:
                if exc.code != "artifact_transfer_mode_mismatch":
                    raise
                self._client._artifact_grants = False
            else:
                self._client._artifact_grants = True
                async for chunk in _download(grant, self._client._wire.timeouts):
                    yield chunk
                return
        answer = await self._exchange(
            "POST",
            ap.download_target(self._project, artifact_id),
            json_body={"revision": revision},
            stream=True,
        )
        try:
            async for chunk in answer.chunks():
                yield chunk
        finally:
            await answer.aclose()

    async def get(self, path: str, revision: int | None = None) -> bytes:
        """The bytes published at `path` (its current revision, or `revision`)."""
        meta = await self.resolve(path)
        chosen = revision or meta["revision"]
        return b"".join([chunk async for chunk in self.download(meta["artifact_id"], chosen)])


# -- the object store, through grants (GRANT-8) ---------------------------------------------


async def _upload(
    grant: dict[str, Any], body: Body, size: int, retries: int, timeouts: Timeouts
) -> None:
    """PUT `body` to the grant's URL with exactly its headers; a PUT that got no answer is
    sent again (`grant_transfer.stored` reads the second answer)."""
    store = default_async_transport()
    try:
        attempts, first = retries, True
        while True:
            request = Request(
                str(grant["method"]), str(grant["url"]), gt.headers(grant, size),
                ap.content(body), timeouts,
            )  # fmt: skip
            try:
                answer = await store.exchange(request)
            except AidememoUnreachable as exc:
                attempts = gt.again(exc, attempts)
                first = False
                continue
            if gt.stored(answer.status, first):
                return
    finally:
        await store.aclose()


async def _download(grant: dict[str, Any], timeouts: Timeouts) -> AsyncIterator[bytes]:
    """The body of a download grant, streamed in chunks."""
    store = default_async_transport()
    try:
        request = Request("GET", str(grant["url"]), gt.headers(grant), None, timeouts)
        answer = await store.exchange(request, stream=True)
        if answer.status != 200:
            raise gt.refused(answer.status, "download")
        try:
            async for chunk in answer.chunks():
                yield chunk
        finally:
            await answer.aclose()
    finally:
        await store.aclose()
