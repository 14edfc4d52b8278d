"""The edge's grant signer: R2's S3 API, presigned with the stdlib (SPEC.md GRANT-5).

The Worker's `ARTIFACTS` binding has no presigned URLs, so when the deployment gives R2 S3
credentials (secrets `R2_ACCESS_KEY_ID`, `R2_SECRET_ACCESS_KEY`; vars `R2_ACCOUNT_ID`,
`R2_BUCKET`) the edge's body store becomes grant-issuing like the origin's S3 bodies: the
project object's reservations offer `transfer: {mode: "grant"}`, upload grants are presigned
`PUT`s of the generation key, and download grants presigned `GET`s bound to the ETag, all
signed by `aidememo.bodies.sigv4` with R2's region `auto`. The endpoint is
`https://<account>.r2.cloudflarestorage.com` unless `R2_S3_ENDPOINT` names another
S3-compatible endpoint (offline tests point it at SeaweedFS; `R2_S3_REGION` its region).

Presigning is pure computation, so the object signs upload grants itself; every request that
reaches the store (the HEAD before publication and before a download grant, GETs, GC's
DELETEs) is sent through the Workers `fetch` (`durable_objects.r2_s3`), header-signed by
`signed`. Keys are the bare generations, as in the binding, so both see the same objects.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aidememo.bodies import sigv4
from aidememo.domain.errors import ErrorCode, fail
from aidememo.service.artifact_grants import GRANT_MAX_BODY_BYTES, GRANT_MAX_MS

ACCESS_KEY = "R2_ACCESS_KEY_ID"
SECRET_KEY = "R2_SECRET_ACCESS_KEY"
ACCOUNT = "R2_ACCOUNT_ID"
BUCKET = "R2_BUCKET"
ENDPOINT = "R2_S3_ENDPOINT"
REGION = "R2_S3_REGION"
R2_REGION = "auto"

_KEY = re.compile(r"gen_[A-Za-z0-9_-]{1,120}")
_ACCOUNT = re.compile(r"[0-9a-fA-F]{32}")


def _var(env: Any, name: str) -> str:
    value = env.get(name) if isinstance(env, Mapping) else getattr(env, name, None)
    return "" if value is None else str(value).strip()


@dataclass(frozen=True)
class ObjectInfo:
    """What the store's HEAD says about an object."""

    size: int
    etag: str
    content_type: str


class R2Grants:
    """A grant-issuing body store over R2's S3 API: it signs, the Worker sends."""

    transfer_mode = "grant"
    max_body_bytes = GRANT_MAX_BODY_BYTES  # one S3 PUT (GRANT-3)
    grant_window_ms = GRANT_MAX_MS  # no grant lives longer (GRANT-4)
    identity = "r2:v1:ARTIFACTS"  # the binding's bucket, reached through its S3 API

    def __init__(self, creds: sigv4.Credentials, location: sigv4.S3Location) -> None:
        self.creds = creds
        self.location = location

    def __repr__(self) -> str:
        return f"R2Grants(endpoint={self.location.endpoint!r}, bucket={self.location.bucket!r})"

    def key(self, key: str) -> str:
        """The object key of a generation; refuses anything that is not one."""
        if _KEY.fullmatch(key) is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "not a body key")
        return key

    def _now_s(self) -> int:
        # The store checks signatures against its own wall clock, so they are dated by the
        # real time, never by an injected clock (as boto3 signs at the origin).
        return int(time.time())

    def presign_put(
        self, key: str, size: int, content_type: str, expires_s: int, sha256: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """The origin's upload grant (GRANT-3): exact length and type, create-only, and the
        store-verified `x-amz-checksum-sha256` when the reservation declares `sha256`."""
        headers = {
            "Content-Length": str(size),
            "Content-Type": content_type,
            "If-None-Match": "*",
        }
        if sha256 is not None:
            headers["x-amz-checksum-sha256"] = base64.b64encode(bytes.fromhex(sha256)).decode()
        url = sigv4.presign_url(
            self.creds, self.location, "PUT", self.key(key),
            now_s=self._now_s(), expires_s=expires_s, headers=headers,
        )  # fmt: skip
        return url, headers

    def presign_get(self, key: str, etag: str, expires_s: int) -> tuple[str, dict[str, str]]:
        """A GET of `key` only while its ETag is `etag` (GRANT-4)."""
        headers = {"If-Match": etag}
        url = sigv4.presign_url(
            self.creds, self.location, "GET", self.key(key),
            now_s=self._now_s(), expires_s=expires_s, headers=headers,
        )  # fmt: skip
        return url, headers

    def signed(
        self, method: str, key: str, headers: Mapping[str, str] | None = None
    ) -> tuple[str, dict[str, str]]:
        """`(url, headers)` of a header-signed request the Worker sends to the store."""
        return sigv4.sign_request(
            self.creds, self.location, method, self.key(key), now_s=self._now_s(),
            headers=headers,
        )  # fmt: skip

    # The synchronous body-store calls: never reached at the edge, where the Worker sends every
    # request to the store (durable_objects.r2_s3); they refuse rather than block an object.
    def stat(self, key: str) -> ObjectInfo | None:
        raise _not_here()

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        raise _not_here()

    def head(self, key: str) -> int | None:
        raise _not_here()

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        raise _not_here()

    def delete(self, key: str) -> None:
        raise _not_here()


def _not_here() -> Exception:
    return fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, "the edge reaches its store from the Worker")


def from_env(env: Any) -> R2Grants | None:
    """The edge's grant signer when the R2 S3 secrets and vars are all set, else None (the
    binding alone: direct bodies). Half a configuration is refused rather than ignored."""
    access, secret = _var(env, ACCESS_KEY), _var(env, SECRET_KEY)
    account, bucket, endpoint = _var(env, ACCOUNT), _var(env, BUCKET), _var(env, ENDPOINT)
    if not (access or secret):
        return None
    if not (access and secret and bucket and (account or endpoint)):
        raise fail(
            ErrorCode.ARTIFACT_STORE_UNAVAILABLE,
            f"grants need {ACCESS_KEY}, {SECRET_KEY}, {BUCKET} and {ACCOUNT} (or {ENDPOINT})",
        )
    if not endpoint:
        if _ACCOUNT.fullmatch(account) is None:
            raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, f"{ACCOUNT} is not an account id")
        endpoint = f"https://{account.lower()}.r2.cloudflarestorage.com"
    region = _var(env, REGION) or R2_REGION
    try:
        location = sigv4.S3Location(endpoint.rstrip("/"), region, bucket, "path")
    except ValueError as exc:
        raise fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, f"{ENDPOINT}: {exc}") from None
    return R2Grants(sigv4.Credentials(access, secret), location)
