"""The request's media type and charset (SPEC.md HTTP-1, HTTP-7), read the same at origin and
edge."""

from __future__ import annotations

from aidememo.domain.errors import ErrorCode, fail

# The charset names a body may declare: UTF-8 as registered, and the common spelling without
# the dash, compared without case.
UTF8_NAMES = frozenset({"utf-8", "utf8"})


def check_media_type(content_type: str | None, expected: str) -> None:
    """`unsupported_media_type` unless `content_type` is `expected` (any case, parameters
    allowed) with no `charset` parameter or a UTF-8 one; a missing content type is read as
    `expected` (HTTP-1)."""
    if content_type is None:
        return
    media_type, *params = content_type.split(";")
    if media_type.strip().lower() != expected:
        raise fail(ErrorCode.UNSUPPORTED_MEDIA_TYPE, f"send {expected}")
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() != "charset":
            continue
        charset = value.strip()
        if len(charset) >= 2 and charset[0] == charset[-1] == '"':
            charset = charset[1:-1]
        if charset.lower() not in UTF8_NAMES:
            raise fail(
                ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                f"bodies are UTF-8: send {expected} without a charset or with charset=utf-8",
            )
