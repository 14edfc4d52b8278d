"""The bearer token's text rule (SPEC.md AUTH-2), checked on every code point."""

from __future__ import annotations

import hashlib

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.http.bearer import bearer_digest


def test_auth2_every_whitespace_and_control_character_is_refused() -> None:
    """The rule is `str.isspace()`, below 33 or DEL; checked against every code point."""
    for code in range(0x110000):
        ch = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates cannot arrive in a decoded header
        refused = ch.isspace() or code < 33 or code == 127
        if refused:
            with pytest.raises(AidememoError) as error:
                bearer_digest(f"Bearer ab{ch}cd")
            assert error.value.code is ErrorCode.AUTHENTICATION_FAILED
        elif code % 997 == 0:  # a sample of the accepted ones: the digest of the text
            token = f"ab{ch}cd"
            assert bearer_digest(f"Bearer {token}") == hashlib.sha256(token.encode()).digest()
