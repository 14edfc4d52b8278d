"""Bodies straight to and from the object store through grants (SPEC.md GRANT-8).

When a reservation's `transfer` is `{mode: "grant"}` (S3 bodies at the origin, R2 grants at
the edge) `Client.artifacts.put` asks for an upload grant and PUTs the body to its URL with
exactly the grant's headers (they are signed), and downloads read a download grant's URL when
the server issues them. Those requests go to the store, not the service: they use their own
plain HTTP transport (never the service's, which tests and proxies may replace) and carry no
bearer token. A grant is a bearer capability: it is never logged, and a refusal's message
names only the status. A PUT whose first attempt got no answer is sent again (with the body
rewound); a 412 then means the first one stored the body, and publication (which trusts only
the store's own observation, ART-4) decides.
"""

from __future__ import annotations

from collections.abc import Iterator
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
                error = unreachable(exc)
                if not error.retryable or attempts <= 0:
                    raise error from None  # never chain: the request names the signed URL
                attempts, first = attempts - 1, False
                continue
            if response.status_code == 412 and not first:
                return  # the attempt that got no answer stored it; publication verifies
            if response.status_code >= 300:
                raise _refused(response.status_code, "upload")
            return


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
