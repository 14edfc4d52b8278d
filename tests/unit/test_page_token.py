"""Snapshot page tokens (SNAP-3): what they carry, what they are bound to, and that nothing
else verifies."""

from __future__ import annotations

import base64

import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.model import ResourceRef
from aidememo.domain.page_token import TOKEN_MAX_CHARS, sign, verify

KEY = bytes(range(32))
BINDING = ("tenant_t", "project_p", "epoch_e", "actor_a")
AFTER = ResourceRef("custom.note", "n:1@x")


def _expired(key: bytes, binding: tuple[str, ...], token: str, now_ms: int = 0) -> None:
    with pytest.raises(AidememoError) as err:
        verify(key, binding, token, now_ms)
    assert err.value.code is ErrorCode.SNAPSHOT_EXPIRED and err.value.http_status == 409


def test_snap3_a_token_carries_seq_and_cursor_until_it_expires() -> None:
    token = sign(KEY, BINDING, 25_011, AFTER, 600_000)
    assert verify(KEY, BINDING, token, 599_999) == (25_011, AFTER)
    assert len(token) < TOKEN_MAX_CHARS and all(c.isalnum() or c in "-_." for c in token)
    _expired(KEY, BINDING, token, 600_000)
    longest = ResourceRef("k" * 96, "i" * 128)
    assert verify(KEY, BINDING, sign(KEY, BINDING, 2**63 - 1, longest, 2**62), 0)[1] == longest


def test_snap3_a_token_is_bound_to_key_tenant_project_epoch_and_actor() -> None:
    token = sign(KEY, BINDING, 7, AFTER, 10)
    _expired(bytes(32), BINDING, token)
    for i in range(len(BINDING)):
        other = list(BINDING)
        other[i] += "x"
        _expired(KEY, tuple(other), token)
    # Framing keeps shifted boundaries apart.
    _expired(KEY, ("tenant_tp", "roject_p", "epoch_e", "actor_a"), token)


def test_snap3_an_edited_or_malformed_token_is_refused() -> None:
    token = sign(KEY, BINDING, 7, AFTER, 10)
    payload, mac = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    for i in range(len(raw)):
        edited = bytearray(raw)
        edited[i] ^= 1
        text = base64.urlsafe_b64encode(bytes(edited)).rstrip(b"=").decode()
        _expired(KEY, BINDING, f"{text}.{mac}")
    forged = [
        "",
        ".",
        token + ".",
        token.replace(".", ""),
        f"{payload}.{mac[:-1]}",
        f"{payload}.{mac}=",
        f"{payload}+.{mac}",
        "\u00e9." + mac,
        "a" * (TOKEN_MAX_CHARS + 1),
    ]
    for bad in forged:
        _expired(KEY, BINDING, bad)


def test_snap3_a_token_reveals_nothing_of_the_resource_it_names() -> None:
    """The page's last resource may be hidden from its reader: the token is sealed and of one
    length, so neither the id nor its length can be read from it."""
    hidden = ResourceRef("handoff", "h_secret_plan")
    token = sign(KEY, BINDING, 7, hidden, 10)
    payload, _mac = token.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    for needle in (b"h_secret_plan", b"handoff", b"secret", b"\x00\x00\x00\x00\x00\x00\x00\x07"):
        assert needle not in raw
    short = sign(KEY, BINDING, 7, ResourceRef("fact", "f"), 10)
    longest = sign(KEY, BINDING, 2**63 - 1, ResourceRef("k" * 96, "i" * 128), 2**62)
    assert len(short) == len(token) == len(longest)
    assert verify(KEY, BINDING, token, 9) == (7, hidden)
