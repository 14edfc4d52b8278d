"""The Worker's requests to R2's S3 API when the edge issues grants (SPEC.md GRANT-5, GRANT-6).

Each request is header-signed by `aidememo.bodies.r2_grants.R2Grants.signed` and sent with the
Workers `fetch`, so it works in Pyodide (no urllib, no botocore):

- `observe`: the stored object's `(size, sha256)` for publication: a `HEAD` asking for the
  store's checksum (`x-amz-checksum-mode: ENABLED`), which a grant PUT of a reservation with
  `sha256` carries; without one the body is read back with a `GET` and re-hashed (ART-4);
- `stat`: size and ETag for a download grant (GRANT-4);
- `open_body`: a streamed `GET` for the download route;
- `delete`: GC's idempotent `DELETE`.
A refusal or an unreachable store is `artifact_store_unavailable`; the URLs and signatures are
never logged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from aidememo.bodies.r2_grants import ObjectInfo, R2Grants
from aidememo.domain.errors import ErrorCode, fail


async def _send(
    grants: R2Grants, method: str, key: str, extra: dict[str, str] | None = None
) -> Any:
    from workers import fetch

    url, headers = grants.signed(method, key, extra)
    try:
        return await fetch(url, method=method, headers=headers)
    except Exception:  # the store is unreachable: never echo the signed URL
        raise fail(
            ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "the object store is unreachable"
        ) from None


def _header(response: Any, name: str) -> str | None:
    value = response.headers.get(name)
    return None if value is None else str(value)


def _refused(response: Any, what: str) -> Exception:
    return fail(
        ErrorCode.ARTIFACT_STORE_UNAVAILABLE,
        f"the object store refused the {what} ({int(response.status)})",
    )


async def _head(grants: R2Grants, key: str, extra: dict[str, str] | None = None) -> Any:
    response = await _send(grants, "HEAD", key, extra)
    status = int(response.status)
    if status == 404:
        return None
    if not 200 <= status < 300:
        raise _refused(response, "HEAD")
    return response


async def stat(grants: R2Grants, key: str) -> ObjectInfo | None:
    """Size, ETag and type of the stored object, or None when it is absent."""
    response = await _head(grants, key)
    if response is None:
        return None
    return ObjectInfo(
        size=int(_header(response, "content-length") or 0),
        etag=_header(response, "etag") or "",
        content_type=_header(response, "content-type") or "",
    )


async def open_body(grants: R2Grants, key: str) -> Any:
    """The `GET` response of the stored object (its `body` a stream), or None when absent."""
    response = await _send(grants, "GET", key)
    status = int(response.status)
    if status == 404:
        return None
    if status != 200:
        raise _refused(response, "GET")
    return response


async def observe(grants: R2Grants, key: str) -> tuple[int, str] | None:
    """`(size, sha256 hex)` of the stored object, None when absent (ART-4, GRANT-3)."""
    response = await _head(grants, key, {"x-amz-checksum-mode": "ENABLED"})
    if response is None:
        return None
    size = int(_header(response, "content-length") or 0)
    checksum = _header(response, "x-amz-checksum-sha256")
    if checksum is not None and "-" not in checksum:  # not a multipart composite
        try:
            digest = base64.b64decode(checksum, validate=True)
        except (ValueError, binascii.Error):
            digest = b""
        if len(digest) == 32:
            return size, digest.hex()
    body = await open_body(grants, key)
    if body is None:
        return None
    hasher = hashlib.sha256()
    seen = 0
    stream = body.body
    if stream is not None:
        async for chunk in stream:
            data = chunk.to_bytes()
            seen += len(data)
            hasher.update(data)
    return seen, hasher.hexdigest()


async def delete(grants: R2Grants, key: str) -> None:
    """Remove the object; nothing when it is gone already (S3's DELETE is idempotent)."""
    response = await _send(grants, "DELETE", key)
    status = int(response.status)
    if status not in (200, 204, 404):
        raise _refused(response, "DELETE")
