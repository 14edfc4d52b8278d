"""AWS Signature Version 4 for S3 with the stdlib only (SPEC.md GRANT-1, GRANT-2).

The edge runs in Pyodide, which has no botocore, so grants (query-presigned URLs) and the
header-signed requests the edge sends to R2's S3 endpoint are computed here with `hmac` and
`hashlib`. The output is byte for byte what botocore's `S3SigV4QueryAuth` and `S3SigV4Auth`
produce for the same inputs (tests/unit/test_sigv4.py checks a table against botocore):

- the object path is the key percent-encoded with `/` and `~` kept (S3 does not normalise it:
  `a//b/./c` stays as it is);
- the URL's query is `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
  `X-Amz-SignedHeaders` (and `X-Amz-Security-Token`) in that order, then `X-Amz-Signature`;
  the canonical query sorts them;
- the signed headers are `host` and every header the caller binds (lower-cased, values
  trimmed and inner white space collapsed), so a presigned PUT that binds `Content-Length`,
  `Content-Type` and `If-None-Match` is refused by the store unless the uploader sends exactly
  those values.

Addressing: `path` puts the bucket first in the path (`https://host/bucket/key`), `virtual`
in the host name (`https://bucket.host/key`); virtual addressing needs a DNS-compatible bucket
name and a host name that is not an IP address (botocore silently falls back to path style
there; this module refuses instead, so a configuration says what it gets).

Secrets never appear in a repr (`Credentials`), and a presigned URL is a bearer capability:
callers must not log or store it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "s3"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_EXPIRES_S = 7 * 24 * 60 * 60  # SigV4's bound on X-Amz-Expires
ADDRESSING_STYLES = ("path", "virtual")

_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Hop-by-hop and tracing headers botocore never signs (auth.SIGNED_HEADERS_BLACKLIST).
_UNSIGNED_HEADERS = frozenset(
    {
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)


@dataclass(frozen=True)
class Credentials:
    """An access key pair (and an optional session token); redacted in every repr."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Credentials(access_key_id={self.access_key_id!r}, secret_access_key=<redacted>)"


