"""Upload grants: presigned single PUTs straight into the object store (SPEC.md GRANT-3).

A grant is a bearer capability for exactly one object: the reservation's generation key (so
never outside the body store's prefix), exactly `size_bytes` of `content_type`, created only if
absent (`If-None-Match: *`), expiring at the earlier of 15 minutes from now and the
reservation's expiry. It is never stored and never logged: the answer carries it to the writer
and nothing else keeps it. Publication then trusts only the store's own observation of the
object (ART-4), so a grant cannot publish anything by itself.

The body store signs (`GrantSigner`): at the origin the S3 bodies through boto3. A body store
that cannot sign (local files, memory) takes bodies through the direct route instead, and a
grant request there is 409 `artifact_transfer_mode_mismatch`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from aidememo.domain.artifacts import GcIntent, Publication
from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.ids import validate_id
from aidememo.service.access import Caller
from aidememo.service.artifact_rules import not_live
from aidememo.service.artifacts import Artifacts

UPLOAD_GRANT_MAX_MS = 15 * 60 * 1000
DOWNLOAD_GRANT_MAX_MS = 15 * 60 * 1000
GRANT_MAX_MS = max(UPLOAD_GRANT_MAX_MS, DOWNLOAD_GRANT_MAX_MS)  # the body store's grant_window_ms
# A download may still stream this long after its grant expired (the read retention).
READ_RETENTION_MS = 60 * 1000
# S3's limit of one PUT; larger bodies would need multipart, which grants do not offer.
GRANT_MAX_BODY_BYTES = 5 * 1024**3


@runtime_checkable
class GrantSigner(Protocol):
    """A body store that presigns uploads into itself."""

    def presign_put(
        self, key: str, size: int, content_type: str, expires_s: int, sha256: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """`(url, headers)` of a PUT of exactly `size` bytes that only creates `key` (and
        whose SHA-256 the store verifies, when given)."""
        ...

    def presign_get(self, key: str, etag: str, expires_s: int) -> tuple[str, dict[str, str]]:
        """`(url, headers)` of a GET of `key` only while its ETag is `etag`."""
        ...

    def stat(self, key: str) -> Any:
        """The stored object's `size`, `etag` and `content_type`, or None when absent."""
        ...


def _signer(artifacts: Artifacts, instead: str) -> GrantSigner:
    """The body store, when it signs grants; else why not (no body store, or bodies move
    `instead`, through a route of this server)."""
    bodies = artifacts.bodies
    if bodies is None:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "no body store is configured here")
    if not isinstance(bodies, GrantSigner):
        raise fail(ErrorCode.ARTIFACT_TRANSFER_MODE_MISMATCH, f"this server {instead}, not grants")
    return bodies


def upload_grant(
    artifacts: Artifacts, caller: Caller, project_id: str, reservation_id: str
) -> dict[str, Any]:
    """`{url, method, headers, expires_at_ms}` for the reservation's one upload (GRANT-3)."""
    validate_id(reservation_id, "reservation_id")
    bodies = _signer(artifacts, "takes bodies through the direct upload route")
    r = artifacts._writable(caller, project_id, reservation_id)
    now = artifacts.clock.now_ms()
    problem = not_live(r, now)
    if problem is not None:
        raise problem
    if r.size_bytes > GRANT_MAX_BODY_BYTES:
        raise fail(ErrorCode.ARTIFACT_UPLOAD_TOO_LARGE, "a grant uploads at most 5 GiB")
    expires_s = (min(now + UPLOAD_GRANT_MAX_MS, r.expires_at_ms) - now) // 1000
    if expires_s < 1:  # a grant never outlives its reservation
        raise fail(ErrorCode.ARTIFACT_RESERVATION_EXPIRED, "the reservation expires too soon")
    url, headers = bodies.presign_put(
        r.generation, r.size_bytes, r.content_type, expires_s, r.sha256
    )
    return {
        "url": url,
        "method": "PUT",
        "headers": headers,
        "expires_at_ms": now + expires_s * 1000,
    }


def download_grant(
    artifacts: Artifacts, caller: Caller, project_id: str, artifact_id: str, revision: object
) -> dict[str, Any]:
    """`{url, method, headers, expires_at_ms, ...}`: a presigned GET of the exact revision's
    generation, bound to its ETag (GRANT-4).

    No grant outlives the body: a current generation's GC intent, once it becomes
    unreachable, is due no earlier than `grant_window_ms` after that (`Artifacts._settle_ms`),
    and a grant of a generation already queued expires `READ_RETENTION_MS` before its intent
    is due (or is refused as gone), so GC never deletes a body while a grant of it could
    still start or finish a download.
    """
    bodies = _signer(artifacts, "serves bodies through the download route")
    pub, expires_s = download_window(artifacts, caller, project_id, artifact_id, revision)
    info = bodies.stat(pub.generation)
    return download_answer(bodies, pub, info, expires_s, artifacts.clock.now_ms())


def download_window(
    artifacts: Artifacts, caller: Caller, project_id: str, artifact_id: str, revision: object
) -> tuple[Publication, int]:
    """The revision's publication and its grant's lifetime in seconds (GRANT-4): at most
    15 min, and a read retention short of its generation's GC intent when one is queued."""
    pub = artifacts.download_meta(caller, project_id, artifact_id, revision)
    now = artifacts.clock.now_ms()
    intent: GcIntent | None = artifacts.store.read(lambda tx: tx.get_gc_intent(pub.generation))
    until = now + DOWNLOAD_GRANT_MAX_MS
    if intent is not None:
        until = min(until, intent.not_before_ms - READ_RETENTION_MS)
    expires_s = (until - now) // 1000
    if expires_s < 1:
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "this revision's body is being collected")
    return pub, expires_s


def download_answer(
    bodies: GrantSigner, pub: Publication, info: Any, expires_s: int, now_ms: int
) -> dict[str, Any]:
    """The download grant of `pub` once the store's HEAD said `info` (None when absent)."""
    if info is None or info.size != pub.size_bytes:
        raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "the revision's body is not in the store")
    url, headers = bodies.presign_get(pub.generation, info.etag, expires_s)
    return {
        "url": url,
        "method": "GET",
        "headers": headers,
        "expires_at_ms": now_ms + expires_s * 1000,
        "size_bytes": pub.size_bytes,
        "sha256": pub.sha256,
        "content_type": pub.content_type,
    }
