"""Bodies straight to and from the object store through grants (SPEC.md GRANT-8).

When a reservation's `transfer` is `{mode: "grant"}` (S3 bodies at the origin, R2 grants at
the edge) `Client.artifacts.put` asks for an upload grant and PUTs the body to its URL with
exactly the grant's headers (they are signed), and downloads read a download grant's URL when
the server issues them. Those requests go to the store, not the service: they use their own
plain HTTP transport (never the service's, which tests and proxies may replace) and carry no
bearer token. A grant is a bearer capability: it is never logged, and a refusal's message
names only the status. A PUT whose first attempt got no answer is sent again (with the body
rewound); a 412 then means the first one stored the body, and publication (which trusts only
the store's own observation, ART-4) decides. `upload_async` and `download_async` are the same
for `AsyncClient`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import IO, Any

import httpx

from aidememo.client.errors import AidememoClientError
from aidememo.client.transport import unreachable

CHUNK = 64 << 10
Body = bytes | IO[bytes]


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


def _refused(status: int, what: str) -> AidememoClientError:
    code = "artifact_body_mismatch" if status in (400, 403, 412) else "artifact_store_unavailable"
    if what == "download" and status in (403, 404, 412):
        code = "artifact_not_found"
    return AidememoClientError(code, f"the object store refused the {what} (HTTP {status})", status)


def upload(grant: dict[str, Any], body: Body, retries: int, timeout: Any) -> None:
    """PUT `body` to the grant's URL with exactly its headers."""
    headers = {str(k): str(v) for k, v in dict(grant["headers"]).items()}
    url = str(grant["url"])
    with httpx.Client(timeout=timeout, trust_env=False) as store:
        attempts, first = retries, True
        while True:
            if not isinstance(body, bytes):
                body.seek(0)
            content: Any = body if isinstance(body, bytes) else _chunks(body)
            try:
                response = store.request(str(grant["method"]), url, headers=headers,
                                         content=content)  # fmt: skip
            except httpx.TransportError as exc:
                attempts = _again(exc, attempts)
                first = False
                continue
            if _stored(response.status_code, first):
                return


def _again(exc: httpx.TransportError, attempts: int) -> int:
    """The attempts left after a PUT that got no answer, or its error when none are."""
    error = unreachable(exc)
    if not error.retryable or attempts <= 0:
        raise error from None  # never chain: the request names the signed URL
    return attempts - 1


def _stored(status: int, first: bool) -> bool:
    if status == 412 and not first:
        return True  # the attempt that got no answer stored it; publication verifies
    if status >= 300:
        raise _refused(status, "upload")
    return True


async def upload_async(grant: dict[str, Any], body: Body, retries: int, timeout: Any) -> None:
    """`upload` for `AsyncClient`: the same requests on an `httpx.AsyncClient`."""
    headers = {str(k): str(v) for k, v in dict(grant["headers"]).items()}
    url = str(grant["url"])
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as store:
        attempts, first = retries, True
        while True:
            if not isinstance(body, bytes):
                body.seek(0)
            data = body if isinstance(body, bytes) else _async_chunks(body)
            try:
                response = await store.request(str(grant["method"]), url, headers=headers,
                                               content=data)  # fmt: skip
            except httpx.TransportError as exc:
                attempts = _again(exc, attempts)
                first = False
                continue
            if _stored(response.status_code, first):
                return


async def _async_chunks(handle: IO[bytes]) -> AsyncIterator[bytes]:
    for chunk in _chunks(handle):
        yield chunk


def download(grant: dict[str, Any], timeout: Any) -> Iterator[bytes]:
    """The body of a download grant, streamed in chunks."""
    headers = {str(k): str(v) for k, v in dict(grant["headers"]).items()}
    with httpx.Client(timeout=timeout, trust_env=False) as store:
        try:
            with store.stream("GET", str(grant["url"]), headers=headers) as response:
                if response.status_code != 200:
                    raise _refused(response.status_code, "download")
                yield from response.iter_bytes(CHUNK)
        except httpx.TransportError as exc:
            raise unreachable(exc) from None


async def download_async(grant: dict[str, Any], timeout: Any) -> AsyncIterator[bytes]:
    """`download` for `AsyncClient`."""
    headers = {str(k): str(v) for k, v in dict(grant["headers"]).items()}
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as store:
        try:
            async with store.stream("GET", str(grant["url"]), headers=headers) as response:
                if response.status_code != 200:
                    raise _refused(response.status_code, "download")
                async for chunk in response.aiter_bytes(CHUNK):
                    yield chunk
        except httpx.TransportError as exc:
            raise unreachable(exc) from None