@dataclass(frozen=True)
class S3Location:
    """One bucket of an S3-compatible endpoint (`scheme://host[:port]`, no path)."""

    endpoint: str
    region: str
    bucket: str
    addressing: str = "path"

    def __post_init__(self) -> None:
        parts = urlsplit(self.endpoint)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError("the S3 endpoint must be an http or https URL")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise ValueError("the S3 endpoint must be scheme://host[:port] only")
        if self.addressing not in ADDRESSING_STYLES:
            raise ValueError("addressing must be 'path' or 'virtual'")
        if not self.bucket or "/" in self.bucket or not self.region:
            raise ValueError("a bucket name and a region are required")
        if self.addressing == "virtual":
            if _DNS_BUCKET.fullmatch(self.bucket) is None or "--" in self.bucket:
                raise ValueError("virtual addressing needs a DNS-compatible bucket name")
            if _is_ip(parts.hostname):
                raise ValueError("virtual addressing needs a host name, not an IP address")

    def host(self) -> str:
        """The `Host` header the store sees (lower case; the port unless it is the default)."""
        parts = urlsplit(self.endpoint)
        host = (parts.hostname or "").lower()
        if ":" in host:
            host = f"[{host}]"
        if self.addressing == "virtual":
            host = f"{self.bucket}.{host}"
        if parts.port is not None and parts.port != _DEFAULT_PORTS[parts.scheme]:
            host = f"{host}:{parts.port}"
        return host

    def path(self, key: str) -> str:
        """The encoded object path, which is also the canonical URI (S3 never normalises it)."""
        encoded = quote(key, safe="/~")
        return f"/{encoded}" if self.addressing == "virtual" else f"/{self.bucket}/{encoded}"

    def url(self, key: str) -> str:
        """The object's URL without a query."""
        return f"{urlsplit(self.endpoint).scheme}://{self.host()}{self.path(key)}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def amz_date(now_s: int) -> str:
    """`YYYYMMDDTHHMMSSZ` of a Unix time in seconds."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_s))


def _encode(value: str) -> str:
    return quote(value, safe="-_.~")


def _canonical_headers(host: str, headers: Mapping[str, str]) -> tuple[str, str]:
    merged: dict[str, str] = {}
    for name, value in headers.items():
        lname = name.lower().strip()
        if lname in _UNSIGNED_HEADERS:
            continue
        merged[lname] = " ".join(str(value).split())
    merged.setdefault("host", host)
    names = sorted(merged)
    canonical = "".join(f"{name}:{merged[name]}\n" for name in names)
    return canonical, ";".join(names)


def _signature(creds: Credentials, region: str, stamp: str, canonical_request: str) -> str:
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = f"AWS4{creds.secret_access_key}".encode()
    for part in (stamp[:8], region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _check(method: str, key: str) -> str:
    upper = method.upper()
    if upper not in _METHODS:
        raise ValueError(f"cannot sign {method!r} for an object")
    if not key:
        raise ValueError("an object key is required")
    return upper


def presign_url(
    creds: Credentials,
    location: S3Location,
    method: str,
    key: str,
    *,
    now_s: int,
    expires_s: int,
    headers: Mapping[str, str] | None = None,
) -> str:
    """A query-presigned URL for `method` on `key`, valid `expires_s` seconds from `now_s`.

    Every header in `headers` is signed: the request must carry it with exactly that value.
    """
    upper = _check(method, key)
    if not 1 <= expires_s <= MAX_EXPIRES_S:
        raise ValueError(f"expires_s must be 1..{MAX_EXPIRES_S}")
    stamp = amz_date(now_s)
    canonical_headers, signed = _canonical_headers(location.host(), headers or {})
    params = [
        ("X-Amz-Algorithm", ALGORITHM),
        (
            "X-Amz-Credential",
            f"{creds.access_key_id}/{stamp[:8]}/{location.region}/s3/aws4_request",
        ),
        ("X-Amz-Date", stamp),
        ("X-Amz-Expires", str(expires_s)),
        ("X-Amz-SignedHeaders", signed),
    ]
    if creds.session_token is not None:
        params.append(("X-Amz-Security-Token", creds.session_token))
    encoded = [(_encode(k), _encode(v)) for k, v in params]
    query = "&".join(f"{k}={v}" for k, v in encoded)
    canonical_query = "&".join(f"{k}={v}" for k, v in sorted(encoded))
    path = location.path(key)
    canonical_request = "\n".join(
        [upper, path, canonical_query, canonical_headers, signed, UNSIGNED_PAYLOAD]
    )
    signature = _signature(creds, location.region, stamp, canonical_request)
    return f"{location.url(key)}?{query}&X-Amz-Signature={signature}"


def sign_request(
    creds: Credentials,
    location: S3Location,
    method: str,
    key: str,
    *,
    now_s: int,
    headers: Mapping[str, str] | None = None,
    payload_sha256: str = EMPTY_SHA256,
) -> tuple[str, dict[str, str]]:
    """`(url, headers)` of a header-signed request (`Authorization`) for `method` on `key`:
    the caller's `headers` plus `X-Amz-Date`, `X-Amz-Content-SHA256` (and
    `X-Amz-Security-Token`) and `Authorization`. The edge HEADs uploaded objects this way."""
    upper = _check(method, key)
    stamp = amz_date(now_s)
    out = dict(headers or {})
    out["X-Amz-Date"] = stamp
    if creds.session_token is not None:
        out["X-Amz-Security-Token"] = creds.session_token
    out["X-Amz-Content-SHA256"] = payload_sha256
    canonical_headers, signed = _canonical_headers(location.host(), out)
    canonical_request = "\n".join(
        [upper, location.path(key), "", canonical_headers, signed, payload_sha256]
    )
    signature = _signature(creds, location.region, stamp, canonical_request)
    scope = f"{creds.access_key_id}/{stamp[:8]}/{location.region}/{SERVICE}/aws4_request"
    out["Authorization"] = (
        f"{ALGORITHM} Credential={scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return location.url(key), out
