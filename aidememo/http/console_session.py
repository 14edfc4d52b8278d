"""The browser console's session cookie and its cross-site checks (SPEC.md CONSOLE-2..CONSOLE-5).

A person signs in once with a member token (`POST /console/session`, the token in the
`Authorization` header); the answer sets an HttpOnly, SameSite=Strict cookie (Secure, and
named with the `__Host-` prefix, when the console was reached over https) whose value holds
no token: the token's SHA-256, an expiry one hour on, and an HMAC-SHA256 of both under the
server's console key. The pipeline (`aidememo.http.pipeline.admit`) takes such a cookie in
place of a bearer header on member `GET` routes only, and resolves its digest exactly as a
bearer token's (`Authenticate(digest)`), so a revoked token loses its console sessions on the
very next request, and every write still needs the bearer header (no request a cookie
authenticates changes anything, which is what makes the API immune to cross-site forgery).
Two cookie requests must also carry an `Origin` whose host is the request's `Host`: the live
feed's WebSocket upgrade (browsers do not apply CORS to WebSockets) and the one read made by
`POST`, the artifact download (`Route.console_read`).

Nothing here does I/O; `now_ms` is the caller's clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from urllib.parse import urlsplit

from aidememo.domain.errors import ErrorCode, fail

SESSION_TTL_MS = 60 * 60 * 1000  # one hour: a stolen cookie is worth little for long
COOKIE_NAME = "aidememo-console"
SECURE_COOKIE_NAME = "__Host-aidememo-console"  # the browser keeps it to https, path /, no Domain
CSRF_HEADER = "x-aidememo-console"  # sign-in/out need it: a cross-site form cannot send it
_MAC_LABEL = b"aidememo console session v1\x00"
_DIGEST_BYTES, _EXPIRY_BYTES, _MAC_BYTES = 32, 8, 32
_VALUE_BYTES = _DIGEST_BYTES + _EXPIRY_BYTES + _MAC_BYTES
_VALUE_CHARS = 96  # base64url of 72 bytes, no padding


def _mac(key: bytes, digest: bytes, expiry: bytes) -> bytes:
    return hmac.new(key, _MAC_LABEL + digest + expiry, hashlib.sha256).digest()


def mint(key: bytes, digest: bytes, now_ms: int) -> tuple[str, int]:
    """A cookie value for the token `digest`, and the time it expires (ms since the epoch)."""
    expires = now_ms + SESSION_TTL_MS
    expiry = expires.to_bytes(_EXPIRY_BYTES, "big")
    raw = digest + expiry + _mac(key, digest, expiry)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="), expires


def verify(key: bytes, value: str, now_ms: int) -> bytes:
    """The token digest a cookie value carries, or `authentication_failed` (forged, altered,
    made under another key, or expired)."""
    if len(value) != _VALUE_CHARS:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed console session")
    try:
        raw = base64.urlsafe_b64decode(value + "==")
    except (binascii.Error, ValueError):
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed console session") from None
    if len(raw) != _VALUE_BYTES:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed console session")
    digest = raw[:_DIGEST_BYTES]
    expiry = raw[_DIGEST_BYTES : _DIGEST_BYTES + _EXPIRY_BYTES]
    if not hmac.compare_digest(raw[_DIGEST_BYTES + _EXPIRY_BYTES :], _mac(key, digest, expiry)):
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "invalid console session")
    if int.from_bytes(expiry, "big") <= now_ms:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "console session expired; sign in again")
    return digest


def session_cookie(headers: dict[str, str]) -> str | None:
    """The console cookie's value among the request's cookies, or None."""
    raw = headers.get("cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name in (SECURE_COOKIE_NAME, COOKIE_NAME):
            return value.strip()
    return None


def same_origin(headers: dict[str, str]) -> bool:
    """True when the request names an `Origin` whose host is its own `Host`, and its
    `Sec-Fetch-Site` (when the browser sent one) says same-origin."""
    origin, host = headers.get("origin"), headers.get("host")
    if not origin or not host:
        return False
    site = headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return False
    return hmac.compare_digest(netloc.lower().encode(), host.strip().lower().encode())


def check_state_change(headers: dict[str, str]) -> None:
    """A browser request that changes the session (sign-in, sign-out) must come from the
    console's own page: same origin and the console's header, else 403
    `origin_not_allowed` (CONSOLE-4)."""
    if headers.get(CSRF_HEADER) != "1" or not same_origin(headers):
        raise fail(ErrorCode.ORIGIN_NOT_ALLOWED, "console requests must come from the console")


def cookie_digest(
    headers: dict[str, str], same_origin_only: bool, key: bytes, now_ms: int
) -> bytes | None:
    """The token digest of the request's console cookie (None without one): verified, and
    with `same_origin_only` (a WebSocket upgrade, a read by POST) only from the console's own
    origin (CONSOLE-3)."""
    value = session_cookie(headers)
    if value is None:
        return None
    digest = verify(key, value, now_ms)
    if same_origin_only and not same_origin(headers):
        raise fail(ErrorCode.ORIGIN_NOT_ALLOWED, "a console session works from the console only")
    return digest


def set_cookie(value: str, secure: bool) -> str:
    """The `Set-Cookie` header value of a new session."""
    name = SECURE_COOKIE_NAME if secure else COOKIE_NAME
    max_age = SESSION_TTL_MS // 1000
    flags = "; Secure" if secure else ""
    return f"{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{flags}"


def clear_cookies() -> list[str]:
    """The `Set-Cookie` header values that drop both cookie names."""
    return [
        f"{SECURE_COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure",
        f"{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
    ]
