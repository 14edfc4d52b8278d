"""Artifact bodies in an S3-compatible bucket through boto3 (`serve --artifact-backend s3`,
SPEC.md OBJ-2, OBJ-3).

Origin-only: boto3 never reaches the core or the edge. Every body lives at
`<prefix><generation key>` in one bucket; keys are the catalog's random generations, checked
here again, so nothing is written outside the prefix. Credentials come from boto3's standard
provider chain (environment, shared files, instance or container roles), never from the command
line, and never enter the identity: that pins endpoint, region, bucket, prefix and addressing
only, so a catalog refuses to start against another bucket or layout (ART-8).

- `create` is one conditional `PutObject` (`If-None-Match: *`) of exactly `size` streamed
  bytes (unsigned payload: the body is never buffered to hash it first); a body already under
  the key is kept (412) and observed, so the caller compares, as with local files.
- `head` and `stat` are `HeadObject`; `read` a ranged `GetObject`; `delete` `DeleteObject`
  (idempotent in S3).
- Large bodies never traverse the service: `transfer_mode` is `grant`, so the direct upload
  route answers 409 `artifact_transfer_mode_mismatch` and writers upload through presigned
  grants (`presign_put`: boto3's presigner, with the client's own credentials). With a
  `public_endpoint` the grants name that endpoint instead of the service's own (OBJ-4).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlsplit

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.service.artifact_grants import GRANT_MAX_BODY_BYTES, GRANT_MAX_MS

CHUNK = 64 << 10
ADDRESSING = ("path", "virtual", "auto")
_KEY = re.compile(r"[A-Za-z0-9_]{3,96}")
_PREFIX = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]*/)*")
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
_EXISTS = frozenset({"412", "PreconditionFailed", "ConditionalRequestConflict"})


@dataclass(frozen=True)
class S3Config:
    """Where the bodies live; nothing secret (the identity is made from all of it)."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str = "us-east-1"
    addressing: str = "path"
    public_endpoint: str | None = None
    """Where grant URLs point when the uploaders reach the store at another address than the
    service does (OBJ-4); not part of the identity: the bucket is the same."""

    def __post_init__(self) -> None:
        if _BUCKET.fullmatch(self.bucket) is None:
            raise ValueError(f"not an S3 bucket name: {self.bucket!r}")
        if _PREFIX.fullmatch(self.prefix) is None or ".." in self.prefix.split("/"):
            raise ValueError(
                "the S3 prefix must be empty or segments of [A-Za-z0-9._-] each ending in '/'"
            )
        if self.addressing not in ADDRESSING:
            raise ValueError("addressing must be path, virtual or auto")
        if not self.region:
            raise ValueError("an S3 region is required")
        for endpoint in (self.endpoint, self.public_endpoint):
            if endpoint is None:
                continue
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("the S3 endpoint must be an http or https URL")
            if parts.username or parts.password or parts.query or parts.fragment:
                raise ValueError("the S3 endpoint must not carry credentials or a query")

    def normalized_endpoint(self) -> str:
        """The endpoint as the identity records it (scheme and host lower case, no '/')."""
        if self.endpoint is None:
            return "aws"
        parts = urlsplit(self.endpoint)
        netloc = (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")
        return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"

    def identity(self) -> str:
        """The credential-free body-store identity the catalog is pinned to (OBJ-2)."""
        fields = [
            ("endpoint", self.normalized_endpoint()),
            ("region", self.region),
            ("bucket", self.bucket),
            ("prefix", self.prefix),
            ("addressing", self.addressing),
        ]
        return "s3:v1?" + "&".join(f"{k}={quote(v, safe='/:')}" for k, v in fields)


@dataclass(frozen=True)
class ObjectInfo:
    """What the store's HEAD says about an object."""

    size: int
    etag: str
    content_type: str


class _Stream:
    """A file-like view of `chunks` that refuses more or fewer than `size` bytes."""

    def __init__(self, chunks: Iterator[bytes], size: int) -> None:
        self._chunks = chunks
        self._size = size
        self._buffer = b""
        self.count = 0
        self.digest = hashlib.sha256()
        self.wrong_size = False

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buffer) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                if self.count != self._size:
                    self.wrong_size = True
                    raise _WrongSize
                break
            self.count += len(chunk)
            if self.count > self._size:
                self.wrong_size = True
                raise _WrongSize
            self.digest.update(chunk)
            self._buffer += chunk
        if n < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


