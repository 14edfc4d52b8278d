"""The bearer token of a request: its SHA-256, or `authentication_failed` (AUTH-2)."""

from __future__ import annotations

import hashlib
import re

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.limits import BEARER_MAX_BYTES

# What a bearer token may not contain: control characters, DEL, and any whitespace (str.isspace,
# which `\s` matches in a str pattern).
_NOT_TOKEN_TEXT = re.compile(r"[\s\x00-\x20\x7f]")


def bearer_digest(authorization: str | None) -> bytes:
    """SHA-256 of the bearer token text, or `authentication_failed` (AUTH-2)."""
    if authorization is None:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "missing bearer token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed bearer token")
    if token.isascii():
        # The common case, without the pattern: in ASCII, the control characters and DEL are
        # exactly what `isprintable` refuses, and the only other whitespace is the space.
        if len(token) > BEARER_MAX_BYTES or not token.isprintable() or " " in token:
            raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed bearer token")
        return hashlib.sha256(token.encode("ascii")).digest()
    if (
        len(token.encode("utf-8", "replace")) > BEARER_MAX_BYTES
        or _NOT_TOKEN_TEXT.search(token) is not None
    ):
        raise fail(ErrorCode.AUTHENTICATION_FAILED, "malformed bearer token")
    return hashlib.sha256(token.encode("utf-8")).digest()
