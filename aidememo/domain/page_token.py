"""Snapshot page tokens: opaque, stateless, bound to caller and project (SPEC.md SNAP-3).

A token carries what the next page needs, the sequence the snapshot is pinned at, the last
resource the previous page scanned and its expiry, and an HMAC-SHA256 over those and what
it is bound to: tenant, project, project epoch and actor. The key is the store's own
(`ReadTx.page_token_key`, 32 random bytes made by the store's migration), so whichever front
serves the next page (the origin, any process on the same PostgreSQL, a project's Durable
Object in either storage mode) verifies it without any state of its own.

Text form: `base64url(nonce || sealed) "." base64url(mac)`, without padding. The payload and
the MAC input are length-framed like stable ids (ID-4): each part is its UTF-8 length as 8
bytes, big-endian, then its bytes, so no two inputs frame alike. The payload is padded to one
length and sealed, so a token says nothing a caller could read (not the id of the resource a
page ended on, which may be one it cannot see, nor its length): it is XORed with a keystream
of HMAC-SHA256 blocks (counter mode, keyed by a key derived from the store's), under a
16-byte synthetic nonce, an HMAC of the binding and the payload (deterministic, so no random
source is needed on any runtime). The MAC covers the binding, the nonce and the sealed bytes
(encrypt-then-MAC). Anything that does not verify (bad form, another key, another binding,
an edited payload, an expired one) is one error, `snapshot_expired`: the client starts the
snapshot again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from aidememo.domain.errors import AidememoError, ErrorCode, fail
from aidememo.domain.model import ResourceRef

_DOMAIN = b"aidememo.snapshot_page.v1"
_SEAL = b"aidememo.snapshot_page.seal.v1"
_NONCE = b"aidememo.snapshot_page.nonce.v1"
_LENGTH_BYTES = 8
_MAC_BYTES = 32
_NONCE_BYTES = 16
# Every payload is padded to this length: 5 frames, two 19-digit integers, kind and id
# at their longest (96 and 128 bytes), rounded up.
_PADDED_BYTES = 320
# Far above any real token (kind 96 and id 128 bytes, two integers): decoding stops here.
TOKEN_MAX_CHARS = 1_024


def _frame(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(_LENGTH_BYTES, "big") + p for p in parts)


def _unframe(data: bytes, count: int) -> list[bytes]:
    parts: list[bytes] = []
    at = 0
    for _ in range(count):
        size = int.from_bytes(data[at : at + _LENGTH_BYTES], "big")
        at += _LENGTH_BYTES
        if at + size > len(data):
            raise ValueError("truncated")
        parts.append(data[at : at + size])
        at += size
    if at != len(data):
        raise ValueError("trailing bytes")
    return parts


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or not all(c.isascii() and (c.isalnum() or c in "-_") for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, binding: tuple[str, ...], payload: bytes) -> bytes:
    bound = _frame(_DOMAIN, *(part.encode("utf-8") for part in binding))
    return hmac.new(key, bound + payload, hashlib.sha256).digest()


def _derived(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, purpose, hashlib.sha256).digest()


def _keystream_xor(key: bytes, nonce: bytes, data: bytes) -> bytes:
    """`data` XOR the HMAC-SHA256 counter-mode keystream of (`key`, `nonce`): seals and
    opens alike."""
    seal_key = _derived(key, _SEAL)
    stream = b"".join(
        hmac.new(seal_key, nonce + block.to_bytes(8, "big"), hashlib.sha256).digest()
        for block in range((len(data) + 31) // 32)
    )
    return bytes(a ^ b for a, b in zip(data, stream, strict=False))


def _decimal(data: bytes) -> int:
    if not data or not data.isdigit() or len(data) > 19:
        raise ValueError("not a decimal")
    return int(data)


def sign(
    key: bytes, binding: tuple[str, ...], at_seq: int, after: ResourceRef, expires_at_ms: int
) -> str:
    """The token of the page after `after` of the snapshot at `at_seq`, for `binding`
    (tenant, project, epoch, actor), valid until `expires_at_ms`."""
    parts = (
        str(at_seq).encode(),
        str(expires_at_ms).encode(),
        after.kind.encode("utf-8"),
        after.id.encode("utf-8"),
    )
    used = sum(len(p) for p in parts) + 5 * _LENGTH_BYTES
    payload = _frame(*parts, bytes(max(0, _PADDED_BYTES - used)))
    nonce_input = _frame(_NONCE, *(part.encode("utf-8") for part in binding)) + payload
    nonce = _derived(key, nonce_input)[:_NONCE_BYTES]
    sealed = nonce + _keystream_xor(key, nonce, payload)
    return _b64(sealed) + "." + _b64(_mac(key, binding, sealed))


def verify(
    key: bytes, binding: tuple[str, ...], token: str, now_ms: int
) -> tuple[int, ResourceRef]:
    """`(at_seq, after)` of a token signed for `binding` and not expired at `now_ms`; any
    other token is `snapshot_expired` (409)."""
    try:
        if len(token) > TOKEN_MAX_CHARS or token.count(".") != 1:
            raise ValueError("not a token")
        text, mac_text = token.split(".")
        sealed, mac = _unb64(text), _unb64(mac_text)
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, _mac(key, binding, sealed)):
            raise ValueError("not ours")
        nonce = sealed[:_NONCE_BYTES]
        payload = _keystream_xor(key, nonce, sealed[_NONCE_BYTES:])
        seq, expires, kind, rid, _pad = _unframe(payload, 5)
        at_seq, expires_at_ms = _decimal(seq), _decimal(expires)
        after = ResourceRef(kind.decode("utf-8"), rid.decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise _expired() from None
    if now_ms >= expires_at_ms:
        raise _expired()
    return at_seq, after


def _expired() -> AidememoError:
    return fail(
        ErrorCode.SNAPSHOT_EXPIRED,
        "page_token is expired or not this caller's for this project; start the snapshot again",
    )