class _WrongSize(Exception):
    pass


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    error = response.get("Error") or {}
    code = str(error.get("Code", ""))
    status = str((response.get("ResponseMetadata") or {}).get("HTTPStatusCode", ""))
    return code if code and not code.isdigit() else status or code


def _unavailable(exc: BaseException) -> AidememoError:
    return fail(ErrorCode.ARTIFACT_STORE_UNAVAILABLE, f"the S3 body store failed: {_code(exc)}")


class S3Bodies:
    """`BodyStore` over one bucket and prefix of an S3-compatible store."""

    transfer_mode = "grant"
    max_body_bytes = GRANT_MAX_BODY_BYTES  # one PUT's limit in S3 (GRANT-3)
    grant_window_ms = GRANT_MAX_MS  # no grant lives longer (GRANT-4)

    def __init__(
        self, config: S3Config, client: Any | None = None, presigner: Any | None = None
    ) -> None:
        self.config = config
        self.identity = config.identity()
        self.client = client if client is not None else make_client(config)
        # Grants are signed for the public endpoint when there is one (OBJ-4): a presigned
        # URL names the host it was signed for, so it is signed by a client of that endpoint.
        if presigner is None and config.public_endpoint is not None:
            presigner = make_client(replace(config, endpoint=config.public_endpoint))
        self.presigner = presigner if presigner is not None else self.client

    def __repr__(self) -> str:
        return f"S3Bodies({self.identity!r})"

    def presign_put(
        self, key: str, size: int, content_type: str, expires_s: int, sha256: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """A presigned single PUT of exactly `size` bytes of `content_type` that only creates
        (`If-None-Match: *`), and the headers the uploader must send with it (GRANT-3). With
        `sha256` (hex) the store itself verifies the bytes (`x-amz-checksum-sha256`) and keeps
        the checksum, which `observe` then reads from the HEAD."""
        headers = {
            "Content-Length": str(size),
            "Content-Type": content_type,
            "If-None-Match": "*",
        }
        params: dict[str, Any] = {
            "Bucket": self.config.bucket,
            "Key": self.object_key(key),
            "ContentLength": size,
            "ContentType": content_type,
            "IfNoneMatch": "*",
        }
        if sha256 is not None:
            checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
            headers["x-amz-checksum-sha256"] = checksum
            params["ChecksumSHA256"] = checksum
        url: str = self.presigner.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=expires_s
        )
        return url, headers

    def object_key(self, key: str) -> str:
        """The bucket key of a generation; refuses anything that is not one."""
        if _KEY.fullmatch(key) is None:
            raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "not a body key")
        return self.config.prefix + key

    def create(self, key: str, chunks: Iterator[bytes], size: int) -> tuple[int, str]:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self.object_key(key)
        stream = _Stream(chunks, size)
        try:
            self.client.put_object(
                Bucket=self.config.bucket,
                Key=name,
                Body=stream,
                ContentLength=size,
                ContentType="application/octet-stream",
                IfNoneMatch="*",
            )
        except ClientError as exc:
            if _code(exc) in _EXISTS:
                return self._observe(key)
            if stream.wrong_size:
                raise self._wrong_size(size) from None
            raise _unavailable(exc) from None
        except (_WrongSize, BotoCoreError) as exc:
            if stream.wrong_size or isinstance(exc, _WrongSize):
                raise self._wrong_size(size) from None
            raise _unavailable(exc) from None
        if stream.count != size:
            raise self._wrong_size(size)
        return size, stream.digest.hexdigest()

    def _wrong_size(self, size: int) -> AidememoError:
        return fail(ErrorCode.ARTIFACT_BODY_MISMATCH, f"the body is not {size} bytes long")

    def _observe(self, key: str) -> tuple[int, str]:
        digest = hashlib.sha256()
        size = 0
        for chunk in self.read(key):
            size += len(chunk)
            digest.update(chunk)
        return size, digest.hexdigest()

    def _head(self, key: str, **options: str) -> dict[str, Any] | None:
        """The object's HEAD answer (`options` added to the request), or None when absent."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            meta: dict[str, Any] = self.client.head_object(
                Bucket=self.config.bucket, Key=self.object_key(key), **options
            )
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            raise _unavailable(exc) from None
        except BotoCoreError as exc:
            raise _unavailable(exc) from None
        return meta

    def stat(self, key: str) -> ObjectInfo | None:
        """Size, ETag and content type of the stored object, or None when it is absent."""
        meta = self._head(key)
        if meta is None:
            return None
        return ObjectInfo(
            size=int(meta["ContentLength"]),
            etag=str(meta.get("ETag", "")),
            content_type=str(meta.get("ContentType", "")),
        )

    def presign_get(self, key: str, etag: str, expires_s: int) -> tuple[str, dict[str, str]]:
        """A presigned GET of the object only while its ETag is `etag` (`If-Match`), and the
        headers the reader must send with it (GRANT-4)."""
        params = {"Bucket": self.config.bucket, "Key": self.object_key(key), "IfMatch": etag}
        url: str = self.presigner.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires_s
        )
        return url, {"If-Match": etag}

    def observe(self, key: str) -> tuple[int, str] | None:
        """`(size, sha256 hex)` of the stored object, None when absent: from the store's own
        SHA-256 checksum on its HEAD when the upload carried one (a grant of a reservation
        with `sha256`), else by reading the bytes back and hashing them (ART-4)."""
        meta = self._head(key, ChecksumMode="ENABLED")
        if meta is None:
            return None
        size = int(meta["ContentLength"])
        checksum = meta.get("ChecksumSHA256")
        if isinstance(checksum, str) and "-" not in checksum:  # not a multipart composite
            try:
                digest = base64.b64decode(checksum, validate=True)
            except ValueError:
                digest = b""
            if len(digest) == 32:
                return size, digest.hex()
        return self._observe(key)

    def head(self, key: str) -> int | None:
        info = self.stat(key)
        return None if info is None else info.size

    def read(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self.object_key(key)
        if end is not None and end <= start:
            if self.head(key) is None:
                raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no body under this key")
            return iter(())
        params: dict[str, Any] = {"Bucket": self.config.bucket, "Key": name}
        if start or end is not None:
            params["Range"] = f"bytes={start}-" + ("" if end is None else str(end - 1))
        try:
            answer = self.client.get_object(**params)
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING:
                raise fail(ErrorCode.ARTIFACT_NOT_FOUND, "no body under this key") from None
            if code in ("416", "InvalidRange"):
                return iter(())
            raise _unavailable(exc) from None
        except BotoCoreError as exc:
            raise _unavailable(exc) from None
        return _chunks(answer["Body"])

    def delete(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.config.bucket, Key=self.object_key(key))
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return
            raise _unavailable(exc) from None
        except BotoCoreError as exc:
            raise _unavailable(exc) from None


def _chunks(body: Any) -> Iterator[bytes]:
    try:
        while True:
            chunk = body.read(CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        body.close()


def make_client(config: S3Config, session: Any | None = None) -> Any:
    """A boto3 S3 client for `config`; credentials from boto3's default provider chain (or
    `session`'s).

    Payload signing is off (`UNSIGNED-PAYLOAD`), so a streamed body is sent as it comes;
    checksums only where the operation requires them, so a PUT is one plain request."""
    import boto3
    from botocore.config import Config

    return (session or boto3.session.Session()).client(
        "s3",
        endpoint_url=config.endpoint,
        region_name=config.region,
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": config.addressing, "payload_signing_enabled": False},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 3, "mode": "standard"},
        ),
    )
