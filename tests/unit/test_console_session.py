"""The console's session cookie and same-origin checks (SPEC.md CONSOLE-2..CONSOLE-4), as
pure functions: minting, verifying, the cookie header and the request checks."""

from __future__ import annotations

import hashlib

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.http import console_session as cs

KEY = bytes(range(32))
DIGEST = hashlib.sha256(b"a member token").digest()
NOW = 1_800_000_000_000


def test_console2_cookie_carries_digest_and_expiry_never_the_token() -> None:
    value, expires = cs.mint(KEY, DIGEST, NOW)
    assert expires == NOW + cs.SESSION_TTL_MS == NOW + 3_600_000
    assert "a member token" not in value and len(value) == 96
    assert cs.verify(KEY, value, NOW + 1) == DIGEST
    header = cs.set_cookie(value, secure=True)
    assert header.startswith("__Host-aidememo-console=")
    for flag in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/", "Max-Age=3600"):
        assert flag in header
    plain = cs.set_cookie(value, secure=False)
    assert plain.startswith("aidememo-console=") and "Secure" not in plain


@pytest.mark.parametrize("later_ms", [cs.SESSION_TTL_MS, cs.SESSION_TTL_MS + 1])
def test_console2_expired_cookie_is_authentication_failed(later_ms: int) -> None:
    value, _ = cs.mint(KEY, DIGEST, NOW)
    with pytest.raises(AidememoError) as err:
        cs.verify(KEY, value, NOW + later_ms)
    assert err.value.code is ErrorCode.AUTHENTICATION_FAILED


def test_console3_forged_altered_or_foreign_cookie_is_refused() -> None:
    value, _ = cs.mint(KEY, DIGEST, NOW)
    altered = ("A" if value[0] != "A" else "B") + value[1:]
    foreign, _ = cs.mint(bytes(32), DIGEST, NOW)
    for bad in (altered, foreign, value[:-1], value + "A", "", "!" * 96):
        with pytest.raises(AidememoError) as err:
            cs.verify(KEY, bad, NOW)
        assert err.value.code is ErrorCode.AUTHENTICATION_FAILED


def test_console3_cookie_found_among_others_and_checked_for_origin_on_upgrade() -> None:
    value, _ = cs.mint(KEY, DIGEST, NOW)
    headers = {"cookie": f"a=b; aidememo-console={value}; c=d", "host": "h:1"}
    assert cs.cookie_digest(headers, False, KEY, NOW) == DIGEST
    assert cs.cookie_digest({"host": "h:1"}, True, KEY, NOW) is None
    with pytest.raises(AidememoError) as err:
        cs.cookie_digest(headers, True, KEY, NOW)
    assert err.value.code is ErrorCode.ORIGIN_NOT_ALLOWED
    same = {**headers, "origin": "http://h:1"}
    assert cs.cookie_digest(same, True, KEY, NOW) == DIGEST
    cross = {**headers, "origin": "http://evil.test"}
    with pytest.raises(AidememoError):
        cs.cookie_digest(cross, True, KEY, NOW)


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"origin": "https://c.test", "host": "c.test", "x-aidememo-console": "1"}, True),
        (
            {
                "origin": "https://c.test",
                "host": "c.test",
                "x-aidememo-console": "1",
                "sec-fetch-site": "same-origin",
            },
            True,
        ),
        ({"origin": "https://c.test", "host": "c.test"}, False),  # no console header
        ({"host": "c.test", "x-aidememo-console": "1"}, False),  # no Origin
        ({"origin": "https://evil.test", "host": "c.test", "x-aidememo-console": "1"}, False),
        (
            {
                "origin": "https://c.test",
                "host": "c.test",
                "x-aidememo-console": "1",
                "sec-fetch-site": "cross-site",
            },
            False,
        ),
        ({"origin": "null", "host": "c.test", "x-aidememo-console": "1"}, False),
    ],
)
def test_console4_sign_in_and_out_need_the_console_header_and_same_origin(
    headers: dict[str, str], allowed: bool
) -> None:
    if allowed:
        cs.check_state_change(headers)
    else:
        with pytest.raises(AidememoError) as err:
            cs.check_state_change(headers)
        assert err.value.code is ErrorCode.ORIGIN_NOT_ALLOWED


def test_console4_sign_out_expires_both_cookie_names() -> None:
    cleared = cs.clear_cookies()
    assert {c.split("=", 1)[0] for c in cleared} == {cs.COOKIE_NAME, cs.SECURE_COOKIE_NAME}
    assert all("Max-Age=0" in c for c in cleared)
